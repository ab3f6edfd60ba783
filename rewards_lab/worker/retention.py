"""The retention worker: applies `service.retention` inside `serve`, once at start and then every interval."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from rewards_lab.service.retention import RetentionReport, RetentionSettings, run_once
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.worker.thread_names import name_os_thread

log = logging.getLogger(__name__)


class RetentionWorker:
    # Several processes on one database may each run one: a run takes `Store.exclusive("retention")` first.

    def __init__(self, database: Store, settings: RetentionSettings | None = None) -> None:
        self.database = database
        self.settings = settings or RetentionSettings()
        self.last_cycle_at: datetime | None = None
        self.last_report: RetentionReport | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the chunk in progress (each chunk is its own transaction, so stopping loses nothing)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.is_set():
            self.last_cycle_at = utcnow()
            try:
                self.last_report = run_once(self.database, self.settings, stop=self._stop)
                if any(self.last_report.deleted.values()):
                    log.info("retention deleted %s", self.last_report.deleted)
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("retention run failed")
            self._stop.wait(self.settings.interval_s)
