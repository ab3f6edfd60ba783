"""Support conversations in DuckDB: one row per conversation and one per turn, keyed within the tenant."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import ConversationRow, TurnRow

TENANT = "organization_id = ? AND environment = ?"


class ConversationRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, scope: Scope, conversation_id: str) -> ConversationRow:
        now = utcnow()
        self.con.execute(
            "INSERT INTO conversations (organization_id, environment, id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [*scope.params, conversation_id, now, now],
        )
        return ConversationRow(conversation_id, now, now)

    def get(self, scope: Scope, conversation_id: str) -> ConversationRow | None:
        row = self.con.execute(
            f"SELECT id, created_at, updated_at FROM conversations WHERE {TENANT} AND id = ?",
            [*scope.params, conversation_id],
        ).fetchone()
        return None if row is None else ConversationRow(*row)

    def turns(self, scope: Scope, conversation_id: str) -> list[TurnRow]:
        rows = self.con.execute(
            "SELECT id, position, role, content, sources, context, created_at FROM conversation_turns "
            f"WHERE {TENANT} AND conversation_id = ? ORDER BY position",
            [*scope.params, conversation_id],
        ).fetchall()
        return [TurnRow(*row) for row in rows]

    def add_turns(self, scope: Scope, conversation_id: str, turns: Sequence[TurnRow]) -> None:
        if not turns:
            return
        self.con.executemany(
            "INSERT INTO conversation_turns (organization_id, environment, conversation_id, position, id, role, "
            "content, sources, context, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [[*scope.params, conversation_id, *_values(t)] for t in turns],
        )
        self.con.execute(
            f"UPDATE conversations SET updated_at = ? WHERE {TENANT} AND id = ?",
            [max(t.created_at for t in turns), *scope.params, conversation_id],
        )


def _values(turn: TurnRow) -> list[object]:
    return [turn.position, turn.id, turn.role, turn.content, turn.sources, turn.context, turn.created_at]
