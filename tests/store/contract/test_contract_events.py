"""The events' repository on both stores: the intake's insert (all or none, duplicates in the store and in the
batch), timestamps to the microsecond, empty list parameters, arrival order, waits, outcomes, pages."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import EventFilter, EventOutcome, NewEvent
from tests.store.contract.support import world_of


def _event(scope: Scope, external: str, customer: str = "cus_x", occurred: datetime | None = None) -> Any:
    return scope, NewEvent(new_id("event"), external, "order.completed", customer, occurred, '{"n": 1}', "h")


def test_event_intake_inserts_all_or_none_and_marks_outcomes(store: Store) -> None:
    world = world_of(store)
    customer = world.customer("ev")
    now = utcnow().replace(microsecond=0)

    def event(external: str, occurred: datetime | None) -> tuple[Scope, NewEvent]:
        return world.scope, NewEvent(new_id("event"), external, "order.completed", customer.id, occurred, "{}", "h")

    first = [event("e-1", now - timedelta(days=1)), event("e-2", None)]
    with store.intake_events() as events:
        assert events.add(first, now) is True
        assert events.add([event("e-3", None), event("e-1", None)], now) is False  # e-1 is stored: neither
    with store.intake_unit_of_work() as uow:
        assert uow.events.add([event("e-4", now)], now) is True
    stored = store.reader_repositories().events.get_by_external_ids(world.scope, ["e-1", "e-2", "e-3", "e-4"])
    assert sorted(stored) == ["e-1", "e-2", "e-4"]
    assert stored["e-1"].occurred_at == now - timedelta(days=1) and stored["e-2"].occurred_at is None
    assert stored["e-1"].received_at == now and stored["e-1"].status == "received"
    with store.unit_of_work() as uow:
        uow.events.mark_many(
            world.scope,
            [
                EventOutcome(stored["e-1"].id, "processed", None, None, ["v1"]),
                EventOutcome(stored["e-2"].id, "failed", "bad", "no rule", None),
            ],  # fmt: skip
        )
    marked = store.reader_repositories().events.get_by_external_ids(world.scope, ["e-1", "e-2"])
    assert (marked["e-1"].status, marked["e-1"].attempts) == ("processed", 1)
    assert (marked["e-2"].status, marked["e-2"].error_code, marked["e-2"].attempts) == ("failed", "bad", 1)
    with store.unit_of_work() as uow:  # a retry: the versions of the first attempt stay, the count goes on
        retry = [
            EventOutcome(stored["e-1"].id, "processed", None, None, ["v2"]),
            EventOutcome(stored["e-2"].id, "processed", None, None, ["v3"]),
        ]
        uow.events.mark_many(world.scope, retry)
    reader = store.reader_repositories()
    rows = [reader.events.to_process(world.scope, stored[e].id) for e in ("e-1", "e-2")]
    assert [(p.external_event_id, p.attempts, p.versions_value()) for p in rows if p is not None] == [
        ("e-1", 2, ["v1"]),
        ("e-2", 2, ["v3"]),
    ]
    again = reader.events.get_by_external_ids(world.scope, ["e-1", "e-2"])
    assert [(again[e].status, again[e].error_code) for e in ("e-1", "e-2")] == [("processed", None)] * 2


def test_a_batch_repeating_an_external_id_is_refused_whole_and_other_tenants_are_apart(
    store: Store, scope: Scope
) -> None:
    other = Scope(scope.organization_id, "production")
    now = utcnow()
    with store.intake_events() as events:
        assert events.add([], now) is True  # nothing to insert
        assert events.add([_event(scope, "d-1"), _event(scope, "d-2"), _event(scope, "d-1")], now) is False
        assert events.add([_event(scope, "d-1"), _event(other, "d-1")], now) is True  # one per environment
    reader = store.reader_repositories()
    assert sorted(reader.events.get_by_external_ids(scope, ["d-1", "d-2"])) == ["d-1"]
    assert sorted(reader.events.get_by_external_ids(other, ["d-1", "d-2"])) == ["d-1"]
    assert reader.events.get_by_external_ids(scope, []) == {}
    assert reader.events.received(scope, []) == [] and reader.events.waiting_on(scope, []) == []


def test_timestamps_keep_their_microseconds_as_naive_utc(store: Store, scope: Scope) -> None:
    received = datetime(2026, 2, 28, 23, 59, 59, 999_999)
    occurred = datetime(1999, 12, 31, 0, 0, 0, 1)
    with store.intake_events() as events:
        assert events.add([_event(scope, "t-1", occurred=occurred)], received) is True
    stored = store.reader_repositories().events.get_by_external_ids(scope, ["t-1"])["t-1"]
    assert (stored.received_at, stored.occurred_at) == (received, occurred)
    assert stored.received_at.tzinfo is None and stored.occurred_at is not None and stored.occurred_at.tzinfo is None
    again = store.reader_repositories().events.get(scope, stored.id)
    assert again == stored


def test_pending_events_come_in_arrival_order_across_tenants_and_waits_hold_them_back(
    store: Store, scope: Scope
) -> None:
    other = Scope(scope.organization_id, "production")
    batch = [_event(scope, "p-1"), _event(other, "p-1"), _event(scope, "p-2"), _event(scope, "p-3")]
    with store.intake_events() as events:
        assert events.add(batch, utcnow()) is True
    ids = [event.id for _, event in batch]
    reader = store.reader_repositories()
    assert [p.id for p in reader.events.pending(10)] == sorted(ids)
    assert [p.id for p in reader.events.pending(2)] == sorted(ids)[:2]
    with store.unit_of_work() as uow:
        uow.events.wait(scope, {ids[3]: "p-1"}, utcnow() + timedelta(hours=1))
        uow.events.wait(scope, {}, utcnow())
    reader = store.reader_repositories()
    assert ids[3] not in [p.id for p in reader.events.pending(10)]
    waiting = reader.events.waiting_on(scope, ["p-1", "absent"])
    assert [(p.id, p.waiting_for) for p in waiting] == [(ids[3], "p-1")]
    assert [p.id for p in reader.events.received(scope, [ids[0], ids[1], ids[2]])] == sorted([ids[0], ids[2]])
    with store.unit_of_work() as uow:
        uow.events.mark_many(scope, [EventOutcome(ids[0], "processed", None, None, [])])
        uow.events.mark_many(scope, [])
    reader = store.reader_repositories()
    assert [p.id for p in reader.events.received(scope, [ids[0], ids[2]])] == [ids[2]]
    replay = reader.events.to_process(scope, ids[0])
    assert replay is not None and replay.attempts == 1 and replay.versions_value() == []


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_events_are_paged_over_every_row_in_both_directions(store: Store, direction: str) -> None:
    world = world_of(store)
    people = [world.customer(f"who-{n}") for n in range(3)]
    base = datetime(2026, 1, 1)
    batch = [_event(world.scope, f"x-{n:02}", people[n % 3].id, base + timedelta(seconds=n % 4)) for n in range(13)]
    with store.intake_events() as events:
        assert events.add(batch, utcnow()) is True
    reader = store.reader_repositories()
    for sort in ("received_at", "occurred_at"):
        request = PageRequest(limit=100, sort=sort, direction=direction)  # type: ignore[arg-type]
        every = reader.events.page(world.scope, request, sort, EventFilter()).rows
        assert len(every) == 13
        seen, cursor = [], None
        while True:
            request = PageRequest(limit=5, cursor=cursor, sort=sort, direction=direction)  # type: ignore[arg-type]
            page = reader.events.page(world.scope, request, sort, EventFilter())
            seen += [e.id for e in page.rows]
            if not page.has_more:
                break
            cursor = page.next_cursor
        assert seen == [e.id for e in every], sort
    mine = reader.events.page(
        world.scope, PageRequest(limit=100), "received_at", EventFilter(customer_refs=[people[0].id])
    ).rows
    assert sorted(e.external_event_id for e in mine) == [f"x-{n:02}" for n in range(0, 13, 3)]
    unfiltered = reader.events.page(world.scope, PageRequest(limit=100), "received_at", EventFilter(customer_refs=[]))
    assert len(unfiltered.rows) == 13  # an empty list filters nothing
