"""Reversals (issue 18) in process, on a real DuckDB file: whole and partial refunds that never take back more than
was issued, clawback policies against spent points (the wallet floor of `negative`), refunds that wait for their
original, caps given back, the `reward.reversed` webhook, and a ledger that verifies after all of it."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import event_intake, event_queries, ledger, programmes
from rewards_lab.store.uow import reader, unit_of_work
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World

ORDER, REFUND = "order.completed", "order.refunded"


class Shop:
    """One asset (0 decimals), one programme issuing `amount x rate` per order and reversing on refunds."""

    def __init__(self, world: World, *, rate: str = "1", fraction: Any = None, **settings: Any) -> None:
        self.world = world
        self.asset = world.asset(decimals=0, symbol="PTS")
        body = {"name": "Shop", "asset_id": self.asset.id, **settings}
        self.programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
        self.rule({"event_type": ORDER, "actions": [{"type": "issue", "amount": {"per": "amount", "rate": rate}}]})
        reverse: dict[str, Any] = {"type": "reverse", "original": {"field": "order_id"}}
        if fraction is not None:
            reverse["fraction"] = fraction
        self.rule({"event_type": REFUND, "actions": [reverse]})
        programmes.publish(world.db, world.scope, self.programme.id)
        self.events = 0

    def rule(self, body: dict[str, Any]) -> r.Rule:
        return programmes.create_rule(
            self.world.db, self.world.scope, validate(rq.RuleCreate, {"program_id": self.programme.id, **body})
        )

    def customer(self, name: str) -> r.Wallet:
        return self.world.wallet(self.world.customer(name))

    def send(self, event_type: str, customer: str, *, process: bool = True, **data: Any) -> r.Event:
        self.events += 1
        external_id = data.pop("external_id", f"e-{self.events}")
        body = {"type": event_type, "external_event_id": external_id, "customer_id": customer, "data": data}
        created = event_intake.submit_event(self.world.db, self.world.scope, validate(rq.EventCreate, body))
        if process:
            event_processing.process_all(self.world.db)
        return event_queries.get_event(self.world.db, self.world.scope, created.id)

    def order(self, customer: str, order_id: str, amount: int) -> r.Event:
        return self.send(ORDER, customer, external_id=order_id, amount=amount)

    def refund(self, customer: str, order_id: str, **data: Any) -> r.Event:
        return self.send(REFUND, customer, order_id=order_id, **data)

    def executions(self, event: r.Event) -> list[r.RewardExecution]:
        page = event_queries.list_executions(self.world.db, self.world.scope, PageRequest(limit=100), event_id=event.id)
        return [e for e in page.data if e.program_id == self.programme.id]

    def reversal(self, event: r.Event) -> r.RewardExecution:
        (execution,) = self.executions(event)
        assert execution.status == "reversed", execution
        assert execution.reversal is not None
        return execution

    def balance(self, wallet: r.Wallet) -> Decimal:
        balances = ledger.wallet_balances(self.world.db, self.world.scope, wallet.id).balances
        return sum((Decimal(b.balance) for b in balances if b.asset_id == self.asset.id), Decimal(0))

    def redeem(self, wallet: r.Wallet, amount: str) -> None:
        body = validate(rq.RedemptionRequest, {"wallet_id": wallet.id, "amount": amount, "reference": "spent"})
        ledger.redeem(self.world.db, self.world.scope, self.asset.id, body)


@pytest.fixture(autouse=True)
def _ledger_verifies(world: World) -> Any:
    yield
    report = verify_ledger(world.db.reader())
    assert report.ok, report.problems


def test_a_whole_refund_takes_back_the_reward_once(world: World) -> None:
    shop = Shop(world)
    wallet = shop.customer("ann")
    order = shop.order("ann", "o-1", 100)
    assert shop.balance(wallet) == 100
    refund = shop.refund("ann", "o-1")
    assert refund.status == "processed"
    execution = shop.reversal(refund)
    assert execution.amount == "100"
    assert execution.reversal is not None
    assert (execution.reversal.target, execution.reversal.shortfall, execution.reversal.fraction) == ("100", "0", None)
    (item,) = execution.reversal.rewards
    (original,) = shop.executions(order)
    assert (item.original_execution_id, item.original_transaction_id) == (original.id, original.transaction_id)
    assert original.reversed_amount == "100"
    assert shop.balance(wallet) == 0
    assert item.transaction_id is not None
    transaction = ledger.get_transaction(world.db, world.scope, item.transaction_id)
    assert (transaction.kind, transaction.amount, transaction.wallet_id) == ("reversal", "100", wallet.id)
    assert original.transaction_id is not None and original.transaction_id in (transaction.memo or "")
    # A second refund of the same order finds nothing left to take back.
    again = shop.reversal(shop.refund("ann", "o-1"))
    assert again.amount == "0" and again.reversal is not None and again.reversal.rewards == []
    assert shop.balance(wallet) == 0


def test_partial_refunds_read_from_both_events_never_exceed_the_reward(world: World) -> None:
    shop = Shop(world, rate="0.5", fraction={"field": "refund_amount", "of": "amount"})
    wallet = shop.customer("bob")
    shop.order("bob", "o-2", 120)  # 60 points
    taken = [shop.reversal(shop.refund("bob", "o-2", refund_amount=amount)).amount for amount in (30, 30, 100, 5)]
    assert taken == ["15", "15", "30", "0"]  # a quarter, a quarter, then only what remains
    assert shop.balance(wallet) == 0


def test_constant_fractions_round_down_so_their_sum_stays_within_the_reward(world: World) -> None:
    shop = Shop(world, fraction="0.333333")
    wallet = shop.customer("cat")
    shop.order("cat", "o-3", 100)
    taken = [shop.reversal(shop.refund("cat", "o-3")).amount for _ in range(5)]
    assert taken == ["33", "33", "33", "1", "0"]
    assert shop.balance(wallet) == 0


@pytest.mark.parametrize(
    ("clawback", "taken", "balance_after"),
    [("available", "20", 0), ("negative", "100", -80), ("none", "0", 20)],
)
def test_clawback_decides_what_a_wallet_that_spent_the_points_gives(
    world: World, clawback: str, taken: str, balance_after: int
) -> None:
    shop = Shop(world, clawback=clawback)
    wallet = shop.customer("dan")
    shop.order("dan", "o-4", 100)
    shop.redeem(wallet, "80")
    execution = shop.reversal(shop.refund("dan", "o-4"))
    assert execution.reversal is not None
    assert (execution.amount, execution.reversal.target, execution.reversal.clawback) == (taken, "100", clawback)
    assert Decimal(execution.reversal.shortfall) == 100 - Decimal(taken)
    assert shop.balance(wallet) == balance_after
    if balance_after < 0:
        # Below zero the wallet can give nothing more; new rewards pay the debt back first.
        with pytest.raises(ServiceError) as refused:
            shop.redeem(wallet, "1")
        assert refused.value.code == "insufficient_balance"
        shop.order("dan", "o-5", 50)
        assert shop.balance(wallet) == -30


def test_a_refund_before_its_original_waits_then_follows_it(world: World) -> None:
    shop = Shop(world)
    wallet = shop.customer("eve")
    early = shop.refund("eve", "o-6")
    assert early.status == "received"
    assert early.waiting_for == "o-6" and early.wait_until is not None
    shop.order("eve", "o-6", 70)
    settled = event_queries.get_event(world.db, world.scope, early.id)
    assert settled.status == "processed"
    assert shop.reversal(settled).amount == "70"
    assert shop.balance(wallet) == 0


def test_a_refund_and_its_original_in_one_batch_are_processed_original_first(world: World) -> None:
    shop = Shop(world)
    wallet = shop.customer("fay")
    refund = shop.refund("fay", "o-7", process=False)
    shop.send(ORDER, "fay", external_id="o-7", amount=40, process=False)
    report = event_processing.process_pending(world.db, 100)
    assert report.processed == 2 and report.reversed == 1
    assert shop.reversal(event_queries.get_event(world.db, world.scope, refund.id)).amount == "40"
    assert shop.balance(wallet) == 0


def test_a_refund_whose_original_never_comes_fails_once_its_wait_is_over(world: World) -> None:
    shop = Shop(world)
    shop.customer("gus")
    early = shop.refund("gus", "o-missing")
    assert early.status == "received"
    with unit_of_work(world.db) as uow:  # as if the seven days had passed
        uow.events.wait(world.scope, {early.id: "o-missing"}, datetime(2000, 1, 1))
    event_processing.process_all(world.db)
    failed = event_queries.get_event(world.db, world.scope, early.id)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "original_not_found"


def test_a_reversal_gives_the_cap_back(world: World) -> None:
    shop = Shop(world, limits=[{"period": "lifetime", "max_amount": "100"}])
    wallet = shop.customer("hal")
    shop.order("hal", "o-8", 100)
    (capped,) = shop.executions(shop.order("hal", "o-9", 10))
    assert capped.status == "limited"
    shop.refund("hal", "o-8")
    (again,) = shop.executions(shop.order("hal", "o-10", 60))
    assert (again.status, again.amount) == ("issued", "60")
    assert shop.balance(wallet) == 60


def test_a_reversal_emits_a_signed_reward_reversed_webhook(world: World) -> None:
    shop = Shop(world)
    shop.customer("ivy")
    shop.order("ivy", "o-11", 25)
    execution = shop.reversal(shop.refund("ivy", "o-11"))
    found = [row for row in reader(world.db).outbox.of_scope(world.scope) if row.resource_id == execution.id]
    assert [row.kind for row in found] == ["reward.reversed"]
    payload = jsonutil.loads(found[0].payload)
    assert payload["reversal"]["target"] == "25" and payload["amount"] == "25"
    assert payload["reversal"]["rewards"][0]["original_transaction_id"] is not None
