"""`store.shared_state.SharedState` on PostgreSQL: the rate counters and login failures of every process serving
the database, in its UNLOGGED tables `rate_counters` and `login_failures` (migration 27).

A rate counter is one upsert `RETURNING count` on the calling thread's autocommit connection (the one its reads
use: no pool checkout on the request's path), exact across processes. The login guard's records are read and
written in one transaction that first takes a transaction advisory lock per key, in the order of the locks' keys:
two logins touching one key (the same address, the same account) are serialised wherever they run, as the
in-memory guard's lock serialises them in one process, and never deadlock.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import PoolTimeout

from rewards_lab.store.shared_state import SharedStateUnavailable

if TYPE_CHECKING:
    from rewards_lab.store.postgres.store import PostgresStore

LOGIN_LOCK_SEED = 0x6C6F67  # hashtextextended's seed for the login guard's keys ("log"), apart from idempotency's 0
_COUNT = (
    "INSERT INTO rate_counters AS c (bucket, window_start, count) VALUES (%s, %s, 1) "
    "ON CONFLICT (bucket, window_start) DO UPDATE SET count = c.count + 1 RETURNING c.count"
)
_READ_COUNT = "SELECT count FROM rate_counters WHERE bucket = %s AND window_start = %s"
_FORGET_WINDOWS = "DELETE FROM rate_counters WHERE window_start < %s"
_LOCK_KEYS = (
    "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, %s) AS h "
    "FROM unnest(%s::text[]) AS k ORDER BY h) AS locks"
)
_READ_RECORDS = "SELECT key, failures, last_failure_at FROM login_failures WHERE key = ANY(%s)"
_PUT_RECORD = (
    "INSERT INTO login_failures (key, failures, last_failure_at) VALUES (%s, %s, %s) ON CONFLICT (key) "
    "DO UPDATE SET failures = EXCLUDED.failures, last_failure_at = EXCLUDED.last_failure_at"
)
_DROP_RECORD = "DELETE FROM login_failures WHERE key = %s"
_FORGET_RECORDS = "DELETE FROM login_failures WHERE last_failure_at < %s"


class _Records:
    def __init__(self, conn: psycopg.Connection[Any], found: dict[str, tuple[int, float]]) -> None:
        self._conn = conn
        self._found = found

    def get(self, key: str) -> tuple[int, float] | None:
        return self._found.get(key)

    def put(self, key: str, failures: int, last_failure_at: float) -> None:
        self._conn.execute(_PUT_RECORD, [key, failures, last_failure_at])
        self._found[key] = (failures, last_failure_at)

    def drop(self, key: str) -> None:
        if self._found.pop(key, None) is not None:
            self._conn.execute(_DROP_RECORD, [key])


class PgSharedState:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _autocommit(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        try:
            cursor = self._store.thread_connection().execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as error:
            raise SharedStateUnavailable(str(error)) from error

    def count_request(self, bucket: str, window_start: int) -> int:
        return int(self._autocommit(_COUNT, [bucket, window_start])[0][0])

    def request_count(self, bucket: str, window_start: int) -> int:
        rows = self._autocommit(_READ_COUNT, [bucket, window_start])
        return int(rows[0][0]) if rows else 0

    def forget_windows_before(self, window_start: int) -> None:
        self._autocommit(_FORGET_WINDOWS, [window_start])

    @contextmanager
    def login_records(self, keys: Sequence[str]) -> Iterator[_Records]:
        try:
            with self._store.pooled_transaction() as conn:
                conn.execute(_LOCK_KEYS, [LOGIN_LOCK_SEED, list(keys)])
                rows = conn.execute(_READ_RECORDS, [list(keys)]).fetchall()
                yield _Records(conn, {str(k): (int(f), float(t)) for k, f, t in rows})
        except (psycopg.Error, PoolTimeout) as error:
            raise SharedStateUnavailable(str(error)) from error

    def forget_login_failures_before(self, at: float) -> None:
        self._autocommit(_FORGET_RECORDS, [at])
