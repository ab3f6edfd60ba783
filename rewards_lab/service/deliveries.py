"""Webhook deliveries: fan-out of outbox messages to endpoint deliveries, the body, and the retry schedule.

Every step is a short database transaction; the HTTP request itself happens outside any transaction (in
`worker/deliveries.py`), so a slow receiver never holds the writer. A delivery lives in the database from the
moment it is created, so a restart resumes it; a request that was sent but not recorded before a crash is sent
again (at-least-once: receivers deduplicate on the delivery id).
"""

from __future__ import annotations

import os
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.presenters import utc
from rewards_lab.security.webhook_targets import private_targets_allowed
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueDelivery, EndpointRow, NewDelivery

# Delays before the 2nd, 3rd... attempt: 9 attempts over about 23 hours, then the delivery is failed.
DEFAULT_RETRY_DELAYS_S: tuple[float, ...] = (10, 60, 300, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600)
DEFAULT_JITTER = 0.2  # each delay is multiplied by a uniform factor in [1 - jitter, 1 + jitter]
DEFAULT_TIMEOUT_S = 10.0  # the TOTAL deadline of one attempt: resolve, connect, TLS, send, read the status
DEFAULT_CONCURRENCY = 16  # requests in flight at once, over every tenant
DEFAULT_PER_TENANT = 8  # of which at most this many for one organization (both environments)
DEFAULT_PER_ENDPOINT = 4  # and at most this many to one endpoint
DEFAULT_BREAKER_FAILURES = 5  # consecutive failed attempts that open an endpoint's circuit
DEFAULT_BREAKER_COOL_DOWN_S = 60.0  # an open circuit lets one probe through after this long (half-open)
FAN_OUT_BATCH = 500
# A claimed delivery's lease (PostgreSQL: several senders) lasts an attempt's deadline and this margin (signing,
# recording the attempt, the hosts' clocks disagreeing): a sender killed mid-attempt holds its deliveries that
# long, then any sender retries them.
LEASE_MARGIN_S = 30.0
TEST_KIND = "webhook.test"
ENV_RETRY_DELAYS = "REWARDS_LAB_WEBHOOK_RETRY_DELAYS"
ENV_TIMEOUT = "REWARDS_LAB_WEBHOOK_TIMEOUT_S"
ENV_LEASE_MARGIN = "REWARDS_LAB_WEBHOOK_LEASE_MARGIN_S"

# What an attempt's `error` may say: coarse classes only, never a receiver's or the network's text (which would
# turn the delivery history into a scanner of the service's network).
ERROR_CLASSES = (
    "timeout",  # the attempt's total deadline passed (connect, TLS, send or the answer)
    "refused",  # the connection was refused
    "tls",  # the TLS handshake or the certificate failed
    "dns",  # the host name did not resolve
    "blocked_address",  # the host is, or resolves to, an address the sender may not reach
    "connection",  # the connection failed or broke otherwise
    "protocol",  # the answer was not HTTP
    "http_3xx",  # a redirect: never followed
    "http_4xx",
    "http_5xx",
    "http_other",
    "endpoint_disabled",  # the endpoint was disabled before the attempt
    "error",  # anything else
)


def status_error_class(status_code: int) -> str | None:
    """None for a 2xx answer, else its class."""
    if 200 <= status_code < 300:
        return None
    return {3: "http_3xx", 4: "http_4xx", 5: "http_5xx"}.get(status_code // 100, "http_other")


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    retry_delays_s: tuple[float, ...] = DEFAULT_RETRY_DELAYS_S
    jitter: float = DEFAULT_JITTER
    timeout_s: float = DEFAULT_TIMEOUT_S
    concurrency: int = DEFAULT_CONCURRENCY
    per_tenant: int = DEFAULT_PER_TENANT  # so that one organization's slow receivers never hold every slot
    per_endpoint: int = DEFAULT_PER_ENDPOINT  # so that a slow receiver never stalls its tenant's other endpoints
    breaker_failures: int = DEFAULT_BREAKER_FAILURES
    breaker_cool_down_s: float = DEFAULT_BREAKER_COOL_DOWN_S
    allow_private_targets: bool = False  # loopback and private receivers (local development only)
    lease_margin_s: float = LEASE_MARGIN_S

    @property
    def lease_s(self) -> float:
        """How long a sender's claim on a delivery lasts (PostgreSQL): the attempt's deadline and the margin."""
        return self.timeout_s + self.lease_margin_s

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> DeliverySettings:
        """`REWARDS_LAB_WEBHOOK_RETRY_DELAYS` (comma-separated seconds), `REWARDS_LAB_WEBHOOK_TIMEOUT_S` (the
        total deadline of an attempt), `REWARDS_LAB_WEBHOOK_LEASE_MARGIN_S` (how long past that deadline a killed
        sender's claims hold, PostgreSQL) and `REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE` (1 to allow private targets)."""
        env = os.environ if environ is None else environ
        delays = DEFAULT_RETRY_DELAYS_S
        if env.get(ENV_RETRY_DELAYS, "").strip():
            delays = tuple(float(part) for part in env[ENV_RETRY_DELAYS].split(",") if part.strip())
        timeout = float(env[ENV_TIMEOUT]) if env.get(ENV_TIMEOUT, "").strip() else DEFAULT_TIMEOUT_S
        margin = float(env[ENV_LEASE_MARGIN]) if env.get(ENV_LEASE_MARGIN, "").strip() else LEASE_MARGIN_S
        if any(delay < 0 for delay in delays) or timeout <= 0 or margin <= 0:
            raise ValueError("webhook retry delays must be >= 0, the timeout and the lease margin > 0")
        allow_private = private_targets_allowed(env)
        return cls(retry_delays_s=delays, timeout_s=timeout, allow_private_targets=allow_private, lease_margin_s=margin)

    def next_delay_s(self, attempts_in_round: int) -> float | None:
        """The delay before the next attempt after `attempts_in_round` failed ones; None when none is left."""
        if attempts_in_round > len(self.retry_delays_s):
            return None
        base = self.retry_delays_s[attempts_in_round - 1]
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    attempted_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def delivery_body(delivery_id: str, kind: str, created_at: datetime, scope: Scope, data: Any) -> str:
    """The exact JSON a receiver gets (documented in docs/webhooks.md)."""
    return jsonutil.dumps(
        {
            "id": delivery_id,
            "kind": kind,
            "created_at": utc(created_at),
            "organization_id": scope.organization_id,
            "environment": scope.environment,
            "data": data,
        }
    )


def fan_out(database: Store, limit: int = FAN_OUT_BATCH) -> int:
    """Turn up to `limit` outbox messages into one pending delivery per subscribed endpoint, durably.

    An endpoint receives the messages caused after it was registered (its `created_at` is not later than the
    message's), whatever the worker's lag. Returns how many outbox messages were dispatched.
    """
    if not reader(database).outbox.undispatched(1):
        return 0  # the idle path takes no write lock
    with unit_of_work(database) as uow:
        messages = uow.outbox.claim(limit)  # PostgreSQL: locked; another process's fan-out skips them
        endpoints: dict[tuple[str, str], list[EndpointRow]] = defaultdict(list)
        for endpoint in uow.webhooks.enabled_endpoints():
            endpoints[(endpoint.organization_id, endpoint.environment)].append(endpoint)
        rows: list[NewDelivery] = []
        for message in messages:
            data = None
            for endpoint in endpoints.get((message.organization_id, message.environment), []):
                if message.kind not in endpoint.events:
                    continue
                if endpoint.created_at > message.created_at:
                    continue
                data = message.payload_value() if data is None else data
                delivery_id = new_id("delivery")
                body = delivery_body(
                    delivery_id,
                    message.kind,
                    message.created_at,
                    Scope(message.organization_id, message.environment),
                    data,
                )
                rows.append(
                    NewDelivery(
                        delivery_id,
                        message.organization_id,
                        message.environment,
                        endpoint.id,
                        message.id,
                        message.kind,
                        body,
                    )
                )
        uow.webhooks.add_deliveries(rows, utcnow())
        uow.webhooks.mark_dispatched([message.id for message in messages])
    return len(messages)


def due(
    database: Store,
    limit: int,
    exclude: list[str],
    per_endpoint: int = FAN_OUT_BATCH,
    *,
    per_tenant: int = FAN_OUT_BATCH,
    exclude_endpoints: list[str] | None = None,
) -> list[DueDelivery]:
    """Up to `limit` due deliveries (oldest first), at most `per_endpoint` of any one endpoint and `per_tenant` of
    any one organization, none in `exclude`, none to an endpoint in `exclude_endpoints` (open circuits)."""
    if limit <= 0:
        return []
    return reader(database).webhooks.due(utcnow(), limit, exclude, per_endpoint, per_tenant, exclude_endpoints or [])


def claim(
    database: Store,
    limit: int,
    exclude: list[str],
    per_endpoint: int,
    *,
    per_tenant: int,
    exclude_endpoints: list[str],
    owner: str,
    lease_s: float,
) -> list[DueDelivery]:
    """`due`'s deliveries for the sender `owner` to attempt: on PostgreSQL leased to it for `lease_s` seconds
    (another sender skips them until it records the attempt, or the lease passes); on DuckDB, one sender per file,
    `due` itself."""
    if limit <= 0:
        return []
    now = utcnow()
    return reader(database).webhooks.claim(
        now,
        limit,
        exclude,
        per_endpoint,
        per_tenant,
        exclude_endpoints,
        owner=owner,
        lease_until=now + timedelta(seconds=lease_s),
    )


def release(database: Store, delivery_ids: list[str], owner: str) -> None:
    """Give back claimed deliveries the sender will not attempt now (pick_fair left them)."""
    if delivery_ids:
        reader(database).webhooks.release(delivery_ids, owner)


def pick_fair(
    candidates: list[DueDelivery],
    in_flight: Counter[str],
    free: int,
    per_endpoint: int,
    *,
    tenants_in_flight: Counter[str] | None = None,
    per_tenant: int | None = None,
    endpoint_limits: dict[str, int] | None = None,
) -> list[DueDelivery]:
    """The candidates to send now: at most `free` in all, no endpoint above `per_endpoint` in flight (or its own
    limit in `endpoint_limits`: 1 for a half-open circuit), no organization above `per_tenant`."""
    counts = Counter(in_flight)
    tenants = Counter(tenants_in_flight or {})
    limits = endpoint_limits or {}
    picked: list[DueDelivery] = []
    for row in candidates:
        if len(picked) >= free:
            break
        endpoint, tenant = row.endpoint_id, row.organization_id
        if counts[endpoint] >= limits.get(endpoint, per_endpoint):
            continue
        if per_tenant is not None and tenants[tenant] >= per_tenant:
            continue
        counts[endpoint] += 1
        tenants[tenant] += 1
        picked.append(row)
    return picked


def record_outcome(database: Store, settings: DeliverySettings, delivery: DueDelivery, outcome: AttemptOutcome) -> str:
    """Store the attempt and decide what comes next: `succeeded`, `pending` (retry later) or `failed`."""
    next_attempt_at: datetime | None = None
    if outcome.succeeded:
        status = "succeeded"
    else:
        delay = settings.next_delay_s(int(delivery.round_attempts) + 1)
        status = "failed" if delay is None or delivery.endpoint_status == "disabled" else "pending"
        if status == "pending" and delay is not None:
            next_attempt_at = utcnow() + timedelta(seconds=delay)
    with unit_of_work(database) as uow:
        uow.webhooks.record_attempt(
            delivery,
            attempted_at=outcome.attempted_at,
            duration_ms=outcome.duration_ms,
            status_code=outcome.status_code,
            error=outcome.error,
            succeeded=outcome.succeeded,
            next_status=status,
            next_attempt_at=next_attempt_at,
        )
    return status


def queue_depths(database: Store) -> dict[str, int]:
    """What an operator watches: received events, undispatched outbox messages, pending deliveries."""
    store = reader(database).webhooks
    return {
        "event_queue_depth": store.received_events_count(),
        "outbox_undispatched": store.undispatched_count(),
        "pending_deliveries": store.pending_count(),
    }
