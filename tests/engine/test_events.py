"""Business events: durable acceptance, deduplication, processing, failure with a code, and replay."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.domain import posting_decision
from rewards_lab.engine import event_processing
from rewards_lab.service import assets, customers, event_intake, event_queries, ledger, programmes
from rewards_lab.store.uow import reader
from tests.conftest import World


def _event(external_id: str, customer: str = "shopper", **data: Any) -> rq.EventCreate:
    return validate(
        rq.EventCreate,
        {"type": "order.completed", "external_event_id": external_id, "customer_id": customer, "data": data},
    )


@pytest.fixture
def shop(world: World) -> dict[str, Any]:
    customer = world.customer("shopper")
    wallet = world.wallet(customer)
    asset = world.asset(supply_ceiling="100.00")
    programme = world.per_rate_programme(asset, rate="0.05", threshold=20)
    return {"customer": customer, "wallet": wallet, "asset": asset, "programme": programme}


def _balance(world: World, wallet_id: str) -> str:
    balances = ledger.wallet_balances(world.db, world.scope, wallet_id).balances
    return balances[0].balance if balances else "0"


def test_duplicates_return_the_original_and_issue_once(world: World, shop: dict[str, Any]) -> None:
    first = event_intake.submit_event(world.db, world.scope, _event("o-1", amount=Decimal("42.50")))
    again = event_intake.submit_event(world.db, world.scope, _event("o-1", amount=Decimal("42.5")))  # same value
    assert again.id == first.id
    event_processing.process_all(world.db)
    after = event_intake.submit_event(world.db, world.scope, _event("o-1", amount=Decimal("42.50")))
    assert after.id == first.id and after.status == "processed"
    event_processing.process_all(world.db)
    assert _balance(world, shop["wallet"].id) == "2.12"
    with pytest.raises(ServiceError) as caught:
        event_intake.submit_event(world.db, world.scope, _event("o-1", amount=Decimal("43")))
    assert caught.value.code == "event_duplicate_mismatch" and caught.value.details["field"] == "external_event_id"


def test_a_batch_with_a_duplicate_inside_it_stores_one_event(world: World, shop: dict[str, Any]) -> None:
    results = event_intake.submit_events(
        world.db,
        world.scope,
        [_event("b-1", amount=30), _event("b-1", amount=30), _event("b-1", amount=31), _event("b-2", amount=40)],
    )
    assert isinstance(results[2], ServiceError) and results[2].code == "event_duplicate_mismatch"
    ok = [r for r in results if not isinstance(r, ServiceError)]
    assert ok[0].id == ok[1].id and len({r.id for r in ok}) == 2
    report = event_processing.process_all(world.db)
    assert report.issued == 2 and _balance(world, shop["wallet"].id) == "3.50"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"amount": Decimal("20")}, "1.00"),  # boundary of gte
        ({"amount": Decimal("19.99")}, "0"),  # below the threshold
        ({"amount": Decimal("20.19")}, "1.00"),  # 1.0095 rounds toward zero
        ({"amount": "42.50"}, "0"),  # a string is not a number: the condition is false
        ({"amount": True}, "0"),
        ({}, "0"),  # missing field
    ],
)
def test_rule_semantics_when_processing(
    world: World, shop: dict[str, Any], data: dict[str, Any], expected: str
) -> None:
    event_intake.submit_event(world.db, world.scope, _event("x", **data))
    report = event_processing.process_all(world.db)
    assert report.processed == 1 and report.failed == 0
    assert _balance(world, shop["wallet"].id) == expected


def test_every_publishing_programme_applies_and_provenance_is_recorded(world: World, shop: dict[str, Any]) -> None:
    second = world.programme(shop["asset"], "Welcome")
    world.rule(second, amount={"fixed": "5.00"})
    programmes.publish(world.db, world.scope, second.id)
    world.rule(second, amount={"fixed": "99.00"})  # only in the draft: must not apply
    event = event_intake.submit_event(world.db, world.scope, _event("p-1", amount=Decimal("100")))
    event_processing.process_all(world.db)
    assert _balance(world, shop["wallet"].id) == "10.00"  # 5.00 per-rate + 5.00 fixed
    executions = event_queries.list_executions(world.db, world.scope, PageRequest(), event_id=event.id).data
    assert sorted((e.program_id, e.program_version, e.amount) for e in executions) == sorted(
        [(shop["programme"].id, 1, "5.00"), (second.id, 1, "5.00")]
    )
    per_rate = next(e for e in executions if e.program_id == shop["programme"].id)
    assert per_rate.inputs == {"amount": "100"} and per_rate.transaction_id
    transaction = ledger.get_transaction(world.db, world.scope, per_rate.transaction_id)
    assert transaction.kind == "reward" and transaction.wallet_id == shop["wallet"].id
    assert sorted(e.amount for e in transaction.entries) == ["-5.00", "5.00"]
    outbox = reader(world.db).outbox.of_scope(world.scope)
    assert [row.kind for row in outbox] == ["reward.issued", "reward.issued"]
    assert {json.loads(row.payload)["execution_id"] for row in outbox} == {e.id for e in executions}


@pytest.mark.parametrize("cause", ["frozen", "paused", "no_wallet", "unknown_customer"])
def test_failed_events_carry_the_code_and_replay_issues_once(world: World, shop: dict[str, Any], cause: str) -> None:
    db, scope = world.db, world.scope
    customer_ref = "shopper"
    if cause == "frozen":
        customers.freeze_wallet(db, scope, shop["wallet"].id)
    elif cause == "paused":
        assets.pause_asset(db, scope, shop["asset"].id)
    elif cause == "no_wallet":
        customer_ref = world.customer("walletless").external_id
    else:
        customer_ref = "not-yet-a-customer"
    event = event_intake.submit_event(db, scope, _event("f-1", customer_ref, amount=Decimal("40")))
    report = event_processing.process_all(db)
    assert report.failed == 1
    failed = event_queries.get_event(db, scope, event.id)
    expected_code = {
        "frozen": "wallet_frozen",
        "paused": "asset_paused",
        "no_wallet": "wallet_not_found",
        "unknown_customer": "customer_not_found",
    }[cause]
    assert failed.status == "failed" and failed.error is not None and failed.error.code == expected_code
    assert event_queries.list_events(db, scope, PageRequest(), status="failed").data[0].id == event.id

    # fix the cause, then replay: exactly the missing reward is issued, once
    if cause == "frozen":
        customers.unfreeze_wallet(db, scope, shop["wallet"].id)
        wallet_id = shop["wallet"].id
    elif cause == "paused":
        assets.resume_asset(db, scope, shop["asset"].id)
        wallet_id = shop["wallet"].id
    elif cause == "no_wallet":
        wallet_id = world.wallet(customers.get_customer(db, scope, "walletless")).id
    else:
        wallet_id = world.wallet(world.customer("not-yet-a-customer")).id
    replayed = event_processing.replay_event(db, scope, event.id)
    assert replayed.status == "processed" and replayed.error is None and replayed.attempts == 2
    assert _balance(world, wallet_id) == "2.00"
    with pytest.raises(ServiceError) as caught:
        event_processing.replay_event(db, scope, event.id)
    assert caught.value.code == "event_not_replayable"
    assert event_processing.process_all(db).processed == 0
    assert _balance(world, wallet_id) == "2.00"


def test_replay_issues_only_what_is_missing(world: World, shop: dict[str, Any]) -> None:
    """Two actions; the ceiling lets the first through and stops the second; replay issues only the second."""
    db, scope = world.db, world.scope
    asset = world.asset(symbol="GEM", supply_ceiling="10.00")
    programme = world.programme(asset, "Gems")
    body = {
        "program_id": programme.id,
        "event_type": "match.completed",
        "actions": [{"type": "issue", "amount": {"fixed": "6.00"}}, {"type": "issue", "amount": {"fixed": "6.00"}}],
    }
    programmes.create_rule(db, scope, validate(rq.RuleCreate, body))
    programmes.publish(db, scope, programme.id)
    event = event_intake.submit_event(
        db,
        scope,
        validate(rq.EventCreate, {"type": "match.completed", "external_event_id": "m-1", "customer_id": "shopper"}),
    )
    event_processing.process_all(db)
    failed = event_queries.get_event(db, scope, event.id)
    assert failed.status == "failed" and failed.error and failed.error.code == "asset_supply_exhausted"
    gem_balance = [b for b in ledger.wallet_balances(db, scope, shop["wallet"].id).balances if b.asset_id == asset.id]
    assert gem_balance[0].balance == "6.00"

    # Publishing a new version must not change what the replay evaluates: it uses the versions of first processing.
    world.rule(programme, "match.completed", amount={"fixed": "1.00"})
    programmes.publish(db, scope, programme.id)
    # redeem to make room under the ceiling, then replay
    ledger.redeem(
        db, scope, asset.id, rq.RedemptionRequest(wallet_id=shop["wallet"].id, amount="6.00", reference="spend")
    )
    replayed = event_processing.replay_event(db, scope, event.id)
    assert replayed.status == "processed"
    executions = event_queries.list_executions(db, scope, PageRequest(), event_id=event.id).data
    assert sorted((e.action_index, e.status, e.program_version) for e in executions) == [
        (0, "issued", 1),
        (1, "issued", 1),
    ]
    gem_balance = [b for b in ledger.wallet_balances(db, scope, shop["wallet"].id).balances if b.asset_id == asset.id]
    assert gem_balance[0].balance == "6.00"  # 6 issued, 6 redeemed, 6 issued by the replay: once
    assert assets.get_asset(db, scope, asset.id).issued == "12.00"


def test_ceiling_is_enforced_in_event_order_within_a_batch(world: World, shop: dict[str, Any]) -> None:
    for index in range(30):  # 30 x 5.00 against a 100.00 ceiling: the first 20 issue, the rest fail
        event_intake.submit_event(world.db, world.scope, _event(f"c-{index:02d}", amount=Decimal("100")))
    report = event_processing.process_all(world.db)
    assert (report.issued, report.refused, report.failed) == (20, 10, 10)
    failed = event_queries.list_events(world.db, world.scope, PageRequest(limit=100), status="failed").data
    assert sorted(e.external_event_id for e in failed) == [f"c-{i:02d}" for i in range(20, 30)]
    assert assets.get_asset(world.db, world.scope, shop["asset"].id).outstanding_supply == "100.00"


def test_a_batch_of_events_within_the_ceiling_is_issued_whole_with_every_execution_recorded(
    world: World, shop: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    decide = posting_decision.decide_whole

    def spy(*args: Any) -> Any:
        whole = decide(*args)
        taken.append(whole is not None)
        return whole

    monkeypatch.setattr(posting_decision, "decide_whole", spy)
    for index in range(15):  # 15 x 5.00 within the 100.00 ceiling
        event_intake.submit_event(world.db, world.scope, _event(f"w-{index:02d}", amount=Decimal("100")))
    report = event_processing.process_all(world.db)
    assert (report.issued, report.refused, report.failed) == (15, 0, 0)
    assert taken and all(taken)  # decided whole, not one by one
    assert _balance(world, shop["wallet"].id) == "75.00"
    rows = reader(world.db).con.execute("SELECT transaction_id FROM reward_executions").fetchall()
    found = {row[0] for row in rows}
    assert len(found) == 15 and None not in found
    for transaction_id in found:
        assert ledger.get_transaction(world.db, world.scope, transaction_id).amount == "5.00"
