"""The api keys repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from typing import Protocol

from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row


class ApiKeyStore(Protocol):
    """What the services need of the apikey rows (DuckDB: store.api_keys.ApiKeyRepository)."""

    def add(
        self,
        scope: Scope,
        key_id: str,
        name: str,
        prefix: str,
        secret_hash: str,
        permissions: list[str],
        created_by: str | None,
    ) -> Row: ...

    def get(self, scope: Scope, key_id: str) -> Row | None: ...

    def by_hash(self, secret_hash: str) -> Row | None: ...

    def revoke(self, scope: Scope, key_id: str) -> None: ...
