"""The api keys repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from rewards_lab.contract.scope import EnvironmentName, Scope


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    """One row of `api_keys` (`permissions`: a JSON list of permission names)."""

    id: str
    organization_id: str
    environment: EnvironmentName
    name: str
    prefix: str
    secret_hash: str
    permissions: str
    created_by: str | None
    created_at: datetime
    revoked_at: datetime | None


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
    ) -> ApiKeyRow: ...

    def get(self, scope: Scope, key_id: str) -> ApiKeyRow | None: ...

    def by_hash(self, secret_hash: str) -> ApiKeyRow | None: ...

    def revoke(self, scope: Scope, key_id: str) -> None: ...
