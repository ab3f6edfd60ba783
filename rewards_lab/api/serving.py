"""`rewards-lab serve`'s app in a process: built from the serve options, in this process (`--workers 1`) or in
each child of uvicorn's own supervisor (`--workers N`, PostgreSQL only: issue 32).

With several workers uvicorn (`supervisors.Multiprocess`) binds the socket once, spawns N children, pings them,
restarts one that dies and forwards SIGINT/SIGTERM. A spawned child imports `app_from_env`, which reads the serve
options the parent put in `OPTIONS_ENV` as JSON (spawned children inherit the environment) and opens its own store:
a pool is never shared across processes.

Background workers: each kind declares whether several processes on one database may run it (`multi_process_safe`
on its class: deliveries and the outbox's fan-out, expiry and retention claim their work, issue 32 increment 7).
One that does not declare it runs in ONE process of several: the one holding the database's background lock
(`PostgresStore.try_lead`); in the others it does not run (the intake's writes are safe: unique keys). A killed
leader's lock goes with its session; its restarted self (or the next process to start) takes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from fastapi import FastAPI

from rewards_lab.api.app import create_app
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.service.retention import RetentionSettings
from rewards_lab.store.api import Store, is_postgres, open_store

OPTIONS_ENV = "REWARDS_LAB_SERVE_OPTIONS"
FACTORY = "rewards_lab.api.serving:app_from_env"
WORKER_HEALTHCHECK_S = 30  # uvicorn's default 5 s kills a child whose ping thread a loaded machine starves


@dataclass(frozen=True)
class ServeOptions:
    """What `serve` passes to each process's app (the settings read from the environment are read there)."""

    db: str
    worker_batch_size: int
    session_lifetime_s: int
    unauthenticated_limit_per_minute: int
    min_free_disk_bytes: int
    expiry_interval_s: float
    shared: bool = False  # a database other processes may serve: unsafe workers only in the lock holder

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        return cls(**json.loads(text))


def build_app(store: Store, options: ServeOptions) -> FastAPI:
    """The service over `store` as `serve` runs it (settings from the environment, checked by the parent)."""
    leader = True
    if options.shared:
        try_lead = getattr(store, "try_lead", None)
        leader = bool(try_lead()) if try_lead is not None else False
    return create_app(
        store,
        safe_workers_only=not leader,
        delivery_settings=DeliverySettings.from_env(),
        worker_batch_size=options.worker_batch_size,
        session_lifetime_s=options.session_lifetime_s,
        retention_settings=RetentionSettings.from_env(),
        unauthenticated_limit_per_minute=options.unauthenticated_limit_per_minute,
        min_free_disk_bytes=options.min_free_disk_bytes,
        expiry_interval_s=options.expiry_interval_s,
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
