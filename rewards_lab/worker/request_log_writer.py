"""The request log's writer: a queue filled on the request path and a thread that flushes it in batches.

Requests append a small record (`service.request_log.LogRecord`) to an in-memory queue (no I/O); the
`request-log` thread writes the queue in one transaction at least every second and once more at shutdown. The
queue is bounded (`MAX_BUFFERED` records): when writing falls behind, the oldest records are dropped rather than
letting memory grow or requests wait, and every dropped record is counted (`dropped`) and logged. The
authentication audit's writer (`worker.audit_writer`) starts and stops with this one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from rewards_lab.contract.ids import new_id
from rewards_lab.service.request_log import LogRecord
from rewards_lab.store.api import Store, unit_of_work
from rewards_lab.worker.audit_writer import AuditWriter
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
FLUSH_INTERVAL_S = 1.0
MAX_BUFFERED = 200_000


class RequestLogWriter:
    """The queue and its flushing thread. `record` is safe from any thread and never blocks on the database."""

    def __init__(self, database: Store, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.database = database
        self.flush_interval_s = flush_interval_s
        self.dropped = 0  # records dropped because the queue was full or a write failed past the bound (since start)
        self._dropped_reported = 0
        self._queue: deque[LogRecord] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        # The durable half of the access audit trail (authentication events), started and stopped with the log.
        self.audit = AuditWriter(database)

    def record(self, record: LogRecord) -> None:
        if len(self._queue) >= MAX_BUFFERED:
            self._queue.popleft()  # the oldest goes, counted (shown in /v1/health): the newest say most of now
            self.dropped += 1
        self._queue.append(record)

    def queued(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self.audit.start()
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the thread, then write whatever is still queued (audit rows included)."""
        self.audit.stop(timeout_s)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self.flush()

    def flush(self) -> int:
        """Write every queued record in one database transaction; returns how many."""
        batch: list[LogRecord] = []
        while self._queue:
            batch.append(self._queue.popleft())
        if not batch:
            return 0
        # One id per batch and a sequence number: ids stay unique and sort by creation, at no cost per row.
        batch_id = new_id("log_entry")
        ids = [f"{batch_id}{index:06d}" for index in range(len(batch))]
        try:
            with unit_of_work(self.database) as uow:
                uow.request_log.add_batch(ids, batch)
        except Exception:
            self._requeue(batch)
            raise
        return len(batch)

    def _requeue(self, batch: list[LogRecord]) -> None:
        """A failed write puts its records back in front, as far as the bound allows; the oldest of them that
        do not fit are counted as dropped."""
        room = max(0, MAX_BUFFERED - len(self._queue))
        kept = batch[len(batch) - room :] if room else []
        self.dropped += len(batch) - len(kept)
        self._queue.extendleft(reversed(kept))

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the log must never stop the service
                log.exception("request log flush failed")
            self._report_drops()

    def _report_drops(self) -> None:
        dropped = self.dropped
        if dropped > self._dropped_reported:
            log.warning("request log queue full (%d records): %d records refused since start", MAX_BUFFERED, dropped)
            self._dropped_reported = dropped
