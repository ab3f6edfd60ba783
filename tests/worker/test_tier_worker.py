"""The tier worker (issue 33, T4; reports/i33-tiers-plan.md section 4.3), on a real DuckDB file: reviews at a
calendar window's end with and without grace, one level at a time or straight to the level earned, a round run
twice changing nothing, rounds smaller than the customers due, and the worker and the event worker agreeing (an
event after a review sees the reviewed tier; an event that comes first applies the same review itself)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.engine.tier_reviews import review_due
from rewards_lab.service import event_intake, ledger, programme_lifecycle, programmes
from rewards_lab.store.api import reader
from tests.conftest import World

LEVELS = [
    {"code": "member", "name": "Member"},
    {"code": "silver", "name": "Silver", "entry": "100", "multiplier": "1.5"},
    {"code": "gold", "name": "Gold", "entry": "300", "retain": "250", "multiplier": "2"},
]
MULTIPLIED = {"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}


def _tiers(to: str = "earned", grace_days: int = 0) -> dict[str, Any]:
    return {
        "metric": {"type": "points"},
        "window": {"type": "calendar", "period": "month"},
        "levels": LEVELS,
        "downgrade": {"to": to, "grace_days": grace_days},
    }


def _programme(world: World, tiers: dict[str, Any]) -> Any:
    asset = world.asset(decimals=0)
    body = {"name": "Monthly", "asset_id": asset.id, "tiers": tiers, "max_event_age_days": None}
    programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    create = {"program_id": programme.id, "event_type": "order.completed", "actions": [MULTIPLIED]}
    programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, create))
    programmes.publish(world.db, world.scope, programme.id)
    return programme


def _submit(world: World, external_id: str, customer: str, amount: str, at: str) -> str:
    body = {
        "type": "order.completed",
        "external_event_id": external_id,
        "customer_id": customer,
        "occurred_at": at,
        "data": {"amount": Decimal(amount)},
    }
    return event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body)).id


def _gold(world: World, name: str) -> tuple[Any, Any]:
    """A customer who reached gold on 10 January 2026 (300 points): first reviewed on 1 March (the hold rule: the
    end of the month after January), judging February."""
    customer = world.customer(name)
    wallet = world.wallet(customer)
    _submit(world, f"{name}-jan", name, "300", "2026-01-10T10:00:00Z")
    event_processing.process_all(world.db)
    return customer, wallet


def _rows(world: World, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    con = reader(world.db).programmes.con  # type: ignore[attr-defined]
    return [tuple(row) for row in con.execute(sql, list(params)).fetchall()]


def _state(world: World, customer_id: str) -> tuple[Any, ...]:
    (row,) = _rows(
        world,
        "SELECT tier, review_at, grace_until, grace_target FROM customer_tiers WHERE customer_id = ?",
        customer_id,
    )
    return row


def _history(world: World, customer_id: str) -> list[tuple[Any, ...]]:
    return _rows(
        world,
        "SELECT kind, from_tier, to_tier, changed_at, metric_minor, window_start, window_end, event_id "
        "FROM tier_changes WHERE customer_id = ? ORDER BY changed_at, kind",
        customer_id,
    )


def _messages(world: World) -> list[dict[str, Any]]:
    rows = _rows(world, "SELECT payload FROM outbox WHERE kind = 'tier.changed' ORDER BY created_at, id")
    return [json.loads(row[0]) for row in rows]


def _everything(world: World) -> list[list[tuple[Any, ...]]]:
    """What a round writes: state, history, outbox."""
    return [
        _rows(world, "SELECT * EXCLUDE (updated_at) FROM customer_tiers ORDER BY customer_id"),
        _rows(world, "SELECT * EXCLUDE (created_at) FROM tier_changes ORDER BY id"),
        _rows(world, "SELECT id, kind, payload FROM outbox ORDER BY id"),
    ]


@pytest.mark.parametrize(("policy", "target"), [("one_level", "silver"), ("earned", "member")])
def test_a_calendar_review_with_grace_downgrades_at_the_grace_end(world: World, policy: str, target: str) -> None:
    _programme(world, _tiers(policy, grace_days=5))
    customer, _ = _gold(world, "ann")
    assert _state(world, customer.id) == ("gold", datetime(2026, 3, 1), None, None)
    before = _everything(world)
    report = review_due(world.db, as_of=datetime(2026, 2, 28, 23, 59))
    assert report.customers == 0 and _everything(world) == before  # not due yet

    report = review_due(world.db, as_of=datetime(2026, 3, 2))
    assert (report.customers, dict(report.changes)) == (1, {"grace_started": 1})
    # February held nothing: the target is decided now, applied at the grace end; the next review a month on
    assert _state(world, customer.id) == ("gold", datetime(2026, 4, 1), datetime(2026, 3, 6), target)
    assert len(_messages(world)) == 1  # the upgrade's; a grace start is in the history only

    report = review_due(world.db, as_of=datetime(2026, 3, 6))
    assert dict(report.changes) == {"downgraded": 1}
    assert _history(world, customer.id)[1:] == [
        ("grace_started", "gold", target, datetime(2026, 3, 1), 0, date(2026, 2, 1), date(2026, 2, 28), None),
        ("downgraded", "gold", target, datetime(2026, 3, 6), None, None, None, None),
    ]
    down = _messages(world)[-1]
    assert (down["from"], down["to"], down["direction"], down["kind"]) == ("gold", target, "down", "downgraded")
    assert (down["at"], down["event_id"], down["customer_id"]) == ("2026-03-06T00:00:00Z", None, customer.id)
    expected_review = datetime(2026, 4, 1) if target == "silver" else None
    assert _state(world, customer.id) == (target, expected_review, None, None)

    after = _everything(world)
    assert review_due(world.db, as_of=datetime(2026, 3, 6)).customers == 0  # applied once: a rerun changes nothing
    assert _everything(world) == after


@pytest.mark.parametrize(("policy", "tiers_after"), [("one_level", ["silver", "member"]), ("earned", ["member"])])
def test_one_level_at_a_time_or_straight_to_the_level_earned(world: World, policy: str, tiers_after: list[str]) -> None:
    """Without grace, idle from January: `one_level` goes gold -> silver on 1 March, silver -> member on 1 April (each
    review a month after the last, judging its own month); `earned` goes straight to member on 1 March. A customer
    idle for two cycles gets both reviews in one round."""
    _programme(world, _tiers(policy))
    customer, _ = _gold(world, "bo")
    report = review_due(world.db, as_of=datetime(2026, 4, 15))
    assert report.customers == 1
    downs = [row for row in _history(world, customer.id) if row[0] == "downgraded"]
    assert [row[2] for row in downs] == tiers_after
    assert [row[3] for row in downs] == [datetime(2026, 3, 1), datetime(2026, 4, 1)][: len(tiers_after)]
    assert [m["to"] for m in _messages(world)] == ["gold", *tiers_after]
    assert _state(world, customer.id) == ("member", None, None, None)


def test_a_customer_who_kept_the_level_is_retained_and_reviewed_a_month_later(world: World) -> None:
    _programme(world, _tiers("one_level"))
    customer, _ = _gold(world, "cy")
    _submit(world, "cy-feb", "cy", "130", "2026-02-10T10:00:00Z")  # x2 at gold: 260 >= retain 250
    event_processing.process_all(world.db)
    assert dict(review_due(world.db, as_of=datetime(2026, 3, 1)).changes) == {"retained": 1}
    assert _state(world, customer.id) == ("gold", datetime(2026, 4, 1), None, None)
    assert [m["to"] for m in _messages(world)] == ["gold"]  # retention is not announced


def test_rounds_smaller_than_the_customers_due_review_each_once(world: World) -> None:
    _programme(world, _tiers("earned"))
    names = [f"r{i}" for i in range(7)]
    for name in names:
        world.wallet(world.customer(name))
        _submit(world, f"{name}-jan", name, "300", "2026-01-10T10:00:00Z")
    event_processing.process_all(world.db)
    report = review_due(world.db, as_of=datetime(2026, 3, 1), round_size=3)
    assert (report.customers, dict(report.changes), report.skipped) == (7, {"downgraded": 7}, 0)
    assert _rows(world, "SELECT DISTINCT tier FROM customer_tiers") == [("member",)]
    assert len(_messages(world)) == 14  # seven up, seven down
    assert review_due(world.db, as_of=datetime(2026, 3, 1), round_size=3).customers == 0


def test_an_inactive_programmes_holders_wait_and_catch_up_when_it_is_active_again(world: World) -> None:
    """Deactivated, the programme's state is read by nobody: the worker leaves it (and does not find it due again
    and again); active again, every review that came meanwhile is applied at its own instant."""
    programme = _programme(world, _tiers("one_level"))
    customer, _ = _gold(world, "dee")
    programme_lifecycle.deactivate_programme(world.db, world.scope, programme.id)
    before = _everything(world)
    report = review_due(world.db, as_of=datetime(2026, 4, 15))
    assert (report.customers, report.skipped) == (0, 0) and _everything(world) == before
    programme_lifecycle.activate_programme(world.db, world.scope, programme.id)
    assert review_due(world.db, as_of=datetime(2026, 4, 15)).customers == 1
    downs = [(row[2], row[3]) for row in _history(world, customer.id) if row[0] == "downgraded"]
    assert downs == [("silver", datetime(2026, 3, 1)), ("member", datetime(2026, 4, 1))]


def test_the_worker_and_the_event_worker_agree(world: World) -> None:
    """Ann is reviewed by the worker (1 March: gold -> silver), then orders on 2 March: paid at silver (x1.5). Cat
    reaches gold after that round, and her order of 2 March comes before any other: the event worker applies the
    same review at its entry, and the worker then finds nothing due. Both histories and payouts are the same."""
    _programme(world, _tiers("one_level"))
    ann, ann_wallet = _gold(world, "ann")
    assert dict(review_due(world.db, as_of=datetime(2026, 3, 1, 12)).changes) == {"downgraded": 1}
    assert _state(world, ann.id)[0] == "silver"
    cat, cat_wallet = _gold(world, "cat")
    assert _state(world, cat.id) == ("gold", datetime(2026, 3, 1), None, None)  # due, not reviewed yet
    _submit(world, "ann-mar", "ann", "10", "2026-03-02T10:00:00Z")
    _submit(world, "cat-mar", "cat", "10", "2026-03-02T10:00:00Z")
    event_processing.process_all(world.db)
    balances = [
        ledger.wallet_balances(world.db, world.scope, w.id).balances[0].balance for w in (ann_wallet, cat_wallet)
    ]
    assert balances == ["315", "315"]  # 300 in January (member at entry), 10 x 1.5 in March (silver at entry)
    assert review_due(world.db, as_of=datetime(2026, 3, 2, 12)).customers == 0  # cat's review: done by her event

    def shape(customer_id: str) -> list[tuple[Any, ...]]:
        return [row[:5] for row in _history(world, customer_id)]

    assert shape(ann.id)[1:] == shape(cat.id)[1:] == [("downgraded", "gold", "silver", datetime(2026, 3, 1), 0)]
    assert _state(world, ann.id) == _state(world, cat.id) == ("silver", datetime(2026, 4, 1), None, None)
    assert [(m["customer_id"], m["to"]) for m in _messages(world)] == [
        (ann.id, "gold"),
        (ann.id, "silver"),
        (cat.id, "gold"),
        (cat.id, "silver"),
    ]
