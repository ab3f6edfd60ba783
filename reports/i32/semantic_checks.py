"""Issue 32: statements PostgreSQL accepts but that may answer differently. Each check runs a DuckDB statement
on DuckDB and its sqlglot rendering (plain `postgres`, and with the hooks of store_dialect.py) on the throwaway
cluster, over the same rows, and compares the answers.

Run: PYTHONPATH=. python reports/i32/semantic_checks.py
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import duckdb
import psycopg
import sqlglot

from reports.i32.store_dialect import NotPortable, to_postgres
from tests.pg_cluster import PgCluster

SETUP = [
    "CREATE TABLE d (id VARCHAR, org VARCHAR, t INTEGER, amount BIGINT, note VARCHAR)",
    "INSERT INTO d VALUES ('a1', 'A', 1, 9000000000000000000, 'b'), ('a2', 'A', 2, 9000000000000000000, NULL), "
    "('a3', 'A', 3, 5, 'B'), ('b1', 'B', 4, 7, 'a'), ('c1', 'C', 5, 1, 'é')",
    "CREATE TABLE ts (id INTEGER, moment TIMESTAMP)",
    "INSERT INTO ts VALUES (1, TIMESTAMP '1969-12-31 23:59:59.999999'), (2, TIMESTAMP '2026-03-29 01:00:00.000001'), "
    "(3, TIMESTAMP '1900-01-01 00:00:00')",
    "CREATE TABLE kv (k VARCHAR PRIMARY KEY, v BIGINT)",
    "INSERT INTO kv VALUES ('x', 1)",
]

CHECKS: list[tuple[str, str, Sequence[Any]]] = [
    (
        "QUALIFY with LIMIT (the shape of webhooks.due)",
        "SELECT id FROM d QUALIFY row_number() OVER (PARTITION BY org ORDER BY t, id) <= 1 ORDER BY t, id LIMIT ?",
        [2],
    ),
    (
        "QUALIFY without LIMIT (the shape of lots.next_expiry)",
        "SELECT org, min(t) AS t FROM d GROUP BY org QUALIFY row_number() OVER (ORDER BY min(t)) <= 2 ORDER BY org",
        [],
    ),
    ("epoch_us (events.pending's event time)", "SELECT id, epoch_us(moment) FROM ts ORDER BY id", []),
    ("ORDER BY a nullable column DESC, no NULLS clause", "SELECT id FROM d ORDER BY note DESC, id", []),
    (
        "ORDER BY text (binary on DuckDB; the database's collation on PostgreSQL)",
        "SELECT note FROM d WHERE note IS NOT NULL ORDER BY note",
        [],
    ),
    (
        "sum of BIGINT past 2^63 (DuckDB HUGEINT, PostgreSQL NUMERIC)",
        "SELECT org, sum(amount) FROM d GROUP BY org ORDER BY org",
        [],
    ),
    (
        "IN (SELECT unnest(?)) with a list",
        "SELECT id FROM d WHERE id IN (SELECT unnest(?)) ORDER BY id",
        [["a1", "b1", "zz"]],
    ),
    (
        "zipped lists, untyped (ledger._lower_floors, executions.add_reversed)",
        "SELECT w.id, w.v FROM (SELECT unnest(?) AS id, unnest(?) AS v) w ORDER BY w.id",
        [["a", "b"], [1, 2]],
    ),
    (
        "zipped lists, CAST in the text (the canonical rule; sqlglot cannot parse ?::T[])",
        "SELECT w.id, w.v FROM (SELECT unnest(CAST(? AS VARCHAR[])) AS id, unnest(CAST(? AS BIGINT[])) AS v) w "
        "ORDER BY w.id",
        [["a", "b"], [1, 2]],
    ),
    ("GROUP BY ALL", "SELECT org, count(*) AS n FROM d GROUP BY ALL ORDER BY org", []),
    ("integer division with /", "SELECT id, amount / 2 FROM d WHERE amount < 100 ORDER BY id", []),
    ("starts_with", "SELECT id FROM d WHERE starts_with(id, 'a') ORDER BY id", []),
    ("string concatenation with a NULL", "SELECT id, 'n:' || note FROM d ORDER BY id", []),
]


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Answers compared as values: Decimal 5 == int 5; floats as they are."""
    return [
        tuple(int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, float) else v for v in row) for row in rows
    ]


def _pg(con: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | str:
    try:
        rows = con.execute(sql, list(params)).fetchall()
        return _normal(rows)
    except psycopg.Error as error:
        con.rollback()
        return f"ERROR {str(error).splitlines()[0][:90]}"
    finally:
        if con.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            con.rollback()


def run(dsn: str, dsn_icu: str | None) -> list[dict[str, Any]]:
    duck = duckdb.connect()
    for statement in SETUP:
        duck.execute(statement)
    results = []
    with psycopg.connect(dsn) as pg:
        for statement in SETUP:
            pg.execute(sqlglot.transpile(statement, read="duckdb", write="postgres")[0])
        pg.commit()
        icu = psycopg.connect(dsn_icu) if dsn_icu else None
        if icu is not None:
            for statement in SETUP:
                icu.execute(sqlglot.transpile(statement, read="duckdb", write="postgres")[0])
            icu.commit()
        try:
            for name, sql, params in CHECKS:
                expected = _normal(duck.execute(sql, list(params)).fetchall())
                plain = sqlglot.transpile(sql, read="duckdb", write="postgres")[0]
                try:
                    hooked: str | None = to_postgres(sql)
                except NotPortable:
                    hooked = None
                row: dict[str, Any] = {
                    "check": name,
                    "duckdb": expected,
                    "plain_sql": plain,
                    "plain": _pg(pg, plain, params),
                    "hooked_sql": hooked,
                    "hooked": _pg(pg, hooked, params) if hooked else "not rendered (written by hand)",
                }
                if icu is not None and "collation" in name:
                    row["plain_en_icu"] = _pg(icu, plain, params)
                results.append(row)
        finally:
            if icu is not None:
                icu.close()
    return results


def main(show: Callable[[str], None] = print) -> None:
    cluster = PgCluster.start()
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE sem TEMPLATE template0")
            # a database as a distribution's default cluster would have it: a natural-language collation
            admin.execute(
                "CREATE DATABASE sem_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
            )
        for row in run(cluster.dsn("sem"), cluster.dsn("sem_icu")):
            same_plain = row["plain"] == row["duckdb"]
            if row["hooked_sql"] is None:
                hooked = "refused (written by hand)"
            else:
                hooked = "SAME" if row["hooked"] == row["duckdb"] else "DIFFERENT"
            show(f"\n## {row['check']}: plain {'SAME' if same_plain else 'DIFFERENT'}, hooked {hooked}")
            show(f"  DuckDB            {row['duckdb']}")
            show(f"  plain   {row['plain_sql'][:110]}\n          -> {row['plain']}")
            if row["hooked_sql"] != row["plain_sql"]:
                show(f"  hooked  {(row['hooked_sql'] or '-')[:110]}\n          -> {row['hooked']}")
            if "plain_en_icu" in row:
                show(f"  plain on an en-US (ICU) database -> {row['plain_en_icu']}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    _ = datetime  # (timestamps come back naive from TIMESTAMP columns on both)
    main()
