"""How old and how far ahead an event may be (issue 27, item 4), against a real `rewards-lab serve` on 127.0.0.1:
an `occurred_at` in the future is refused at intake (one request, and many group-committed together); a
programme's `max_event_age_days` (default 30, explicit, null for backfills) keeps events backdated across
centuries from filling one cap per period, each processed without rewards and with `event_too_old` on its
executions and in simulation; the ledger is verified when the server stops."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.http_helpers import live_client, ok, settled
from tests.live_server import LiveServer, start_server, stop_and_verify

EVENT = "purchase.aged"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("event_age") / "service.duckdb")
    yield live
    stop_and_verify(live)


_counter = iter(range(1_000_000))


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{time.monotonic_ns()}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _now() -> datetime:
    return datetime.now(UTC)


def _asset(http: httpx.Client) -> dict[str, Any]:
    symbol = "AG" + str(next(_counter))
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return dict(asset)


def _programme(http: httpx.Client, asset: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """A published programme: 100 points per EVENT, at most 100 per customer and month, and these settings."""
    body = {"name": _unique("p"), "asset_id": asset["id"], "limits": [{"period": "month", "max_amount": "100"}]}
    programme = ok(http.post("/reward-programs", json={**body, **settings}), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": EVENT,
        "actions": [{"type": "issue", "amount": {"fixed": "100"}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return dict(ok(http.get(f"/reward-programs/{programme['id']}")))


def _customer(http: httpx.Client) -> str:
    external_id = _unique("customer")
    customer = ok(http.post("/customers", json={"external_id": external_id}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return external_id


def _event_body(customer: str, occurred_at: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": EVENT, "external_event_id": _unique("event"), "customer_id": customer}
    if occurred_at is not None:
        body["occurred_at"] = occurred_at
    return body


def _send(http: httpx.Client, customer: str, occurred_at: str | None) -> dict[str, Any]:
    return settled(http, ok(http.post("/events", json=_event_body(customer, occurred_at)), 202)["id"])


def _executions(http: httpx.Client, event: dict[str, Any], programme: dict[str, Any]) -> list[dict[str, Any]]:
    """The executions the event caused in this programme (every test's programmes reward EVENT)."""
    found = ok(http.get("/reward-executions", params={"event_id": event["id"], "limit": 100}))
    return [execution for execution in found if execution["program_id"] == programme["id"]]


def _balance(http: httpx.Client, customer: str, asset: dict[str, Any]) -> Decimal:
    found = ok(http.get("/customers", params={"external_id": customer}))
    wallets = ok(http.get("/wallets", params={"customer_id": found[0]["id"]}))
    balances = ok(http.get(f"/wallets/{wallets[0]['id']}/balances"))["balances"]
    return sum((Decimal(b["balance"]) for b in balances if b["asset_id"] == asset["id"]), Decimal(0))


def _this_month(now: datetime) -> list[datetime]:
    """Two times within the current UTC month, not in the future."""
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return [max(start, now - timedelta(days=1)), now - timedelta(seconds=1)]


# intake: the future is refused ----------------------------------------------------------------------------------
def test_an_occurred_at_in_the_future_is_refused_at_intake_naming_the_field(http: httpx.Client) -> None:
    customer = _customer(http)
    for ahead in (timedelta(minutes=6), timedelta(days=1), timedelta(days=365 * 100)):
        response = http.post("/events", json=_event_body(customer, _iso(_now() + ahead)))
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("field_invalid", "occurred_at"), error
        assert "future" in error["message"]
    assert http.post("/events", json=_event_body(customer, "9999-12-31T23:59:59Z")).status_code == 422
    # within the skew (a client clock a little ahead), now, and without occurred_at: accepted
    for occurred_at in (_iso(_now() + timedelta(minutes=2)), _iso(_now()), None):
        assert http.post("/events", json=_event_body(customer, occurred_at)).status_code == 202


def test_future_events_are_refused_one_by_one_when_group_committed_with_others(
    server: LiveServer, http: httpx.Client
) -> None:
    """Sixty concurrent requests share the intake's group commits: each future one is refused, the rest stored."""
    customer = _customer(http)
    bodies = [_event_body(customer, _iso(_now() + timedelta(hours=1 if n % 2 else 0))) for n in range(60)]
    bodies = [body if n % 2 else {**body, "occurred_at": _iso(_now())} for n, body in enumerate(bodies)]

    def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with live_client(server) as client:
            response = client.post("/events", json=body)
            return response.status_code, response.json()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(post, bodies))
    for n, (status, body) in enumerate(answers):
        if n % 2:
            assert status == 422 and body["error"]["details"]["field"] == "occurred_at", body
        else:
            assert status == 202, body
    stored = ok(http.get("/events", params={"customer_id": customer, "limit": 100}))
    assert sorted(e["external_event_id"] for e in stored) == sorted(b["external_event_id"] for b in bodies[::2])


# the programme's bound: backdating no longer multiplies a cap -----------------------------------------------------
def test_events_backdated_across_centuries_no_longer_multiply_a_monthly_cap(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset)  # no max_event_age_days sent: the default
    assert programme["max_event_age_days"] == 30
    customer = _customer(http)
    now = _now()
    centuries = ["0001-01-01T00:00:00Z", "1066-10-14T09:00:00Z", "1500-01-01T00:00:00Z", "1900-06-01T00:00:00Z"]
    centuries += [_iso(now - timedelta(days=31)), *(_iso(t) for t in _this_month(now))]
    events = [_send(http, customer, at) for at in centuries]
    assert [e["status"] for e in events] == ["processed"] * 7, events
    assert _balance(http, customer, asset) == Decimal(100)  # 600 before: one cap per backdated month
    outcomes = [[(x["status"], x["amount"], x["error_code"]) for x in _executions(http, e, programme)] for e in events]
    assert outcomes[:5] == [[("limited", "0", "event_too_old")]] * 5, outcomes
    assert sorted(outcomes[5:]) == sorted([[("issued", "100", None)], [("limited", "0", None)]]), outcomes


def test_an_event_just_inside_the_bound_is_rewarded(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, max_event_age_days=2, limits=[])
    customer = _customer(http)
    inside = _send(http, customer, _iso(_now() - timedelta(days=2) + timedelta(minutes=5)))
    outside = _send(http, customer, _iso(_now() - timedelta(days=2, minutes=5)))
    assert [(x["status"], x["error_code"]) for x in _executions(http, inside, programme)] == [("issued", None)]
    assert [(x["status"], x["error_code"]) for x in _executions(http, outside, programme)] == [
        ("limited", "event_too_old")
    ]
    assert _balance(http, customer, asset) == Decimal(100)


def test_a_backfill_programme_with_no_bound_rewards_old_events(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, max_event_age_days=None)
    assert programme["max_event_age_days"] is None
    customer = _customer(http)
    for at in ("1999-01-15T00:00:00Z", "1999-02-15T00:00:00Z"):
        (execution,) = _executions(http, _send(http, customer, at), programme)
        assert (execution["status"], execution["error_code"]) == ("issued", None)
    assert _balance(http, customer, asset) == Decimal(200)


# the setting on the API ---------------------------------------------------------------------------------------
def test_the_setting_is_created_patched_frozen_into_versions_and_validated(http: httpx.Client) -> None:
    asset = _asset(http)
    seven = _programme(http, asset, max_event_age_days=7)
    assert seven["max_event_age_days"] == 7
    pid = seven["id"]
    changed = ok(http.patch(f"/reward-programs/{pid}", json={"max_event_age_days": 90}))
    assert changed["max_event_age_days"] == 90
    untouched = ok(http.patch(f"/reward-programs/{pid}", json={"description": "d"}))
    assert untouched["max_event_age_days"] == 90  # absent: unchanged
    versions = ok(http.get(f"/reward-programs/{pid}/versions"))
    by_status = {v["status"]: v["max_event_age_days"] for v in versions}
    assert by_status == {"published": 7, "draft": 90}  # the published version keeps its own
    ok(http.patch(f"/reward-programs/{pid}", json={"max_event_age_days": None}))
    ok(http.post(f"/reward-programs/{pid}/publish"), 201)
    assert _live(http, pid)["max_event_age_days"] is None
    for bad in (0, -1, 36_601, 1.5, "30", True):
        for response in (
            http.patch(f"/reward-programs/{pid}", json={"max_event_age_days": bad}),
            http.post(
                "/reward-programs", json={"name": _unique("p"), "asset_id": asset["id"], "max_event_age_days": bad}
            ),
        ):
            assert response.status_code == 422, (bad, response.text)
            assert response.json()["error"]["details"]["field"] == "max_event_age_days", response.text


# the reason, in simulation too ------------------------------------------------------------------------------------
def test_simulation_says_an_old_event_would_issue_nothing_and_why(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, max_event_age_days=10, limits=[])
    event = {"event": {"type": EVENT}}
    old = ok(
        http.post(
            f"/reward-programs/{programme['id']}/simulate",
            json={**event, "occurred_at": _iso(_now() - timedelta(days=11))},
            params={"version": "live"},
        )
    )
    (action,) = old["rules"][0]["actions"]
    assert (action["amount"], action["issues"], action["error_code"]) == ("0", False, "event_too_old"), action
    assert "10 days" in action["reason"] and old["totals"] == []
    recent = ok(
        http.post(
            f"/reward-programs/{programme['id']}/simulate",
            json={**event, "occurred_at": _iso(_now() - timedelta(days=9))},
            params={"version": "live"},
        )
    )
    (action,) = recent["rules"][0]["actions"]
    assert (action["amount"], action["error_code"]) == ("100", None)
    rule_id = programme_rules(http, programme)[0]
    by_rule = ok(
        http.post(f"/reward-rules/{rule_id}/simulate", json={**event, "occurred_at": _iso(_now() - timedelta(days=11))})
    )
    assert by_rule["rules"][0]["actions"][0]["error_code"] == "event_too_old"


def programme_rules(http: httpx.Client, programme: dict[str, Any]) -> list[str]:
    return [rule["id"] for rule in _live(http, programme["id"])["rules"]]


def _live(http: httpx.Client, program_id: str) -> dict[str, Any]:
    versions = ok(http.get(f"/reward-programs/{program_id}/versions"))
    return dict(max((v for v in versions if v["status"] == "published"), key=lambda v: v["number"]))
