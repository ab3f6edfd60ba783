"""Reversals (issue 18) through a real `rewards-lab serve` on 127.0.0.1: a refund rule posted over /v1, partial
and early refunds, the execution and ledger resources that show them, and the signed `reward.reversed` webhook
received by a real receiver."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, verify
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.webhook_receiver import Receiver, ok

POLL_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")  # the receiver listens on 127.0.0.1
        live = start_server(tmp_path_factory.mktemp("reversals") / "service.duckdb")
    yield live
    stop_and_verify(live)


def _until(http: httpx.Client, event_id: str, done: Any) -> dict[str, Any]:
    """The event once `done(event)` holds (bounded wait: the worker runs beside the request)."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        event: dict[str, Any] = ok(http.get(f"/events/{event_id}"))
        if done(event):
            return event
        assert time.monotonic() < deadline, event
        time.sleep(0.05)


def _send(http: httpx.Client, event_type: str, external_id: str, **data: Any) -> str:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": "refunder", "data": data}
    return str(ok(http.post("/events", json=body), 202)["id"])


def _processed(event: dict[str, Any]) -> bool:
    return event["status"] != "received"


def _shop(http: httpx.Client) -> dict[str, str]:
    asset = ok(http.post("/assets", json={"name": "Points", "symbol": "RPT", "type": "points", "decimals": 2}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    programme = ok(http.post("/reward-programs", json={"name": "Refunds", "asset_id": asset["id"]}), 201)
    earn = {
        "program_id": programme["id"],
        "event_type": "shop.order",
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "0.1"}}],
    }
    ok(http.post("/reward-rules", json=earn), 201)
    reverse = {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}}
    refund = ok(
        http.post(
            "/reward-rules", json={"program_id": programme["id"], "event_type": "shop.refund", "actions": [reverse]}
        ),
        201,
    )
    assert refund["actions"] == [reverse]
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "refunder"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return {"asset_id": asset["id"], "program_id": programme["id"], "wallet_id": wallet["id"]}


def _balance(http: httpx.Client, wallet_id: str, asset_id: str) -> str:
    balances = ok(http.get(f"/wallets/{wallet_id}/balances"))["balances"]
    return next((b["balance"] for b in balances if b["asset_id"] == asset_id), "0.00")


def test_refunds_over_http_take_back_their_share_and_are_delivered_signed(http: httpx.Client) -> None:
    shop = _shop(http)
    receiver = Receiver()
    try:
        hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["reward.reversed"]}), 201)
        # A refund that arrives before its order waits for it, visibly (still received).
        early = _send(http, "shop.refund", "ref-1", order_id="ord-1", refund=50)
        waiting = _until(http, early, lambda event: event.get("waiting_for") is not None)
        assert (waiting["status"], waiting["waiting_for"]) == ("received", "ord-1")
        _until(http, _send(http, "shop.order", "ord-1", amount=200), _processed)
        assert _until(http, early, _processed)["status"] == "processed"
        assert _balance(http, shop["wallet_id"], shop["asset_id"]) == "15.00"  # 20.00 issued, a quarter back
        second = _until(http, _send(http, "shop.refund", "ref-2", order_id="ord-1", refund=500), _processed)
        (execution,) = ok(http.get("/reward-executions", params={"event_id": second["id"]}))
        assert (execution["status"], execution["amount"]) == ("reversed", "15.00")  # only what remained
        reversal = execution["reversal"]
        expected = ("ord-1", "1", "15.00", "0.00")
        assert (
            reversal["original_external_event_id"],
            reversal["fraction"],
            reversal["target"],
            reversal["shortfall"],
        ) == expected
        transaction = ok(http.get(f"/transactions/{reversal['rewards'][0]['transaction_id']}"))
        assert (transaction["kind"], transaction["amount"]) == ("reversal", "15.00")
        assert transaction["wallet_id"] == shop["wallet_id"]
        assert _balance(http, shop["wallet_id"], shop["asset_id"]) == "0.00"
        got = receiver.wait_for(lambda seen: len(seen) >= 2)
        for delivery in got:
            assert delivery.headers["X-Rewards-Event"] == "reward.reversed"
            assert verify(delivery.raw, delivery.headers[SIGNATURE_HEADER], hook["signing_secret"])
        assert sorted(d.body["data"]["reversal"]["target"] for d in got) == ["15.00", "5.00"]
    finally:
        receiver.close()
