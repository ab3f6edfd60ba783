"""`rewards-lab serve`'s app in a process: built from the serve options, in this process (`--workers 1`) or in
each child of uvicorn's own supervisor (`--workers N`, PostgreSQL only: issue 32).

With several workers uvicorn (`supervisors.Multiprocess`) binds the socket once, spawns N children, pings them,
restarts one that dies and forwards SIGINT/SIGTERM. A spawned child imports `app_from_env`, which reads the serve
options the parent put in `OPTIONS_ENV` as JSON (spawned children inherit the environment) and opens its own store:
a pool is never shared across processes.

Each background worker kind declares whether several processes may run it on one database at once
(`MULTI_PROCESS`). Today every kind may (issue 32, increment 7; tiers, issue 33): the event worker leases event
partitions and takes row locks in one order; deliveries, the outbox, expiry, tier reviews and retention claim their
work. A kind that may not would run in ONE process of several: the one holding the database's background lock
(`PostgresStore.try_lead`); the intake's writes are safe everywhere (unique keys). A killed leader's lock goes with
its session; its restarted self (or the next process to start) takes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from fastapi import FastAPI

from rewards_lab.api.app import BACKGROUND_WORKERS, create_app
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.service.retention import RetentionSettings
from rewards_lab.store.api import Store, is_postgres, open_store

OPTIONS_ENV = "REWARDS_LAB_SERVE_OPTIONS"
FACTORY = "rewards_lab.api.serving:app_from_env"
WORKER_HEALTHCHECK_S = 30  # uvicorn's default 5 s kills a child whose ping thread a loaded machine starves
# Whether several processes may run a background worker kind on one database at once.
MULTI_PROCESS = {
    "events": True,  # partition leases (store/postgres/leases.py) and row locks in one order (row_locks.py)
    "deliveries": True,  # deliveries leased FOR UPDATE SKIP LOCKED, the outbox claimed (store/postgres/claims.py)
    "expiry": True,  # a round locks its wallets' balance rows SKIP LOCKED, then their due lots (claims.py)
    "retention": True,  # one process at a time: `Store.exclusive("retention")`, the others skip the round
    "tiers": True,  # a round locks its customers' tier rows SKIP LOCKED; the event worker waits for them (claims.py)
}


@dataclass(frozen=True)
class ServeOptions:
    """What `serve` passes to each process's app (the settings read from the environment are read there)."""

    db: str
    worker_batch_size: int
    session_lifetime_s: int
    unauthenticated_limit_per_minute: int
    min_free_disk_bytes: int
    expiry_interval_s: float
    tier_interval_s: float = 30.0
    shared: bool = False  # a database other processes may serve: single-process workers only in the lock holder

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        return cls(**json.loads(text))


def background_workers(store: Store, shared: bool) -> frozenset[str]:
    """The background workers this process runs: every kind on a database no other process serves; where others
    may (`shared`), the multi-process kinds, and the others only in the holder of the background lock."""
    if not shared:
        return frozenset(BACKGROUND_WORKERS)
    try_lead = getattr(store, "try_lead", None)
    if try_lead is not None and try_lead():
        return frozenset(BACKGROUND_WORKERS)
    return frozenset(kind for kind in BACKGROUND_WORKERS if MULTI_PROCESS[kind])


def build_app(store: Store, options: ServeOptions) -> FastAPI:
    """The service over `store` as `serve` runs it (settings from the environment, checked by the parent)."""
    return create_app(
        store,
        run_worker=background_workers(store, options.shared),
        delivery_settings=DeliverySettings.from_env(),
        worker_batch_size=options.worker_batch_size,
        session_lifetime_s=options.session_lifetime_s,
        retention_settings=RetentionSettings.from_env(),
        unauthenticated_limit_per_minute=options.unauthenticated_limit_per_minute,
        min_free_disk_bytes=options.min_free_disk_bytes,
        expiry_interval_s=options.expiry_interval_s,
        tier_interval_s=options.tier_interval_s,
        admin_socket=not is_postgres(options.db),  # `rewards-lab backup --online --db FILE` talks to it
    )


def app_from_env() -> FastAPI:
    """uvicorn's factory in each child: the store opened here, after the spawn; closed when the app stops."""
    options = ServeOptions.from_json(os.environ[OPTIONS_ENV])
    store = open_store(options.db)
    try:
        app = build_app(store, options)
    except BaseException:
        store.close()
        raise
    # the app's lifespan stops the workers and checkpoints; the process ends right after, closing the store
    app.state.owned_store = store
    return app
