"""The authentication audit trail as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class AuditFilter:
    kind: str | None = None
    outcome: str | None = None
    since: datetime | None = None  # inclusive, naive UTC
    until: datetime | None = None  # exclusive, naive UTC


class AuditRow(NamedTuple):
    """One authentication event (login, logout, key created or revoked, access denied)."""

    id: str
    organization_id: str | None
    environment: str | None
    kind: str
    outcome: str
    reason: str | None
    status: int | None
    actor_id: str | None
    subject_id: str | None
    request_id: str | None
    method: str | None
    path: str | None
    address: str | None
    sdk_version: str | None
    created_at: datetime


class Tenant(NamedTuple):
    """Whom an audit event without a tenant is filed under (the owner of a key, session or account)."""

    organization_id: str
    environment: str | None
    actor_id: str


class AuthAuditStore(Protocol):
    """What the services need of the audit trail (DuckDB: store.auth_audit.AuthAuditRepository)."""

    def add(self, row: dict[str, Any]) -> None: ...

    def add_many(self, rows: list[dict[str, Any]]) -> None: ...

    def page(self, scope: Scope, where: AuditFilter, page: PageRequest) -> RowPage[AuditRow]: ...

    def api_key_owner(self, key_id: str) -> Tenant | None: ...

    def session_owner(self, session_id: str) -> Tenant | None: ...

    def account_owner(self, email: str) -> Tenant | None: ...
