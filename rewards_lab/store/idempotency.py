"""Idempotency keys: per (organization, environment, key), the body's hash and the original response."""

from __future__ import annotations

import duckdb

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.queries import Row, fetch_one


class IdempotencyRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def get(self, scope: Scope, key: str) -> Row | None:
        return fetch_one(
            self.con,
            "SELECT * FROM idempotency_keys WHERE organization_id = ? AND environment = ? AND key = ?",
            [*scope.params, key],
        )

    def add(self, scope: Scope, key: str, operation: str, request_hash: str, response: str, status_code: int) -> None:
        self.con.execute(
            "INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [*scope.params, key, operation, request_hash, response, status_code, utcnow()],
        )
