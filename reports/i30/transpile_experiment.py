"""Issue 30 design experiment: statements of today's DuckDB replay written once in DuckDB SQL, parsed by sqlglot
(read="duckdb"), rendered for Spark (.sql(dialect="spark")), run on DuckDB 2.x and on local PySpark over temporary
views of the same Arrow tables; the results are compared as sorted rows.

    PYTHONPATH=. /work/main/.venv/bin/python reports/i30/transpile_experiment.py
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import traceback
from decimal import Decimal

import duckdb
import pyarrow as pa
import sqlglot

UTC = dt.timezone.utc


def tables() -> dict[str, pa.Table]:
    times = [
        dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC),  # before the epoch: floor vs truncating division
        dt.datetime(2026, 3, 29, 0, 30, tzinfo=UTC),  # Paris DST change night
        dt.datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        dt.datetime(2026, 3, 31, 22, 30, tzinfo=UTC),  # local month differs from UTC month in Paris
        dt.datetime(2026, 4, 1, 12, 0, tzinfo=UTC),
        dt.datetime(2026, 4, 1, 12, 0, tzinfo=UTC),
        dt.datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
        dt.datetime(2027, 1, 4, 8, 0, tzinfo=UTC),
    ]
    n = len(times)
    events = pa.table(
        {
            "pos": pa.array(range(n), pa.int64()),
            "external_event_id": pa.array([f"e{i}" for i in range(n)]),
            "customer_id": pa.array(["c1", "c2", "c1", "c1", "c2", "c3", "c1", "c2"]),
            "type": pa.array(["order", "order", "visit", "order", "order", "visit", "order", "refund"]),
            "occurred_at": pa.array(times, pa.timestamp("us", tz="UTC")),
            "amount": pa.array([Decimal(x) for x in ["12.34", "99.99", "0", "500.00", "7.50", "1", "250.01", "3"]],
                               pa.decimal128(12, 2)),
            "big": pa.array([(9_000_000_000_000_000_000 // 9) * (i + 1) for i in range(n)], pa.int64()),
        }
    )
    # rows of a pass-like stream: holder, period start, processing keys, requested amount
    rows = pa.table(
        {
            "seq": pa.array(range(10), pa.int64()),
            "holder": pa.array(["a", "a", "a", "b", "a", "b", "b", "a", "b", "a"]),
            "st": pa.array([0, 0, 0, 0, 0, 0, 7, 7, 7, 7], pa.int32()),
            "k1": pa.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], pa.int64()),
            "m": pa.array([700, 500, 900, 100, 50, 2000, 10, 10, 10, 10], pa.int64()),
            "mask": pa.array([1, 1, 3, 1, 1, 1, 1, 1, 1, 1], pa.int32()),
        }
    )
    return {"ev": events, "r": rows}


DAY_US = 86_400_000_000
STATEMENTS: dict[str, str] = {
    # store.create: one row per event, a STRUCT of the type's amounts; integer day of the epoch
    "s1_struct_case": f"""
        SELECT pos, customer_id, CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day,
               CASE type WHEN 'order' THEN {{'k': 0, 'c1': CAST(floor(amount * 5) AS BIGINT), 'c2': CAST(100 AS BIGINT)}}
                         WHEN 'visit' THEN {{'k': 1, 'c1': CAST(10 AS BIGINT), 'c2': CAST(0 AS BIGINT)}} END AS a
        FROM ev""",
    # store.summarise: per (day, k), several unnests of lists zipped in one SELECT list
    "s2_group_unnest_zip": f"""
        SELECT day, k, unnest([p1, p2]) AS p, unnest([n1, n2]) AS n
        FROM (SELECT day, a.k AS k, sum(greatest(a.c1, 0)) AS p1, count_if(a.c1 > 0) AS n1,
                     sum(greatest(a.c2, 0)) AS p2, count_if(a.c2 > 0) AS n2
              FROM (SELECT CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day,
                           {{'k': CASE type WHEN 'order' THEN 0 ELSE 1 END, 'c1': CAST(amount * 100 AS BIGINT),
                             'c2': CAST(1 AS BIGINT)}} AS a FROM ev) GROUP BY day, a.k)""",
    # store.unnested: a list of structs unnested in the SELECT list, then its fields
    "s3_unnest_structs": """
        SELECT pos, u.i AS i, u.m AS m FROM (
          SELECT pos, unnest([{'m': CAST(amount * 100 AS BIGINT), 'i': CAST(1 AS BIGINT)},
                              {'m': CAST(big % 1000 AS BIGINT), 'i': CAST(2 AS BIGINT)}]) AS u FROM ev)
        WHERE u.m <> 0""",
    # feature_store.tails: running sums, a frame ending one row before, HUGEINT, CTEs, UNION ALL
    "s4_window_tails": """
        WITH keyed AS (SELECT seq, holder AS h, st, k1, mask, m, CAST(CASE WHEN mask = 1 THEN m ELSE 0 END AS HUGEINT) AS x
                       FROM r),
             summed AS (SELECT *, sum(x) OVER (PARTITION BY h, st ORDER BY k1 ROWS UNBOUNDED PRECEDING) AS s FROM keyed),
             bounded AS (SELECT *, s - x - greatest(0, coalesce(max(s - 1000) OVER (
                            PARTITION BY h, st ORDER BY k1 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS lower
                         FROM summed)
        SELECT seq, h, st, m, lower FROM bounded WHERE lower >= 1000""",
    # the single-cap closed form: min(cap, S) - min(cap, S - m)
    "s5_cap_closed_form": """
        SELECT seq, holder, m,
               least(1000, s) - least(1000, s - m) AS granted
        FROM (SELECT *, sum(CAST(m AS HUGEINT)) OVER (PARTITION BY holder, st ORDER BY k1
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s FROM r)""",
    # feature_store.binding: GROUP BY ALL, HAVING, SEMI JOIN
    "s6_group_by_all_semi": """
        SELECT r.seq FROM r SEMI JOIN (
            SELECT holder, st FROM r GROUP BY ALL HAVING sum(m) > 1000 OR count(*) > 3) b
          ON b.holder = r.holder AND b.st = r.st""",
    # feature_store.period_starts / local_day: a timezone, date arithmetic, date_trunc
    "s7_local_periods": """
        SELECT pos, lday,
               CAST(CAST(date_trunc('month', DATE '1970-01-01' + lday) AS DATE) - DATE '1970-01-01' AS INTEGER) AS d_month,
               CAST(CAST(date_trunc('year', DATE '1970-01-01' + lday) AS DATE) - DATE '1970-01-01' AS INTEGER) AS d_year
        FROM (SELECT pos, CAST(CAST(timezone('Europe/Paris', occurred_at) AS DATE) - DATE '1970-01-01' AS INTEGER) AS lday
              FROM ev)""",
    # expiry_store.lots_table: integer division, anti-join by LEFT JOIN .. IS NULL, UNION ALL, make_timestamp
    "s8_lots_closed_form": """
        SELECT i.seq, i.holder, CAST(make_timestamp(i.t) AS TIMESTAMPTZ) AS issued_at,
               CASE WHEN i.t + 2592000000000 <= 1800000000000000 THEN 0 ELSE i.m END AS remaining
        FROM (SELECT seq, holder, m, k1 * 100000000000000 AS t FROM r) i
        LEFT JOIN (SELECT 'b' AS holder) l ON l.holder = i.holder
        WHERE l.holder IS NULL AND i.seq // 3 >= 0
        UNION ALL SELECT 99, 'z', CAST(make_timestamp(0) AS TIMESTAMPTZ), 0""",
    # reversal_store: the original as the first event of its external id (arg_min), epoch_us
    "s9_arg_min": """
        SELECT customer_id, min(pos) AS opos, arg_min(epoch_us(occurred_at), pos) AS t, arg_min(type, pos) AS ty
        FROM ev GROUP BY customer_id""",
    # QUALIFY (first event of each customer)
    "s10_qualify": """
        SELECT customer_id, pos FROM ev QUALIFY row_number() OVER (PARTITION BY customer_id ORDER BY pos) = 1""",
    # a lambda over a list, list aggregates
    "s11_list_lambda": """
        SELECT pos, list_sum(list_transform([1, 2, 3], lambda x: x * CAST(amount * 100 AS BIGINT))) AS s,
               len(list_filter([1, 2, 3], lambda x: x > 1)) AS n FROM ev""",
    # wide integers: HUGEINT products and integer division of a negative number
    "s12_hugeint_div": f"""
        SELECT pos, CAST(big AS HUGEINT) * 1000 AS wide, (CAST(big AS HUGEINT) * 1000) // 7 AS q,
               epoch_us(occurred_at) // {DAY_US} AS day, (0 - big) // 7 AS neg, CAST(amount * 3 AS DECIMAL(38, 0)) AS d
        FROM ev""",
    # isodow and date arithmetic as written today (DuckDB spellings)
    "s13_isodow_dates": """
        SELECT pos, isodow(timezone('Europe/Paris', occurred_at)) AS dow,
               CAST(CAST(timezone('Europe/Paris', occurred_at) AS DATE) AS VARCHAR) AS local_date,
               DATE '1970-01-01' + 5 AS d5 FROM ev""",
    # the same statements in the portable spelling (AT TIME ZONE, date_diff, unix_micros through the hook)
    "p1_local_periods": """
        SELECT pos, lday,
               date_diff('day', DATE '1970-01-01', CAST(date_trunc('month', DATE '1970-01-01' + lday) AS DATE)) AS d_month,
               date_diff('day', DATE '1970-01-01', CAST(date_trunc('year', DATE '1970-01-01' + lday) AS DATE)) AS d_year
        FROM (SELECT pos, CAST(date_diff('day', DATE '1970-01-01', CAST(occurred_at AT TIME ZONE 'Europe/Paris' AS DATE)) AS INTEGER) AS lday
              FROM ev)""",
    "p2_struct_case_day": f"""
        SELECT pos, customer_id, CAST(floor(epoch_us(occurred_at) / {DAY_US}) AS INTEGER) AS day,
               CASE type WHEN 'order' THEN {{'k': 0, 'c1': CAST(floor(amount * 5) AS BIGINT), 'c2': CAST(100 AS BIGINT)}}
                         WHEN 'visit' THEN {{'k': 1, 'c1': CAST(10 AS BIGINT), 'c2': CAST(0 AS BIGINT)}} END AS a
        FROM ev""",
    "p3_group_then_explode_zip": f"""
        SELECT day, k, u.p AS p, u.n AS n
        FROM (SELECT day, k, unnest([{{'p': p1, 'n': n1}}, {{'p': p2, 'n': n2}}]) AS u
        FROM (SELECT day, a.k AS k, sum(greatest(a.c1, 0)) AS p1, count_if(a.c1 > 0) AS n1,
                     sum(greatest(a.c2, 0)) AS p2, count_if(a.c2 > 0) AS n2
              FROM (SELECT CAST(floor(epoch_us(occurred_at) / {DAY_US}) AS INTEGER) AS day,
                           {{'k': CASE type WHEN 'order' THEN 0 ELSE 1 END, 'c1': CAST(amount * 100 AS BIGINT),
                             'c2': CAST(1 AS BIGINT)}} AS a FROM ev) GROUP BY day, a.k))""",
    "p4_isodow": """
        SELECT pos, isodow(occurred_at AT TIME ZONE 'Europe/Paris') AS dow,
               CAST(CAST(occurred_at AT TIME ZONE 'Europe/Paris' AS DATE) AS VARCHAR) AS local_date FROM ev""",
    "p5_wide_div": f"""
        SELECT pos, CAST(big AS HUGEINT) * 1000 AS wide, (CAST(big AS HUGEINT) * 1000) // 7 AS q,
               CAST(floor(epoch_us(occurred_at) / {DAY_US}) AS BIGINT) AS day, (0 - big) // 7 AS neg FROM ev""",
    "p6_asof": """
        SELECT r.seq, e.pos FROM r ASOF JOIN ev e ON e.pos <= r.k1""",
    # the ASOF join's portable form: a running max over the union, ordered by the key
    "p7_asof_as_window": """
        SELECT seq, anchor FROM (
          SELECT seq, max(epos) OVER (ORDER BY key, kind ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS anchor
          FROM (SELECT pos AS key, 0 AS kind, pos AS epos, CAST(NULL AS BIGINT) AS seq FROM ev
                UNION ALL SELECT k1, 1, CAST(NULL AS BIGINT), seq FROM r)) WHERE seq IS NOT NULL""",
    # wide division written per dialect (a builder: DuckDB `//` on HUGEINT, Spark FLOOR of a DECIMAL quotient)
    "p8_wide_div_builder": "WIDE_DIV",
    # the reversal share in WIDE integers: floor(m * F / 10^s) for a fraction F / 10^s
    "p9_reversal_share": "SHARE",
}


def wide_div(numerator: str, denominator: str, dialect: str) -> str:
    """Integer division of non-negative WIDE values: DuckDB's `//` on HUGEINT is exact; Spark's DIV returns a
    BIGINT (overflows silently), so its quotient is FLOOR of the DECIMAL(38, 0) division, cast back."""
    if dialect == "duckdb":
        return f"(CAST({numerator} AS HUGEINT) // CAST({denominator} AS HUGEINT))"
    numerator = sqlglot.parse_one(numerator, read="duckdb").sql(dialect=replay_spark_dialect())
    return f"CAST(FLOOR(CAST({numerator} AS DECIMAL(38, 0)) / CAST({denominator} AS DECIMAL(38, 0))) AS DECIMAL(38, 0))"


def generated(name: str, dialect: str) -> str:
    if name == "p8_wide_div_builder":
        return f"SELECT pos, {wide_div('CAST(big AS HUGEINT) * 1000', '7', dialect)} AS q FROM ev"
    # F = 123456789012345678 / 10^18 (a fraction of 18 digits), m up to ~10^18: m * F < 10^38
    return f"SELECT pos, {wide_div('CAST(big AS HUGEINT) * 123456789012345678', '1000000000000000000', dialect)} AS share FROM ev"


def replay_spark_dialect() -> type:
    """Spark as the replay renders it: sqlglot's Spark dialect with the three hooks the experiment found needed."""
    from sqlglot import exp
    from sqlglot.dialects.spark import Spark

    class ReplaySpark(Spark):
        class Generator(Spark.Generator):
            TYPE_MAPPING = {**Spark.Generator.TYPE_MAPPING, exp.DataType.Type.INT128: "DECIMAL(38, 0)"}
            TRANSFORMS = {
                **Spark.Generator.TRANSFORMS,
                # sqlglot renders ISODOW as (DAYOFWEEK(x) % 7) + 1: Sunday 2, Monday 3 (wrong)
                exp.DayOfWeekIso: lambda self, e: f"(((DAYOFWEEK({self.sql(e, 'this')}) + 5) % 7) + 1)",
            }

            def anonymous_sql(self, expression: exp.Anonymous) -> str:
                name = expression.name.upper()
                if name == "EPOCH_US":
                    return self.func("UNIX_MICROS", *expression.expressions)
                if name == "TIMEZONE":
                    zone, instant = expression.expressions
                    return self.func("FROM_UTC_TIMESTAMP", instant, zone)
                return super().anonymous_sql(expression)

    return ReplaySpark


def duckdb_rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    return sorted(con.sql(sql).fetchall(), key=repr)


def spark_rows(spark: object, sql: str) -> list[tuple[object, ...]]:
    frame = spark.sql(sql)  # type: ignore[attr-defined]
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def normal(value: object) -> object:
    """Rows as comparable values: Spark returns Row objects for structs, naive datetimes in the session zone."""
    if hasattr(value, "asDict"):
        return {k: normal(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value
    return value


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, table in tables().items():
        con.register(name, table)
        spark.createDataFrame(table).createOrReplaceTempView(name)
    verbose = "-v" in sys.argv
    only = [a for a in sys.argv[1:] if a != "-v"]
    for name, sql in STATEMENTS.items():
        if only and name not in only:
            continue
        print(f"=== {name}")
        if sql in ("WIDE_DIV", "SHARE"):
            expected = [tuple(normal(v) for v in row) for row in duckdb_rows(con, generated(name, "duckdb"))]
            got = [tuple(normal(v) for v in row) for row in spark_rows(spark, generated(name, "spark"))]
            same = sorted(map(repr, expected)) == sorted(map(repr, got))
            print(f"  [builder] {'SAME' if same else 'DIFFERENT'} ({len(expected)} rows)")
            if not same:
                print("     duckdb:", sorted(map(repr, expected))[:2], "\n     spark: ", sorted(map(repr, got))[:2])
            continue
        try:
            expected = [tuple(normal(v) for v in row) for row in duckdb_rows(con, sql)]
        except Exception as error:  # noqa: BLE001
            print(f"  DUCKDB FAILED: {str(error).splitlines()[0][:300]}")
            continue
        for label, dialect in (("spark", "spark"), ("hooked", replay_spark_dialect())):
            try:
                rendered = sqlglot.parse_one(sql, read="duckdb").sql(dialect=dialect)
            except Exception as error:  # noqa: BLE001
                print(f"  [{label}] TRANSPILE FAILED: {type(error).__name__}: {error}")
                continue
            if verbose:
                print(f"  [{label}] SQL:", " ".join(rendered.split())[:700])
            try:
                got = [tuple(normal(v) for v in row) for row in spark_rows(spark, rendered)]
            except Exception as error:  # noqa: BLE001
                first = next((line for line in str(error).splitlines() if line.strip()), "")
                print(f"  [{label}] SPARK FAILED: {first[:240]}")
                continue
            same = sorted(map(repr, expected)) == sorted(map(repr, got))
            counts = f"{len(expected)} rows" if len(got) == len(expected) else f"{len(expected)} rows on DuckDB, {len(got)} on Spark"
            print(f"  [{label}] {'SAME' if same else 'DIFFERENT'} ({counts})")
            if not same:
                shown = 0
                for a, b in zip(sorted(map(repr, expected)), sorted(map(repr, got))):
                    if a != b and shown < 3:
                        shown += 1
                        print("     duckdb:", a[:220])
                        print("     spark: ", b[:220])
    spark.stop()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        raise
