"""Issue 32: small measurements on the throwaway cluster that the plan's choices rest on (not the issue's figures:
those need the store). Each is the median of a few rounds on a shared two-core machine: read them as ratios.

1. a batch of 1,000 ledger transactions written four ways: executemany (psycopg pipelines it), one INSERT ... SELECT
   FROM unnest of typed arrays, COPY (text) and COPY (binary);
2. the balance update of a batch by per-account deltas: UPDATE ... FROM unnest(arrays);
3. one hot row (an asset's issuance account) incremented by one and by two connections at once (commits/s);
4. a rate-limit counter: one upsert per request on an UNLOGGED table, from one connection (round trips/s);
5. claiming 1,000 of 20,000 received events with FOR UPDATE SKIP LOCKED while another connection holds 1,000;
6. pg_try_advisory_xact_lock on 1,000 customers in one statement.

Run: PYTHONPATH=. python reports/i32/pg_micro.py [--durable]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg

from tests.pg_cluster import PgCluster

ROWS = 1000
ROUNDS = 5
SCHEMA = [
    """CREATE TABLE transactions (id TEXT NOT NULL, organization_id TEXT NOT NULL, environment TEXT NOT NULL,
        kind TEXT NOT NULL, asset_id TEXT NOT NULL, amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
        source_account_id TEXT NOT NULL, destination_account_id TEXT NOT NULL, memo TEXT, execution_id TEXT,
        created_at TIMESTAMP NOT NULL, id_time_ms BIGINT NOT NULL)""",
    """CREATE TABLE balances (organization_id TEXT NOT NULL, environment TEXT NOT NULL, account_id TEXT NOT NULL,
        asset_id TEXT NOT NULL, balance_minor NUMERIC(38, 0) NOT NULL, floor_minor NUMERIC(38, 0),
        updated_at TIMESTAMP NOT NULL, PRIMARY KEY (account_id, asset_id), CHECK (balance_minor >= floor_minor))""",
    """CREATE UNLOGGED TABLE rate_counters (bucket TEXT NOT NULL, window_start BIGINT NOT NULL,
        count INTEGER NOT NULL, PRIMARY KEY (bucket, window_start))""",
    """CREATE TABLE events (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, status TEXT NOT NULL)""",
]
COLUMNS = (
    "id, organization_id, environment, kind, asset_id, amount_minor, source_account_id, "
    "destination_account_id, memo, execution_id, created_at, id_time_ms"
)


def _rows(now: datetime) -> list[tuple[Any, ...]]:
    return [
        (
            uuid.uuid4().hex,
            "org_1",
            "sandbox",
            "reward",
            "ast_1",
            100 + i,
            "iss_1",
            f"wal_{i}",
            None,
            f"exe_{i}",
            now,
            i,
        )
        for i in range(ROWS)
    ]


def timed(fn: Callable[[], None], rounds: int = ROUNDS) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def batch_writes(con: psycopg.Connection[Any]) -> dict[str, float]:
    now = datetime(2026, 11, 29)
    insert = f"INSERT INTO transactions ({COLUMNS}) VALUES ({', '.join(['%s'] * 12)})"

    def executemany() -> None:
        with con.transaction(), con.cursor() as cur:
            cur.executemany(insert, _rows(now))

    def unnest_arrays() -> None:
        columns = list(zip(*_rows(now), strict=True))
        casts = [
            "text",
            "text",
            "text",
            "text",
            "text",
            "bigint",
            "text",
            "text",
            "text",
            "text",
            "timestamp",
            "bigint",
        ]
        selects = ", ".join(f"unnest(%s::{t}[])" for t in casts)
        with con.transaction():
            con.execute(f"INSERT INTO transactions ({COLUMNS}) SELECT {selects}", [list(c) for c in columns])

    def copy(binary: bool) -> Callable[[], None]:
        def run() -> None:
            with con.transaction(), con.cursor() as cur:
                mode = " (FORMAT BINARY)" if binary else ""
                with cur.copy(f"COPY transactions ({COLUMNS}) FROM STDIN{mode}") as cp:
                    if binary:
                        cp.set_types(["text"] * 5 + ["bigint"] + ["text"] * 4 + ["timestamp", "bigint"])
                    for row in _rows(now):
                        cp.write_row(row)

        return run

    return {
        "executemany (pipelined)": timed(executemany),
        "INSERT .. SELECT unnest(arrays)": timed(unnest_arrays),
        "COPY text (write_row)": timed(copy(False)),
        "COPY binary (write_row)": timed(copy(True)),
    }


def balance_update(con: psycopg.Connection[Any]) -> float:
    accounts = [f"wal_{i}" for i in range(ROWS)]
    with con.transaction():
        con.execute(
            "INSERT INTO balances SELECT 'org_1', 'sandbox', a, 'ast_1', 0, 0, now() FROM unnest(%s::text[]) a "
            "ON CONFLICT DO NOTHING",
            [accounts],
        )

    def update() -> None:
        with con.transaction():
            con.execute(
                "UPDATE balances b SET balance_minor = b.balance_minor + d.delta, updated_at = now() "
                "FROM (SELECT unnest(%s::text[]) AS account_id, unnest(%s::numeric[]) AS delta) d "
                "WHERE b.account_id = d.account_id AND b.asset_id = 'ast_1'",
                [accounts, [7] * ROWS],
            )

    return timed(update)


def hot_row(dsn: str, connections: int, seconds: float = 2.0) -> float:
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(
            "INSERT INTO balances VALUES ('org_1', 'sandbox', 'iss_hot', 'ast_1', 0, NULL, now()) "
            "ON CONFLICT DO NOTHING"
        )
    counts = [0] * connections
    stop = time.monotonic() + seconds

    def work(slot: int) -> None:
        with psycopg.connect(dsn) as con:
            while time.monotonic() < stop:
                con.execute(
                    "UPDATE balances SET balance_minor = balance_minor - 1 WHERE account_id = 'iss_hot' "
                    "AND asset_id = 'ast_1'"
                )
                con.commit()
                counts[slot] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def rate_counter(con: psycopg.Connection[Any], requests: int = 2000) -> float:
    con.autocommit = True
    start = time.perf_counter()
    for _ in range(requests):
        con.execute(
            "INSERT INTO rate_counters VALUES ('org_1/sandbox', 29401, 1) ON CONFLICT (bucket, window_start) "
            "DO UPDATE SET count = rate_counters.count + 1 RETURNING count"
        ).fetchone()
    con.autocommit = False
    return requests / (time.perf_counter() - start)


def skip_locked(dsn: str) -> tuple[float, int]:
    claim = "SELECT id FROM events WHERE status = 'received' ORDER BY id LIMIT 1000 FOR UPDATE SKIP LOCKED"
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(
            "INSERT INTO events SELECT 'evt_' || lpad(g::text, 8, '0'), 'cus_' || (g % 500), 'received' "
            "FROM generate_series(1, 20000) g ON CONFLICT DO NOTHING"
        )
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        held = first.execute(claim).fetchall()
        start = time.perf_counter()
        got = second.execute(claim).fetchall()
        elapsed = time.perf_counter() - start
        overlap = len({r[0] for r in held} & {r[0] for r in got})
        first.rollback()
        second.rollback()
    return elapsed, overlap


def advisory(con: psycopg.Connection[Any]) -> float:
    customers = [f"org_1/sandbox/cus_{i}" for i in range(1000)]

    def take() -> None:
        with con.transaction():
            con.execute(
                "SELECT count(*) FILTER (WHERE pg_try_advisory_xact_lock(hashtextextended(c, 0))) "
                "FROM unnest(%s::text[]) c",
                [customers],
            ).fetchone()

    return timed(take)


def main() -> None:
    cluster = PgCluster.start(durable="--durable" in sys.argv)
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE micro TEMPLATE template0")
        dsn = cluster.dsn("micro")
        with psycopg.connect(dsn, autocommit=True) as con:
            for statement in SCHEMA:
                con.execute(statement)
        with psycopg.connect(dsn) as con:
            for name, seconds in batch_writes(con).items():
                print(f"1. {ROWS} transactions, {name:34s} {seconds * 1000:7.1f} ms")
            print(f"2. {ROWS} balances UPDATE .. FROM unnest(deltas)   {balance_update(con) * 1000:7.1f} ms")
            print(f"4. rate counter upsert, one connection      {rate_counter(con):7.0f} /s")
            print(f"6. try-advisory-lock 1,000 customers        {advisory(con) * 1000:7.1f} ms")
        one = hot_row(dsn, 1)
        two = hot_row(dsn, 2)
        print(
            f"3. one hot row: 1 connection {one:6.0f} commits/s, 2 connections {two:6.0f} commits/s ({two / one:.2f}x)"
        )
        elapsed, overlap = skip_locked(dsn)
        print(f"5. SKIP LOCKED claim of 1,000 of 20,000 with 1,000 held: {elapsed * 1000:.1f} ms, overlap {overlap}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
