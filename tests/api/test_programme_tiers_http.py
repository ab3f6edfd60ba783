"""Tiers over HTTP (issue 33, T2): a programme created with tiers shows them, publishing freezes them into the
version, `tiers: null` removes the draft's (through the client too), and a rule that multiplies is refused with
the element named, as the engine does not apply tiers yet."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rewards_lab.client import RewardsClient
from tests.http_helpers import ok
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


def test_tiers_round_trip_and_rules_that_use_them_are_refused(http: httpx.Client, server: LiveServer) -> None:
    asset = ok(http.post("/assets", json={"name": "Tier", "symbol": "TIER", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    created = ok(http.post("/reward-programs", json={"name": "T", "asset_id": asset["id"], "tiers": TIERS}), 201)
    assert created["tiers"] == TIERS
    program_id = created["id"]
    refused = http.post(
        "/reward-rules",
        json={"program_id": program_id, "event_type": "order.completed", "actions": [{**ISSUE, "multiply": "tier"}]},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"]["field"] == "actions[0].multiply"
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
