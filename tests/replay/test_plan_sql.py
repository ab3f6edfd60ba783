"""The replay plan's dialect: statements written once in DuckDB SQL give the same rows on DuckDB (as written and as
rendered back) and on Spark (as rendered by `ReplaySpark`), over the same Arrow tables; `wide_div` is exact on both
where Spark's own division is not; and the lint refuses each construct that Spark runs with other rows, no error
(the measurements of reports/i30-replay-plan.md, section 3)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp

from rewards_lab.replay.plan.sql import lint, parse, render, wide_div

UTC = dt.UTC
DAY_US = 86_400_000_000


def _tables() -> dict[str, pa.Table]:
    times = [
        dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC),  # before the epoch
        dt.datetime(2026, 3, 29, 0, 30, tzinfo=UTC),  # the Paris DST change night
        dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        dt.datetime(2026, 3, 31, 22, 30, tzinfo=UTC),  # a local month other than the UTC month
        dt.datetime(2026, 4, 1, 12, 0, tzinfo=UTC),
        dt.datetime(2026, 4, 1, 12, 0, tzinfo=UTC),
        dt.datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
        dt.datetime(2027, 1, 4, 8, 0, tzinfo=UTC),
    ]
    n = len(times)
    amounts = ["12.34", "99.99", "0", "500.00", "7.50", "1", "250.01", "3"]
    events = pa.table(
        {
            "pos": pa.array(range(n), pa.int64()),
            "customer_id": pa.array(["c1", "c2", "c1", "c1", "c2", "c3", "c1", "c2"]),
            "type": pa.array(["order", "order", "visit", "order", "order", "visit", "order", "refund"]),
            "occurred_at": pa.array(times, pa.timestamp("us", tz="UTC")),
            "amount": pa.array([Decimal(a) for a in amounts], pa.decimal128(12, 2)),
            "big": pa.array([1_000_000_000_000_000_000 * (i + 1) for i in range(n)], pa.int64()),
        }
    )
    rows = pa.table(
        {
            "seq": pa.array(range(10), pa.int64()),
            "holder": pa.array(["a", "a", "a", "b", "a", "b", "b", "a", "b", "a"]),
            "st": pa.array([0, 0, 0, 0, 0, 0, 7, 7, 7, 7], pa.int32()),
            "k1": pa.array(range(1, 11), pa.int64()),
            "m": pa.array([700, 500, 900, 100, 50, 2000, 10, 10, 10, 10], pa.int64()),
            "mask": pa.array([1, 1, 3, 1, 1, 1, 1, 1, 1, 1], pa.int32()),
        }
    )
    # two weeks at noon and at 23:30 UTC (already the next day in Paris): every ISO weekday, both sides of midnight
    start = dt.datetime(2026, 3, 23, tzinfo=UTC)
    instants = [start + dt.timedelta(days=d, hours=h) for d in range(14) for h in (12, 23.5)]
    days = pa.table(
        {"pos": pa.array(range(len(instants)), pa.int64()), "t": pa.array(instants, pa.timestamp("us", tz="UTC"))}
    )
    return {"pq_ev": events, "pq_r": rows, "pq_days": days}


# (numerator, denominator) pairs for wide_div: quotients below 10^32, numerators up to ~10^35, one where the
# DECIMAL(38, 6) quotient rounds up to the next integer (1999999999999999999 / 10^18 is 1.999..., not 2)
WIDE = [
    (0, 7),
    (1_999_999_999_999_999_999, 10**18),
    (10**35 - 1, 10**18),
    (8_000_000_000_000_000_000 * 123_456_789_012_345_678, 10**18),
    (99_999_999_999_999_999_999_999_999_999_999_999, 10**17 + 3),
    (10**31 * 7 - 1, 7),
]

STATEMENTS: dict[str, str] = {
    "struct_by_case": f"""
        SELECT pos, customer_id, CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day,
          CASE type WHEN 'order' THEN {{'k': 0, 'c1': CAST(floor(amount * 5) AS BIGINT), 'c2': CAST(100 AS BIGINT)}}
                    WHEN 'visit' THEN {{'k': 1, 'c1': CAST(10 AS BIGINT), 'c2': CAST(0 AS BIGINT)}} END AS a
        FROM pq_ev""",
    "unnest_structs": """
        SELECT pos, u.i AS i, u.m AS m FROM (
          SELECT pos, unnest([{'m': CAST(amount * 100 AS BIGINT), 'i': CAST(1 AS BIGINT)},
                              {'m': CAST(big % 1000 AS BIGINT), 'i': CAST(2 AS BIGINT)}]) AS u FROM pq_ev)
        WHERE u.m <> 0""",
    "window_hugeint": """
        WITH keyed AS (SELECT seq, holder AS h, st, k1, m,
                         CAST(CASE WHEN mask = 1 THEN m ELSE 0 END AS HUGEINT) * 1000000000000000000 AS x FROM pq_r),
             summed AS (SELECT *, sum(x) OVER (PARTITION BY h, st ORDER BY k1 ROWS UNBOUNDED PRECEDING) AS s FROM keyed)
        SELECT seq, h, st, m, s, max(s) OVER (PARTITION BY h, st ORDER BY k1
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
        FROM summed""",
    "group_by_all_having": """
        SELECT r.seq FROM pq_r r SEMI JOIN (
            SELECT holder, st FROM pq_r GROUP BY ALL HAVING sum(m) > 1000 OR count(*) > 3) b
          ON b.holder = r.holder AND b.st = r.st""",
    "local_day": """
        SELECT pos, lday,
          CAST(CAST(date_trunc('month', DATE '1970-01-01' + lday) AS DATE) - DATE '1970-01-01' AS INTEGER) AS d_month
        FROM (SELECT pos,
                CAST(CAST(timezone('Europe/Paris', occurred_at) AS DATE) - DATE '1970-01-01' AS INTEGER) AS lday
              FROM pq_ev)""",
    "arg_min": """
        SELECT customer_id, min(pos) AS opos, arg_min(epoch_us(occurred_at), pos) AS t, arg_max(type, pos) AS ty
        FROM pq_ev GROUP BY customer_id""",
    "qualify": """
        SELECT customer_id, pos FROM pq_ev
        QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY pos DESC) = 1""",
    "isodow_local": """
        SELECT pos, isodow(timezone('Europe/Paris', t)) AS dow, isodow(t) AS utc_dow FROM pq_days""",
    "make_timestamp": """
        SELECT seq, CAST(make_timestamp(k1 * 100000000000000) AS TIMESTAMPTZ) AS issued_at FROM pq_r""",
    "wide_div": """
        SELECT i, wide_div(CAST(n AS HUGEINT), d) AS q, wide_div(n, 2 * d - d) AS q2
        FROM (VALUES {values}) AS w(i, n, d)""".replace(
        "{values}",
        ", ".join(f"({i}, CAST('{n}' AS DECIMAL(38, 0)), CAST({d} AS BIGINT))" for i, (n, d) in enumerate(WIDE)),
    ),
}


def _normal(value: object) -> object:
    """Comparable values: Spark gives Row objects for structs, naive UTC datetimes, DECIMAL for wide integers."""
    if hasattr(value, "asDict"):
        return {k: _normal(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value


def _sorted(rows: Any) -> list[str]:
    return sorted(repr(tuple(_normal(v) for v in row)) for row in rows)


@pytest.fixture(scope="module")
def con() -> Any:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    for name, table in _tables().items():
        connection.register(name, table)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def spark_views(spark: Any) -> Any:
    for name, table in _tables().items():
        spark.createDataFrame(table).createOrReplaceTempView(name)
    yield spark
    for name in _tables():
        spark.catalog.dropTempView(name)


def _duckdb(con: Any, sql: str) -> list[str]:
    return _sorted(con.sql(sql).fetchall())


@pytest.mark.parametrize("name", STATEMENTS)
def test_statement_gives_the_same_rows_on_both_engines(name: str, con: Any, spark_views: Any) -> None:
    query = parse(STATEMENTS[name])
    assert lint(query) == []
    expected = _duckdb(con, render(query, "duckdb"))
    assert expected, "a statement without rows proves nothing"
    assert _sorted(spark_views.sql(render(query, "spark")).collect()) == expected


@pytest.mark.parametrize("name", [n for n in STATEMENTS if n != "wide_div"])  # wide_div is not DuckDB's own
def test_duckdb_round_trip_gives_the_rows_of_the_text(name: str, con: Any) -> None:
    assert _duckdb(con, render(parse(STATEMENTS[name]), "duckdb")) == _duckdb(con, STATEMENTS[name])


def test_wide_div_is_exact_and_isodow_is_iso(con: Any) -> None:
    quotients = sorted(con.sql(render(parse(STATEMENTS["wide_div"]), "duckdb")).fetchall())
    assert quotients == [(i, n // d, n // d) for i, (n, d) in enumerate(WIDE)]
    days = sorted(con.sql(render(parse(STATEMENTS["isodow_local"]), "duckdb")).fetchall())
    assert sorted({dow for _, dow, _ in days}) == [1, 2, 3, 4, 5, 6, 7]
    # 2026-03-23 is a Monday; 23:30 UTC is already Tuesday in Paris
    assert days[0][1:] == (1, 1) and days[1][1:] == (2, 1)


def test_placeholders_take_trees_and_must_all_be_given(con: Any) -> None:
    template = "SELECT pos, CASE WHEN :cond THEN :amount ELSE 0 END AS m FROM pq_ev"
    cond = exp.GT(this=exp.column("amount"), expression=exp.Literal.number(10))
    amount = wide_div(exp.cast(exp.column("big"), "HUGEINT"), exp.Literal.number(3))
    query = parse(template, cond=cond, amount=amount)
    assert "UNIX" not in render(query, "spark") and "DECIMAL(38, 0)" in render(query, "spark")
    assert sorted(con.sql(render(query, "duckdb")).fetchall())[1] == (1, 2 * 10**18 // 3)
    with pytest.raises(ValueError, match="amount"):
        parse(template, cond=cond)


REFUSED = {
    "SELECT unnest([1, 2]) AS a, unnest([3, 4]) AS b FROM pq_ev": "2 unnests in one SELECT",
    "SELECT CAST(big AS HUGEINT) * 1000 // 7 FROM pq_ev": "// on a wide value",
    "SELECT s // 7 FROM (SELECT sum(CAST(big AS HUGEINT)) AS s FROM pq_ev)": "// on a wide value",
    "SELECT wide_div(CAST(big AS HUGEINT), 3) // 2 FROM pq_ev": "// on a wide value",
    "SELECT CAST(big AS DECIMAL(38, 0)) // 2 FROM pq_ev": "// on a wide value",
    "SELECT big // 7, CAST(big AS DECIMAL(18, 0)) // 7 FROM pq_ev": "",  # BIGINT-sized: Spark's DIV is exact
    "SELECT r.seq, e.pos FROM pq_r r ASOF JOIN pq_ev e ON e.pos <= r.k1": "ASOF join",
    "SELECT list_sum([1, 2]) FROM pq_ev": "list function: list_sum",
    "SELECT list_transform([1, 2], lambda x: x + 1) FROM pq_ev": "list function or lambda",
    "SELECT len(list_filter([1, 2], lambda x: x > 1)) FROM pq_ev": "list function or lambda",
    "SELECT strftime(occurred_at, '%Y') FROM pq_ev": "",  # a known function: rendered by sqlglot, accepted
    "SELECT fsum(amount) FROM pq_ev": "function without a Spark hook: fsum",
}


@pytest.mark.parametrize("sql", REFUSED)
def test_lint_refuses_what_spark_runs_differently(sql: str) -> None:
    problems = lint(parse(sql), wide={"s"})
    if REFUSED[sql]:
        assert any(REFUSED[sql] in p for p in problems), problems
    else:
        assert problems == []


def test_lint_finds_two_unnests_only_in_the_same_select() -> None:
    nested = "SELECT unnest([x, x]) AS y FROM (SELECT unnest([1, 2]) AS x FROM pq_ev)"
    assert lint(parse(nested)) == []
