"""Tiers over HTTP (issue 33, T2, T3): a programme created with tiers shows them, publishing freezes them into the
version, `tiers: null` removes the draft's (through the client too), a rule that multiplies is taken only in a
programme with tiers (refused without, the element named), and the server's event worker pays it at the
customer's tier."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest

from rewards_lab.client import RewardsClient
from tests.http_helpers import ok, settled
from tests.live_server import LiveServer, start_server

TIERS = {
    "metric": {"type": "count", "event_type": "order.completed"},
    "window": {"type": "calendar", "period": "year"},
    "downgrade": {"to": "one_level", "grace_days": 10},
    "levels": [{"code": "new", "name": "New"}, {"code": "regular", "name": "Regular", "entry": "3", "retain": "2"}],
}
ISSUE = {"type": "issue", "amount": {"fixed": "1"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("tiers") / "service.duckdb")
    yield live
    live.stop()


def test_tiers_round_trip_and_rules_that_use_them_need_them(http: httpx.Client, server: LiveServer) -> None:
    asset = ok(http.post("/assets", json={"name": "Tier", "symbol": "TIER", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    plain = ok(http.post("/reward-programs", json={"name": "P", "asset_id": asset["id"]}), 201)
    refused = http.post(
        "/reward-rules",
        json={"program_id": plain["id"], "event_type": "order.completed", "actions": [{**ISSUE, "multiply": "tier"}]},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"]["field"] == "actions[0].multiply"
    created = ok(http.post("/reward-programs", json={"name": "T", "asset_id": asset["id"], "tiers": TIERS}), 201)
    assert created["tiers"] == TIERS
    program_id = created["id"]
    body = {"program_id": program_id, "event_type": "order.completed", "actions": [ISSUE]}
    ok(http.post("/reward-rules", json=body), 201)
    published = ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    assert published["version"]["tiers"] == TIERS

    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        assert client.update_programme(program_id, name="Renamed").tiers is not None  # absent: kept
        assert client.update_programme(program_id, tiers=None).tiers is None  # null: removed
    assert ok(http.get(f"/reward-programs/{program_id}"))["tiers"] is None
    versions = ok(http.get(f"/reward-programs/{program_id}/versions"))
    assert [(v["number"], v["tiers"]) for v in versions] == [(1, TIERS), (None, None)]


def test_the_worker_pays_at_the_tier_before_each_event(http: httpx.Client) -> None:
    """A count metric (lifetime): the second order makes the customer `regular` (x2) after it; the third is paid
    x2, and the fourth also gets the regulars' bonus (a `customer.tier` condition)."""
    asset = ok(http.post("/assets", json={"name": "Cups", "symbol": "CUP", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    tiers = {
        "metric": {"type": "count", "event_type": "order.completed"},
        "window": {"type": "lifetime"},
        "levels": [
            {"code": "new", "name": "New"},
            {"code": "regular", "name": "Regular", "entry": "2", "multiplier": "2"},
        ],
    }
    body = {"name": "Cups", "asset_id": asset["id"], "tiers": tiers, "max_event_age_days": None}
    program_id = ok(http.post("/reward-programs", json=body), 201)["id"]
    regular = [{"field": "customer.tier", "operator": "eq", "value": "regular"}]
    for rule in (
        {"actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}]},
        {"conditions": regular, "actions": [{"type": "issue", "amount": {"fixed": "7"}}]},
    ):
        ok(http.post("/reward-rules", json={"program_id": program_id, "event_type": "order.completed", **rule}), 201)
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "cup-fan"}), 201)
    wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    ids = []
    for number, amount in enumerate([3, 4, 5]):
        event = {
            "type": "order.completed",
            "external_event_id": f"cup-{number}",
            "customer_id": "cup-fan",
            "occurred_at": f"2026-03-0{number + 1}T09:00:00Z",
            "data": {"amount": amount},
        }
        ids.append(ok(http.post("/events", json=event), 202)["id"])
    assert all(settled(http, event_id)["status"] == "processed" for event_id in ids)
    balances = ok(http.get(f"/wallets/{wallet['id']}/balances"))["balances"]
    assert sum(Decimal(b["balance"]) for b in balances) == 3 + 4 + 5 * 2 + 7
