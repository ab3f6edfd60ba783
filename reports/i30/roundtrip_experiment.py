"""Issue 30 design experiment: the statements of transpile_experiment.py rendered back to DuckDB by sqlglot (the
plan renders every step, for DuckDB too), placeholders filled with expression trees, and the cost of parsing.

    PYTHONPATH=. /work/main/.venv/bin/python reports/i30/roundtrip_experiment.py
"""

from __future__ import annotations

import time

import duckdb
import sqlglot
from sqlglot import exp

from transpile_experiment import STATEMENTS, normal, tables  # type: ignore[import-not-found]


def main() -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, table in tables().items():
        con.register(name, table)
    for name, sql in STATEMENTS.items():
        if sql in ("WIDE_DIV", "SHARE"):  # generated per dialect, not parsed
            continue
        try:
            direct = sorted(map(repr, (tuple(normal(v) for v in r) for r in con.sql(sql).fetchall())))
        except Exception as error:  # noqa: BLE001
            print(f"{name}: direct DuckDB failed: {str(error).splitlines()[0][:120]}")
            continue
        rendered = sqlglot.parse_one(sql, read="duckdb").sql(dialect="duckdb")
        try:
            back = sorted(map(repr, (tuple(normal(v) for v in r) for r in con.sql(rendered).fetchall())))
            print(f"{name}: round trip {'SAME' if back == direct else 'DIFFERENT'}")
        except Exception as error:  # noqa: BLE001
            print(f"{name}: round trip FAILED: {str(error).splitlines()[0][:160]}\n    {rendered[:200]}")
    # placeholders: a step's text with the compiled rule trees put in as nodes
    template = sqlglot.parse_one(
        "SELECT pos, CASE WHEN :cond THEN :amount ELSE 0 END AS m FROM ev WHERE type = :type", read="duckdb"
    )
    cond = exp.GT(this=exp.column("amount"), expression=exp.Literal.number(10))
    amount = exp.cast(exp.Floor(this=exp.Mul(this=exp.column("amount"), expression=exp.Literal.number(5))), "BIGINT")
    filled = exp.replace_placeholders(template, cond=cond, amount=amount, type=exp.Literal.string("order"))
    print("placeholders:", filled.sql("duckdb"), "|", filled.sql("spark"))
    print("   ", con.sql(filled.sql("duckdb")).fetchall())
    # cost: parse + render of the largest statement, 200 times
    big = STATEMENTS["s4_window_tails"]
    started = time.perf_counter()
    for _ in range(200):
        sqlglot.parse_one(big, read="duckdb").sql(dialect="spark")
    print(f"parse+render of s4 (a 3-CTE window statement): {(time.perf_counter() - started) / 200 * 1000:.2f} ms")


if __name__ == "__main__":
    main()
