"""The customers repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class CustomerRow:
    """A customer, keyed by the client's `external_id` within its tenant."""

    id: str
    organization_id: str
    environment: str
    external_id: str
    email: str | None
    country: str | None
    created_at: datetime
    # Compact JSON text (contract.attributes.to_json); '{}' when none. Read with every row, `resolve_many`'s
    # included, so that rules can read a customer's attributes without another query.
    attributes: str


class CustomerStore(Protocol):
    """What the services need of the customer rows (DuckDB: store.customers.CustomerRepository)."""

    def add(
        self,
        scope: Scope,
        customer_id: str,
        external_id: str,
        email: str | None,
        country: str | None,
        attributes: str = "{}",
    ) -> CustomerRow: ...

    def update(
        self, scope: Scope, customer_id: str, *, email: str | None, country: str | None, attributes: str
    ) -> CustomerRow:
        """Set the three editable fields of an existing customer; returns the row as it is now."""
        ...

    def get(self, scope: Scope, customer_id: str) -> CustomerRow | None: ...

    def get_by_external_id(self, scope: Scope, external_id: str) -> CustomerRow | None: ...

    def resolve_many(self, scope: Scope, references: list[str]) -> dict[str, CustomerRow]: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[CustomerRow]: ...
