"""Group commit of POST /events: concurrent requests share transactions, every answer follows its commit."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.service import event_intake, event_queries, organizations
from rewards_lab.store.database import Database
from rewards_lab.worker.event_intake import EventIntake


def _event(external_id: str, amount: int = 42, customer: str = "c1") -> rq.EventCreate:
    return rq.EventCreate(
        type="order.completed", external_event_id=external_id, customer_id=customer, data={"amount": amount}
    )


async def _submit_all(intake: EventIntake, items: list[tuple[Scope, rq.EventCreate]]) -> list[r.Event | BaseException]:
    """As the POST /events handler does: prepare, queue, await the commit, present the stored row."""

    async def one(scope: Scope, body: rq.EventCreate) -> r.Event:
        stored = event_intake.present_stored(await intake.submit(scope, event_intake.prepare_event(body)))
        assert isinstance(stored, r.Event)
        return stored

    return await asyncio.gather(*(one(scope, body) for scope, body in items), return_exceptions=True)


def test_concurrent_submissions_share_commits_and_each_answer_is_durable(db: Database, scope: Scope) -> None:
    other = Scope(organizations.create_organization(db, "Other").id, "production")
    stored_signals: list[int] = []
    intake = EventIntake(db, on_stored=lambda: stored_signals.append(1))
    intake.start()
    # Hold the intake's transaction lock so that the requests pile up, as they do while a commit is in flight.
    gate = threading.Event()
    blocker = threading.Thread(target=lambda: _hold(db, gate))
    blocker.start()
    items = [(scope if i % 2 else other, _event(f"e{i}")) for i in range(300)]

    async def scenario() -> list[r.Event | BaseException]:
        pending = asyncio.ensure_future(_submit_all(intake, items))
        await asyncio.sleep(0.2)
        assert not pending.done()  # nobody is answered before the commit
        gate.set()
        return await pending

    results = asyncio.run(scenario())
    blocker.join()
    intake.stop()
    assert all(isinstance(result, r.Event) and result.status == "received" for result in results)
    assert intake.stored == 300
    assert intake.batches < 10  # group commit: far fewer transactions than requests
    assert len(stored_signals) == intake.batches  # the worker is woken after each commit
    counts = db.reader().execute("SELECT organization_id, environment, count(*) FROM events GROUP BY ALL").fetchall()
    assert sorted(counts) == sorted([(*scope.params, 150), (*other.params, 150)])
    # Each answer is exactly what a later read returns (built from the inserted row, not read back).
    first = results[1]
    assert isinstance(first, r.Event)
    assert event_queries.get_event(db, scope, first.id) == first


def _hold(database: Database, gate: threading.Event) -> None:
    with database.intake_transaction():
        gate.wait(10)


def test_duplicates_inside_one_batch_and_across_batches(db: Database, scope: Scope) -> None:
    intake = EventIntake(db)
    intake.start()
    items = [(scope, _event("same")), (scope, _event("same")), (scope, _event("same", amount=7))]
    first, second, third = asyncio.run(_submit_all(intake, items))
    again = asyncio.run(_submit_all(intake, [(scope, _event("same"))]))[0]
    intake.stop()
    assert isinstance(first, r.Event) and isinstance(second, r.Event) and isinstance(again, r.Event)
    assert first.id == second.id == again.id
    assert isinstance(third, ServiceError) and third.code == "event_duplicate_mismatch"
    assert third.details["field"] == "external_event_id"


def test_after_stop_new_events_are_refused_and_queued_ones_were_stored(tmp_path: Path) -> None:
    database = Database(tmp_path / "stop.duckdb")
    scope = Scope(organizations.create_organization(database, "A").id, "sandbox")
    intake = EventIntake(database)
    intake.start()

    async def scenario() -> None:
        accepted = await _submit_all(intake, [(scope, _event(f"s{i}")) for i in range(20)])
        assert all(isinstance(item, r.Event) for item in accepted)
        intake.stop()
        with pytest.raises(ServiceError) as refused:
            await intake.submit(scope, event_intake.prepare_event(_event("late")))
        assert refused.value.code == "service_unavailable"

    asyncio.run(scenario())
    database.close()
    reopened = Database(tmp_path / "stop.duckdb")
    (count,) = reopened.reader().execute("SELECT count(*) FROM events").fetchone() or (0,)
    reopened.close()
    assert count == 20
