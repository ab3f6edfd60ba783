"""Webhook endpoints and their deliveries: register, list, disable, rotate the secret, send a test, list
deliveries, replay.

The signing secret is returned once, by `create_webhook` (and a new one once by `rotate_secret`). It is stored
sealed (`security/webhook_secrets.py`; the sender opens it for the HMAC) in a column no resource ever reads: every
response is built by `_endpoint`, which has no secret field.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from rewards_lab import presenters
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.presenters import utc
from rewards_lab.security import webhook_secrets
from rewards_lab.security.webhook_targets import normalise_url, private_targets_allowed
from rewards_lab.service.deliveries import ERROR_CLASSES, TEST_KIND, delivery_body
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store, reader, snapshot, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import AttemptRow, DeliveryRow, EndpointRow, NewDelivery, Repositories

SECRET_PREFIX = "whsec_"
VISIBLE_SECRET_LENGTH = 12
ENDPOINT_SORTS = ("created_at",)
DELIVERY_SORTS = ("created_at",)


def _endpoint(row: EndpointRow) -> r.WebhookEndpoint:
    return r.WebhookEndpoint(
        id=row.id,
        url=row.url,
        events=list(row.events),
        status=row.status,
        secret_prefix=row.secret_prefix,
        created_at=utc(row.created_at),
        previous_secret_expires_at=_grace_end(row),
    )


def _grace_end(row: EndpointRow) -> datetime | None:
    expires_at = row.previous_secret_expires_at
    if row.previous_signing_secret is None or expires_at is None or expires_at <= utcnow():
        return None
    return utc(expires_at)


def _error_class(stored: str | None) -> str | None:
    """Only a coarse class ever leaves the service (rows from before the classes were migrated, see schema 8)."""
    if stored is None or stored in ERROR_CLASSES:
        return stored
    return "error"


def _delivery(row: DeliveryRow, attempts: list[AttemptRow]) -> r.WebhookDelivery:
    return r.WebhookDelivery(
        id=row.id,
        webhook_id=row.endpoint_id,
        kind=row.kind,
        status=row.status,
        attempt_count=row.attempt_count,
        next_attempt_at=utc(row.next_attempt_at) if row.status == "pending" else None,
        created_at=utc(row.created_at),
        completed_at=utc(row.completed_at),
        body=row.body,
        attempts=[
            r.WebhookAttempt(
                number=a.number,
                attempted_at=utc(a.attempted_at),
                duration_ms=a.duration_ms,
                status_code=a.status_code,
                error=_error_class(a.error),
                succeeded=a.succeeded,
            )
            for a in attempts
        ],
    )


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def create_webhook(
    database: Store, scope: Scope, body: rq.WebhookCreate, *, allow_private: bool | None = None
) -> r.WebhookEndpointCreated:
    """Register an endpoint; the answer is the only time its signing secret is shown. The URL is normalised and
    checked (`webhook_targets.normalise_url`); private targets follow the operator's setting unless told."""
    allowed = private_targets_allowed() if allow_private is None else allow_private
    url = normalise_url(body.url, scope.environment, allow_private=allowed)
    for index, kind in enumerate(body.events):
        if kind not in rq.WEBHOOK_EVENT_KINDS:
            raise ServiceError(
                "webhook_event_kind_invalid",
                f"'{kind}' is not one of {', '.join(rq.WEBHOOK_EVENT_KINDS)}",
                field=f"events[{index}]",
                allowed=list(rq.WEBHOOK_EVENT_KINDS),
            )
    events = list(dict.fromkeys(body.events))
    secret = _new_secret()
    endpoint_id = new_id("webhook")
    sealed = webhook_secrets.seal(database, endpoint_id, secret)
    with unit_of_work(database) as uow:
        row = uow.webhooks.add_endpoint(scope, endpoint_id, url, events, sealed, secret[:VISIBLE_SECRET_LENGTH])
    return r.WebhookEndpointCreated(**_endpoint(row).model_dump(), signing_secret=secret)


def rotate_secret(
    database: Store, scope: Scope, webhook_id: str, body: rq.WebhookSecretRotate
) -> r.WebhookSecretRotated:
    """A new signing secret, shown once. The current one becomes the previous one and keeps signing (beside the
    new one) for `grace_period_s`; a secret that was already previous stops signing now. Not idempotent on
    purpose: a stored answer would keep the new secret in the idempotency table."""
    secret = _new_secret()
    with unit_of_work(database) as uow:
        row = _endpoint_row(uow, scope, webhook_id)
        if row.status != "enabled":
            raise ServiceError("invalid_state_transition", "the endpoint is disabled", status=row.status)
        previous: str | None = None
        expires_at: datetime | None = None
        if body.grace_period_s > 0:
            current = webhook_secrets.open_secret(database, webhook_id, str(row.signing_secret))
            previous = webhook_secrets.seal(database, webhook_id, current, previous=True)
            expires_at = utcnow() + timedelta(seconds=body.grace_period_s)
        uow.webhooks.rotate_secret(
            scope,
            webhook_id,
            secret=webhook_secrets.seal(database, webhook_id, secret),
            secret_prefix=secret[:VISIBLE_SECRET_LENGTH],
            previous_secret=previous,
            previous_expires_at=expires_at,
        )
        updated = _endpoint_row(uow, scope, webhook_id)
    return r.WebhookSecretRotated(**_endpoint(updated).model_dump(), signing_secret=secret)


def _endpoint_row(uow: Repositories, scope: Scope, webhook_id: str) -> EndpointRow:
    row = uow.webhooks.endpoint(scope, webhook_id)
    if row is None:
        raise ServiceError("webhook_not_found", webhook_id=webhook_id)
    return row


def get_webhook(database: Store, scope: Scope, webhook_id: str) -> r.WebhookEndpoint:
    return _endpoint(_endpoint_row(reader(database), scope, webhook_id))


def list_webhooks(
    database: Store, scope: Scope, page: PageRequest, *, status: str | None = None
) -> r.Page[r.WebhookEndpoint]:
    sort = check_page_request(page, ENDPOINT_SORTS)
    rows = reader(database).webhooks.endpoints_page(scope, page, sort, status)
    return presenters.page(r.Page[r.WebhookEndpoint], rows, _endpoint)


def disable_webhook(
    database: Store, scope: Scope, webhook_id: str, *, idempotency_key: str | None = None
) -> r.WebhookEndpoint:
    """Stop delivering to the endpoint (its history stays listable); its pending deliveries end failed."""

    def write(uow: Repositories) -> r.WebhookEndpoint:
        row = _endpoint_row(uow, scope, webhook_id)
        if row.status == "disabled":
            raise ServiceError("invalid_state_transition", "the endpoint is already disabled", status="disabled")
        uow.webhooks.disable_endpoint(scope, webhook_id)
        return _endpoint(_endpoint_row(uow, scope, webhook_id))

    return run_write(
        database, scope, f"webhooks.disable:{webhook_id}", {}, write, r.WebhookEndpoint, idempotency_key=idempotency_key
    )


def send_test(database: Store, scope: Scope, webhook_id: str) -> r.WebhookDelivery:
    """Queue a signed `webhook.test` delivery to the endpoint now; it retries like any other delivery."""
    with unit_of_work(database) as uow:
        endpoint = _endpoint_row(uow, scope, webhook_id)
        if endpoint.status != "enabled":
            raise ServiceError("invalid_state_transition", "the endpoint is disabled", status=endpoint.status)
        delivery_id = new_id("delivery")
        now = utcnow()
        data = {"webhook_id": webhook_id, "message": "A test delivery from the rewards service."}
        body = delivery_body(delivery_id, TEST_KIND, now, scope, data)
        row = NewDelivery(delivery_id, scope.organization_id, scope.environment, webhook_id, None, TEST_KIND, body)
        uow.webhooks.add_deliveries([row], now)
        stored = uow.webhooks.delivery(scope, delivery_id)
    assert stored is not None
    return _delivery(stored, [])


def list_deliveries(
    database: Store, scope: Scope, webhook_id: str, page: PageRequest, *, status: str | None = None
) -> r.Page[r.WebhookDelivery]:
    """The endpoint's deliveries, each with every attempt made so far (cursor pagination)."""
    sort = check_page_request(page, DELIVERY_SORTS)
    with snapshot(database) as store:  # the deliveries and their attempts as of one commit
        _endpoint_row(store, scope, webhook_id)
        rows = store.webhooks.deliveries_page(scope, webhook_id, page, sort, status)
        attempts: dict[str, list[AttemptRow]] = {row.id: [] for row in rows.rows}
        for attempt in store.webhooks.attempts_of(list(attempts)):
            attempts[attempt.delivery_id].append(attempt)
    return presenters.page(r.Page[r.WebhookDelivery], rows, lambda row: _delivery(row, attempts[row.id]))


def _delivery_row(uow: Repositories, scope: Scope, webhook_id: str, delivery_id: str) -> DeliveryRow:
    row = uow.webhooks.delivery(scope, delivery_id)
    if row is None or row.endpoint_id != webhook_id:
        raise ServiceError("webhook_delivery_not_found", delivery_id=delivery_id)
    return row


def get_delivery(database: Store, scope: Scope, webhook_id: str, delivery_id: str) -> r.WebhookDelivery:
    with snapshot(database) as store:  # the delivery's status and its attempts as of one commit
        _endpoint_row(store, scope, webhook_id)
        row = _delivery_row(store, scope, webhook_id, delivery_id)
        return _delivery(row, store.webhooks.attempts_of([delivery_id]))


def replay_delivery(
    database: Store, scope: Scope, webhook_id: str, delivery_id: str, *, idempotency_key: str | None = None
) -> r.WebhookDelivery:
    """A failed delivery goes back to `pending`, due now, with the retry schedule from its start. The same body
    (same delivery id; signed afresh, with a new timestamp) is sent again; its earlier attempts stay listed."""

    def write(uow: Repositories) -> r.WebhookDelivery:
        endpoint = _endpoint_row(uow, scope, webhook_id)
        row = _delivery_row(uow, scope, webhook_id, delivery_id)
        if row.status != "failed":
            raise ServiceError("webhook_delivery_not_replayable", delivery_id=delivery_id, status=row.status)
        if endpoint.status != "enabled":
            raise ServiceError("invalid_state_transition", "the endpoint is disabled", status=endpoint.status)
        uow.webhooks.requeue(scope, delivery_id, utcnow())
        updated = _delivery_row(uow, scope, webhook_id, delivery_id)
        return _delivery(updated, uow.webhooks.attempts_of([delivery_id]))

    return run_write(
        database,
        scope,
        f"webhooks.replay:{delivery_id}",
        {},
        write,
        r.WebhookDelivery,
        idempotency_key=idempotency_key,
    )
