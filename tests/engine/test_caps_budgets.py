"""Caps and budgets (issue 18) against a real `rewards-lab serve` on 127.0.0.1 and its event worker: amount caps
cut to what remains, count caps skip, calendar periods in the programme's timezone, programme-wide caps across
rules, budgets across customers with their consumption shown, counters that survive a new version, and the
validation of what a client sends."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.http_helpers import ok, refused, settled
from tests.live_server import LiveServer, start_server, stop_and_verify

EVENT = "purchase.capped"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("caps") / "service.duckdb")
    yield live
    stop_and_verify(live)


_counter = iter(range(1_000_000))


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{time.monotonic_ns()}"


def _asset(http: httpx.Client, decimals: int = 0) -> dict[str, Any]:
    symbol = "C" + str(next(_counter))
    body = {"name": symbol, "symbol": symbol, "type": "points", "decimals": decimals}
    asset = ok(http.post("/assets", json=body), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return dict(asset)


def _programme(
    http: httpx.Client, asset: dict[str, Any], rules: list[dict[str, Any]], **settings: Any
) -> dict[str, Any]:
    """A published programme with these rules (on EVENT unless they say otherwise) and programme settings. The
    events are dated in 1998-2002 (the calendar of 2026-2030, 28 years earlier; an event's date may not be in the
    future): the programme takes them as a backfill (no bound on an event's age)."""
    body = {"name": _unique("p"), "asset_id": asset["id"], "max_event_age_days": None, **settings}
    programme = ok(http.post("/reward-programs", json=body), 201)
    for rule in rules:
        body = {"program_id": programme["id"], "event_type": EVENT, **rule}
        ok(http.post("/reward-rules", json=body), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return dict(ok(http.get(f"/reward-programs/{programme['id']}")))


def _per_amount(**extra: Any) -> dict[str, Any]:
    return {"actions": [{"type": "issue", "amount": {"per": "amount", "rate": 1}}], **extra}


def _customer(http: httpx.Client) -> str:
    external_id = _unique("customer")
    customer = ok(http.post("/customers", json={"external_id": external_id}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return external_id


def _send(http: httpx.Client, customer: str, amount: int, occurred_at: str, event_type: str = EVENT) -> dict[str, Any]:
    body = {
        "type": event_type,
        "external_event_id": _unique("event"),
        "customer_id": customer,
        "occurred_at": occurred_at,
        "data": {"amount": amount},
    }
    event_id = ok(http.post("/events", json=body), 202)["id"]
    event = settled(http, event_id)
    assert event["status"] == "processed", event
    return event


def _executions(http: httpx.Client, event: dict[str, Any], programme: dict[str, Any]) -> list[dict[str, Any]]:
    executions = ok(http.get("/reward-executions", params={"event_id": event["id"], "limit": 100}))
    return sorted((e for e in executions if e["program_id"] == programme["id"]), key=lambda e: e["rule_id"])


def _given(http: httpx.Client, customer: str, programme: dict[str, Any], amount: int, at: str) -> list[tuple[Any, ...]]:
    """(status, amount, requested, cut scope, cut) of each execution one event causes in the programme."""
    event = _send(http, customer, amount, at)
    return [
        (
            e["status"],
            e["amount"],
            e["requested_amount"],
            None if e["limited"] is None else e["limited"]["scope"],
            None if e["limited"] is None else e["limited"]["cut"],
        )
        for e in _executions(http, event, programme)
    ]


def _balance(http: httpx.Client, customer: str, asset: dict[str, Any]) -> Decimal:
    found = ok(http.get("/customers", params={"external_id": customer}))
    wallets = ok(http.get("/wallets", params={"customer_id": found[0]["id"]}))
    balances = ok(http.get(f"/wallets/{wallets[0]['id']}/balances"))["balances"]
    return sum((Decimal(b["balance"]) for b in balances if b["asset_id"] == asset["id"]), Decimal(0))


def test_an_amount_cap_cuts_to_what_remains_then_skips_until_the_next_period(http: httpx.Client) -> None:
    asset = _asset(http)
    cap = {"per": "customer", "period": "month", "max_amount": "500"}
    programme = _programme(http, asset, [_per_amount(limits=[cap])])
    rule = ok(http.get(f"/reward-programs/{programme['id']}/versions"))[0]["rules"][0]
    assert rule["limits"] == [cap]
    alice, bob = _customer(http), _customer(http)
    assert _given(http, alice, programme, 300, "1998-12-01T10:00:00Z") == [("issued", "300", None, None, None)]
    assert _given(http, alice, programme, 300, "1998-12-15T10:00:00Z") == [("issued", "200", "300", "rule", "100")]
    assert _given(http, alice, programme, 50, "1998-12-31T23:59:59Z") == [("limited", "0", "50", "rule", "50")]
    assert _given(http, bob, programme, 300, "1998-12-20T10:00:00Z") == [("issued", "300", None, None, None)]
    assert _given(http, alice, programme, 300, "1999-01-01T00:00:00Z") == [("issued", "300", None, None, None)]
    assert _balance(http, alice, asset) == 800  # 300 + 200 in December, 300 in January
    event = _send(http, alice, 1, "1998-12-02T00:00:00Z")
    limited = _executions(http, event, programme)[0]["limited"]
    assert limited == {
        "scope": "rule",
        "period": "month",
        "period_start": "1998-12-01",
        "max_amount": "500",
        "max_count": None,
        "cut": "1",
    }


def test_a_count_cap_skips_once_reached_and_weeks_start_on_monday_in_the_programmes_timezone(
    http: httpx.Client,
) -> None:
    asset = _asset(http)
    cap = {"per": "customer", "period": "week", "max_count": 2}
    programme = _programme(http, asset, [_per_amount(limits=[cap])], timezone="Europe/Paris")
    carol = _customer(http)
    # Sunday 1998-12-06 23:30 UTC is Monday 00:30 in Paris: a new week there.
    assert _given(http, carol, programme, 10, "1998-12-01T12:00:00Z")[0][:2] == ("issued", "10")
    assert _given(http, carol, programme, 10, "1998-12-06T22:00:00Z")[0][:2] == ("issued", "10")
    assert _given(http, carol, programme, 10, "1998-12-06T22:30:00Z") == [("limited", "0", "10", "rule", "10")]
    assert _given(http, carol, programme, 10, "1998-12-06T23:30:00Z")[0][:2] == ("issued", "10")


def test_programme_caps_span_its_rules_and_the_budget_spans_customers(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(
        http,
        asset,
        [_per_amount(), {"actions": [{"type": "issue", "amount": {"fixed": "40"}}]}],
        limits=[{"per": "customer", "period": "day", "max_amount": "100"}],
        budget={"period": "day", "max_amount": "250"},
    )
    assert programme["limits"] == [{"per": "customer", "period": "day", "max_amount": "100"}]
    assert programme["budget"] == {"period": "day", "max_amount": "250"}
    dave, erin, frank = _customer(http), _customer(http), _customer(http)
    day = "1998-12-10T09:00:00Z"
    # Rule order: the per-amount rule (70), then the fixed 40, cut by the programme's daily cap of 100.
    first = _given(http, dave, programme, 70, day)
    assert sorted(row[:2] for row in first) == [("issued", "30"), ("issued", "70")]
    assert ("issued", "30", "40", "programme", "10") in first
    assert sorted(row[:2] for row in _given(http, erin, programme, 70, day)) == [("issued", "30"), ("issued", "70")]
    # 200 of the day's 250 are gone: frank's 70 fits, his 40 is cut to the 50 - 70 < 0 ... the budget's 50 left.
    third = _given(http, frank, programme, 70, day)
    assert ("issued", "50", "70", "budget", "20") in third
    assert ("limited", "0", "40", "budget", "40") in third
    shown = ok(http.get(f"/reward-programs/{programme['id']}"))["budget_consumption"]
    assert shown == [
        {"period": "day", "period_start": "1998-12-10", "max_amount": "250", "consumed": "250", "remaining": "0"}
    ]
    # The next day the budget is whole again.
    assert sorted(row[:2] for row in _given(http, frank, programme, 70, "1998-12-11T09:00:00Z")) == [
        ("issued", "30"),
        ("issued", "70"),
    ]


def test_counters_belong_to_the_programme_so_a_new_version_does_not_reset_them(http: httpx.Client) -> None:
    asset = _asset(http)
    cap = {"per": "customer", "period": "lifetime", "max_amount": "100"}
    programme = _programme(http, asset, [_per_amount(limits=[cap])])
    gina = _customer(http)
    assert _given(http, gina, programme, 80, "1998-12-01T00:00:00Z")[0][:2] == ("issued", "80")
    ok(http.patch(f"/reward-programs/{programme['id']}", json={"description": "v2"}))
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    assert _given(http, gina, programme, 80, "2002-01-01T00:00:00Z") == [("issued", "20", "80", "rule", "60")]


def test_caps_and_budgets_are_validated_with_the_offending_field_named(http: httpx.Client) -> None:
    asset = _asset(http, decimals=2)
    programme = ok(http.post("/reward-programs", json={"name": "validated", "asset_id": asset["id"]}), 201)
    rule = {"program_id": programme["id"], "event_type": EVENT, **_per_amount()}
    both = {"period": "day", "max_amount": "5", "max_count": 1}
    error = refused(http.post("/reward-rules", json={**rule, "limits": [both]}), 422, "field_unknown")
    assert error["details"]["field"] == "limits[0].max_count"
    neither = {"period": "day"}
    error = refused(http.post("/reward-rules", json={**rule, "limits": [neither]}), 422, "field_required")
    assert error["details"]["field"] == "limits[0].max_amount"
    # 2.0 in JSON is the integer 2, as JSON Schema says.
    two = json.dumps({**rule, "limits": [{"period": "day", "max_count": 2.0}]})
    created = ok(http.post("/reward-rules", content=two, headers={"Content-Type": "application/json"}), 201)
    assert created["limits"] == [{"per": "customer", "period": "day", "max_count": 2}]
    bad_period = {"period": "fortnight", "max_count": 1}
    error = refused(http.post("/reward-rules", json={**rule, "limits": [bad_period]}), 422, "field_invalid")
    assert error["details"]["field"] == "limits[0].period"
    too_fine = {"period": "day", "max_amount": "1.234"}
    error = refused(http.post("/reward-rules", json={**rule, "limits": [too_fine]}), 422, "amount_too_many_decimals")
    assert error["details"]["field"] == "limits[0].max_amount"
    zero_count = {"period": "day", "max_count": 0}
    error = refused(http.post("/reward-rules", json={**rule, "limits": [zero_count]}), 422, "field_invalid")
    assert error["details"]["field"] == "limits[0].max_count"
    error = refused(
        http.patch(f"/reward-programs/{programme['id']}", json={"budget": {"period": "month", "max_amount": "0.001"}}),
        422,
        "amount_too_many_decimals",
    )
    assert error["details"]["field"] == "budget.max_amount"
    error = refused(
        http.patch(f"/reward-programs/{programme['id']}", json={"clawback": "sometimes"}), 422, "field_invalid"
    )
    assert error["details"]["field"] == "clawback"
    six = [{"period": "day", "max_count": n} for n in range(1, 7)]
    error = refused(http.post("/reward-rules", json={**rule, "limits": six}), 422, "field_invalid")
    assert error["details"]["field"] == "limits"
