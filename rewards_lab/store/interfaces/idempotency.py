"""The idempotency repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from typing import Protocol

from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row


class IdempotencyStore(Protocol):
    """What the services need of the idempotency rows (DuckDB: store.idempotency.IdempotencyRepository)."""

    def get(self, scope: Scope, key: str) -> Row | None: ...

    def add(
        self, scope: Scope, key: str, operation: str, request_hash: str, response: str, status_code: int
    ) -> None: ...
