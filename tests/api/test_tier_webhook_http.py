"""`tier.changed` through a real `rewards-lab serve` on 127.0.0.1 (issue 33, T4): the event worker upgrades a
customer, the tier worker (`--tier-interval-s`) downgrades them at a review already past, and a real receiver gets
both, signed like every kind."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, verify
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.webhook_receiver import Receiver, ok


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")  # the receiver listens on 127.0.0.1
        live = start_server(
            tmp_path_factory.mktemp("tiers") / "service.duckdb", serve_args=("--tier-interval-s", "0.2")
        )
    yield live
    stop_and_verify(live)


def test_tier_changes_are_announced_signed_up_and_down(http: httpx.Client) -> None:
    asset = ok(http.post("/assets", json={"name": "Stars", "symbol": "STR", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    tiers = {
        "metric": {"type": "points"},
        "window": {"type": "calendar", "period": "month"},
        "levels": [{"code": "member", "name": "Member"}, {"code": "gold", "name": "Gold", "entry": "100"}],
    }
    body = {"name": "Monthly", "asset_id": asset["id"], "tiers": tiers, "max_event_age_days": None}
    programme = ok(http.post("/reward-programs", json=body), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": "order",
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "shopper"}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    receiver = Receiver()
    try:
        hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["tier.changed"]}), 201)
        # 70 days ago: gold at once, first reviewed at the end of the month after (at most 62 days on): past now
        occurred = datetime.now(UTC) - timedelta(days=70)
        event = {"type": "order", "external_event_id": "big", "customer_id": "shopper", "data": {"amount": 150}}
        ok(http.post("/events", json={**event, "occurred_at": occurred.isoformat()}), 202)
        up, down = receiver.wait_for(lambda seen: len(seen) >= 2)
        for delivery in (up, down):
            assert delivery.headers["X-Rewards-Event"] == "tier.changed"
            assert verify(delivery.raw, delivery.headers[SIGNATURE_HEADER], hook["signing_secret"])
            assert delivery.body["kind"] == "tier.changed"
        first, second = up.body["data"], down.body["data"]
        assert (first["from"], first["to"], first["direction"], first["kind"]) == ("member", "gold", "up", "upgraded")
        assert (second["from"], second["to"], second["direction"], second["kind"]) == (
            "gold",
            "member",
            "down",
            "downgraded",
        )
        for data in (first, second):
            assert (data["customer_id"], data["program_id"], data["program_version"]) == (
                customer["id"],
                programme["id"],
                1,
            )
        assert first["event_id"] is not None and first["metric"] == "150"
        assert second["event_id"] is None and second["metric"] == "0" and second["review_at"] is None
        assert second["at"] > first["at"] and second["at"].endswith("T00:00:00Z")
    finally:
        receiver.close()
