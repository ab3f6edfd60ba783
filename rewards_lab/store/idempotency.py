"""Idempotency keys: per (organization, environment, key), the body's hash and the original response.

A key is honoured for its retention window (`set_retention`; `service.retention` documents the default of 7 days)
and treated as new afterwards, whether or not the retention job has deleted its row yet: `get` looks inside the
window only, and `add` replaces an expired row of the same key.
"""

from __future__ import annotations

from datetime import timedelta

import duckdb

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import IdempotencyRow
from rewards_lab.store.queries import columns, fetch_one_as

DEFAULT_RETENTION = timedelta(hours=168)
_retention: list[timedelta | None] = [DEFAULT_RETENTION]  # process-wide; None: keys never expire


def set_retention(window: timedelta | None) -> None:
    """How long a key is honoured (None: forever). Set once at start from the retention settings."""
    _retention[0] = window


def retention() -> timedelta | None:
    return _retention[0]


class IdempotencyRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def hold(self, scope: Scope, key: str) -> bool:
        """True: one process writes a DuckDB file, its units of work one at a time, and `api.in_flight` answers
        a second request of a key in progress."""
        return True

    def get(self, scope: Scope, key: str) -> IdempotencyRow | None:
        """The stored request and response of `key`, unless it is older than the retention window."""
        window = _retention[0]
        sql = (
            f"SELECT {columns(IdempotencyRow)} FROM idempotency_keys"
            " WHERE organization_id = ? AND environment = ? AND key = ?"
        )
        params: list[object] = [*scope.params, key]
        if window is not None:
            sql += " AND created_at >= ?"
            params.append(utcnow() - window)
        return fetch_one_as(self.con, IdempotencyRow, sql, params)

    def add(self, scope: Scope, key: str, operation: str, request_hash: str, response: str, status_code: int) -> None:
        """Store the key; an expired row of the same key (not yet deleted by the retention job) is replaced."""
        self.con.execute(
            "INSERT OR REPLACE INTO idempotency_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [*scope.params, key, operation, request_hash, response, status_code, utcnow()],
        )
