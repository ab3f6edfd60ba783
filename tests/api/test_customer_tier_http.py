"""A customer's tier and tier history over HTTP (issue 33, T5), on a real server: orders processed by the server's
worker upgrade a customer; `GET /customers/{id}/tier` shows the level, the progress and what the next level and
keeping this one need; the history lists the upgrades, paged; other tenants, callers without `customers.view`,
programmes without tiers and bad cursors are refused in the envelope."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from rewards_lab.client import RewardsClient
from tests.http_helpers import live_client, ok, refused, settled
from tests.live_server import LiveServer, two_tenant_server

TIERS = {
    "metric": {"type": "points"},
    "window": {"type": "rolling", "days": 365},
    "levels": [
        {"code": "member", "name": "Member"},
        {"code": "silver", "name": "Silver", "entry": "500", "retain": "400", "multiplier": "1.25"},
        {"code": "gold", "name": "Gold", "entry": "2000", "retain": "1500", "multiplier": "1.5"},
    ],
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    yield from two_tenant_server(tmp_path_factory.mktemp("customer-tier") / "service.duckdb")


@pytest.fixture(scope="module")
def http(servers: tuple[LiveServer, dict[str, Any]]) -> Iterator[httpx.Client]:
    with live_client(servers[0]) as client:
        yield client


@pytest.fixture(scope="module")
def world(http: httpx.Client) -> dict[str, Any]:
    """A points programme (rolling 365 days) whose orders earn 1 a unit, multiplied by tier; ana's orders of 480,
    40 (silver after it), 100 (x1.25) and 1,300 (x1.25: gold after it), a few days ago."""
    asset = ok(http.post("/assets", json={"name": "Beans", "symbol": "BEAN", "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    body = {"name": "Beans", "asset_id": asset["id"], "tiers": TIERS, "max_event_age_days": None}
    program_id = ok(http.post("/reward-programs", json=body), 201)["id"]
    action = {"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}
    rule = {"program_id": program_id, "event_type": "order.completed", "actions": [action]}
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    customer = ok(http.post("/customers", json={"external_id": "ana"}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    events = []
    for number, amount in enumerate([480, 40, 100, 1300]):
        event = {
            "type": "order.completed",
            "external_event_id": f"ana-{number}",
            "customer_id": "ana",
            "occurred_at": (start + timedelta(hours=number)).isoformat().replace("+00:00", "Z"),
            "data": {"amount": amount},
        }
        event_id = ok(http.post("/events", json=event), 202)["id"]
        assert settled(http, event_id)["status"] == "processed"  # one at a time: each sees the tier before it
        events.append(event_id)
    return {"program_id": program_id, "customer": customer, "events": events, "start": start, "asset": asset}


def _published(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """A programme with one rule (on another event type), published."""
    programme: dict[str, Any] = ok(http.post("/reward-programs", json=body), 201)
    action = {"type": "issue", "amount": {"fixed": "1"}}
    rule = {"program_id": programme["id"], "event_type": "visit", "actions": [action]}
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return programme


def test_the_tier_shows_the_level_progress_and_what_is_needed(http: httpx.Client, world: dict[str, Any]) -> None:
    program_id, customer = world["program_id"], world["customer"]
    # 480 + 40 at member, 100 x 1.25 = 125 at silver, 1,300 x 1.25 = 1,625 at silver: 2,270, gold after it.
    tier = ok(http.get(f"/customers/{customer['id']}/tier", params={"program_id": program_id}))
    assert tier["customer_id"] == customer["id"] and tier["program_id"] == program_id
    assert tier["program_version"] == 1
    assert tier["tier"] == {"code": "gold", "name": "Gold", "rank": 3, "multiplier": "1.5"}
    assert tier["metric"] == "points" and tier["progress"] == "2270"
    assert tier["next"] is None  # the top level
    upgraded_at = world["start"] + timedelta(hours=3)
    assert tier["since"] == upgraded_at.isoformat().replace("+00:00", "Z")
    assert tier["enrolled_at"] == world["start"].isoformat().replace("+00:00", "Z")
    today = datetime.now(UTC).date()
    assert tier["window"] == {"start": str(today - timedelta(days=364)), "end": str(today)}
    # Held one full cycle: reviewed 365 days after the upgrade's day, judging the 365 days before the review.
    review_day = upgraded_at.date() + timedelta(days=365)
    assert tier["review_at"] == f"{review_day}T00:00:00Z"
    assert tier["keep"] == {
        "retain": "1500",
        "needed": "0",
        "window": {"start": str(review_day - timedelta(days=365)), "end": str(review_day - timedelta(days=1))},
    }
    assert tier["grace_until"] is None and tier["grace_target"] is None
    # The only tiered programme: program_id may be left out; the customer may be named by external id.
    assert ok(http.get("/customers/ana/tier")) == tier


def test_simulation_reads_the_tier_and_multiplies(http: httpx.Client, world: dict[str, Any]) -> None:
    """ana is gold (x1.5): an order of 100 would issue 150; as silver (named), 125; the block says the effect."""
    path = f"/reward-programs/{world['program_id']}/simulate"
    event = {"type": "order.completed", "amount": 100}
    simulated = ok(http.post(path, params={"version": "live"}, json={"event": event, "customer_id": "ana"}))
    assert [a["amount"] for a in simulated["rules"][0]["actions"]] == ["150"]
    assert simulated["tier"] == {
        "code": "gold",
        "rank": 3,
        "progress": "2270",
        "multiplier": "1.5",
        "contributes": "150",
        "after": {"progress": "2420", "tier": "gold"},
    }
    named = ok(http.post(path, params={"version": "live"}, json={"event": event, "tier": "silver"}))
    assert [a["amount"] for a in named["rules"][0]["actions"]] == ["125"]
    assert named["tier"]["after"] == {"progress": "625", "tier": "silver"}
    error = refused(http.post(path, json={"event": event, "tier": "Gold!"}), 422, "field_invalid")
    assert error["details"]["field"] == "tier"


def test_the_client_reads_the_tier_and_pages_the_history(
    servers: tuple[LiveServer, dict[str, Any]], world: dict[str, Any]
) -> None:
    live = servers[0]
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as client:
        status = client.customer_tier("ana", program_id=world["program_id"])
        assert (status.tier.code, status.progress, status.next) == ("gold", "2270", None)
        changes = list(client.iter_customer_tier_history("ana", program_id=world["program_id"], limit=1))
        assert [(c.from_tier, c.to_tier) for c in changes] == [("member", "silver"), ("silver", "gold")]


def test_a_customer_the_programme_has_not_met_is_at_the_base(http: httpx.Client, world: dict[str, Any]) -> None:
    ok(http.post("/customers", json={"external_id": "ben"}), 201)
    tier = ok(http.get("/customers/ben/tier", params={"program_id": world["program_id"]}))
    assert tier["tier"] == {"code": "member", "name": "Member", "rank": 1, "multiplier": "1"}
    assert tier["progress"] == "0"
    assert tier["next"] == {"code": "silver", "name": "Silver", "entry": "500", "needed": "500"}
    assert tier["keep"] is None and tier["since"] is None and tier["enrolled_at"] is None and tier["review_at"] is None


def test_the_history_lists_the_upgrades_paged(http: httpx.Client, world: dict[str, Any]) -> None:
    customer, events = world["customer"], world["events"]
    path = f"/customers/{customer['id']}/tier/history"
    first = http.get(path, params={"limit": 1}).json()
    assert first["has_more"] is True and first["next_cursor"]
    second = http.get(path, params={"limit": 1, "cursor": first["next_cursor"]}).json()
    changes = first["data"] + second["data"]
    assert second["has_more"] is False
    assert [(c["kind"], c["from_tier"], c["to_tier"], c["event_id"]) for c in changes] == [
        ("upgraded", "member", "silver", events[1]),
        ("upgraded", "silver", "gold", events[3]),
    ]
    assert [c["metric"] for c in changes] == ["520", "2270"]
    assert all(c["program_id"] == world["program_id"] and c["program_version"] == 1 for c in changes)
    newest = ok(http.get(path, params={"direction": "desc", "program_id": world["program_id"]}))
    assert [c["id"] for c in newest] == [c["id"] for c in reversed(changes)]
    other = ok(http.post("/reward-programs", json={"name": "Other", "asset_id": world["asset"]["id"]}), 201)
    assert ok(http.get(path, params={"program_id": other["id"]})) == []
    error = refused(http.get(path, params={"cursor": "not-a-cursor"}), 422, "cursor_invalid", exact_fields=True)
    assert error["details"]["field"] == "cursor"
    # A cursor of the ascending list is not one of the descending list.
    error = refused(http.get(path, params={"cursor": first["next_cursor"], "direction": "desc"}), 422, "cursor_invalid")
    assert error["details"]["field"] == "cursor"


def test_refusals(servers: tuple[LiveServer, dict[str, Any]], http: httpx.Client, world: dict[str, Any]) -> None:
    live, other = servers
    customer = world["customer"]
    refused(http.get("/customers/nobody/tier"), 404, "customer_not_found", exact_fields=True)
    refused(http.get("/customers/nobody/tier/history"), 404, "customer_not_found", exact_fields=True)
    error = refused(http.get("/customers/ana/tier", params={"program_id": "prg_missing"}), 404, "programme_not_found")
    assert error["details"]["field"] == "program_id"
    plain = _published(http, {"name": "Plain", "asset_id": world["asset"]["id"]})
    error = refused(
        http.get("/customers/ana/tier", params={"program_id": plain["id"]}), 404, "tiers_not_defined", exact_fields=True
    )
    assert error["details"]["field"] == "program_id"

    # Another tenant does not see the customer.
    other_headers = {
        "Authorization": f"Bearer {other['api_keys']['sandbox']}",
        "X-Organization-ID": str(other["organization_id"]),
        "X-Environment": "sandbox",
    }
    with httpx.Client(base_url=live.base_url, headers=other_headers, timeout=10) as stranger:
        refused(stranger.get(f"/customers/{customer['id']}/tier"), 404, "customer_not_found")
        refused(stranger.get(f"/customers/{customer['id']}/tier/history"), 404, "customer_not_found")

    # A key without customers.view is refused.
    key = ok(http.post("/developer/api-keys", json={"name": "events", "permissions": ["events.view"]}), 201)
    with httpx.Client(
        base_url=live.base_url, headers={**live.headers(), "Authorization": f"Bearer {key['secret']}"}, timeout=10
    ) as limited:
        refused(limited.get(f"/customers/{customer['id']}/tier"), 403, "permission_denied")
        refused(limited.get(f"/customers/{customer['id']}/tier/history"), 403, "permission_denied")


def test_several_tiered_programmes_need_program_id(http: httpx.Client, world: dict[str, Any]) -> None:
    second = _published(http, {"name": "Second", "asset_id": world["asset"]["id"], "tiers": TIERS})
    error = refused(http.get("/customers/ana/tier"), 422, "field_required")
    assert error["details"]["field"] == "program_id"
    assert ok(http.get("/customers/ana/tier", params={"program_id": world["program_id"]}))["tier"]["code"] == "gold"
    assert ok(http.get("/customers/ana/tier", params={"program_id": second["id"]}))["tier"]["code"] == "member"
