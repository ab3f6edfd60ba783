"""The outbox repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from rewards_lab.contract.scope import EnvironmentName, Scope


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One message of `outbox` (`payload`: the resource as JSON), written with the change that caused it."""

    id: str
    organization_id: str
    environment: EnvironmentName
    kind: str
    resource_id: str
    payload: str
    created_at: datetime
    dispatched_at: datetime | None


class OutboxStore(Protocol):
    """What the services need of the outbox rows (DuckDB: store.outbox.OutboxRepository)."""

    def add_many(self, scope: Scope, messages: list[tuple[str, str, str, str]]) -> None: ...

    def undispatched(self, limit: int) -> list[OutboxRow]: ...

    def of_scope(self, scope: Scope) -> list[OutboxRow]: ...
