"""Issue 14 over HTTP against a real `rewards-lab serve` on 127.0.0.1: failed events replayed after their cause is
fixed issue exactly once, sums past int64 are exact, an id-shaped external_id is refused, and the ledger
verifies afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.http_helpers import ok, refused, settled
from tests.live_server import LiveServer, start_server, stop_and_verify

BIG = 10**18 - 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("rewards") / "service.duckdb")
    yield live
    stop_and_verify(live)


def _balance(http: httpx.Client, wallet_id: str, asset_id: str) -> str:
    balances = ok(http.get(f"/wallets/{wallet_id}/balances"))["balances"]
    return next((b["balance"] for b in balances if b["asset_id"] == asset_id), "0")


def _setup(http: httpx.Client, symbol: str, decimals: int, amount: str, actions: int, event_type: str) -> str:
    asset = ok(
        http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": decimals}), 201
    )
    ok(http.post(f"/assets/{asset['id']}/activate"))
    programme = ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": event_type,
        "actions": [{"type": "issue", "amount": {"fixed": amount}}] * actions,
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return str(asset["id"])


def _post_event(http: httpx.Client, external_id: str, customer: str, event_type: str) -> str:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": customer, "data": {}}
    return str(ok(http.post("/events", json=body), 202)["id"])


def test_an_event_failed_on_a_paused_asset_issues_once_when_replayed_after_resume(http: httpx.Client) -> None:
    customer = ok(http.post("/customers", json={"external_id": "paused-user"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
    asset_id = _setup(http, "PAUSE", 2, "5.00", 1, "order.paused")
    ok(http.post(f"/assets/{asset_id}/pause"))
    event_id = _post_event(http, "p-1", "paused-user", "order.paused")
    failed = settled(http, event_id)
    assert failed["status"] == "failed" and failed["error"]["code"] == "asset_paused"
    assert _balance(http, wallet["id"], asset_id) == "0"

    still = ok(http.post(f"/events/{event_id}/replay"))  # the cause is not fixed yet: still failed, nothing issued
    assert still["status"] == "failed" and still["error"]["code"] == "asset_paused"
    assert _balance(http, wallet["id"], asset_id) == "0"
    ok(http.post(f"/assets/{asset_id}/resume"))
    replayed = ok(http.post(f"/events/{event_id}/replay"))
    assert replayed["status"] == "processed" and replayed["error"] is None
    assert _balance(http, wallet["id"], asset_id) == "5.00"
    refused(http.post(f"/events/{event_id}/replay"), 409, "event_not_replayable")
    executions = ok(http.get("/reward-executions", params={"event_id": event_id}))
    assert [(e["status"], e["amount"]) for e in executions] == [("issued", "5.00")]
    assert _balance(http, wallet["id"], asset_id) == "5.00"


def test_an_event_of_a_walletless_customer_issues_once_when_replayed_after_the_wallet_exists(
    http: httpx.Client,
) -> None:
    customer = ok(http.post("/customers", json={"external_id": "late-wallet"}), 201)
    asset_id = _setup(http, "LATE", 2, "1.50", 2, "order.late")
    event_id = _post_event(http, "l-1", "late-wallet", "order.late")
    failed = settled(http, event_id)
    assert failed["status"] == "failed" and failed["error"]["code"] == "wallet_not_found"
    wallet = ok(http.post("/wallets", json={"customer_id": "late-wallet", "type": "customer"}), 201)
    assert wallet["customer_id"] == customer["id"]
    assert ok(http.post(f"/events/{event_id}/replay"))["status"] == "processed"
    refused(http.post(f"/events/{event_id}/replay"), 409, "event_not_replayable")
    assert _balance(http, wallet["id"], asset_id) == "3.00"
    executions = ok(http.get("/reward-executions", params={"customer_id": "late-wallet"}))
    assert sorted((e["action_index"], e["status"]) for e in executions) == [(0, "issued"), (1, "issued")]


def test_rewards_summing_past_int64_are_issued_exactly(http: httpx.Client) -> None:
    customer = ok(http.post("/customers", json={"external_id": "whale"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
    asset_id = _setup(http, "HUGE", 0, str(BIG), 10, "jackpot.won")
    ids = [_post_event(http, f"j-{index}", "whale", "jackpot.won") for index in range(3)]
    for event_id in ids:
        event = settled(http, event_id)
        assert event["status"] == "processed" and event["error"] is None, event
    assert _balance(http, wallet["id"], asset_id) == str(30 * BIG)
    asset = ok(http.get(f"/assets/{asset_id}"))
    assert asset["issued"] == str(30 * BIG)


def test_an_external_id_shaped_like_a_customer_id_is_refused_and_ids_keep_naming_their_customer(
    http: httpx.Client,
) -> None:
    victim = ok(http.post("/customers", json={"external_id": "victim"}), 201)
    error = refused(http.post("/customers", json={"external_id": victim["id"]}), 422, "field_invalid")
    assert error["details"]["field"] == "external_id"
    assert ok(http.get(f"/customers/{victim['id']}"))["external_id"] == "victim"
    listed = ok(http.get("/customers", params={"external_id": victim["id"]}))
    assert listed == []
