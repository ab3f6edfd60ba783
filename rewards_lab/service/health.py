"""What an operator and a load balancer need: liveness with backpressure (`health`: queue depths, workers; no
tenant data) and readiness (`readiness`: a test write, free disk space, live workers)."""

from __future__ import annotations

import logging
import shutil
from datetime import datetime, timedelta

from rewards_lab.contract import resources as r
from rewards_lab.contract.readiness import DiskCheck, Readiness, ReadinessCheck, WorkersCheck
from rewards_lab.presenters import utc
from rewards_lab.service.deliveries import queue_depths
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow

log = logging.getLogger(__name__)
DEFAULT_MIN_FREE_DISK_MB = 256  # below this the database's filesystem is too full to take a batch safely
WRITE_PROBE_TIMEOUT_S = 5.0  # the single writer busy longer than this (one batch takes well under it) is wedged
WORKER_STALL_S = 60.0  # a live worker thread whose loop has not come round for this long is stuck

Workers = dict[str, tuple[bool, datetime | None]]


def health(
    database: Store,
    workers: Workers,
    intake_waiting: int,
    *,
    request_log_dropped: int = 0,
) -> r.Health:
    """`workers` maps a worker's name to (thread alive, its loop's last cycle as naive UTC); `intake_waiting` is
    how many POST /events requests wait for the next group commit; `request_log_dropped` how many request-log
    records the full queue dropped since start."""
    states = {name: r.WorkerHealth(alive=alive, last_cycle_at=utc(last)) for name, (alive, last) in workers.items()}
    status = "ok" if all(state.alive for state in states.values()) else "degraded"
    return r.Health(
        status=status,
        workers=states,
        intake_waiting=intake_waiting,
        request_log_dropped=request_log_dropped,
        **queue_depths(database),
    )


def _database_write(database: Store) -> ReadinessCheck:
    try:
        if not database.probe_write(WRITE_PROBE_TIMEOUT_S):
            return ReadinessCheck(ok=False, reason="the database writer is busy past the probe's timeout")
    except Exception:  # noqa: BLE001 - any failure to write means not ready; the detail goes to the log only
        log.exception("readiness: the test write failed")
        return ReadinessCheck(ok=False, reason="the database refused a test write")
    return ReadinessCheck(ok=True, reason=None)


def _disk(database: Store, min_free_bytes: int) -> DiskCheck:
    directory = database.local_directory()
    if directory is None:  # in memory, or on a database server: no local filesystem of its own to measure
        return DiskCheck(ok=True, reason=None, free_bytes=None, min_free_bytes=min_free_bytes)
    try:
        free_bytes = shutil.disk_usage(directory).free
    except OSError:
        log.exception("readiness: free disk space unknown")
        return DiskCheck(ok=False, reason="free disk space unknown", free_bytes=None, min_free_bytes=min_free_bytes)
    ok = free_bytes >= min_free_bytes
    reason = None if ok else "free disk space is under the threshold"
    return DiskCheck(ok=ok, reason=reason, free_bytes=free_bytes, min_free_bytes=min_free_bytes)


def _workers(workers: Workers) -> WorkersCheck:
    states = {name: r.WorkerHealth(alive=alive, last_cycle_at=utc(last)) for name, (alive, last) in workers.items()}
    stalled_before = utcnow() - timedelta(seconds=WORKER_STALL_S)
    dead = [name for name, (alive, _) in workers.items() if not alive]
    stuck = [name for name, (alive, last) in workers.items() if alive and last is not None and last < stalled_before]
    if dead or stuck:
        parts = ([f"not running: {', '.join(dead)}"] if dead else []) + (
            [f"stuck: {', '.join(stuck)}"] if stuck else []
        )
        return WorkersCheck(ok=False, reason="; ".join(parts), workers=states)
    return WorkersCheck(ok=True, reason=None, workers=states)


def readiness(database: Store, workers: Workers, *, min_free_disk_bytes: int) -> Readiness:
    """Ready when the database takes a write, its filesystem has `min_free_disk_bytes` free, and every worker
    runs. Each check runs whatever the others found, so a 503 names every failing one."""
    database_write = _database_write(database)
    disk = _disk(database, min_free_disk_bytes)
    worker_check = _workers(workers)
    checks = {"database_write": database_write, "disk": disk, "workers": worker_check}
    failing = [name for name, check in checks.items() if not check.ok]
    return Readiness(
        status="not_ready" if failing else "ready",
        failing=failing,
        database_write=database_write,
        disk=disk,
        workers=worker_check,
    )
