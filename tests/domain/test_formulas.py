"""Formulas written once (rewards_lab.domain.formulas): the replay renders the domain's calendar formulas over its
columns, so the SQL DuckDB evaluates must give what Python gives, negative numbers included (SQL's % truncates)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from rewards_lab.domain.expiry import month_index
from rewards_lab.domain.formulas import remainder
from rewards_lab.domain.limits import week_start


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-800_000, 3_000_000), min_size=1, max_size=50), st.integers(1, 12))
def test_duckdb_evaluates_the_formulas_as_python(numbers: list[int], month: int) -> None:
    con = duckdb.connect()
    con.register("t", pa.table({"n": pa.array(numbers, pa.int64())}))
    n: exp.Expr = exp.column("n")
    forms = [week_start(n), remainder(n, 7), month_index(n, exp.Literal.number(month))]
    select = ", ".join(form.sql(dialect="duckdb") for form in forms)
    rows = con.sql(f"SELECT {select} FROM t").fetchall()
    for number, row in zip(numbers, rows, strict=True):
        assert row == (week_start(number), remainder(number, 7), month_index(number, month))


def test_remainder_is_floored() -> None:
    assert [remainder(x, 7) for x in (-8, -7, -1, 0, 6, 7)] == [6, 0, 6, 0, 6, 0]
