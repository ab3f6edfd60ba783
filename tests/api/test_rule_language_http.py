"""The rule language of issue 17 through a real server on 127.0.0.1 and its worker: groups, strings, lists,
nested paths, priority with stop_processing, referrals with beneficiaries, customer attributes and time fields,
the programme simulation's reasons, and bad rules refused with the offending path."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from typing import Any
from unittest import mock

import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import RewardsClient
from tests.http_helpers import ok
from tests.live_server import LiveServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("rules") / "service.duckdb")
    yield live
    live.stop()


def _refused(response: httpx.Response, code: str) -> str:
    body = response.json()
    assert response.status_code == 422, body
    assert body["error"]["code"] == code, body
    return str(body["error"]["details"]["field"])


def _programme(http: httpx.Client, symbol: str) -> tuple[str, str]:
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    programme = ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)
    return asset["id"], programme["id"]


def _rule(http: httpx.Client, program_id: str, **body: Any) -> dict[str, Any]:
    body.setdefault("event_type", "order.completed")
    body.setdefault("actions", [{"type": "issue", "amount": {"fixed": "1"}}])
    rule: dict[str, Any] = ok(http.post("/reward-rules", json={"program_id": program_id, **body}), 201)
    return rule


def _customer(http: httpx.Client, external_id: str, **fields: Any) -> dict[str, Any]:
    customer: dict[str, Any] = ok(http.post("/customers", json={"external_id": external_id, **fields}), 201)
    ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
    return customer


def _settled(http: httpx.Client, event_ids: list[str]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while True:
        events = [ok(http.get(f"/events/{event_id}")) for event_id in event_ids]
        if all(event["status"] != "received" for event in events):
            return events
        assert time.monotonic() < deadline, events
        time.sleep(0.05)


def _send(http: httpx.Client, external_id: str, customer: str, data: dict[str, Any], **extra: Any) -> str:
    body = {"type": extra.pop("type", "order.completed"), "external_event_id": external_id, "customer_id": customer}
    event = ok(http.post("/events", json={**body, "data": data, **extra}), 202)
    return str(event["id"])


def _issued(http: httpx.Client, event_id: str, program_id: str) -> list[tuple[str, str, str]]:
    """(customer, rule, amount) of each issued execution of an event by a programme (the tests' programmes
    share the server, and some reward every order)."""
    rows = ok(http.get("/reward-executions", params={"event_id": event_id, "limit": 100}))
    return sorted(
        (e["customer_id"], e["rule_id"], e["amount"])
        for e in rows
        if e["status"] == "issued" and e["program_id"] == program_id
    )


def test_groups_strings_lists_and_nested_paths_decide_what_is_issued(http: httpx.Client) -> None:
    _, program_id = _programme(http, "GRP")
    rule = _rule(
        http,
        program_id,
        conditions=[
            {"field": "order.channel", "operator": "in", "value": ["web", "app"]},
            {
                "any": [
                    {"field": "amount", "operator": "between", "value": [20, 100]},
                    {"field": "coupon", "operator": "exists"},
                ]
            },
            {"not": {"field": "status", "operator": "eq", "value": "test"}},
        ],
    )
    assert rule["conditions"][2] == {"not": {"field": "status", "operator": "eq", "value": "test"}}
    assert rule["priority"] == 0 and rule["stop_processing"] is False
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    alice = _customer(http, "grp-alice")
    cases = {
        "grp-1": ({"order": {"channel": "web"}, "amount": 50}, True),
        "grp-2": ({"order": {"channel": "store"}, "amount": 50}, False),
        "grp-3": ({"order": {"channel": "app"}, "amount": 5, "coupon": "SPRING"}, True),
        "grp-4": ({"order": {"channel": "app"}, "amount": 5}, False),
        "grp-5": ({"order": {"channel": "web"}, "amount": 50, "status": "test"}, False),
        "grp-6": ({"order.channel": "web", "amount": "50"}, False),  # a string is no number: the any fails
    }
    ids = {name: _send(http, name, "grp-alice", data) for name, (data, _) in cases.items()}
    _settled(http, list(ids.values()))
    for name, (_, expected) in cases.items():
        assert bool(_issued(http, ids[name], program_id)) is expected, name
    assert _issued(http, ids["grp-1"], program_id) == [(alice["id"], rule["id"], "1")]


def test_priority_and_stop_processing(http: httpx.Client) -> None:
    _, program_id = _programme(http, "PRI")
    base = _rule(http, program_id, actions=[{"type": "issue", "amount": {"fixed": "1"}}], priority=10)
    vip = _rule(
        http,
        program_id,
        conditions=[{"field": "vip", "operator": "eq", "value": True}],
        actions=[{"type": "issue", "amount": {"fixed": "100"}}],
        priority=1,
        stop_processing=True,
    )
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    bob = _customer(http, "pri-bob")
    plain, special = _send(http, "pri-1", "pri-bob", {}), _send(http, "pri-2", "pri-bob", {"vip": True})
    _settled(http, [plain, special])
    assert _issued(http, plain, program_id) == [(bob["id"], base["id"], "1")]
    assert _issued(http, special, program_id) == [(bob["id"], vip["id"], "100")]
    simulated = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate?version=live",
            json={"event": {"type": "order.completed", "vip": True}},
        )
    )
    assert [(r["rule_id"], r["matched"], r["stopped_by"]) for r in simulated["rules"]] == [
        (vip["id"], True, None),
        (base["id"], False, vip["id"]),
    ]
    assert simulated["rules"][0]["stops_processing"] is True and simulated["totals"][0]["amount"] == "100"
    # editing the priority of the draft's rule keeps the published version as it was
    edited = ok(http.patch(f"/reward-rules/{base['id']}", json={"priority": 0}))
    assert edited["priority"] == 0 and edited["stop_processing"] is False
    draft = ok(
        http.post(f"/reward-programs/{program_id}/simulate", json={"event": {"type": "order.completed", "vip": True}})
    )
    assert [(r["rule_id"], r["matched"]) for r in draft["rules"]] == [(base["id"], True), (vip["id"], True)]
    assert (
        _refused(
            http.post(f"/reward-programs/{program_id}/simulate?version=x", json={"event": {"type": "a"}}),
            "field_invalid",
        )
        == "version"
    )


def test_referrals_reward_the_beneficiary_and_fail_only_the_unusable_action(http: httpx.Client) -> None:
    _, program_id = _programme(http, "REF")
    rule = _rule(
        http,
        program_id,
        event_type="customer.signed_up",
        actions=[
            {"type": "issue", "amount": {"fixed": "10"}, "beneficiary": {"field": "referrer_id"}},
            {"type": "issue", "amount": {"fixed": "5"}},
        ],
    )
    assert rule["actions"][0]["beneficiary"] == {"field": "referrer_id"} and "beneficiary" not in rule["actions"][1]
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    referrer = _customer(http, "ref-ann")
    newcomer = _customer(http, "ref-new")
    by_external = _send(http, "ref-1", "ref-new", {"referrer_id": "ref-ann"}, type="customer.signed_up")
    by_id = _send(http, "ref-2", "ref-new", {"referrer_id": referrer["id"]}, type="customer.signed_up")
    unknown = _send(http, "ref-3", "ref-new", {"referrer_id": "nobody"}, type="customer.signed_up")
    missing = _send(http, "ref-4", "ref-new", {}, type="customer.signed_up")
    events = dict(
        zip(
            ["by_external", "by_id", "unknown", "missing"],
            _settled(http, [by_external, by_id, unknown, missing]),
            strict=True,
        )
    )
    both = sorted([(referrer["id"], rule["id"], "10"), (newcomer["id"], rule["id"], "5")])
    assert _issued(http, by_external, program_id) == both and _issued(http, by_id, program_id) == both
    assert events["by_external"]["status"] == "processed"
    for name, code in (("unknown", "beneficiary_not_found"), ("missing", "beneficiary_missing")):
        assert events[name]["status"] == "failed" and events[name]["error"]["code"] == code, events[name]
        assert _issued(http, events[name]["id"], program_id) == [
            (newcomer["id"], rule["id"], "5")
        ]  # the other action issued
    rows = ok(http.get("/reward-executions", params={"event_id": unknown, "limit": 100}))
    failed = [row for row in rows if row["status"] == "failed" and row["program_id"] == program_id]
    assert [(row["error_code"], row["inputs"]) for row in failed] == [
        ("beneficiary_not_found", {"referrer_id": "nobody"})
    ]
    wallets = ok(http.get("/wallets", params={"customer_id": referrer["id"]}))
    assert ok(http.get(f"/wallets/{wallets[0]['id']}/balances"))["balances"][0]["balance"] == "20"


def test_text_operators_issue_as_they_say_and_refuse_a_value_that_is_no_string(http: httpx.Client) -> None:
    """starts_with, ends_with and contains on strings (contains keeps its list meaning): each rule issues its own
    amount where its operator holds; the simulation says why; a value that is no string is refused by its path."""
    _, program_id = _programme(http, "TXT")
    rules = {
        operator: _rule(
            http,
            program_id,
            conditions=[{"field": "email", "operator": operator, "value": value}],
            actions=[{"type": "issue", "amount": {"fixed": amount}}],
        )["id"]
        for operator, value, amount in [
            ("starts_with", "ann", "1"),
            ("ends_with", "@shop.fr", "10"),
            ("contains", "vip", "100"),
        ]
    }
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    _customer(http, "txt-ann")
    cases = {
        "txt-1": ({"email": "ann@shop.fr"}, {"starts_with", "ends_with"}),
        "txt-2": ({"email": "vip.ann@shop.fr"}, {"ends_with", "contains"}),
        "txt-3": ({"email": "Ann@Shop.FR"}, set()),  # case counts
        "txt-4": ({"email": ["vip"]}, {"contains"}),  # contains keeps its list meaning
        "txt-5": ({"email": 7}, set()),
        "txt-6": ({}, set()),
    }
    ids = {name: _send(http, name, "txt-ann", data) for name, (data, _) in cases.items()}
    _settled(http, list(ids.values()))
    for name, (_, expected) in cases.items():
        assert {rule_id for _, rule_id, _ in _issued(http, ids[name], program_id)} == {rules[o] for o in expected}, name
    simulated = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate?version=live",
            json={"event": {"type": "order.completed", "email": "joann@shop.com"}},
        )
    )
    reasons = {r["rule_id"]: r["conditions"][0]["reason"] for r in simulated["rules"]}
    assert reasons[rules["starts_with"]] == 'email = "joann@shop.com" does not start with "ann"'
    assert reasons[rules["ends_with"]] == 'email = "joann@shop.com" does not end with "@shop.fr"'
    assert reasons[rules["contains"]] == 'email = "joann@shop.com" does not contain "vip"'
    for operator in ("starts_with", "ends_with"):
        body = {"program_id": program_id, "event_type": "order.completed"}
        body["actions"] = [{"type": "issue", "amount": {"fixed": "1"}}]
        body["conditions"] = [{"not": {"field": "email", "operator": operator, "value": 5}}]
        assert _refused(http.post("/reward-rules", json=body), "field_invalid") == "conditions[0].not.value"


def test_bad_rules_are_refused_with_the_offending_path(http: httpx.Client) -> None:
    _, program_id = _programme(http, "BAD")

    def refused(code: str, **body: Any) -> str:
        body.setdefault("event_type", "order.completed")
        body.setdefault("actions", [{"type": "issue", "amount": {"fixed": "1"}}])
        return _refused(http.post("/reward-rules", json={"program_id": program_id, **body}), code)

    exists = {"field": "a", "operator": "exists"}
    deep: dict[str, Any] = exists
    for _ in range(5):
        deep = {"all": [deep]}
    assert refused("field_invalid", conditions=[exists, deep]) == "conditions[1].all[0].all[0].all[0].all[0].all[0]"
    assert refused(
        "field_invalid", conditions=[exists, exists, {"any": [{"field": "a", "operator": "like", "value": 1}]}]
    ) == ("conditions[2].any[0].operator")
    assert refused(
        "field_invalid", conditions=[{"any": [exists, {"field": "a", "operator": "in", "value": "web"}]}]
    ) == ("conditions[0].any[1].value")
    beneficiary = [{"type": "issue", "amount": {"fixed": "1"}, "beneficiary": {"field": "referrer_id", "kind": "x"}}]
    assert refused("field_unknown", actions=beneficiary) == "actions[0].beneficiary.kind"
    assert refused("field_invalid", priority=1.5) == "priority"
    rule = _rule(http, program_id)
    assert _refused(
        http.patch(f"/reward-rules/{rule['id']}", json={"conditions": [{"not": exists, "any": [exists]}]}),
        "field_unknown",
    ).startswith("conditions[0]")


def test_customer_attributes_country_and_segments_as_they_are_when_the_event_is_processed(http: httpx.Client) -> None:
    _, program_id = _programme(http, "CUS")
    gold = _rule(
        http,
        program_id,
        conditions=[
            {"field": "customer.attributes.tier", "operator": "eq", "value": "gold"},
            {"field": "customer.country", "operator": "in", "value": ["FR", "BE"]},
            {"field": "customer.segments", "operator": "contains", "value": "new"},
        ],
    )
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    carla = _customer(http, "cus-carla", country="FR", attributes={"tier": "gold", "visits": 12.50})
    first = _send(http, "cus-1", "cus-carla", {})
    _settled(http, [first])
    assert _issued(http, first, program_id) == [(carla["id"], gold["id"], "1")]
    (execution,) = [
        e for e in ok(http.get("/reward-executions", params={"event_id": first})) if e["program_id"] == program_id
    ]
    assert execution["inputs"] == {
        "customer.attributes.tier": "gold",
        "customer.country": "FR",
        "customer.segments": ["new", "active"],
    }
    ok(http.patch(f"/customers/{carla['id']}", json={"attributes": {"tier": "silver"}}))
    second = _send(http, "cus-2", "cus-carla", {})
    _settled(http, [second])
    assert _issued(http, second, program_id) == []  # read as it is when the event is processed
    simulated = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate?version=live",
            json={"event": {"type": "order.completed"}, "customer_id": "cus-carla"},
        )
    )
    assert simulated["matched"] is False
    assert (
        simulated["rules"][0]["conditions"][0]["reason"]
        == 'customer.attributes.tier = "silver" == "gold" does not hold'
    )
    unknown = {"event": {"type": "order.completed"}, "customer_id": "nobody"}
    assert _refused_code(http.post(f"/reward-programs/{program_id}/simulate", json=unknown), 404) == "customer_id"


def _refused_code(response: httpx.Response, status: int) -> str:
    body = response.json()
    assert response.status_code == status, body
    return str(body["error"]["details"]["field"])


def test_time_fields_read_the_event_time_in_the_programme_timezone(http: httpx.Client) -> None:
    _, program_id = _programme(http, "TIM")
    # events of December 1998 (the calendar of 2026; an event may not be dated in the future): a backfill
    ok(http.patch(f"/reward-programs/{program_id}", json={"timezone": "Europe/Paris", "max_event_age_days": None}))
    weekend = _rule(
        http, program_id, conditions=[{"field": "occurred_at.weekday", "operator": "between", "value": [6, 7]}]
    )
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    dana = _customer(http, "tim-dana")
    saturday_in_paris = _send(http, "tim-1", "tim-dana", {}, occurred_at="1998-12-04T23:30:00Z")
    friday = _send(http, "tim-2", "tim-dana", {}, occurred_at="1998-12-04T12:00:00Z")
    _settled(http, [saturday_in_paris, friday])
    assert _issued(http, saturday_in_paris, program_id) == [(dana["id"], weekend["id"], "1")]
    assert _issued(http, friday, program_id) == []
    rows = ok(http.get("/reward-executions", params={"event_id": saturday_in_paris}))
    (execution,) = [e for e in rows if e["program_id"] == program_id]
    assert execution["inputs"] == {"occurred_at.weekday": "6"}
    simulated = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate?version=live",
            json={"event": {"type": "order.completed"}, "occurred_at": "2026-12-05T10:00:00+01:00"},
        )
    )
    assert simulated["matched"] is True and simulated["in_window"] is True


def test_the_simulation_says_when_the_window_keeps_a_version_off(http: httpx.Client) -> None:
    _, program_id = _programme(http, "WIN")
    body = {"starts_at": "2026-12-01T00:00:00+01:00", "ends_at": "2027-01-01T00:00:00+01:00"}
    ok(http.patch(f"/reward-programs/{program_id}", json=body))
    _rule(http, program_id)
    event = {"type": "order.completed"}
    inside = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate", json={"event": event, "occurred_at": "2026-12-24T12:00:00Z"}
        )
    )
    outside = ok(
        http.post(
            f"/reward-programs/{program_id}/simulate", json={"event": event, "occurred_at": "2027-01-01T00:00:00+01:00"}
        )
    )
    assert (inside["matched"], inside["in_window"]) == (True, True)
    assert (outside["matched"], outside["in_window"], outside["totals"]) == (False, False, [])
    assert "outside the window" in outside["window_reason"] and outside["rules"][0]["reason"].startswith("not applied")


def _cli(server: LiveServer, *args: str) -> Any:
    """`rewards-lab api ...` in-process (the very entry point), its JSON output."""
    target = ["--base-url", server.base_url, "--org", server.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, {"REWARDS_API_KEY": server.keys["sandbox"]}),
        redirect_stdout(out),
        redirect_stderr(err),
    ):
        status = main(["api", *args, *target])
    assert status == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_the_command_line_and_the_client_take_the_rule_language(server: LiveServer, http: httpx.Client) -> None:
    _, program_id = _programme(http, "CLI")
    group = [
        {"any": [{"field": "channel", "operator": "eq", "value": "web"}, {"field": "coupon", "operator": "exists"}]}
    ]
    rule = _cli(
        server,
        "rules", "create", "--program-id", program_id, "--event-type", "order.completed",
        "--conditions", json.dumps(group),
        "--actions", '[{"type": "issue", "amount": {"fixed": "3"}, "beneficiary": {"field": "referrer_id"}}]',
        "--priority", "5", "--stop-processing",
    )  # fmt: skip
    assert (rule["conditions"], rule["priority"], rule["stop_processing"]) == (group, 5, True)
    assert rule["actions"][0]["beneficiary"] == {"field": "referrer_id"}
    edited = _cli(server, "rules", "update", rule["id"], "--priority", "7", "--no-stop-processing")
    assert (edited["priority"], edited["stop_processing"], edited["conditions"]) == (7, False, group)
    event = '{"type": "order.completed", "channel": "web", "referrer_id": "x"}'
    at = "2026-12-05T10:00:00Z"
    simulated = _cli(server, "programmes", "simulate", program_id, "--event", event, "--occurred-at", at)
    assert simulated["matched"] is True
    assert simulated["rules"][0]["actions"][0]["beneficiary"] == "x"
    assert simulated["rules"][0]["conditions"][0]["conditions"][0]["path"] == "conditions[0].any[0]"
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        again = client.simulate_programme(program_id, {"type": "order.completed", "coupon": "C"}, version="draft")
        assert again.matched and again.rules[0].conditions[0].operator == "any"
        created = client.create_rule(
            program_id, "order.completed", [{"type": "issue", "amount": {"fixed": "1"}}], priority=-3
        )
        assert created.priority == -3 and created.stop_processing is False
