"""Webhook endpoints, their deliveries and the attempts of each delivery (all SQL of the webhook path)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import (
    AttemptRow,
    DeliveryRow,
    DueDelivery,
    EndpointRow,
    NewDelivery,
    PlaintextSecrets,
)
from rewards_lab.store.queries import RowPage, columns, decoding, fetch_all_as, fetch_one_as, paginate, scalar
from rewards_lab.store.secret_box import SEALED_PREFIX, SecretBox, is_sealed

TENANT = "organization_id = ? AND environment = ?"
_ENDPOINT = columns(EndpointRow)
_DELIVERY = columns(DeliveryRow)
_ATTEMPT = columns(AttemptRow)
_DUE = columns(DueDelivery)  # the columns of `due`'s `ranked`, its rank aside
# An endpoint with the event kinds it subscribes to decoded as it is read.
_ENDPOINT_ROW = decoding(EndpointRow, {"events": lambda text: tuple(json.loads(text))})


def webhook_secret_context(endpoint_id: str, *, previous: bool = False) -> str:
    """The associated data a signing secret is sealed under: `webhook:<endpoint id>`, and `...:previous` for a
    rotated-out secret in its grace period, so a sealed value copied to another row or column does not open."""
    return f"webhook:{endpoint_id}:previous" if previous else f"webhook:{endpoint_id}"


def seal_plaintext_webhook_secrets(con: duckdb.DuckDBPyConnection, box: SecretBox) -> int:
    """Seal every webhook signing secret still stored in plain text (a database written before sealing); returns
    how many endpoints changed. Run by `Database.seal_plaintext_secrets` when the database opens."""
    repository = WebhookRepository(con)
    found = repository.endpoints_with_plaintext_secrets()
    for row in found:
        endpoint_id, current, previous = str(row.id), str(row.signing_secret), row.previous_signing_secret
        if not is_sealed(current):
            current = box.seal(current, context=webhook_secret_context(endpoint_id))
        if previous is not None and not is_sealed(str(previous)):
            previous = box.seal(str(previous), context=webhook_secret_context(endpoint_id, previous=True))
        repository.store_sealed_secrets(endpoint_id, current, previous)
    return len(found)


class WebhookRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # endpoints -------------------------------------------------------------------------------------------
    def add_endpoint(
        self, scope: Scope, endpoint_id: str, url: str, events: list[str], secret: str, secret_prefix: str
    ) -> EndpointRow:
        """`secret` is the sealed signing secret."""
        self.con.execute(
            "INSERT INTO webhook_endpoints (id, organization_id, environment, url, events, signing_secret, "
            "secret_prefix, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'enabled', ?)",
            [endpoint_id, *scope.params, url, json.dumps(events), secret, secret_prefix, utcnow()],
        )
        row = self.endpoint(scope, endpoint_id)
        assert row is not None
        return row

    def endpoint(self, scope: Scope, endpoint_id: str) -> EndpointRow | None:
        sql = f"SELECT {_ENDPOINT} FROM webhook_endpoints WHERE {TENANT} AND id = ?"
        return fetch_one_as(self.con, _ENDPOINT_ROW, sql, [*scope.params, endpoint_id])

    def endpoints_page(self, scope: Scope, page: PageRequest, sort: str, status: str | None) -> RowPage[EndpointRow]:
        sql = f"SELECT {_ENDPOINT} FROM webhook_endpoints WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if status:
            sql += " AND status = ?"
            params.append(status)
        listed = paginate(self.con, list_name="webhooks", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(_ENDPOINT_ROW)

    def disable_endpoint(self, scope: Scope, endpoint_id: str) -> None:
        self.con.execute(
            f"UPDATE webhook_endpoints SET status = 'disabled', disabled_at = ? WHERE {TENANT} AND id = ?",
            [utcnow(), *scope.params, endpoint_id],
        )

    def rotate_secret(
        self,
        scope: Scope,
        endpoint_id: str,
        *,
        secret: str,
        secret_prefix: str,
        previous_secret: str | None,
        previous_expires_at: datetime | None,
    ) -> None:
        """Replace the (sealed) signing secret; the old one, sealed again, signs too until `previous_expires_at`."""
        self.con.execute(
            "UPDATE webhook_endpoints SET signing_secret = ?, secret_prefix = ?, previous_signing_secret = ?, "
            f"previous_secret_expires_at = ? WHERE {TENANT} AND id = ?",
            [secret, secret_prefix, previous_secret, previous_expires_at, *scope.params, endpoint_id],
        )

    def endpoints_with_plaintext_secrets(self) -> list[PlaintextSecrets]:
        return fetch_all_as(
            self.con,
            PlaintextSecrets,
            "SELECT id, signing_secret, previous_signing_secret FROM webhook_endpoints "
            "WHERE NOT starts_with(signing_secret, ?) "
            "OR (previous_signing_secret IS NOT NULL AND NOT starts_with(previous_signing_secret, ?)) ORDER BY id",
            [SEALED_PREFIX, SEALED_PREFIX],
        )

    def store_sealed_secrets(self, endpoint_id: str, secret: str, previous_secret: str | None) -> None:
        self.con.execute(
            "UPDATE webhook_endpoints SET signing_secret = ?, previous_signing_secret = ? WHERE id = ?",
            [secret, previous_secret, endpoint_id],
        )

    def enabled_endpoints(self) -> list[EndpointRow]:
        """Every enabled endpoint of every tenant (the fan-out reads them once per batch)."""
        sql = f"SELECT {_ENDPOINT} FROM webhook_endpoints WHERE status = 'enabled' ORDER BY id"
        return fetch_all_as(self.con, _ENDPOINT_ROW, sql)

    # deliveries ------------------------------------------------------------------------------------------
    def add_deliveries(self, rows: list[NewDelivery], next_attempt_at: datetime) -> None:
        """Insert pending deliveries, due at `next_attempt_at`, in one statement. A message already fanned out to an
        endpoint is skipped (`UNIQUE (endpoint_id, outbox_id)`): never on DuckDB (one fan-out at a time), a net on
        PostgreSQL behind the fan-out's claim of its messages."""
        if not rows:
            return
        batch = pa.table(dict(zip(NewDelivery._fields, map(list, zip(*rows, strict=True)), strict=True)))
        self.con.register("delivery_batch", batch)
        try:
            self.con.execute(
                "INSERT INTO webhook_deliveries (id, organization_id, environment, endpoint_id, outbox_id, kind, "
                "body, status, attempt_count, round_attempts, next_attempt_at, created_at) "
                "SELECT id, organization_id, environment, endpoint_id, outbox_id, kind, body, 'pending', 0, 0, ?, ? "
                "FROM delivery_batch ON CONFLICT (endpoint_id, outbox_id) DO NOTHING",
                [next_attempt_at, utcnow()],
            )
        finally:
            self.con.unregister("delivery_batch")

    def delivery(self, scope: Scope, delivery_id: str) -> DeliveryRow | None:
        sql = f"SELECT {_DELIVERY} FROM webhook_deliveries WHERE {TENANT} AND id = ?"
        return fetch_one_as(self.con, DeliveryRow, sql, [*scope.params, delivery_id])

    def deliveries_page(
        self, scope: Scope, endpoint_id: str, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[DeliveryRow]:
        sql = f"SELECT {_DELIVERY} FROM webhook_deliveries WHERE {TENANT} AND endpoint_id = ?"
        params: list[Any] = [*scope.params, endpoint_id]
        if status:
            sql += " AND status = ?"
            params.append(status)
        listed = paginate(
            self.con, list_name=f"deliveries:{endpoint_id}", select_sql=sql, params=params, page=page, sort=sort
        )
        return listed.typed(DeliveryRow)

    def due(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
    ) -> list[DueDelivery]:
        """Pending deliveries whose next attempt is due, oldest first, at most `per_endpoint` of each endpoint and
        then `per_tenant` of each organization (so that one backlog never hides another's), none to an enabled
        endpoint in `exclude_endpoints` (a disabled one's still come, to end failed unsent), with their endpoint's
        url, sealed secrets and status. A delivery a sender holds (its lease not yet passed: PostgreSQL) is not due."""
        return fetch_all_as(
            self.con,
            DueDelivery,
            "WITH ranked AS (SELECT d.id, d.organization_id, d.environment, d.endpoint_id, d.kind, d.body, "
            "d.attempt_count, d.round_attempts, d.next_attempt_at, e.url, e.signing_secret, "
            "e.previous_signing_secret, e.previous_secret_expires_at, e.status AS endpoint_status, "
            "row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS endpoint_rank "
            "FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id "
            "WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?) "
            "AND d.id NOT IN (SELECT unnest(?)) "
            "AND (e.status <> 'enabled' OR d.endpoint_id NOT IN (SELECT unnest(?)))) "
            f"SELECT {_DUE} FROM (SELECT {_DUE}, "
            "row_number() OVER (PARTITION BY organization_id ORDER BY next_attempt_at, id) AS tenant_rank "
            "FROM ranked WHERE endpoint_rank <= ?) tenant_ranked WHERE tenant_rank <= ? "
            "ORDER BY next_attempt_at, id LIMIT ?",
            [now, now, exclude, exclude_endpoints, per_endpoint, per_tenant, limit],
        )

    def claim(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
        *,
        owner: str,
        lease_until: datetime,
    ) -> list[DueDelivery]:
        """`due`'s deliveries for `owner` (a sender) to attempt. DuckDB: `due` itself (one sender per file: its
        deliveries in flight, `exclude`, are its claim). PostgreSQL (store/postgres/repositories.py): leased to
        `owner` until `lease_until`, skipping those another sender holds."""
        return self.due(now, limit, exclude, per_endpoint, per_tenant, exclude_endpoints)

    def release(self, delivery_ids: list[str], owner: str) -> None:
        """Give back claimed deliveries `owner` will not attempt now (DuckDB: nothing was leased)."""

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
    ) -> None:
        """Append the attempt and move the delivery on (succeeded, pending again later, or failed)."""
        number = delivery.attempt_count + 1
        self.con.execute(
            "INSERT INTO webhook_attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                delivery.id,
                number,
                delivery.organization_id,
                delivery.environment,
                attempted_at,
                duration_ms,
                status_code,
                error,
                succeeded,
            ],
        )
        self.con.execute(
            "UPDATE webhook_deliveries SET status = ?, attempt_count = ?, round_attempts = round_attempts + 1, "
            "next_attempt_at = ?, completed_at = ?, lease_until = NULL, leased_by = NULL WHERE id = ?",
            [next_status, number, next_attempt_at, None if next_status == "pending" else utcnow(), delivery.id],
        )

    def requeue(self, scope: Scope, delivery_id: str, when: datetime) -> None:
        """Pending again from the start of the retry schedule (a replay); past attempts are kept."""
        self.con.execute(
            "UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = ?, "
            f"completed_at = NULL WHERE {TENANT} AND id = ?",
            [when, *scope.params, delivery_id],
        )

    def attempts_of(self, delivery_ids: list[str]) -> list[AttemptRow]:
        if not delivery_ids:
            return []
        return fetch_all_as(
            self.con,
            AttemptRow,
            f"SELECT {_ATTEMPT} FROM webhook_attempts WHERE delivery_id IN (SELECT unnest(?)) "
            "ORDER BY delivery_id, number",
            [delivery_ids],
        )

    # operators -------------------------------------------------------------------------------------------
    def pending_count(self) -> int:
        return int(scalar(self.con, "SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"))

    def undispatched_count(self) -> int:
        return int(scalar(self.con, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"))

    def received_events_count(self) -> int:
        return int(scalar(self.con, "SELECT count(*) FROM events WHERE status = 'received'"))

    def mark_dispatched(self, outbox_ids: list[str]) -> None:
        if outbox_ids:
            self.con.execute(
                "UPDATE outbox SET dispatched_at = ? WHERE id IN (SELECT unnest(?))", [utcnow(), outbox_ids]
            )
