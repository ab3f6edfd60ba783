"""Issue 27, item 2, against a real `rewards-lab serve` on 127.0.0.1: a programme version's rules are bounded in
number and in size by one limit (the API's rules, edits and publish, and programme files: the same code, naming
the limit), and a simulation's explanation is bounded in size and time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.contract import programme_limits
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.programme_file import ProgrammeFileError, load_programme
from rewards_lab.contract.programme_limits import MAX_RULES_PER_VERSION, MAX_VERSION_RULES_BYTES
from rewards_lab.contract.validation import validate
from rewards_lab.engine import simulation
from rewards_lab.service import programmes
from rewards_lab.store.interfaces import RuleBody
from rewards_lab.store.uow import unit_of_work
from tests.conftest import World
from tests.http_helpers import live_client, ok
from tests.live_server import LiveServer, start_server, stop_and_verify

WIDE_VALUES = [f"{index:03d}" + "x" * 197 for index in range(100)]  # 100 strings of 200 characters


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("limits") / "service.duckdb", "Acme", "--plan", "enterprise")
    yield live
    stop_and_verify(live)


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with live_client(server, timeout=60) as client:
        yield client


def _refused(response: httpx.Response, code: str) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == 422, str(body)[:500]
    assert body["error"]["code"] == code, body["error"]
    details: dict[str, Any] = body["error"]["details"]
    return details


def _programme(http: httpx.Client, symbol: str) -> str:
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 2}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return str(ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)["id"])


def _rule(program_id: str, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "program_id": program_id,
        "event_type": "order.completed",
        "conditions": conditions or [],
        "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
    }


def _wide_conditions() -> list[dict[str, Any]]:
    """20 conditions of 100 strings of 200 characters: a rule of about 420 kB."""
    return [{"field": f"sku{n}", "operator": "in", "value": WIDE_VALUES} for n in range(20)]


def test_rules_beyond_the_count_limit_are_refused_with_the_limit_named(http: httpx.Client) -> None:
    program_id = _programme(http, "CNT")
    for _ in range(MAX_RULES_PER_VERSION):
        ok(http.post("/reward-rules", json=_rule(program_id)), 201)
    details = _refused(http.post("/reward-rules", json=_rule(program_id)), "programme_limit_exceeded")
    assert details["limit"] == "rules_per_version" and details["value"] == MAX_RULES_PER_VERSION
    assert details["field"] == "rules" and details["actual"] == MAX_RULES_PER_VERSION + 1
    # With an Idempotency-Key the refusal comes from inside the unit of work (the early one is keyless): the same.
    keyed = http.post("/reward-rules", json=_rule(program_id), headers={"Idempotency-Key": "one-too-many"})
    assert _refused(keyed, "programme_limit_exceeded")["limit"] == "rules_per_version"
    version = ok(http.post(f"/reward-programs/{program_id}/publish"), 201)["version"]
    assert len(version["rules"]) == MAX_RULES_PER_VERSION  # at the limit, it publishes


def test_a_versions_total_size_is_bounded_for_new_and_edited_rules(http: httpx.Client) -> None:
    program_id = _programme(http, "BIG")
    for _ in range(2):  # two rules of about 420 kB: under 1 MiB together
        ok(http.post("/reward-rules", json=_rule(program_id, _wide_conditions())), 201)
    small = ok(http.post("/reward-rules", json=_rule(program_id)), 201)
    details = _refused(
        http.post("/reward-rules", json=_rule(program_id, _wide_conditions())), "programme_limit_exceeded"
    )
    assert details["limit"] == "version_rules_bytes" and details["value"] == MAX_VERSION_RULES_BYTES
    assert details["actual"] > MAX_VERSION_RULES_BYTES and details["field"] == "rules"
    edit = http.patch(f"/reward-rules/{small['id']}", json={"conditions": _wide_conditions()})
    assert _refused(edit, "programme_limit_exceeded")["limit"] == "version_rules_bytes"
    assert len(ok(http.get(f"/reward-programs/{program_id}/versions"))[-1]["rules"]) == 3  # nothing was added
    # An edit that keeps the version within the limit is taken.
    ok(http.patch(f"/reward-rules/{small['id']}", json={"conditions": [{"field": "a", "operator": "exists"}]}))


def test_publishing_a_draft_over_the_limit_is_refused(world: World) -> None:
    """A draft written before the limit existed (rows put in place below the API) cannot be published."""
    programme = world.programme(world.asset())
    world.rule(programme)
    with unit_of_work(world.db) as uow:
        (row,) = uow.programmes.rules_of(world.scope, [programme.draft_version_id])
        stored = RuleBody(row.event_type, row.condition_items(), row.action_items())
        for position in range(1, MAX_RULES_PER_VERSION + 1):
            draft = programme.draft_version_id
            uow.programmes.add_rule(world.scope, new_id("rule"), draft, programme.id, stored, position)
    with pytest.raises(ServiceError) as refused:
        programmes.publish(world.db, world.scope, programme.id)
    assert refused.value.code == "programme_limit_exceeded", refused.value
    assert refused.value.details["limit"] == "rules_per_version" and refused.value.details["field"] == "rules"
    assert programmes.get_programme(world.db, world.scope, programme.id).current_version is None


def _file(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "programme": {"name": "Big"},
        "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2},
        "rules": rules,
    }


def _file_rule(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"event_type": "order.completed", "conditions": conditions or [], "actions": _rule("p")["actions"]}


def test_programme_files_have_the_same_limits_with_the_same_code(tmp_path: Path) -> None:
    many = tmp_path / "many.json"
    many.write_text(json.dumps(_file([_file_rule() for _ in range(MAX_RULES_PER_VERSION + 1)])))
    with pytest.raises(ProgrammeFileError) as refused:
        load_programme(many)
    assert refused.value.code == "programme_limit_exceeded"
    assert refused.value.details["limit"] == "rules_per_version"
    assert refused.value.details["value"] == MAX_RULES_PER_VERSION and refused.value.details["field"] == "rules"

    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(_file([_file_rule(_wide_conditions()) for _ in range(3)])))
    with pytest.raises(ProgrammeFileError) as refused:
        load_programme(wide)
    assert refused.value.code == "programme_limit_exceeded"
    assert refused.value.details["limit"] == "version_rules_bytes"
    assert refused.value.details["value"] == MAX_VERSION_RULES_BYTES

    at_limit = tmp_path / "at_limit.json"
    at_limit.write_text(json.dumps(_file([_file_rule() for _ in range(MAX_RULES_PER_VERSION)])))
    assert len(load_programme(at_limit).rules) == MAX_RULES_PER_VERSION


def test_a_simulation_whose_explanation_is_too_large_is_refused(http: httpx.Client) -> None:
    """20 conditions in each of 14 rules read one 16 kB string: echoed, over 4 MiB (today: answered whole)."""
    program_id = _programme(http, "SIM")
    conditions = [{"field": "note", "operator": "exists"} for _ in range(20)]
    for _ in range(14):
        ok(http.post("/reward-rules", json=_rule(program_id, conditions)), 201)
    long_event = {"event": {"type": "order.completed", "note": "n" * 16_384}}
    response = http.post(f"/reward-programs/{program_id}/simulate", json=long_event)
    assert len(response.content) < 100_000
    details = _refused(response, "simulation_too_large")
    assert details["limit"] == "simulation_response_bytes" and details["field"] == "event"
    assert details["value"] == programme_limits.MAX_SIMULATION_RESPONSE_BYTES
    # The same programme explains a short event in full, and one rule explains the long one.
    short = ok(
        http.post(f"/reward-programs/{program_id}/simulate", json={"event": {**long_event["event"], "note": "n"}})
    )
    assert len(short["rules"]) == 14 and short["matched"]
    rule_id = short["rules"][0]["rule_id"]
    assert ok(http.post(f"/reward-rules/{rule_id}/simulate", json=long_event))["matched"]


def test_a_simulation_over_its_time_budget_is_refused(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    programme = world.programme(world.asset())
    world.rule(programme, conditions=[{"field": "amount", "operator": "gte", "value": 1}])
    monkeypatch.setattr(programme_limits, "MAX_SIMULATION_SECONDS", 0.0)
    event = validate(rq.SimulationRequest, {"event": {"type": "order.completed", "amount": 5}})
    with pytest.raises(ServiceError) as refused:
        simulation.simulate_programme(world.db, world.scope, programme.id, event)
    assert refused.value.code == "simulation_too_large"
    assert refused.value.details["limit"] == "simulation_seconds"
