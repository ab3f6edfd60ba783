"""The organizations repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from typing import Protocol

from rewards_lab.store.queries import Row


class OrganizationStore(Protocol):
    """What the services need of the organization rows (DuckDB: store.organizations.OrganizationRepository)."""

    def add(self, organization_id: str, name: str, plan: str, rate_limit_per_minute: int | None) -> Row: ...

    def get(self, organization_id: str) -> Row | None: ...
