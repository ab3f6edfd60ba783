"""The outbox: side effects (webhook kinds) written in the same transaction as the change that causes them."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import OutboxRow
from rewards_lab.store.queries import columns, fetch_all_as


class OutboxRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add_many(self, scope: Scope, messages: list[tuple[str, str, str, str]]) -> None:
        """Add (id, kind, resource id, payload JSON) messages."""
        if not messages:
            return
        ids, kinds, resources, payloads = (list(column) for column in zip(*messages, strict=True))
        self.con.register(
            "outbox_batch",
            pa.table({"id": ids, "kind": kinds, "resource_id": resources, "payload": payloads}),
        )
        try:
            self.con.execute(
                "INSERT INTO outbox SELECT id, ?, ?, kind, resource_id, payload, ?, NULL FROM outbox_batch",
                [*scope.params, utcnow()],
            )
        finally:
            self.con.unregister("outbox_batch")

    def undispatched(self, limit: int) -> list[OutboxRow]:
        sql = f"SELECT {columns(OutboxRow)} FROM outbox WHERE dispatched_at IS NULL ORDER BY id LIMIT ?"
        return fetch_all_as(self.con, OutboxRow, sql, [limit])

    def claim(self, limit: int) -> list[OutboxRow]:
        """`undispatched`'s messages for this unit of work's fan-out. DuckDB: `undispatched` itself (one fan-out at
        a time). PostgreSQL (store/postgres/repositories.py): locked until the unit of work ends, skipping those
        another process's fan-out holds."""
        return self.undispatched(limit)

    def of_scope(self, scope: Scope) -> list[OutboxRow]:
        return fetch_all_as(
            self.con,
            OutboxRow,
            f"SELECT {columns(OutboxRow)} FROM outbox WHERE organization_id = ? AND environment = ? ORDER BY id",
            scope.params,
        )
