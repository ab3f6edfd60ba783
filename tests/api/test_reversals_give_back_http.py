"""Issue 27, items 3 and 5, through a real `rewards-lab serve` on 127.0.0.1: a refund gives back to the caps only
what the wallet gave (spend-then-refund cycles never reopen a daily cap), and a refund by another customer takes
nothing unless the reverse action says `any_customer`, in which case the reversal belongs to the original's
customer. The ledger and the cap counters are checked on the file the server leaves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from itertools import count
from typing import Any

import httpx
import pytest

from rewards_lab.store.database import Database
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.webhook_receiver import ok

POLL_TIMEOUT_S = 15.0
_names = count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("give-back") / "service.duckdb")
    yield live
    stop_and_verify(live)
    database = Database(live.db)
    try:  # what the counters hold once the server has stopped: the net of what customers kept
        usage = database.reader().execute(
            "SELECT u.customer_id, u.counter, u.amount_minor, u.reward_count FROM limit_usage u"
        )
        counters = {(row[0], row[1].split(":")[0]): (int(row[2]), int(row[3])) for row in usage.fetchall()}
    finally:
        database.close()
    for customer, expected in EXPECTED_COUNTERS.items():
        assert counters[(customer, "rule")] == expected, (customer, counters)


EXPECTED_COUNTERS: dict[str, tuple[int, int]] = {}  # customer id -> (amount minor, count) on the rule's daily cap


def _processed(http: httpx.Client, event_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        event: dict[str, Any] = ok(http.get(f"/events/{event_id}"))
        if event["status"] != "received":
            return event
        assert time.monotonic() < deadline, event
        time.sleep(0.05)


def _send(http: httpx.Client, kind: str, customer: str, **data: Any) -> dict[str, Any]:
    body = {
        "type": kind,
        "external_event_id": f"{kind}-{next(_names)}",
        "customer_id": customer,
        "occurred_at": "2026-05-04T10:00:00Z",  # one day: the cap's one period (the programme takes backfills)
        "data": data,
    }
    return _processed(http, str(ok(http.post("/events", json=body), 202)["id"]))


def _shop(http: httpx.Client, clawback: str, limits: list[dict[str, Any]], **reverse: Any) -> dict[str, str]:
    """A programme (0 decimals) whose `shop<n>.order` issues `amount` points under `limits`, and whose `shop<n>.refund`
    reverses the order its `order_id` names, in full."""
    tag = next(_names)
    body = {"name": f"P{tag}", "symbol": f"P{tag}", "type": "points", "decimals": 0}
    asset = ok(http.post("/assets", json=body), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    # a backfill programme (no bound on an event's age): the tests date their events on one past day
    shop = {"name": f"Shop {tag}", "asset_id": asset["id"], "clawback": clawback, "max_event_age_days": None}
    programme = ok(http.post("/reward-programs", json=shop), 201)
    earn = {
        "program_id": programme["id"],
        "event_type": f"shop{tag}.order",
        "limits": limits,
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}],
    }
    ok(http.post("/reward-rules", json=earn), 201)
    action = {"type": "reverse", "original": {"field": "order_id"}, **reverse}
    refund = ok(
        http.post(
            "/reward-rules",
            json={"program_id": programme["id"], "event_type": f"shop{tag}.refund", "actions": [action]},
        ),
        201,
    )
    assert refund["actions"] == [action]  # `any_customer` is kept as given (and left out when not given)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return {
        "asset_id": asset["id"],
        "program_id": programme["id"],
        "order": f"shop{tag}.order",
        "refund": f"shop{tag}.refund",
    }


def _customer(http: httpx.Client, name: str) -> tuple[str, str]:
    customer = ok(http.post("/customers", json={"external_id": f"{name}-{next(_names)}"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return str(customer["id"]), str(wallet["id"])


def _balance(http: httpx.Client, wallet_id: str, asset_id: str) -> Decimal:
    balances = ok(http.get(f"/wallets/{wallet_id}/balances"))["balances"]
    return Decimal(next((b["balance"] for b in balances if b["asset_id"] == asset_id), "0"))


def _execution(http: httpx.Client, event: dict[str, Any]) -> dict[str, Any]:
    (execution,) = ok(http.get("/reward-executions", params={"event_id": event["id"]}))
    return dict(execution)


def _redeem(http: httpx.Client, shop: dict[str, str], wallet_id: str, amount: str) -> None:
    body = {"wallet_id": wallet_id, "amount": amount, "reference": "spent"}
    headers = {"Idempotency-Key": f"spend-{next(_names)}"}
    ok(http.post(f"/assets/{shop['asset_id']}/redemptions", json=body, headers=headers), 201)


@pytest.mark.parametrize("clawback", ["available", "none"])
def test_spend_then_refund_cycles_never_reopen_a_daily_cap(http: httpx.Client, clawback: str) -> None:
    """Order 100, redeem what the wallet holds, refund in full (the wallet gives nothing back), three times over:
    the daily cap of 100 stays used, so the later orders are limited; 100 issued in all, not 100 per cycle."""
    shop = _shop(http, clawback, [{"period": "day", "max_amount": "100"}])
    customer, wallet = _customer(http, "cycler")
    orders = []
    for _ in range(3):
        order = _send(http, shop["order"], customer, amount=100)
        orders.append(_execution(http, order))
        held = _balance(http, wallet, shop["asset_id"])
        if held:
            _redeem(http, shop, wallet, str(held))
        refund = _execution(http, _send(http, shop["refund"], customer, order_id=order["external_event_id"]))
        assert (refund["status"], refund["amount"]) == ("reversed", "0")  # spent: nothing comes back
    assert [(o["status"], o["amount"]) for o in orders] == [("issued", "100"), ("limited", "0"), ("limited", "0")]
    assert _balance(http, wallet, shop["asset_id"]) == 0
    EXPECTED_COUNTERS[customer] = (100, 1)  # the reward was kept (spent): it still counts, whole


def test_a_refund_of_part_spent_points_gives_back_only_what_the_wallet_gave(http: httpx.Client) -> None:
    """Spent 60 of 100, refunded in full under `available`: the wallet gives 40, so 40 of the cap comes back (the
    next order of 100 gets 40), and the reward still counts (a count cap of 2 then lets one more through, not two);
    a refund of points still held gives them all back, and the reward stops counting."""
    shop = _shop(http, "available", [{"period": "day", "max_amount": "100"}, {"period": "day", "max_count": 2}])
    customer, wallet = _customer(http, "partial")
    order = _send(http, shop["order"], customer, amount=100)
    _redeem(http, shop, wallet, "60")
    refund = _execution(http, _send(http, shop["refund"], customer, order_id=order["external_event_id"]))
    assert (refund["amount"], refund["reversal"]["target"], refund["reversal"]["shortfall"]) == ("40", "100", "60")
    second = _send(http, shop["order"], customer, amount=100)
    assert (_execution(http, second)["status"], _execution(http, second)["amount"]) == ("issued", "40")
    third = _execution(http, _send(http, shop["order"], customer, amount=1))
    assert (third["status"], third["amount"]) == ("limited", "0")  # two rewards count: the first was kept in part
    back = _execution(http, _send(http, shop["refund"], customer, order_id=second["external_event_id"]))
    assert (back["amount"], back["reversal"]["shortfall"]) == ("40", "0")  # held: all of it, and it stops counting
    fourth = _execution(http, _send(http, shop["order"], customer, amount=100))
    assert (fourth["status"], fourth["amount"]) == ("issued", "40")
    assert _balance(http, wallet, shop["asset_id"]) == 40  # the fourth order's
    EXPECTED_COUNTERS[customer] = (100, 2)  # 60 kept of the first, 40 of the fourth: two rewards


def test_a_refund_by_another_customer_takes_nothing_by_default(http: httpx.Client) -> None:
    """Bob refunds Alice's order: the action fails with `original_customer_mismatch` on Bob's event, and Alice
    keeps her points; Alice's own refund then takes them back (recorded under her)."""
    shop = _shop(http, "available", [])
    alice, alice_wallet = _customer(http, "alice")
    bob, bob_wallet = _customer(http, "bob")
    order = _send(http, shop["order"], alice, amount=70)
    _send(http, shop["order"], bob, amount=5)
    hostile = _send(http, shop["refund"], bob, order_id=order["external_event_id"])
    assert (hostile["status"], hostile["error"]["code"]) == ("failed", "original_customer_mismatch")
    execution = _execution(http, hostile)
    assert (execution["status"], execution["error_code"], execution["customer_id"]) == (
        "failed",
        "original_customer_mismatch",
        bob,
    )
    assert execution["reversal"] is None and execution["amount"] == "0"
    assert _balance(http, alice_wallet, shop["asset_id"]) == 70 and _balance(http, bob_wallet, shop["asset_id"]) == 5
    simulate = f"/reward-programs/{shop['program_id']}/simulate?version=live"
    event = {"type": shop["refund"], "order_id": order["external_event_id"]}
    for who, expected in ((bob, "original_customer_mismatch"), (alice, None)):  # the simulation says the same
        simulated = ok(http.post(simulate, json={"event": event, "customer_id": who}))
        (action,) = next(rule for rule in simulated["rules"] if rule["matched"])["actions"]
        assert action.get("error_code") == expected and (action.get("reversal") is None) == (expected is not None)
    own = _execution(http, _send(http, shop["refund"], alice, order_id=order["external_event_id"]))
    assert (own["status"], own["amount"], own["customer_id"]) == ("reversed", "70", alice)
    assert _balance(http, alice_wallet, shop["asset_id"]) == 0


def test_a_marketplace_rule_takes_back_another_customers_reward_under_its_owner(http: httpx.Client) -> None:
    """With `any_customer`, a seller's refund of a buyer's order takes the buyer's reward back; the execution and
    the reversal's transaction belong to the buyer, not the refunding seller."""
    shop = _shop(http, "available", [], any_customer=True)
    buyer, buyer_wallet = _customer(http, "buyer")
    seller, seller_wallet = _customer(http, "seller")
    order = _send(http, shop["order"], buyer, amount=30)
    _send(http, shop["order"], seller, amount=9)
    refund = _send(http, shop["refund"], seller, order_id=order["external_event_id"])
    assert refund["status"] == "processed"
    execution = _execution(http, refund)
    assert (execution["status"], execution["amount"], execution["customer_id"]) == ("reversed", "30", buyer)
    (reward,) = execution["reversal"]["rewards"]
    assert (reward["customer_id"], reward["wallet_id"]) == (buyer, buyer_wallet)
    transaction = ok(http.get(f"/transactions/{reward['transaction_id']}"))
    assert (transaction["kind"], transaction["wallet_id"], transaction["amount"]) == ("reversal", buyer_wallet, "30")
    mine = ok(http.get("/reward-executions", params={"customer_id": buyer}))
    assert execution["id"] in {row["id"] for row in mine}
    assert _balance(http, buyer_wallet, shop["asset_id"]) == 0 and _balance(http, seller_wallet, shop["asset_id"]) == 9
