"""The outbox repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from typing import Protocol

from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row


class OutboxStore(Protocol):
    """What the services need of the outbox rows (DuckDB: store.outbox.OutboxRepository)."""

    def add_many(self, scope: Scope, messages: list[tuple[str, str, str, str]]) -> None: ...

    def undispatched(self, limit: int) -> list[Row]: ...

    def of_scope(self, scope: Scope) -> list[Row]: ...
