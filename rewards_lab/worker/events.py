"""The event worker: processes received events in batches until told to stop.

On PostgreSQL, where several processes share one database, each process's worker leases event partitions
(`store.postgres.leases`) and processes only their events.

It sleeps while the queue is empty and is woken early by `notify()` (the intake calls it after each commit).
Under load it lingers briefly between batches so that they grow (see LINGER_S).
Stopping lets the batch in progress finish: a batch is one database transaction, so it either commits whole or,
if the process dies first, leaves every event `received` for the next start.
"""

from __future__ import annotations

import logging
import threading

import pyarrow as pa

from rewards_lab.engine.event_processing import DEFAULT_BATCH_SIZE, process_pending
from rewards_lab.store.api import Store
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
IDLE_WAIT_S = 0.05
# After a batch that emptied the queue, wait this long before the next one so that events arriving under load
# gather into larger batches (a batch's fixed cost dominates small ones); an idle worker still starts at once.
LINGER_S = 0.05


class EventWorker:
    def __init__(self, database: Store, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.database = database
        self.batch_size = batch_size
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-worker", daemon=True)
        # On a store shared by several processes (PostgreSQL) the worker takes only the events of the partitions it
        # leases, rebalanced between batches; on DuckDB every event (no leases).
        self.leases = database.event_leases()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        # pyarrow imports pandas on its first table (half a second of GIL): pay that before serving, not in the
        # middle of the first batch under load.
        pa.table({"warm_up": [0]})
        self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        name_os_thread()
        try:
            self._loop()
        finally:
            if self.leases is not None:
                self.leases.close()  # the partitions are free for the other processes' workers at once

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                partitions = self.leases.claim() if self.leases is not None else None
                if partitions is not None and not partitions.held:
                    report = None  # every partition is another worker's for now
                else:
                    report = process_pending(self.database, self.batch_size, partitions)
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("event worker batch failed")
                report = None
            handled = 0 if report is None else report.processed + report.failed
            if handled == 0:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
            elif handled < self.batch_size:
                self._stop.wait(LINGER_S)
