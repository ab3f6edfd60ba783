"""Forecast guards and the guard override on the wire (issue 19): programmes and versions keep their guards like
their caps, publishing records an override with who gave it, bad guards are `field_invalid` naming the field;
through the service on a DuckDB file and through a real `rewards-lab serve`."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import RewardsClient
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import CeilingGuard, GuardOverride, IssuedGuard, PublishRequest
from rewards_lab.contract.programme_file import dumps_programme, loads_programme, parse_programme
from rewards_lab.contract.validation import validate
from rewards_lab.lab.push import make_plan, push
from rewards_lab.lab.workbench import Lab
from rewards_lab.service import programme_lifecycle, programmes
from tests.conftest import World
from tests.live_server import LiveServer, start_server

GUARDS = [
    {"metric": "issued", "period": "month", "max": "120000"},
    # Guards an empty history passes: the server now checks them on publish (issue 31; a negative max would fail:
    # an empty history adds no liability).
    {"metric": "liability_delta", "max": "50.5"},
    {"metric": "ceiling_exhausted_within_days", "min": 90},
]


def _refusal(body: dict[str, object], model: type = rq.ProgrammeCreate) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        validate(model, body)
    return caught.value


def test_bad_guards_are_field_invalid_naming_the_field() -> None:
    base = {"name": "P", "asset_id": "asset_x"}
    cases = {
        "guards[1].max": [GUARDS[0], {"metric": "liability_delta", "max": "lots"}],
        "guards[0].max": [{"metric": "issued", "period": "day", "max": "-1"}],  # only a delta may be negative
        "guards[0].period": [{"metric": "issued", "period": "lifetime", "max": "1"}],
        "guards[0].min": [{"metric": "ceiling_exhausted_within_days", "min": 0}],
        "guards[0]": [{"metric": "spent"}],
    }
    for field, guards in cases.items():
        error = _refusal({**base, "guards": guards})
        assert (error.code, error.details["field"]) == ("field_invalid", field), (field, error)
    error = _refusal({"guard_override": {"reason": ""}}, PublishRequest)
    assert (error.code, error.details["field"]) == ("field_invalid", "guard_override.reason")
    error = _refusal({"guard_override": {"reason": "x" * 501}}, PublishRequest)
    assert error.details["field"] == "guard_override.reason"
    # JSON numbers parse as Decimal: a whole one is a number of days, an exact limit is taken as written
    parsed = validate(
        rq.ProgrammeCreate,
        {**base, "guards": [{"metric": "ceiling_exhausted_within_days", "min": Decimal("30.0")}]},
    )
    assert parsed.guards == [CeilingGuard(metric="ceiling_exhausted_within_days", min=30)]


def test_guards_are_the_drafts_frozen_into_each_version_and_an_override_stays_with_its_version(world: World) -> None:
    asset = world.asset()
    body = {"name": "Guarded", "asset_id": asset.id, "guards": GUARDS}
    created = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    assert [g.model_dump(mode="json") for g in created.guards] == GUARDS
    world.rule(created)
    first = programmes.publish(world.db, world.scope, created.id)
    assert first.version.guard_override is None
    assert [g.model_dump(mode="json") for g in first.version.guards] == GUARDS
    # the draft changes, version 1 keeps its guards
    update = validate(rq.ProgrammeUpdate, {"guards": GUARDS[:1]})
    edited = programme_lifecycle.update_programme(world.db, world.scope, created.id, update)
    assert edited.guards == [IssuedGuard(metric="issued", period="month", max="120000")]
    assert len(programmes.get_version(world.db, world.scope, created.id, 1).guards) == 3
    override = PublishRequest(guard_override=GuardOverride(reason="approved by finance, ticket 42"))
    second = programmes.publish(world.db, world.scope, created.id, override, actor="key_abc")
    recorded = second.version.guard_override
    assert recorded is not None
    assert (recorded.reason, recorded.given_by) == ("approved by finance, ticket 42", "key_abc")
    assert second.version.guards == edited.guards
    draft = programmes.get_version(world.db, world.scope, created.id, "draft")
    assert draft.guard_override is None and draft.guards == edited.guards  # the next draft inherits no override
    assert programmes.get_version(world.db, world.scope, created.id, 1).guard_override is None
    cleared = programme_lifecycle.update_programme(
        world.db, world.scope, created.id, validate(rq.ProgrammeUpdate, {"guards": None})
    )
    assert cleared.guards == []
    # restoring version 1 brings back its guards (not an override: it has none to give)
    restored = programme_lifecycle.restore_version(world.db, world.scope, created.id, "1")
    assert len(restored.guards) == 3 and restored.guard_override is None


def test_programme_files_carry_guards_and_the_assets_value_per_unit() -> None:
    text = """{"programme": {"name": "P", "guards": [{"metric": "issued", "period": "week", "max": "500"}]},
      "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "value_per_unit": "0.01"},
      "rules": [{"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}]}"""
    definition = loads_programme(text)
    assert definition.programme.guards == [IssuedGuard(metric="issued", period="week", max="500")]
    assert definition.asset.value_per_unit == "0.01"
    again = loads_programme(dumps_programme(definition))
    assert again == definition
    bare = loads_programme(text.replace(', "value_per_unit": "0.01"', ""))
    assert '"value_per_unit"' not in dumps_programme(bare)
    bad = text.replace('"max": "500"', '"max": "five"')
    with pytest.raises(ServiceError) as caught:
        loads_programme(bad, "p.json")
    assert caught.value.details["field"] == "programme.guards[0].max"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("guards") / "guards.duckdb", "Acme")
    yield server
    server.stop()


def test_a_live_server_keeps_guards_and_records_the_override_with_the_key_that_gave_it(live: LiveServer) -> None:
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        asset = api.activate_asset(api.create_asset("Guarded", "GRD", "points", 2).id)
        programme = api.create_programme("Guarded", asset.id, guards=GUARDS)
        assert [g.model_dump(mode="json") for g in programme.guards] == GUARDS
        api.create_rule(programme.id, "order.completed", [{"type": "issue", "amount": {"fixed": "1"}}])
        plain = api.publish(programme.id)  # no body: as before overrides existed
        assert plain.version.number == 1 and plain.version.guard_override is None
        overridden = api.publish(programme.id, guard_override="the forecast double counts refunds")
        recorded = overridden.version.guard_override
        assert recorded is not None and recorded.reason == "the forecast double counts refunds"
        assert recorded.given_by.startswith("key_")
        versions = list(api.iter_versions(programme.id))
        assert [v.guard_override is not None for v in versions] == [False, True, False]
        url = f"{live.base_url}/reward-programs/{programme.id}"
        bad = {"guards": [GUARDS[0], {"metric": "liability_delta", "max": "a lot"}]}
        answer = httpx.patch(url, json=bad, headers=live.headers())
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert (error["code"], error["details"]["field"]) == ("field_invalid", "guards[1].max")
        empty = httpx.post(f"{url}/publish", json={"guard_override": {"reason": ""}}, headers=live.headers())
        assert empty.status_code == 422 and empty.json()["error"]["details"]["field"] == "guard_override.reason"


def _cli(live: LiveServer, *args: str) -> Any:
    """`rewards-lab api ...` in-process, its JSON output."""
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["api", *args, *target])
    assert status == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_the_command_line_sets_and_clears_guards_and_publishes_with_an_override(live: LiveServer) -> None:
    asset = _cli(live, "assets", "create", "--name", "Cli guards", "--symbol", "CLIG", "--decimals", "0")
    _cli(live, "assets", "activate", asset["id"])
    guards = json.dumps(GUARDS[:1])
    programme = _cli(
        live, "programmes", "create", "--name", "Cli guards", "--asset-id", asset["id"], "--guards", guards
    )
    assert programme["guards"] == GUARDS[:1]
    actions = '[{"type": "issue", "amount": {"fixed": "1"}}]'
    _cli(live, "rules", "create", "--program-id", programme["id"], "--event-type", "cli.order", "--actions", actions)
    published = _cli(live, "programmes", "publish", programme["id"], "--guard-override", "finance said yes")
    assert published["version"]["guard_override"]["reason"] == "finance said yes"
    assert published["version"]["guards"] == GUARDS[:1]
    assert _cli(live, "programmes", "update", programme["id"], "--clear-guards")["guards"] == []


def test_push_brings_the_drafts_guards_to_the_files_and_publishes_them(live: LiveServer) -> None:
    data = {
        "programme": {"name": "Pushed guards", "guards": GUARDS},
        "asset": {"name": "Pushed", "symbol": "PGRD", "type": "points", "decimals": 2, "value_per_unit": "0.01"},
        "rules": [{"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}],
    }
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        push(parse_programme(data), api)
        data["programme"]["guards"] = GUARDS[2:]
        changed = parse_programme(data)
        plan = make_plan(changed, api)
        assert [step.kind for step in plan.steps] == ["update_guards", "publish"]
        push(changed, api)
        assert not make_plan(changed, api).changes
        assert plan.programme is not None
        versions = [v for v in api.iter_versions(plan.programme.id) if v.status == "published"]
        assert [len(v.guards) for v in versions] == [3, 1]


def test_the_lab_keeps_guards_and_the_value_per_unit_of_the_files_it_loads(tmp_path: Path) -> None:
    data = {
        "programme": {"name": "Lab guards", "guards": GUARDS},
        "asset": {"name": "Lab", "symbol": "LGRD", "type": "points", "decimals": 2, "value_per_unit": "0.01"},
        "rules": [{"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}],
    }
    with Lab(tmp_path / "lab.duckdb") as lab:
        programme = lab.load(parse_programme(data))
        exported = programme.definition()
        assert [g.model_dump(mode="json") for g in exported.programme.guards] == GUARDS
        assert exported.asset.value_per_unit == "0.01"
        assert programme.set_guards([GUARDS[0]]).guards == [IssuedGuard(metric="issued", period="month", max="120000")]
        assert programme.set_guards(None).guards == []
        with pytest.raises(ServiceError) as caught:
            programme.set_guards([{"metric": "issued", "period": "month", "max": "x"}])
        assert caught.value.details["field"] == "guards[0].max"
