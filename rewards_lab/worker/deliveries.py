"""The delivery worker: fans outbox messages out to endpoint deliveries and sends the due ones.

One loop thread does the database side (fan-out, picking due deliveries); a small pool sends the HTTP
requests, at most `concurrency` at once, so that a slow receiver delays only its own deliveries. A request is
never sent inside a database transaction: the attempt is recorded afterwards in a short one. Deliveries live
in the database, so stopping (or a crash) loses nothing: a restart picks every pending delivery up again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx

from rewards_lab.service.deliveries import (
    FAN_OUT_BATCH,
    AttemptOutcome,
    DeliverySettings,
    due,
    fan_out,
    pick_fair,
    record_outcome,
)
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.queries import Row
from rewards_lab.threads import name_os_thread
from rewards_lab.webhooks import SIGNATURE_HEADER, sign

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.05
# After a fan-out that emptied the outbox, wait this long before the next one: under load (a message per reward)
# the outbox then gathers into larger fan-outs instead of a write transaction per few messages, which competed
# with the event worker for the writer. A full batch (a backlog) goes on at once.
BUSY_LINGER_S = 0.1
USER_AGENT = "rewards-lab-webhooks/1"
DELIVERY_HEADER = "X-Rewards-Delivery"
KIND_HEADER = "X-Rewards-Event"


def send(client: httpx.Client, delivery: Row) -> AttemptOutcome:
    """POST the stored body (exact bytes) with its signature; never raises for the receiver's failures."""
    raw = str(delivery["body"]).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: sign(raw, str(delivery["signing_secret"])),
        DELIVERY_HEADER: str(delivery["id"]),
        KIND_HEADER: str(delivery["kind"]),
    }
    attempted_at = utcnow()
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    try:
        # streamed and closed unread: only the status matters, and a receiver cannot make us read a huge answer
        with client.stream("POST", str(delivery["url"]), content=raw, headers=headers) as response:
            status_code = response.status_code
        if not 200 <= status_code < 300:
            error = f"HTTP {status_code}"
    except httpx.TimeoutException:
        error = "timeout"
    except httpx.ConnectError as failure:
        error = "connection refused" if "refused" in str(failure).lower() else f"connection failed: {failure}"[:300]
    except httpx.HTTPError as failure:
        error = f"{type(failure).__name__}: {failure}"[:300]
    duration_ms = int((time.monotonic() - started) * 1000)
    return AttemptOutcome(attempted_at, duration_ms, status_code, error)


class DeliveryWorker:
    def __init__(self, database: Database, settings: DeliverySettings | None = None) -> None:
        self.database = database
        self.settings = settings or DeliverySettings()
        self.last_cycle_at: datetime | None = None
        self._in_flight: dict[str, str] = {}  # delivery id -> endpoint id
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._client: httpx.Client | None = None
        self._thread = threading.Thread(target=self._run, name="delivery-worker", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="webhook-send")
        self._client = httpx.Client(timeout=self.settings.timeout_s, follow_redirects=False)
        self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop picking deliveries; requests in flight finish (bounded by the timeout) and are recorded."""
        self._stop.set()
        self._wake.set()
        if self._pool is None or self._client is None:
            return
        self._thread.join(timeout_s)
        self._pool.shutdown(wait=True)
        self._client.close()

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
            busy = Counter(self._in_flight.values())
        free = self.settings.concurrency - len(exclude)
        per_endpoint = self.settings.per_endpoint
        candidates = due(self.database, free * per_endpoint, exclude, per_endpoint)
        picked = pick_fair(candidates, busy, free, per_endpoint)
        for delivery in picked:
            with self._lock:
                self._in_flight[delivery["id"]] = delivery["endpoint_id"]
            assert self._pool is not None
            self._pool.submit(self._attempt, delivery)
        return dispatched  # none: wait, until a finished attempt or a new message wakes the loop

    def _attempt(self, delivery: Row) -> None:
        try:
            if delivery["endpoint_status"] != "enabled":
                outcome = AttemptOutcome(utcnow(), 0, None, "endpoint disabled")
            else:
                assert self._client is not None
                outcome = send(self._client, delivery)
            record_outcome(self.database, self.settings, delivery, outcome)
        except Exception:  # noqa: BLE001 - the delivery stays pending and is tried again
            log.exception("delivery %s could not be attempted", delivery["id"])
        finally:
            with self._lock:
                self._in_flight.pop(delivery["id"], None)
            self._wake.set()
