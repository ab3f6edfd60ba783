"""The webhooks repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row, RowPage


class WebhookStore(Protocol):
    """What the services need of the webhook rows (DuckDB: store.webhooks.WebhookRepository)."""

    def add_endpoint(
        self, scope: Scope, endpoint_id: str, url: str, events: list[str], secret: str, secret_prefix: str
    ) -> Row: ...

    def endpoint(self, scope: Scope, endpoint_id: str) -> Row | None: ...

    def endpoints_page(self, scope: Scope, page: PageRequest, sort: str, status: str | None) -> RowPage[Row]: ...

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

    def endpoints_with_plaintext_secrets(self) -> list[Row]: ...

    def store_sealed_secrets(self, endpoint_id: str, secret: str, previous_secret: str | None) -> None: ...

    def enabled_endpoints(self) -> list[Row]: ...

    def add_deliveries(self, rows: list[dict[str, Any]], next_attempt_at: datetime) -> None: ...

    def delivery(self, scope: Scope, delivery_id: str) -> Row | None: ...

    def deliveries_page(
        self, scope: Scope, endpoint_id: str, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[Row]: ...

    def due(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
    ) -> list[Row]: ...

    def record_attempt(
        self,
        delivery: Row,
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

    def attempts_of(self, delivery_ids: list[str]) -> list[Row]: ...

    def pending_count(self) -> int: ...

    def undispatched_count(self) -> int: ...

    def received_events_count(self) -> int: ...

    def mark_dispatched(self, outbox_ids: list[str]) -> None: ...
