"""The expiry worker: expires due lots every few seconds until told to stop (rewards_lab.engine.expiry).

A round is one unit of work per tenant, so stopping (or dying) between rounds loses nothing: what was not
expired is still due at the next start.
"""

from __future__ import annotations

import logging
import threading

from rewards_lab.engine.expiry import expire_due
from rewards_lab.store.api import Store
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
INTERVAL_S = 5.0


class ExpiryWorker:
    # Several processes on one database may each run one: a round expires the lots of the wallets whose balance
    # rows it could lock (PostgreSQL: `LotStore.due_among`), so no lot is expired twice.

    def __init__(self, database: Store, interval_s: float = INTERVAL_S) -> None:
        self.database = database
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="expiry-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.is_set():
            try:
                expire_due(self.database)
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("expiry round failed")
            self._stop.wait(self.interval_s)
