"""The delivery worker: fans outbox messages out to endpoint deliveries and sends the due ones.

One loop thread does the database side (fan-out, picking due deliveries); a small pool sends the HTTP
requests, at most `concurrency` at once, `per_tenant` for one organization and `per_endpoint` to one endpoint,
and none to an endpoint whose circuit is open, so that slow receivers delay only their own deliveries. Every
connection goes through `safe_transport` (resolved, checked, pinned; one deadline per attempt). A request is
never sent inside a database transaction: the attempt is recorded afterwards in a short one, as a coarse error
class. Deliveries live in the database, so stopping (or a crash) loses nothing: a restart picks every pending
delivery up again. On PostgreSQL several processes' senders share them: each claims its deliveries with a lease
(`service.deliveries.claim`), which a killed sender's deliveries outlive only until it passes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from secrets import token_hex
from typing import Protocol

import httpcore

from rewards_lab.contract.webhook_signatures import (
    SIGNATURE_HEADER,
    TIMESTAMPED_SIGNATURE_HEADER,
    sign,
    sign_timestamped,
)
from rewards_lab.security.webhook_secrets import signing_secrets
from rewards_lab.service.deliveries import (
    FAN_OUT_BATCH,
    AttemptOutcome,
    DeliverySettings,
    claim,
    fan_out,
    pick_fair,
    record_outcome,
    release,
    status_error_class,
)
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueDelivery
from rewards_lab.worker.circuit_breaker import CircuitBreakers
from rewards_lab.worker.safe_transport import (
    BlockedAddress,
    ConnectionRefused,
    GuardedBackend,
    ResolutionFailed,
    TLSFailed,
    attempt_deadline,
)
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.05
# After a fan-out that emptied the outbox, wait this long before the next one: under load (a message per reward)
# the outbox then gathers into larger fan-outs instead of a write transaction per few messages, which competed
# with the event worker for the writer. A full batch (a backlog) goes on at once.
BUSY_LINGER_S = 0.1
USER_AGENT = "rewards-lab-webhooks/1"
DELIVERY_HEADER = "X-Rewards-Delivery"
KIND_HEADER = "X-Rewards-Event"


def new_pool(settings: DeliverySettings) -> httpcore.ConnectionPool:
    """The sender's connections: HTTP/1.1 through `GuardedBackend` (resolved, checked, pinned), no proxy, no
    redirects, at most `concurrency` connections, and at least as many resolver threads."""
    return httpcore.ConnectionPool(
        network_backend=GuardedBackend(
            allow_private=settings.allow_private_targets, resolver_threads=settings.concurrency
        ),
        max_connections=settings.concurrency,
        max_keepalive_connections=settings.concurrency,
        keepalive_expiry=30.0,
        http1=True,
        http2=False,
        retries=0,
    )


def error_class(failure: Exception) -> str:
    """The coarse class of a failed attempt; the failure's own text is never kept."""
    if isinstance(failure, BlockedAddress):
        return "blocked_address"
    if isinstance(failure, ResolutionFailed):
        return "dns"
    if isinstance(failure, httpcore.TimeoutException):
        return "timeout"
    if isinstance(failure, TLSFailed):
        return "tls"
    if isinstance(failure, ConnectionRefused):
        return "refused"
    if isinstance(failure, httpcore.ConnectError):
        return "connection"
    if isinstance(failure, httpcore.ReadError | httpcore.WriteError):
        return "connection"
    if isinstance(failure, httpcore.ProtocolError):
        return "protocol"
    return "error"


class Outgoing(Protocol):
    """What sending needs of a delivery (a `DueDelivery` has it all)."""

    @property
    def id(self) -> str: ...
    @property
    def organization_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def url(self) -> str: ...


def send(pool: httpcore.ConnectionPool, delivery: Outgoing, secrets: list[str], timeout_s: float) -> AttemptOutcome:
    """POST the stored body (exact bytes) with its signatures, within one total deadline; never raises for the
    receiver's or the network's failures (they become a coarse class).

    `secrets` are the signing secrets, current first. `X-Rewards-Signature` carries a `v1` per secret; the
    GitHub-style `X-Rewards-Signature-256` carries the previous secret's while a rotation's grace period runs (a
    receiver that knows only the old secret keeps working until it switches), else the current one's."""
    raw = str(delivery.body).encode()
    headers: dict[bytes | str, bytes | str] = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: sign(raw, secrets[-1]),
        TIMESTAMPED_SIGNATURE_HEADER: sign_timestamped(raw, secrets),
        DELIVERY_HEADER: str(delivery.id),
        KIND_HEADER: str(delivery.kind),
    }
    attempted_at = utcnow()
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    per_step = {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": timeout_s}
    try:
        with attempt_deadline(timeout_s, owner=str(delivery.organization_id or "")):
            # closed unread: only the status matters, and a receiver cannot make us read a huge answer
            with pool.stream(
                "POST", str(delivery.url), headers=headers, content=raw, extensions={"timeout": per_step}
            ) as response:
                status_code = response.status
        error = status_error_class(status_code)
    except Exception as failure:  # noqa: BLE001 - every failure of the attempt is recorded as its class
        status_code = None
        error = error_class(failure)
    duration_ms = int((time.monotonic() - started) * 1000)
    return AttemptOutcome(attempted_at, duration_ms, status_code, error)


class DeliveryWorker:
    # Several processes on one database may each run one (issue 32): the fan-out claims its outbox messages and a
    # sender leases its deliveries (service/deliveries.claim; api/serving.MULTI_PROCESS). Concurrency, fairness and
    # circuits are per process.

    def __init__(self, database: Store, settings: DeliverySettings | None = None) -> None:
        self.database = database
        self.settings = settings or DeliverySettings()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{token_hex(4)}"  # what leases name
        self.last_cycle_at: datetime | None = None
        self._in_flight: dict[str, tuple[str, str]] = {}  # delivery id -> (endpoint id, organization id)
        self.breakers = CircuitBreakers(self.settings.breaker_failures, self.settings.breaker_cool_down_s)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._connections: httpcore.ConnectionPool | None = None
        self._thread = threading.Thread(target=self._run, name="delivery-worker", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="webhook-send")
        self._connections = new_pool(self.settings)
        self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop picking deliveries; requests in flight finish (bounded by the timeout) and are recorded."""
        self._stop.set()
        self._wake.set()
        if self._pool is None or self._connections is None:
            return
        self._thread.join(timeout_s)
        self._pool.shutdown(wait=True)
        self._connections.close()

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.is_set():
            self.last_cycle_at = utcnow()
            dispatched = 0
            try:
                dispatched = self._cycle()
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("delivery worker cycle failed")
            if dispatched == 0:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
            elif dispatched < FAN_OUT_BATCH:
                self._stop.wait(BUSY_LINGER_S)

    def _cycle(self) -> int:
        dispatched = fan_out(self.database)
        with self._lock:
            exclude = sorted(self._in_flight)
            busy = Counter(endpoint for endpoint, _ in self._in_flight.values())
            tenants = Counter(tenant for _, tenant in self._in_flight.values())
        free = self.settings.concurrency - len(exclude)
        per_endpoint = self.settings.per_endpoint
        skip, probe = self.breakers.blocked()  # open circuits wait; half-open ones send one probe
        candidates = claim(
            self.database,
            free * per_endpoint,
            exclude,
            per_endpoint,
            per_tenant=self.settings.per_tenant,
            exclude_endpoints=skip,
            owner=self.owner,
            lease_s=self.settings.lease_s,
        )
        picked = pick_fair(
            candidates,
            busy,
            free,
            per_endpoint,
            tenants_in_flight=tenants,
            per_tenant=self.settings.per_tenant,
            endpoint_limits=dict.fromkeys(probe, 1),
        )
        for delivery in picked:
            with self._lock:
                self._in_flight[delivery.id] = (delivery.endpoint_id, delivery.organization_id)
            self.breakers.started(delivery.endpoint_id)
            assert self._pool is not None
            self._pool.submit(self._attempt, delivery)
        chosen = {delivery.id for delivery in picked}  # the rest: due again at once for any sender (PostgreSQL)
        release(self.database, [d.id for d in candidates if d.id not in chosen], self.owner)
        return dispatched  # none: wait, until a finished attempt or a new message wakes the loop

    def _attempt(self, delivery: DueDelivery) -> None:
        try:
            if delivery.endpoint_status != "enabled":
                outcome = AttemptOutcome(utcnow(), 0, None, "endpoint_disabled")
            else:
                assert self._connections is not None
                secrets = signing_secrets(self.database, delivery)
                outcome = send(self._connections, delivery, secrets, self.settings.timeout_s)
                self.breakers.record(delivery.endpoint_id, outcome.succeeded)
            record_outcome(self.database, self.settings, delivery, outcome)
        except Exception:  # noqa: BLE001 - the delivery stays pending and is tried again
            log.exception("delivery %s could not be attempted", delivery.id)
            # e.g. a secret that does not open with the operator's key: counted, so that the endpoint's circuit
            # opens instead of the loop retrying it every cycle
            self.breakers.record(delivery.endpoint_id, succeeded=False)
        finally:
            with self._lock:
                self._in_flight.pop(delivery.id, None)
            self._wake.set()
