"""The forecast gate over HTTP (issue 31): a real server on 127.0.0.1 refuses a draft that breaks its guard on
the tenant's stored events, shows the same table on /forecast, and lets only a key holding
rewards.guards.override publish past it (audited) or loosen the guards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, start_server, stop_and_verify

AT_MOST_ONE_A_DAY = [{"metric": "issued", "period": "day", "max": "1"}]
PUBLISHER = ["rewards.view", "rewards.edit", "rewards.activate"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("server-gate") / "gate.duckdb", "Gate")
    yield server
    stop_and_verify(server)


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=120) as client:
        yield client


def _ok(response: httpx.Response, status: int = 200) -> Any:
    body = response.json()
    assert response.status_code == status, body
    return body["data"]


def _refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    body = response.json()
    assert (response.status_code, body["error"]["code"]) == (status, code), body
    error: dict[str, Any] = body["error"]
    return error


def _key(live: LiveServer, http: httpx.Client, name: str, permissions: list[str]) -> tuple[str, dict[str, str]]:
    key = _ok(http.post("/developer/api-keys", json={"name": name, "permissions": permissions}), 201)
    return str(key["id"]), {**live.headers(), "Authorization": f"Bearer {key['secret']}"}


def _programme(http: httpx.Client, symbol: str, amount: str, guards: list[dict[str, Any]]) -> str:
    asset = _ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 2}), 201)
    _ok(http.post(f"/assets/{asset['id']}/activate"))
    body = {"name": f"gated {symbol}", "asset_id": asset["id"], "guards": guards}
    programme = _ok(http.post("/reward-programs", json=body), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": f"order.{symbol.lower()}",
        "actions": [{"type": "issue", "amount": {"fixed": amount}}],
    }
    _ok(http.post("/reward-rules", json=rule), 201)
    return str(programme["id"])


def _events(http: httpx.Client, symbol: str, count: int) -> None:
    for n in range(count):
        event = {"type": f"order.{symbol.lower()}", "external_event_id": f"{symbol}-{n}", "customer_id": f"{symbol}-c"}
        assert http.post("/events", json=event).status_code in (200, 201, 202)


def test_a_draft_that_breaks_its_guard_is_refused_for_every_client_and_published_only_with_the_permission(
    live: LiveServer, http: httpx.Client
) -> None:
    program_id = _programme(http, "GA", "1000", AT_MOST_ONE_A_DAY)  # 1000 per event, at most 1 a day
    _events(http, "GA", 2)
    publish, forecast = f"/reward-programs/{program_id}/publish", f"/reward-programs/{program_id}/forecast"
    key_id, publisher = _key(live, http, "publisher", PUBLISHER)

    error = _refused(http.post(publish, headers=publisher), 409, "forecast_guard_failed")
    (check,) = error["details"]["checks"]
    assert {k: check[k] for k in ("metric", "limit", "draft", "published", "checked", "passed")} == {
        "metric": "issued per day",
        "limit": "<= 1",
        "draft": "2000.00",
        "published": None,
        "checked": "2000.00",
        "passed": False,
    }
    assert error["details"]["events"] == 2 and error["details"]["window_days"] == 90
    table = _ok(http.post(forecast, headers=publisher))  # the same table, without publishing: 200
    assert table["passed"] is False and table["checks"] == error["details"]["checks"]
    assert _ok(http.get(f"/reward-programs/{program_id}"))["current_version"] is None

    # an override by a key that may publish but not override: 403, nothing published
    body = {"guard_override": {"reason": "a launch week, approved by finance"}}
    denied = _refused(http.post(publish, json=body, headers=publisher), 403, "permission_denied")
    assert denied["details"]["permission"] == "rewards.guards.override"
    # removing the guards first is no way around it
    patch = f"/reward-programs/{program_id}"
    _refused(http.patch(patch, json={"guards": None}, headers=publisher), 403, "permission_denied")
    _refused(http.patch(patch, json={"guard_window_days": 1}, headers=publisher), 403, "permission_denied")
    assert _ok(http.get(patch))["guards"] == AT_MOST_ONE_A_DAY

    overrider_id, overrider = _key(live, http, "overrider", [*PUBLISHER, "rewards.guards.override"])
    published = _ok(http.post(publish, json=body, headers=overrider), 201)["version"]
    assert published["number"] == 1 and published["guard_override"]["given_by"] == overrider_id
    audited = _ok(http.get("/developer/audit", params={"kind": "guard_overridden"}))
    assert [(e["actor_id"], e["subject_id"], e["reason"]) for e in audited] == [
        (overrider_id, published["id"], "a launch week, approved by finance")
    ]
    assert key_id != overrider_id
    # the key with the permission may loosen the guards
    loosened = _ok(
        http.patch(patch, json={"guards": [{"metric": "issued", "period": "day", "max": "5000"}]}, headers=overrider)
    )
    assert loosened["guards"][0]["max"] == "5000"
    # now within its guard: the plain publisher publishes, compared with the live version
    assert _ok(http.post(forecast, headers=publisher))["checks"][0]["published"] == "2000.00"
    assert _ok(http.post(publish, headers=publisher), 201)["version"]["number"] == 2


def test_a_passing_draft_and_a_programme_without_guards_publish_as_before(live: LiveServer, http: httpx.Client) -> None:
    _, publisher = _key(live, http, "plain publisher", PUBLISHER)
    within = _programme(http, "GB", "0.50", AT_MOST_ONE_A_DAY)
    _events(http, "GB", 2)  # 1.00 in a day
    assert _ok(http.post(f"/reward-programs/{within}/publish", headers=publisher), 201)["version"]["number"] == 1
    unguarded = _programme(http, "GC", "1000", [])
    _events(http, "GC", 3)
    published = _ok(http.post(f"/reward-programs/{unguarded}/publish", json={}, headers=publisher), 201)
    assert published["version"]["number"] == 1 and published["version"]["guards"] == []
    assert published["version"]["guard_window_days"] == 90
    table = _ok(http.post(f"/reward-programs/{unguarded}/forecast", headers=publisher))
    assert table["checks"] == [] and table["passed"] is True and table["events"] == 3  # only its own types


def test_another_tenants_events_never_enter_the_forecast(live: LiveServer, http: httpx.Client) -> None:
    program_id = _programme(http, "GD", "1000", AT_MOST_ONE_A_DAY)
    production = httpx.Client(base_url=live.base_url, headers=live.headers("production"), timeout=30)
    with production:
        _events(production, "GD", 5)  # the same organization's other environment: another tenant's books
    table = _ok(http.post(f"/reward-programs/{program_id}/forecast"))
    assert (table["events"], table["passed"]) == (0, True)
    assert _ok(http.post(f"/reward-programs/{program_id}/publish"), 201)["version"]["number"] == 1


def test_the_forecast_needs_rewards_edit_and_a_window_out_of_range_is_refused(
    live: LiveServer, http: httpx.Client
) -> None:
    program_id = _programme(http, "GE", "1", AT_MOST_ONE_A_DAY)
    _, viewer = _key(live, http, "viewer", ["rewards.view"])
    _refused(http.post(f"/reward-programs/{program_id}/forecast", headers=viewer), 403, "permission_denied")
    for days in (0, 366, "30"):
        _refused(http.patch(f"/reward-programs/{program_id}", json={"guard_window_days": days}), 422, "field_invalid")
    assert (
        _ok(http.patch(f"/reward-programs/{program_id}", json={"guard_window_days": 365}))["guard_window_days"] == 365
    )
