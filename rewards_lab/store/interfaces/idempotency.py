"""The idempotency repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from rewards_lab.contract.scope import EnvironmentName, Scope


@dataclass(frozen=True, slots=True)
class IdempotencyRow:
    """One row of `idempotency_keys`: the first request's hash and its serialised response."""

    organization_id: str
    environment: EnvironmentName
    key: str
    operation: str
    request_hash: str
    response: str
    status_code: int
    created_at: datetime


class IdempotencyStore(Protocol):
    """What the services need of the idempotency rows (DuckDB: store.idempotency.IdempotencyRepository)."""

    def get(self, scope: Scope, key: str) -> IdempotencyRow | None: ...

    def add(
        self, scope: Scope, key: str, operation: str, request_hash: str, response: str, status_code: int
    ) -> None: ...
