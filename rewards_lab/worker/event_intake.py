"""Group commit for POST /events: many requests, one transaction, one fsync.

Each request validates and prepares its event (`event_intake.prepare_event`: id, payload hash, data text), hands it to
`EventIntake.submit` and awaits the answer. One writer thread takes
everything queued (up to `max_batch`), stores it in ONE transaction (`event_intake.store_events`), and only
after the commit answers every waiting request. A response therefore never precedes durability, and while one
commit is in flight the next batch gathers by itself: the busier the service, the larger the batches.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.service.event_intake import store_events
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import NewEvent, StoredEvent
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
DEFAULT_MAX_BATCH = 2000
_STOP = object()


@dataclass(slots=True)
class _Pending:
    scope: Scope
    event: NewEvent
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[StoredEvent]


def _resolve(future: asyncio.Future[StoredEvent], outcome: StoredEvent | BaseException) -> None:
    if future.done():  # the client went away and the request was cancelled; the event is stored all the same
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _resolve_all(answers: list[tuple[asyncio.Future[StoredEvent], StoredEvent | BaseException]]) -> None:
    for future, outcome in answers:
        _resolve(future, outcome)


def _answer(answers: list[tuple[_Pending, StoredEvent | BaseException]]) -> None:
    """Hand the answers to their event loops: one thread-safe call per loop and batch, not one per request."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[StoredEvent], StoredEvent | BaseException]]] = {}
    for item, outcome in answers:
        by_loop.setdefault(item.loop, []).append((item.future, outcome))
    for loop, pairs in by_loop.items():
        loop.call_soon_threadsafe(_resolve_all, pairs)


class EventIntake:
    def __init__(
        self, database: Store, on_stored: Callable[[], None] | None = None, max_batch: int = DEFAULT_MAX_BATCH
    ) -> None:
        self.database = database
        self.on_stored = on_stored
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="event-intake", daemon=True)
        self._accepting = False
        self.batches = 0
        self.stored = 0

    def start(self) -> None:
        self._accepting = True
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Refuse new events, store what is queued, then end the writer thread."""
        self._accepting = False
        self._queue.put(_STOP)
        self._thread.join(timeout_s)

    def depth(self) -> int:
        return self._queue.qsize()

    async def submit(self, scope: Scope, event: NewEvent) -> StoredEvent:
        """The stored row (or the original one, for a repeated `external_event_id` with the same payload), once
        committed; `event_duplicate_mismatch` is raised for the same id with another payload."""
        if not self._accepting:
            raise ServiceError("service_unavailable", "the service is shutting down; retry shortly")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[StoredEvent] = loop.create_future()
        self._queue.put(_Pending(scope, event, loop, future))
        return await future

    def _take_batch(self) -> tuple[list[_Pending], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [first]
        stopping = False
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                stopping = True
                break
            batch.append(item)
        return [item for item in batch if isinstance(item, _Pending)], stopping

    def _run(self) -> None:
        name_os_thread()
        stopping = False
        while not stopping:
            batch, stopping = self._take_batch()
            if batch:
                self._store(batch)
        while True:  # anything queued behind the stop marker by a request that raced it
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Pending):
                self._store([item])

    def _store(self, batch: list[_Pending]) -> None:
        groups: dict[Scope, list[_Pending]] = {}
        for item in batch:
            groups.setdefault(item.scope, []).append(item)
        ordered = list(groups.items())
        try:
            results = store_events(self.database, [(scope, [p.event for p in items]) for scope, items in ordered])
        except Exception as error:  # noqa: BLE001 - every waiting request must get an answer
            log.exception("storing a batch of %d events failed", len(batch))
            failure = error if isinstance(error, ServiceError) else ServiceError("internal_error")
            _answer([(item, failure) for item in batch])
            return
        self.batches += 1
        self.stored += len(batch)
        if self.on_stored is not None:
            self.on_stored()
        _answer(
            [
                (item, outcome)
                for (_, items), outcomes in zip(ordered, results, strict=True)
                for item, outcome in zip(items, outcomes, strict=True)
            ]
        )
