"""Rule names (issue 28) through a real server on 127.0.0.1: an optional short name, trimmed, kept by edits that
do not send it, changed or cleared by those that do, carried into published versions, quoted by simulation
reasons, refused with the field when it is no name; the client and `rewards-lab api` send it."""

from __future__ import annotations

import io
import json
import os
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

ISSUE = [{"type": "issue", "amount": {"fixed": "1"}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("names") / "service.duckdb")
    yield live
    live.stop()


def _programme(http: httpx.Client, symbol: str) -> str:
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return str(ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)["id"])


def _rule(http: httpx.Client, program_id: str, **body: Any) -> dict[str, Any]:
    body = {"program_id": program_id, "event_type": "order.completed", "actions": ISSUE, **body}
    rule: dict[str, Any] = ok(http.post("/reward-rules", json=body), 201)
    return rule


def test_a_rule_is_named_renamed_kept_and_cleared(http: httpx.Client) -> None:
    program_id = _programme(http, "NAMEA")
    named = _rule(http, program_id, name="  Double points on orders \n")
    assert named["name"] == "Double points on orders"  # trimmed
    assert _rule(http, program_id)["name"] is None  # optional: a rule without one reads as before
    assert ok(http.get(f"/reward-rules/{named['id']}"))["name"] == "Double points on orders"
    # an edit that does not send the name keeps it
    edited = ok(http.patch(f"/reward-rules/{named['id']}", json={"priority": 3}))
    assert (edited["name"], edited["priority"]) == ("Double points on orders", 3)
    renamed = ok(http.patch(f"/reward-rules/{named['id']}", json={"name": "Big basket bonus"}))
    assert (renamed["name"], renamed["priority"]) == ("Big basket bonus", 3)
    # published versions carry the name; renaming the draft's copy leaves them as published
    ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
    ok(http.patch(f"/reward-rules/{named['id']}", json={"name": "Renamed in the draft"}))
    versions = ok(http.get(f"/reward-programs/{program_id}/versions"))
    names = {v["status"]: [rule["name"] for rule in v["rules"]] for v in versions}
    assert names == {"published": ["Big basket bonus", None], "draft": ["Renamed in the draft", None]}
    # null clears it
    cleared = ok(http.patch(f"/reward-rules/{named['id']}", json={"name": None}))
    assert cleared["name"] is None and cleared["priority"] == 3


def test_clearing_and_leaving_the_name_are_different_requests_for_an_idempotency_key(http: httpx.Client) -> None:
    program_id = _programme(http, "NAMEK")
    rule = _rule(http, program_id, name="Kept")
    key = {"Idempotency-Key": "names-key-1"}
    assert ok(http.patch(f"/reward-rules/{rule['id']}", json={}, headers=key))["name"] == "Kept"
    reused = http.patch(f"/reward-rules/{rule['id']}", json={"name": None}, headers=key)
    assert reused.status_code == 409 and reused.json()["error"]["type"] == "idempotency_error", reused.json()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        (" \t\u3000 ", "white space only"),
        ("x" * 121, "too long"),
        (7, "not a string"),
    ],
)
def test_what_is_no_name_is_refused_with_the_field(http: httpx.Client, name: Any, why: str) -> None:
    program_id = _programme(http, f"NAMEBAD{len(str(name)) % 10}{why[0].upper()}")
    body = {"program_id": program_id, "event_type": "order.completed", "actions": ISSUE, "name": name}
    refused = http.post("/reward-rules", json=body).json()
    assert refused["error"]["code"] == "field_invalid" and refused["error"]["details"]["field"] == "name", refused
    rule = _rule(http, program_id)
    patched = http.patch(f"/reward-rules/{rule['id']}", json={"name": name})
    assert patched.status_code == 422 and patched.json()["error"]["details"]["field"] == "name", patched.json()
    assert ok(http.get(f"/reward-rules/{rule['id']}"))["name"] is None


def test_the_longest_name_is_accepted(http: httpx.Client) -> None:
    program_id = _programme(http, "NAMELONG")
    assert _rule(http, program_id, name="y" * 120)["name"] == "y" * 120


def test_a_simulation_reason_quotes_the_stopping_rule_by_name_else_by_position(http: httpx.Client) -> None:
    program_id = _programme(http, "NAMESIM")
    vip = _rule(http, program_id, name="VIP first", stop_processing=True)
    base = _rule(http, program_id)
    event = {"event": {"type": "order.completed"}}
    simulated = ok(http.post(f"/reward-programs/{program_id}/simulate", json=event))
    reason = simulated["rules"][1]["reason"]
    assert reason == 'not applied: rule "VIP first" (priority 0) matched first and stops processing'
    assert vip["id"] not in reason and simulated["rules"][1]["stopped_by"] == vip["id"]  # the id stays a field
    ok(http.patch(f"/reward-rules/{vip['id']}", json={"name": None}))
    simulated = ok(http.post(f"/reward-programs/{program_id}/simulate", json=event))
    # the rule at position 0, numbered from 1 as a person reads it
    assert simulated["rules"][1]["reason"].startswith("not applied: rule 1 (order.completed) (priority 0)")
    assert simulated["rules"][1]["rule_id"] == base["id"]


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


def test_the_client_and_the_cli_send_the_name(server: LiveServer, http: httpx.Client) -> None:
    program_id = _programme(http, "NAMECLI")
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        rule = client.create_rule(program_id, "order.completed", ISSUE, name="From the client")
        assert rule.name == "From the client"
        assert client.update_rule(rule.id, priority=2).name == "From the client"
        assert client.update_rule(rule.id, name=None).name is None
    created = _cli(
        server,
        "rules", "create", "--program-id", program_id, "--event-type", "order.completed",
        "--actions", json.dumps(ISSUE), "--name", "From the command line",
    )  # fmt: skip
    assert created["name"] == "From the command line"
    assert _cli(server, "rules", "update", created["id"], "--priority", "4")["name"] == "From the command line"
    assert _cli(server, "rules", "update", created["id"], "--clear-name")["name"] is None
