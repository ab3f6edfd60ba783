"""The tier worker: applies the tier reviews and grace ends that have come, every few seconds, until told to stop
(rewards_lab.engine.tier_reviews).

A round is one unit of work per tenant, so stopping (or dying) between rounds loses nothing: what was not reviewed
is still due at the next start.
"""

from __future__ import annotations

import logging
import threading

from rewards_lab.engine.tier_reviews import review_due
from rewards_lab.store.api import Store
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)
INTERVAL_S = 30.0


class TierWorker:
    # Several processes on one database may each run one: a round reviews the customers whose tier rows it could
    # lock (PostgreSQL: `PgTierClaims.due_among`, FOR UPDATE SKIP LOCKED), so no review is applied twice.

    def __init__(self, database: Store, interval_s: float = INTERVAL_S) -> None:
        self.database = database
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tier-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.is_set():
            try:
                review_due(self.database)
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("tier round failed")
            self._stop.wait(self.interval_s)
