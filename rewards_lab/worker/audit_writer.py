"""Group commit for audited answers (`security/auth_audit.py` decides what is written): each request hands its
event over and awaits the commit; one thread writes everything queued in one transaction."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from dataclasses import dataclass

from rewards_lab.security.auth_audit import AuditEvent, write, write_many
from rewards_lab.store.api import Store
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
MAX_AUDIT_BATCH = 1000  # most audited answers committed in one transaction


@dataclass(slots=True)
class _Pending:
    event: AuditEvent
    email: str | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # the request was cancelled (client gone); the row is committed all the same
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


class AuditWriter:
    """Group commit for audited answers: each request hands its event over and awaits the commit; one thread
    writes everything queued in one transaction (one write-ahead-log sync for a whole flood of 401s, where a
    transaction each would pay a sync per row)."""

    def __init__(self, database: Store, max_batch: int = MAX_AUDIT_BATCH) -> None:
        self.database = database
        self.max_batch = max_batch
        self.batches = 0
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="auth-audit", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Write what is queued, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)

    async def write(self, event: AuditEvent, email: str | None = None) -> None:
        """Returns once `event` is committed; raises what the commit raised."""
        if not self._thread.is_alive():  # not started (or stopped): a transaction of its own
            await asyncio.to_thread(write, self.database, event, email=email)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put(_Pending(event, email, loop, future))
        await future

    def _run(self) -> None:
        name_os_thread()
        stopping = False
        while not stopping:
            first = self._queue.get()
            batch: list[_Pending] = []
            if first is None:
                stopping = True
            else:
                batch.append(first)
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._commit(batch)

    def _commit(self, batch: list[_Pending]) -> None:
        error: BaseException | None = None
        try:
            write_many(self.database, [(item.event, item.email) for item in batch])
            self.batches += 1
        except Exception as failure:  # noqa: BLE001 - every waiting request gets an answer
            log.exception("writing %d authentication audit rows failed", len(batch))
            error = failure
        for item in batch:
            item.loop.call_soon_threadsafe(_settle, item.future, error)
