"""Tiers in the live engine (issue 33, T3; reports/i33-tiers-plan.md sections 3.5 and 4.2), on a real DuckDB file:
an upgrade on the event that crosses the threshold, that event paid at the tier it found and the next at the new
one (in one batch, by matching the rest again, as one event per batch would), `customer.tier` conditions, two
customers in one batch, retries that count nothing twice, and the unit of work (state, contributions, balance and
history commit together or not at all)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import customers, event_intake, event_queries, ledger, programmes
from rewards_lab.store.api import reader
from tests.conftest import World

LEVELS = [
    {"code": "member", "name": "Member"},
    {"code": "silver", "name": "Silver", "entry": "100", "multiplier": "1.5"},
    {"code": "gold", "name": "Gold", "entry": "300", "retain": "250", "multiplier": "2"},
]
POINTS_TIERS: dict[str, Any] = {
    "metric": {"type": "points"},
    "window": {"type": "rolling", "days": 365},
    "levels": LEVELS,
}
MULTIPLIED = {"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}
GOLD_BONUS = {"type": "issue", "amount": {"fixed": "5"}}
GOLD = [{"field": "customer.tier", "operator": "eq", "value": "gold"}]


def _programme(world: World, tiers: dict[str, Any], rules: list[dict[str, Any]], asset: Any = None) -> Any:
    asset = asset or world.asset(decimals=0)
    body = {"name": "Tiered", "asset_id": asset.id, "tiers": tiers, "max_event_age_days": None}
    programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    for rule in rules:
        create = {"program_id": programme.id, "event_type": "order.completed", **rule}
        programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, create))
    programmes.publish(world.db, world.scope, programme.id)
    return programme


def _shopper(world: World, name: str) -> Any:
    customer = world.customer(name)
    return customer, world.wallet(customer)


def _submit(world: World, external_id: str, customer: str, amount: str, at: str = "2026-03-01T10:00:00Z") -> str:
    body = {
        "type": "order.completed",
        "external_event_id": external_id,
        "customer_id": customer,
        "occurred_at": at,
        "data": {"amount": Decimal(amount)},
    }
    return event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body)).id


def _balance(world: World, wallet_id: str) -> str:
    balances = ledger.wallet_balances(world.db, world.scope, wallet_id).balances
    return balances[0].balance if balances else "0"


def _rows(world: World, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    con = reader(world.db).programmes.con  # type: ignore[attr-defined]
    return [tuple(row) for row in con.execute(sql, list(params)).fetchall()]


def _amounts(world: World, event_id: str) -> list[tuple[int, str]]:
    executions = event_queries.list_executions(world.db, world.scope, PageRequest(), event_id=event_id).data
    return sorted((e.action_index, e.amount) for e in executions if e.status == "issued")


@pytest.mark.parametrize("batch_size", [1000, 1])
def test_the_crossing_event_is_paid_at_its_old_tier_and_the_next_at_the_new(world: World, batch_size: int) -> None:
    """80 (member), 30 (member at entry: 110 reaches silver after it), 10 x 1.5, 200 x 1.5 = 300 (gold after it),
    then 10 x 2: the same in one batch (matched again after each upgrade) as one event per batch."""
    programme = _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}])
    customer, wallet = _shopper(world, "ann")
    amounts = ["80", "30", "10", "200", "10"]
    ids = [_submit(world, f"o-{i}", "ann", amount, f"2026-03-0{i + 1}T10:00:00Z") for i, amount in enumerate(amounts)]
    report = event_processing.process_all(world.db, batch_size)
    assert report.processed == 5
    assert [_amounts(world, event_id) for event_id in ids] == [[(0, a)] for a in ["80", "30", "15", "300", "20"]]
    assert _balance(world, wallet.id) == "445"
    if batch_size > 1:
        assert report.rematched == 2  # once after each upgrade, for the events after it
    state = _rows(world, "SELECT tier, review_at, enrolled_at FROM customer_tiers WHERE customer_id = ?", customer.id)
    assert [row[0] for row in state] == ["gold"]
    assert state[0][1] == datetime(2027, 3, 4)  # 365 days after the upgrade on 2026-03-04 (the hold rule)
    assert state[0][2] == datetime(2026, 3, 1, 10)  # enrolled at its first event
    changes = _rows(
        world,
        "SELECT kind, from_tier, to_tier, metric_minor, event_id FROM tier_changes WHERE customer_id = ? "
        "ORDER BY changed_at",
        customer.id,
    )
    assert changes == [("upgraded", "member", "silver", 110, ids[1]), ("upgraded", "silver", "gold", 425, ids[3])]
    days = _rows(world, "SELECT day, amount_minor FROM tier_days WHERE customer_id = ? ORDER BY day", customer.id)
    assert days == [(date(2026, 3, i + 1), int(a)) for i, a in enumerate(["80", "30", "15", "300", "20"])]
    messages = _rows(world, "SELECT kind, payload FROM outbox WHERE kind = 'tier.changed' ORDER BY id")
    assert len(messages) == 2
    assert '"to":"gold"' in messages[1][1].replace(" ", "") and programme.id in messages[1][1]


def test_a_condition_on_customer_tier_reads_the_tier_at_entry(world: World) -> None:
    """The gold bonus is not paid on the event that reaches gold, and is on the next one (same batch)."""
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}, {"conditions": GOLD, "actions": [GOLD_BONUS]}])
    _, wallet = _shopper(world, "bea")
    first = _submit(world, "b-1", "bea", "300", "2026-03-01T10:00:00Z")
    second = _submit(world, "b-2", "bea", "1", "2026-03-02T10:00:00Z")
    event_processing.process_all(world.db)
    assert _amounts(world, first) == [(0, "300")]  # member at entry: no bonus, x1
    assert [amount for _, amount in _amounts(world, second)] == ["2", "5"]  # gold at entry: x2 and the bonus
    assert _balance(world, wallet.id) == "307"


def test_two_customers_in_one_batch_move_apart(world: World) -> None:
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}])
    ann, ann_wallet = _shopper(world, "ann")
    bob, bob_wallet = _shopper(world, "bob")
    _submit(world, "a-1", "ann", "150", "2026-03-01T10:00:00Z")
    _submit(world, "b-1", "bob", "50", "2026-03-01T11:00:00Z")
    _submit(world, "a-2", "ann", "10", "2026-03-01T12:00:00Z")
    _submit(world, "b-2", "bob", "10", "2026-03-01T13:00:00Z")
    event_processing.process_all(world.db)
    assert (_balance(world, ann_wallet.id), _balance(world, bob_wallet.id)) == ("165", "60")
    tiers = dict(_rows(world, "SELECT customer_id, tier FROM customer_tiers"))
    assert tiers == {ann.id: "silver", bob.id: "member"}
    assert len(_rows(world, "SELECT id FROM tier_changes")) == 1


def test_a_count_metric_counts_a_retried_event_once(world: World) -> None:
    """The event fails (frozen wallet) after its count was recorded; its replay issues the reward and counts
    nothing again; the third order reaches `regular`."""
    tiers = {
        "metric": {"type": "count", "event_type": "order.completed"},
        "window": {"type": "lifetime"},
        "levels": [{"code": "new", "name": "New"}, {"code": "regular", "name": "Regular", "entry": "3"}],
    }
    _programme(world, tiers, [{"actions": [{"type": "issue", "amount": {"fixed": "1"}}]}])
    customer, wallet = _shopper(world, "cat")
    customers.freeze_wallet(world.db, world.scope, wallet.id)
    failed = _submit(world, "c-1", "cat", "1")
    event_processing.process_all(world.db)
    assert event_queries.get_event(world.db, world.scope, failed).status == "failed"
    customers.unfreeze_wallet(world.db, world.scope, wallet.id)
    replayed = event_processing.replay_event(world.db, world.scope, failed)
    assert replayed.status == "processed" and _balance(world, wallet.id) == "1"
    count = "SELECT count(*), sum(amount_minor) FROM tier_contributions WHERE customer_id = ?"
    assert _rows(world, count, customer.id) == [(1, 1)]
    assert _rows(world, "SELECT sum(amount_minor) FROM tier_days WHERE customer_id = ?", customer.id) == [(1,)]
    _submit(world, "c-2", "cat", "1")
    event_processing.process_all(world.db)
    assert _rows(world, "SELECT tier FROM customer_tiers") == [("new",)]
    _submit(world, "c-3", "cat", "1")
    event_processing.process_all(world.db)
    assert _rows(world, "SELECT tier FROM customer_tiers") == [("regular",)]
    assert _rows(world, count, customer.id) == [(3, 3)]


def test_points_of_a_replayed_event_count_once(world: World) -> None:
    """Two actions; the second fails on the supply ceiling; the replay issues it and counts only it."""
    asset = world.asset(decimals=0, supply_ceiling="150")
    two = {"actions": [{"type": "issue", "amount": {"fixed": "100"}}, {"type": "issue", "amount": {"fixed": "100"}}]}
    programme = _programme(world, POINTS_TIERS, [two], asset)
    customer, wallet = _shopper(world, "dan")
    event_id = _submit(world, "d-1", "dan", "1")
    event_processing.process_all(world.db)
    assert event_queries.get_event(world.db, world.scope, event_id).status == "failed"
    assert _rows(world, "SELECT sum(amount_minor) FROM tier_days") == [(100,)]
    assert _rows(world, "SELECT tier FROM customer_tiers") == [("silver",)]
    spend = rq.RedemptionRequest(wallet_id=wallet.id, amount="100", reference="x")
    ledger.redeem(world.db, world.scope, asset.id, spend)
    event_processing.replay_event(world.db, world.scope, event_id)
    assert _rows(world, "SELECT count(*), sum(amount_minor) FROM tier_contributions") == [(2, 200)]
    assert _rows(world, "SELECT sum(amount_minor) FROM tier_days") == [(200,)]
    # The redemption does not lower the metric (spending never lowers status).
    assert programme.id and _balance(world, wallet.id) == "100"
    assert [row[0] for row in _rows(world, "SELECT kind FROM tier_changes")] == ["upgraded"]


def test_state_contributions_balance_and_history_commit_together(world: World) -> None:
    """A fault after the tiers are written, inside the batch's unit of work: nothing of it is visible then, and
    nothing survives (the event is marked failed); its replay writes everything once."""
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}])
    customer, wallet = _shopper(world, "eve")
    seen: list[tuple[Any, ...]] = []

    def fail_once(point: str) -> None:
        if point != "after_tiers" or seen:
            return
        committed = reader(world.db)
        con = committed.programmes.con  # type: ignore[attr-defined]
        seen.append(
            (
                con.execute("SELECT count(*) FROM customer_tiers").fetchone()[0],
                con.execute("SELECT count(*) FROM tier_contributions").fetchone()[0],
                con.execute("SELECT count(*) FROM tier_changes").fetchone()[0],
                _balance(world, wallet.id),
            )
        )
        raise RuntimeError("crash after the tiers were written")

    event_id = _submit(world, "e-1", "eve", "120")
    world.db.fault_hook = fail_once
    try:
        event_processing.process_all(world.db)  # the batch fails; the event alone is marked failed
    finally:
        world.db.fault_hook = None
    assert seen == [(0, 0, 0, "0")]  # written in the unit of work, not committed yet
    assert event_queries.get_event(world.db, world.scope, event_id).status == "failed"
    assert _balance(world, wallet.id) == "0"
    for table in ("customer_tiers", "tier_contributions", "tier_days", "tier_changes"):
        assert _rows(world, f"SELECT count(*) FROM {table}") == [(0,)], table
    event_processing.replay_event(world.db, world.scope, event_id)
    assert _balance(world, wallet.id) == "120"
    assert _rows(world, "SELECT tier FROM customer_tiers WHERE customer_id = ?", customer.id) == [("silver",)]
    assert _rows(world, "SELECT count(*), sum(amount_minor) FROM tier_contributions") == [(1, 120)]
    assert _rows(world, "SELECT count(*) FROM tier_changes") == [(1,)]
    assert _rows(world, "SELECT count(*) FROM outbox WHERE kind = 'tier.changed'") == [(1,)]


def test_rules_that_use_tiers_need_tiers_on_v1(world: World) -> None:
    asset = world.asset(decimals=0)
    plain = world.programme(asset)
    body = {"program_id": plain.id, "event_type": "order.completed", "actions": [MULTIPLIED]}
    with pytest.raises(ServiceError) as caught:
        programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, body))
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", "actions[0].multiply")
    rules: list[dict[str, Any]] = [{"actions": [MULTIPLIED]}, {"conditions": GOLD, "actions": [GOLD_BONUS]}]
    tiered = _programme(world, POINTS_TIERS, rules, asset)
    stored = programmes.get_version(world.db, world.scope, tiered.id, 1).rules
    assert [rule.model_dump(mode="json")["actions"][0].get("multiply") for rule in stored] == ["tier", None]


def test_a_beneficiary_is_paid_at_its_own_tier_and_the_reward_counts_for_it(world: World) -> None:
    referral = {"type": "issue", "amount": {"fixed": "10"}, "multiply": "tier", "beneficiary": {"field": "referrer"}}
    referred = [{"field": "referrer", "operator": "exists"}]
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}, {"conditions": referred, "actions": [referral]}])
    referrer, referrer_wallet = _shopper(world, "ref")
    _, newcomer_wallet = _shopper(world, "new")
    _submit(world, "r-1", "ref", "100", "2026-03-01T10:00:00Z")  # ref reaches silver (x1.5)
    event_processing.process_all(world.db)
    body = {
        "type": "order.completed",
        "external_event_id": "n-1",
        "customer_id": "new",
        "occurred_at": "2026-03-02T10:00:00Z",
        "data": {"amount": Decimal("20"), "referrer": "ref"},
    }
    event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body))
    event_processing.process_all(world.db)
    assert _balance(world, newcomer_wallet.id) == "20"  # the newcomer: member, x1
    assert _balance(world, referrer_wallet.id) == "115"  # 100, then the referral x1.5 (the referrer's tier)
    days = _rows(world, "SELECT sum(amount_minor) FROM tier_days WHERE customer_id = ?", referrer.id)
    assert days == [(115,)]


def test_a_progress_condition_reads_the_progress_at_entry_within_a_batch(world: World) -> None:
    nearly = {"conditions": [{"field": "customer.tier_progress", "operator": "gte", "value": 50}]}
    _programme(
        world,
        POINTS_TIERS,
        [{"actions": [MULTIPLIED]}, {**nearly, "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}],
    )
    _, wallet = _shopper(world, "pat")
    ids = [_submit(world, f"p-{i}", "pat", a, f"2026-03-0{i + 1}T10:00:00Z") for i, a in enumerate(["40", "20", "1"])]
    report = event_processing.process_all(world.db)
    assert [_amounts(world, event_id) for event_id in ids] == [[(0, "40")], [(0, "20")], [(0, "1"), (0, "1")]]
    assert report.rematched == 2  # the progress moved under the later events twice
    assert _balance(world, wallet.id) == "62"


def test_a_sum_metric_counts_events_no_rule_names_and_takes_off_its_less_part(world: World) -> None:
    """Refunds have no rule, yet count (negatively) toward a `sum` metric; the upgrade waits until the net sum
    reaches the entry."""
    tiers = {
        "metric": {
            "type": "sum",
            "event_type": "order.completed",
            "field": "amount",
            "decimals": 2,
            "less": {"event_type": "order.refunded", "field": "amount"},
        },
        "window": {"type": "calendar", "period": "month"},
        "levels": [{"code": "new", "name": "New"}, {"code": "vip", "name": "VIP", "entry": "100", "multiplier": "3"}],
    }
    _programme(world, tiers, [{"actions": [{"type": "issue", "amount": {"fixed": "1"}, "multiply": "tier"}]}])
    customer, wallet = _shopper(world, "sue")
    _submit(world, "s-1", "sue", "60.509", "2026-03-01T10:00:00Z")  # counts 60.50 (rounded toward zero)
    refund = {
        "type": "order.refunded",
        "external_event_id": "s-r",
        "customer_id": "sue",
        "occurred_at": "2026-03-02T10:00:00Z",
        "data": {"amount": Decimal("20")},
    }
    event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, refund))
    _submit(world, "s-2", "sue", "50", "2026-03-03T10:00:00Z")  # 90.50: not yet
    _submit(world, "s-3", "sue", "9.50", "2026-03-04T10:00:00Z")  # 100.00: vip after it
    _submit(world, "s-4", "sue", "1", "2026-03-05T10:00:00Z")  # paid x3
    event_processing.process_all(world.db)
    assert _balance(world, wallet.id) == "6"
    days = _rows(world, "SELECT day, amount_minor FROM tier_days WHERE customer_id = ? ORDER BY day", customer.id)
    assert [amount for _, amount in days] == [6050, -2000, 5000, 950, 100]
    assert _rows(world, "SELECT tier FROM customer_tiers") == [("vip",)]


def test_a_refund_takes_its_reward_off_the_original_day(world: World) -> None:
    reverse = {"event_type": "order.refunded", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]}
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}, reverse])
    customer, wallet = _shopper(world, "ron")
    _submit(world, "order-1", "ron", "90", "2026-03-01T10:00:00Z")
    event_processing.process_all(world.db)
    body = {
        "type": "order.refunded",
        "external_event_id": "refund-1",
        "customer_id": "ron",
        "occurred_at": "2026-03-05T10:00:00Z",
        "data": {"order_id": "order-1"},
    }
    event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body))
    _submit(world, "order-2", "ron", "20", "2026-03-06T10:00:00Z")  # 20 after the refund: 20 in all, no upgrade
    event_processing.process_all(world.db)
    days = _rows(world, "SELECT day, amount_minor FROM tier_days WHERE customer_id = ? ORDER BY day", customer.id)
    assert days == [(date(2026, 3, 1), 0), (date(2026, 3, 6), 20)]
    assert _rows(world, "SELECT tier FROM customer_tiers") == [("member",)] and _balance(world, wallet.id) == "20"


def test_a_review_due_before_an_event_applies_at_its_entry(world: World) -> None:
    """Rolling 10 days: silver on day 1 is kept at the review of day 11 (days 1-10 hold 100), lost at the review
    of day 21 (days 11-20 hold nothing); an event on day 22 finds the customer at member and is paid x1."""
    tiers = {**POINTS_TIERS, "window": {"type": "rolling", "days": 10}}
    _programme(world, tiers, [{"actions": [MULTIPLIED]}])
    customer, wallet = _shopper(world, "rex")
    _submit(world, "x-1", "rex", "100", "2026-03-01T10:00:00Z")
    _submit(world, "x-2", "rex", "10", "2026-03-22T10:00:00Z")
    event_processing.process_all(world.db)
    assert _balance(world, wallet.id) == "110"
    changes = _rows(world, "SELECT kind, to_tier, changed_at FROM tier_changes ORDER BY changed_at")
    assert changes == [
        ("upgraded", "silver", datetime(2026, 3, 1, 10)),
        ("retained", "silver", datetime(2026, 3, 11)),
        ("downgraded", "member", datetime(2026, 3, 21)),
    ]
    assert _rows(world, "SELECT tier, review_at FROM customer_tiers WHERE customer_id = ?", customer.id) == [
        ("member", None)
    ]
    assert len(_rows(world, "SELECT id FROM outbox WHERE kind = 'tier.changed'")) == 2  # up, then down


@pytest.mark.parametrize("batch_size", [1000, 1])
def test_two_upgrades_at_one_instant_are_both_in_the_history(world: World, batch_size: int) -> None:
    _programme(world, POINTS_TIERS, [{"actions": [MULTIPLIED]}])
    _shopper(world, "twin")
    _submit(world, "t-1", "twin", "100")
    _submit(world, "t-2", "twin", "200")  # the same instant: silver then gold
    event_processing.process_all(world.db, batch_size)
    changes = _rows(world, "SELECT from_tier, to_tier, changed_at FROM tier_changes ORDER BY changed_at")
    moment = datetime(2026, 3, 1, 10)
    assert changes == [("member", "silver", moment), ("silver", "gold", moment + timedelta(microseconds=1))]
