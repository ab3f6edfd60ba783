"""Which background workers a `serve` process runs (issue 32, increment 7): each kind declares whether several
processes may run it on one database; the event worker runs in every process, the others in the holder of the
database's background lock only."""

from __future__ import annotations

import pytest

from rewards_lab.api.app import BACKGROUND_WORKERS, create_app
from rewards_lab.api.serving import MULTI_PROCESS, background_workers
from rewards_lab.store.database import Database
from rewards_lab.store.postgres.store import PostgresStore
from tests.pg_cluster import PG_SECRET_KEY

EVERY = frozenset(BACKGROUND_WORKERS)


def test_every_worker_kind_declares_whether_several_processes_may_run_it() -> None:
    assert set(MULTI_PROCESS) == EVERY
    # events: partition leases and row locks; deliveries, outbox, expiry, retention and tiers: their claims
    assert {kind for kind, safe in MULTI_PROCESS.items() if safe} == EVERY


def test_the_lock_holder_runs_every_worker_and_the_others_the_multi_process_ones(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kind that may not run in several processes (none today): only in the holder of the background lock.
    monkeypatch.setitem(MULTI_PROCESS, "retention", False)
    one = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    two = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    try:
        assert background_workers(one, shared=True) == EVERY
        assert background_workers(two, shared=True) == EVERY - {"retention"}
        assert background_workers(two, shared=False) == EVERY  # a database no other process serves
        one.close()  # the leader's session ends: the next process to build its app leads
        three = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
        try:
            assert background_workers(three, shared=True) == EVERY
        finally:
            three.close()
    finally:
        one.close()
        two.close()


def test_create_app_builds_the_workers_of_the_kinds_asked_for(db: Database) -> None:
    app = create_app(db, run_worker={"events"})
    assert app.state.worker is not None
    others = (app.state.delivery_worker, app.state.expiry_worker, app.state.retention_worker, app.state.tier_worker)
    assert others == (None, None, None, None)
    every = create_app(db, run_worker=True)
    assert None not in (every.state.worker, every.state.delivery_worker, every.state.expiry_worker)
    assert every.state.tier_worker is not None
    assert create_app(db, run_worker=False).state.worker is None
    with pytest.raises(ValueError, match="no background worker of kind"):
        create_app(db, run_worker={"events", "mail"})
