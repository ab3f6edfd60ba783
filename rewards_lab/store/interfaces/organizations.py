"""The organizations repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class OrganizationRow:
    """One tenant (`rate_limit_per_minute`: None on plans without a fixed limit)."""

    id: str
    name: str
    plan: str
    rate_limit_per_minute: int | None
    created_at: datetime


class OrganizationStore(Protocol):
    """What the services need of the organization rows (DuckDB: store.organizations.OrganizationRepository)."""

    def add(self, organization_id: str, name: str, plan: str, rate_limit_per_minute: int | None) -> OrganizationRow: ...

    def get(self, organization_id: str) -> OrganizationRow | None: ...
