"""Expiry (issue 19) through a real `rewards-lab serve` on 127.0.0.1: a programme whose rewards expire, the expiry
worker running beside the event worker, `GET /wallets/{id}/lots`, `next_expiry` on balances, the asset's expired
total, and the signed `points.expired` webhook received by a real receiver."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, verify
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.webhook_receiver import Receiver, ok

POLL_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")  # the receiver listens on 127.0.0.1
        live = start_server(
            tmp_path_factory.mktemp("expiry") / "service.duckdb", serve_args=("--expiry-interval-s", "0.2")
        )
    yield live
    stop_and_verify(live)


def _until(read: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(0.05)


def test_rewards_expire_on_time_and_are_announced_signed(http: httpx.Client) -> None:
    asset = ok(http.post("/assets", json={"name": "Miles", "symbol": "MIL", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    assert asset["expiry"] is None and asset["expired"] == "0"
    body = {"name": "Miles", "asset_id": asset["id"], "expiry": {"after_days": 1}}
    programme = ok(http.post("/reward-programs", json=body), 201)
    assert programme["expiry"] == {"after_days": 1}
    rule = {
        "program_id": programme["id"],
        "event_type": "trip",
        "actions": [{"type": "issue", "amount": {"fixed": "7"}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "traveller"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    receiver = Receiver()
    try:
        hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["points.expired"]}), 201)
        now = datetime.now(UTC)
        for name, occurred in (("old-trip", now - timedelta(days=2)), ("new-trip", now)):
            event = {"type": "trip", "external_event_id": name, "customer_id": "traveller", "data": {}}
            ok(http.post("/events", json={**event, "occurred_at": occurred.isoformat()}), 202)
        lots_of = f"/wallets/{wallet['id']}/lots"
        expired = _until(lambda: ok(http.get(lots_of, params={"status": "expired"})), lambda d: len(d) == 1)
        assert (expired[0]["amount"], expired[0]["remaining"], expired[0]["expired"]) == ("7", "0", "7")
        (open_lot,) = _until(lambda: ok(http.get(lots_of, params={"status": "open"})), lambda d: len(d) == 1)
        assert open_lot["remaining"] == "7" and open_lot["expires_at"] is not None
        (balance,) = ok(http.get(f"/wallets/{wallet['id']}/balances"))["balances"]
        assert balance["balance"] == "7"
        assert balance["next_expiry"] == {"at": open_lot["expires_at"], "amount": "7"}
        shown = ok(http.get(f"/assets/{asset['id']}"))
        assert (shown["issued"], shown["expired"], shown["outstanding_supply"]) == ("14", "7", "7")
        transaction = ok(http.get(f"/transactions/{expired[0]['expired_transaction_id']}"))
        assert (transaction["kind"], transaction["amount"], transaction["wallet_id"]) == ("expire", "7", wallet["id"])
        (delivery,) = receiver.wait_for(lambda seen: len(seen) >= 1)
        assert delivery.headers["X-Rewards-Event"] == "points.expired"
        assert verify(delivery.raw, delivery.headers[SIGNATURE_HEADER], hook["signing_secret"])
        data = delivery.body["data"]
        assert (data["wallet_id"], data["customer_id"], data["amount"]) == (wallet["id"], customer["id"], "7")
        assert [lot["lot_id"] for lot in data["lots"]] == [expired[0]["id"]]
    finally:
        receiver.close()


def test_lots_are_refused_for_an_unknown_wallet_and_a_bad_status(http: httpx.Client) -> None:
    missing = http.get("/wallets/wal_0000000000000000000000000000000/lots")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "wallet_not_found"
    customer = ok(http.post("/customers", json={"external_id": "lister"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    bad = http.get(f"/wallets/{wallet['id']}/lots", params={"status": "gone"})
    error = bad.json()["error"]
    assert (bad.status_code, error["code"], error["details"]["field"]) == (422, "field_invalid", "status"), error
    assert ok(http.get(f"/wallets/{wallet['id']}/lots")) == []


def test_the_client_creates_expiring_assets_and_programmes_and_pages_lots(server: LiveServer) -> None:
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        asset = client.create_asset("Stamps", "STMP", "stamps", 0, expiry={"at_end_of": "year"}, value_per_unit="0.01")
        assert asset.expiry is not None and asset.expiry.model_dump() == {"at_end_of": "year", "after": 0}
        assert asset.value_per_unit == "0.01"
        client.activate_asset(asset.id)
        programme = client.create_programme("Stamps", asset.id, expiry={"after_days": 90})
        assert programme.expiry is not None and programme.expiry.model_dump() == {"after_days": 90}
        cleared = client.update_programme(programme.id, expiry=None)
        assert cleared.expiry is None
        customer = client.create_customer("collector")
        wallet = client.create_wallet(customer.id)
        for amount in ("1", "2", "3"):
            client.issue(asset.id, wallet.id, amount, "stamp")
        client.redeem(asset.id, wallet.id, "2", "a free coffee")
        seen = [(lot.amount, lot.remaining, lot.status) for lot in client.iter_wallet_lots(wallet.id, limit=2)]
        assert seen == [("1", "0", "spent"), ("2", "1", "open"), ("3", "3", "open")]
        assert [lot.amount for lot in client.list_wallet_lots(wallet.id, status="spent").data] == ["1"]
