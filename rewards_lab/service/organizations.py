"""Organizations (tenants). Created by `bootstrap`; never through the tenant-scoped API."""

from __future__ import annotations

from typing import Literal

from rewards_lab.contract.ids import new_id
from rewards_lab.store.api import Store, unit_of_work
from rewards_lab.store.interfaces import OrganizationRow

Plan = Literal["public", "business", "enterprise"]
RATE_LIMITS_PER_MINUTE: dict[str, int | None] = {"public": 100, "business": 1000, "enterprise": None}


def create_organization(
    database: Store, name: str, plan: Plan = "business", rate_limit_per_minute: int | None = None
) -> OrganizationRow:
    """A new tenant. Enterprise limits are configurable; the other plans take the seed's figures."""
    limit = rate_limit_per_minute if rate_limit_per_minute is not None else RATE_LIMITS_PER_MINUTE[plan]
    with unit_of_work(database) as uow:
        return uow.organizations.add(new_id("organization"), name, plan, limit)
