"""What an operator needs to see backpressure: queue depths and whether the workers run (no tenant data)."""

from __future__ import annotations

from datetime import datetime

from rewards_lab.contract import resources as r
from rewards_lab.service.deliveries import queue_depths
from rewards_lab.service.presenters import utc
from rewards_lab.store.database import Database


def health(
    database: Database,
    workers: dict[str, tuple[bool, datetime | None]],
    intake_waiting: int,
    *,
    request_log_dropped: int = 0,
) -> r.Health:
    """`workers` maps a worker's name to (thread alive, its loop's last cycle as naive UTC); `intake_waiting` is
    how many POST /events requests wait for the next group commit; `request_log_dropped` how many request-log
    records the full queue refused since start."""
    states = {name: r.WorkerHealth(alive=alive, last_cycle_at=utc(last)) for name, (alive, last) in workers.items()}
    status = "ok" if all(state.alive for state in states.values()) else "degraded"
    return r.Health(
        status=status,
        workers=states,
        intake_waiting=intake_waiting,
        request_log_dropped=request_log_dropped,
        **queue_depths(database),
    )
