"""Programme files with expiry (issue 19) through the Lab and push: the asset's expiry and value per unit are made
with the asset, the programme's expiry is planned and applied on the draft like its caps and published with it,
and a live asset whose expiry differs from the file's is noted (an asset's expiry is set when it is made)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.lab.push import make_plan, push
from rewards_lab.lab.workbench import Lab
from tests.live_server import LiveServer, start_server

FILE: dict[str, Any] = {
    "programme": {"name": "Miles", "timezone": "Europe/Paris", "expiry": {"at_end_of": "quarter", "after": 1}},
    "asset": {
        "name": "Miles",
        "symbol": "MILE",
        "type": "points",
        "decimals": 0,
        "expiry": {"after_days": 730},
        "value_per_unit": "0.01",
    },
    "rules": [{"event_type": "flight", "actions": [{"type": "issue", "amount": {"per": "km", "rate": "0.1"}}]}],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push_expiry") / "push.duckdb", "Acme")
    yield server
    server.stop()


def definition(tag: str, edit: Any = None) -> ProgrammeDefinition:
    data = copy.deepcopy(FILE)
    data["asset"]["symbol"], data["programme"]["name"] = f"M{tag}", f"Miles {tag}"
    if edit is not None:
        edit(data)
    return parse_programme(data)


def test_the_lab_loads_and_exports_expiry_and_value_per_unit() -> None:
    file = definition("L")
    with Lab() as lab:
        miles = lab.load(file)
        assert miles.asset().expiry is not None and miles.asset().value_per_unit == "0.01"
        assert miles.definition() == file
        miles.publish()
        assert miles.definition("live").programme.expiry == file.programme.expiry


def test_expiry_is_pushed_with_the_asset_and_the_programme_and_a_change_is_a_new_version(live: LiveServer) -> None:
    file = definition("A")
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        push(file, api)
        (asset,) = [a for a in api.list_assets().data if a.symbol == "MA"]
        assert asset.expiry is not None and asset.expiry.model_dump() == {"after_days": 730}
        assert asset.value_per_unit == "0.01"
        again = make_plan(file, api)
        assert not again.changes, again.text()
        assert any('expiry {"at_end_of":"quarter","after":1}' in line for line in again.matches), again.matches

        def monthly(data: dict[str, Any]) -> None:
            data["programme"]["expiry"] = {"at_end_of": "month", "after": 3}

        changed = definition("A", monthly)
        plan = make_plan(changed, api)
        assert [step.kind for step in plan.steps] == ["update_spending", "publish"], plan.text()
        push(changed, api)
        assert not make_plan(changed, api).changes
        versions = list(api.iter_versions(next(p.id for p in api.list_programmes().data if p.name == "Miles A")))
        published = [v for v in versions if v.status == "published"]
        assert [v.expiry.model_dump() if v.expiry else None for v in published] == [
            {"at_end_of": "quarter", "after": 1},
            {"at_end_of": "month", "after": 3},
        ]

        def asset_never_expires(data: dict[str, Any]) -> None:
            del data["asset"]["expiry"]

        noted = make_plan(definition("A", asset_never_expires), api)
        assert any("expiry" in note and "MA" in note for note in noted.notes), noted.notes
