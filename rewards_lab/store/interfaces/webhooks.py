"""The webhooks repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class EndpointRow:
    """A webhook endpoint; its signing secrets are stored sealed (`security/webhook_secrets.py` opens them)."""

    id: str
    organization_id: str
    environment: str
    url: str
    events: str  # JSON list of event kinds
    signing_secret: str
    secret_prefix: str
    status: str
    created_at: datetime
    disabled_at: datetime | None
    previous_signing_secret: str | None
    previous_secret_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class PlaintextSecrets:
    """An endpoint whose secrets a database from before sealing still holds as given."""

    id: str
    signing_secret: str
    previous_signing_secret: str | None


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    id: str
    organization_id: str
    environment: str
    endpoint_id: str
    outbox_id: str | None
    kind: str
    body: str  # the exact JSON signed and sent on every attempt
    status: str
    attempt_count: int
    round_attempts: int  # attempts since the delivery was created or last replayed
    next_attempt_at: datetime | None
    created_at: datetime
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A delivery due now, with what sending it needs of its endpoint."""

    id: str
    organization_id: str
    environment: str
    endpoint_id: str
    kind: str
    body: str
    attempt_count: int
    round_attempts: int
    next_attempt_at: datetime
    url: str
    signing_secret: str
    previous_signing_secret: str | None
    previous_secret_expires_at: datetime | None
    endpoint_status: str


@dataclass(frozen=True, slots=True)
class AttemptRow:
    delivery_id: str
    number: int
    organization_id: str
    environment: str
    attempted_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    succeeded: bool


class WebhookStore(Protocol):
    """What the services need of the webhook rows (DuckDB: store.webhooks.WebhookRepository)."""

    def add_endpoint(
        self, scope: Scope, endpoint_id: str, url: str, events: list[str], secret: str, secret_prefix: str
    ) -> EndpointRow: ...

    def endpoint(self, scope: Scope, endpoint_id: str) -> EndpointRow | None: ...

    def endpoints_page(
        self, scope: Scope, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[EndpointRow]: ...

    def disable_endpoint(self, scope: Scope, endpoint_id: str) -> None: ...

    def rotate_secret(
        self,
        scope: Scope,
        endpoint_id: str,
        *,
        secret: str,
        secret_prefix: str,
        previous_secret: str | None,
        previous_expires_at: datetime | None,
    ) -> None: ...

    def endpoints_with_plaintext_secrets(self) -> list[PlaintextSecrets]: ...

    def store_sealed_secrets(self, endpoint_id: str, secret: str, previous_secret: str | None) -> None: ...

    def enabled_endpoints(self) -> list[EndpointRow]: ...

    def add_deliveries(self, rows: list[dict[str, Any]], next_attempt_at: datetime) -> None: ...

    def delivery(self, scope: Scope, delivery_id: str) -> DeliveryRow | None: ...

    def deliveries_page(
        self, scope: Scope, endpoint_id: str, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[DeliveryRow]: ...

    def due(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
    ) -> list[DueDelivery]: ...

    def record_attempt(
        self,
        delivery: DueDelivery,
        *,
        attempted_at: datetime,
        duration_ms: int,
        status_code: int | None,
        error: str | None,
        succeeded: bool,
        next_status: str,
        next_attempt_at: datetime | None,
    ) -> None: ...

    def requeue(self, scope: Scope, delivery_id: str, when: datetime) -> None: ...

    def attempts_of(self, delivery_ids: list[str]) -> list[AttemptRow]: ...

    def pending_count(self) -> int: ...

    def undispatched_count(self) -> int: ...

    def received_events_count(self) -> int: ...

    def mark_dispatched(self, outbox_ids: list[str]) -> None: ...
