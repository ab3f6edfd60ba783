"""The simulation explains caps, budgets and reversals (issue 18), against a real `rewards-lab serve` and its
worker: with `customer_id` it reads the customer's counters and says what a cap or the budget would cut, and it
says what a reverse action would take back of an original's rewards under the clawback policy; what it says is
what the worker then does, and it writes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.http_helpers import live_client, ok
from tests.live_server import LiveServer, start_server

POLL_TIMEOUT_S = 15.0
AT = "2026-03-10T12:00:00+01:00"  # a Tuesday; the programme's month starts 2026-03-01 in Europe/Paris


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("simulation_caps") / "service.duckdb")
    yield live
    live.stop()


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with live_client(server) as client:
        yield client


@pytest.fixture(scope="module")
def shop(http: httpx.Client) -> dict[str, str]:
    asset = ok(http.post("/assets", json={"name": "Sim", "symbol": "SIM", "type": "points", "decimals": 2}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    programme = ok(
        http.post(
            "/reward-programs",
            json={
                "name": "Simulated caps",
                "asset_id": asset["id"],
                "timezone": "Europe/Paris",
                "limits": [{"period": "month", "max_amount": "25"}],
                "budget": {"period": "day", "max_amount": "1000"},
                "max_event_age_days": None,  # its events are of March 2026: a backfill
            },
        ),
        201,
    )
    rules = {
        "order": {
            "event_type": "sim.order",
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "0.1"}}],
            "limits": [{"period": "day", "max_count": 2}],
        },
        "refund": {
            "event_type": "sim.refund",
            "actions": [
                {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}}
            ],
        },
        "cancel": {"event_type": "sim.cancel", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]},
    }
    ids = {
        name: ok(http.post("/reward-rules", json={"program_id": programme["id"], **rule}), 201)["id"]
        for name, rule in rules.items()
    }
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "sim-ada"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return {"program_id": programme["id"], "asset_id": asset["id"], "wallet_id": wallet["id"], **ids}


def _simulate(http: httpx.Client, shop: dict[str, str], event: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {"event": event, "occurred_at": AT, **extra}
    result: dict[str, Any] = ok(http.post(f"/reward-programs/{shop['program_id']}/simulate?version=live", json=body))
    return result


def _action(simulation: dict[str, Any]) -> dict[str, Any]:
    (rule,) = [rule for rule in simulation["rules"] if rule["matched"]]
    (action,) = rule["actions"]
    return dict(action)


def _send(http: httpx.Client, event_type: str, external_id: str, **data: Any) -> dict[str, Any]:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": "sim-ada", "occurred_at": AT}
    event_id = ok(http.post("/events", json={**body, "data": data}), 202)["id"]
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while ok(http.get(f"/events/{event_id}"))["status"] == "received":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (execution,) = ok(http.get("/reward-executions", params={"event_id": event_id}))
    return dict(execution)


def _written(http: httpx.Client, shop: dict[str, str]) -> tuple[Any, ...]:
    """What a simulation must leave as it is: executions, the wallet's balance, the budget's consumption."""
    executions = ok(http.get("/reward-executions", params={"limit": 100}))
    balances = ok(http.get(f"/wallets/{shop['wallet_id']}/balances"))["balances"]
    consumption = ok(http.get(f"/reward-programs/{shop['program_id']}"))["budget_consumption"]
    return (executions, balances, consumption)


def test_caps_are_read_for_the_named_customer_and_what_they_cut_is_what_the_worker_cuts(
    http: httpx.Client, shop: dict[str, str]
) -> None:
    order = {"type": "sim.order", "amount": 200}
    anonymous = _action(_simulate(http, shop, order))
    assert (anonymous["amount"], anonymous.get("limited")) == ("20.00", None)
    assert anonymous["limit_reason"].startswith("caps and budget not read: give customer_id")
    fresh = _action(_simulate(http, shop, order, customer_id="sim-ada"))
    assert (fresh["amount"], fresh.get("requested_amount"), fresh.get("limited")) == ("20.00", None, None)
    assert fresh["limit_reason"] == (
        "within its caps: the rule's day cap of 2 rewards: 0 given since 2026-03-10; "
        "the programme's month cap of 25.00: 25.00 left since 2026-03-01; "
        "the programme's day budget of 1000.00: 1000.00 left since 2026-03-10"
    )
    assert _send(http, "sim.order", "sim-o1", amount=200)["amount"] == "20.00"
    second = _simulate(http, shop, {"type": "sim.order", "amount": 100}, customer_id="sim-ada")
    cut = _action(second)
    assert (cut["amount"], cut["requested_amount"], cut["issues"]) == ("5.00", "10.00", True)
    assert cut["limited"] == {
        "scope": "programme",
        "period": "month",
        "period_start": "2026-03-01",
        "max_amount": "25.00",
        "max_count": None,
        "cut": "5.00",
    }
    assert cut["limit_reason"].startswith("cut from 10.00 to 5.00 by the programme's month cap: ")
    assert second["totals"] == [{"asset_id": shop["asset_id"], "amount": "5.00"}]
    before = _written(http, shop)
    assert _simulate(http, shop, {"type": "sim.order", "amount": 100}, customer_id="sim-ada") == second
    assert _written(http, shop) == before  # nothing counted, nothing issued
    executed = _send(http, "sim.order", "sim-o2", amount=100)
    assert (executed["amount"], executed["requested_amount"], executed["limited"]) == ("5.00", "10.00", cut["limited"])
    third = _action(_simulate(http, shop, {"type": "sim.order", "amount": 1}, customer_id="sim-ada"))
    assert (third["amount"], third["issues"], third["limited"]["max_count"]) == ("0.00", False, 2)
    assert third["limit_reason"].startswith("skipped: the rule's day cap of 2 rewards is reached")
    assert _send(http, "sim.order", "sim-o3", amount=1)["status"] == "limited"


def test_a_reverse_action_says_what_it_would_take_back_and_the_worker_takes_that(
    http: httpx.Client, shop: dict[str, str]
) -> None:
    redeem = {"wallet_id": shop["wallet_id"], "amount": "22.00", "reference": "spent"}
    spend = http.post(f"/assets/{shop['asset_id']}/redemptions", json=redeem, headers={"Idempotency-Key": "sim"})
    ok(spend, 201)  # 25.00 issued, 3.00 left
    refund = {"type": "sim.refund", "order_id": "sim-o1", "refund": 100}
    before = _written(http, shop)
    simulated = _action(_simulate(http, shop, refund))
    assert _written(http, shop) == before
    reversal = simulated["reversal"]
    assert (reversal["original_external_event_id"], reversal["fraction"], reversal["clawback"]) == (
        "sim-o1",
        "0.5",
        "available",
    )
    (reward,) = reversal["rewards"]
    assert (reversal["target"], reward["amount"], reward["shortfall"], reward["transaction_id"]) == (
        "10.00",
        "3.00",
        "7.00",
        None,
    )
    assert simulated["reason"].endswith(
        "; it would take back 10.00 from 1 reward(s) of 'sim-o1', "
        "7.00 short (clawback available: the wallets hold less)"
    )
    done = _send(http, "sim.refund", "sim-r1", order_id="sim-o1", refund=100)["reversal"]
    assert {**done, "rewards": [{**r, "transaction_id": None} for r in done["rewards"]]} == reversal
    # the cancellation would take what remains (10.00) from an empty wallet; the rule's simulation says so too
    rule = ok(
        http.post(
            f"/reward-rules/{shop['cancel']}/simulate",
            json={"event": {"type": "sim.cancel", "order_id": "sim-o1"}, "occurred_at": AT},
        )
    )
    whole = _action(rule)["reversal"]
    assert (whole["fraction"], whole["target"], whole["shortfall"]) == (None, "10.00", "10.00")


def test_reverse_actions_that_cannot_run_say_why_with_the_workers_codes(
    http: httpx.Client, shop: dict[str, str]
) -> None:
    unknown = _action(_simulate(http, shop, {"type": "sim.refund", "order_id": "sim-nope", "refund": 1}))
    assert (unknown["error_code"], unknown.get("reversal")) == ("original_not_found", None)
    assert "a refund waits up to 7 days for its original" in unknown["reason"]
    missing = _action(_simulate(http, shop, {"type": "sim.refund", "order_id": "sim-o1"}))
    assert missing["error_code"] == "fraction_invalid"  # the refund's field is missing: refused before any lookup
    nothing = _action(_simulate(http, shop, {"type": "sim.refund", "refund": 5}))
    assert nothing["error_code"] == "original_missing"
    # an original processed without a reward from this programme: nothing to take back
    other = {"type": "sim.other", "external_event_id": "sim-other", "customer_id": "sim-ada"}
    event_id = ok(http.post("/events", json=other), 202)["id"]
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while ok(http.get(f"/events/{event_id}"))["status"] == "received":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    empty = _action(_simulate(http, shop, {"type": "sim.cancel", "order_id": "sim-other"}))
    assert (empty["error_code"], empty["reversal"]["target"], empty["reversal"]["rewards"]) == (None, "0.00", [])
    assert "nothing of what event 'sim-other' received from this programme remains" in empty["reason"]
