"""Rule names (issue 28) in programme files, the lab and push: a file's names load, save and round-trip through a
lab; a name is not part of what a rule does (its fingerprint), so a renamed rule diffs as renamed and pushes as
an update of the live rule (same id), never as a removal and an addition; a name that is no name is refused
naming the file, the rule and the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import (
    ProgrammeDefinition,
    ProgrammeFileError,
    diff_programmes,
    dumps_programme,
    load_programme,
    loads_programme,
)
from rewards_lab.lab.push import apply, make_plan
from rewards_lab.lab.workbench import Lab
from tests.live_server import LiveServer, start_server

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


def _spring(**renames: Any) -> ProgrammeDefinition:
    """The sample programme, its rules renamed by position (`r0="..."`, `r2=None` drops the name)."""
    data = load_programme(SPRING).payload()
    for key, name in renames.items():
        rule = data["rules"][int(key[1:])]
        if name is None:
            rule.pop("name", None)
        else:
            rule["name"] = name
    return ProgrammeDefinition.model_validate(data)


def test_the_sample_programme_names_its_rules_and_they_round_trip(tmp_path: Path) -> None:
    definition = load_programme(SPRING)
    assert [rule.name for rule in definition.rules] == [
        "Cashback on orders of 20 or more",
        "Welcome bonus",
        "Photo review bonus",
    ]
    text = dumps_programme(definition)
    assert '"name": "Welcome bonus"' in text and loads_programme(text) == definition
    unnamed = _spring(r0=None, r1=None, r2=None)
    assert '"name"' not in str(unnamed.payload()["rules"])  # a file without names writes none, as before
    with Lab() as lab:
        programme = lab.load(definition)
        assert [rule.name for rule in programme.rules()] == [rule.name for rule in definition.rules]
        exported = programme.definition()  # the lab's draft as a file: the same rules, names included
        assert [rule.payload() for rule in exported.rules] == [rule.payload() for rule in definition.rules]
        programme.update_rule(1, name="Sign-up gift")
        assert programme.rules()[1].name == "Sign-up gift" and programme.rules()[0].name == definition.rules[0].name
        programme.update_rule(1, priority=2)  # an edit without a name keeps it
        assert programme.rules()[1].name == "Sign-up gift"
        programme.update_rule(1, name=None)
        assert programme.rules()[1].name is None


def test_a_name_is_not_what_a_rule_does_and_a_rename_diffs_as_a_rename() -> None:
    old, new = _spring(), _spring(r1="Sign-up gift")
    assert [rule.fingerprint() for rule in old.rules] == [rule.fingerprint() for rule in new.rules]
    diff = diff_programmes(old, new)
    assert [(change.kind, change.index) for change in diff.rule_changes] == [("renamed", 1)]
    assert diff.summary() == ["~ rules[1] renamed: 'Welcome bonus' -> 'Sign-up gift'"]
    assert diff_programmes(old, _spring()).is_empty


@pytest.mark.parametrize("name", ["", "   ", "z" * 121])
def test_a_file_with_no_name_for_a_name_names_the_rule_and_the_field(name: str) -> None:
    text = SPRING.read_text().replace('"name": "Welcome bonus"', f'"name": "{name}"')
    with pytest.raises(ProgrammeFileError) as refused:
        loads_programme(text, "spring.json")
    assert refused.value.code == "field_invalid"
    assert (refused.value.details["file"], refused.value.details["field"]) == ("spring.json", "rules[1].name")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push-names") / "push.duckdb", "Acme")
    yield server
    server.stop()


def _variant(tag: str, **renames: Any) -> ProgrammeDefinition:
    data = _spring(**renames).payload()
    data["asset"]["symbol"], data["programme"]["name"] = f"N{tag}", f"Named {tag}"
    return ProgrammeDefinition.model_validate(data)


def test_a_renamed_rule_is_pushed_as_an_update_of_the_live_rule(live: LiveServer) -> None:
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        apply(make_plan(_variant("A"), api), api)
        programme = next(p for p in api.iter_programmes() if p.name == "Named A")
        before = {rule.name: rule.id for rule in list(api.iter_versions(programme.id))[-1].rules}
        assert set(before) == {rule.name for rule in _spring().rules}

        renamed = _variant("A", r1="Sign-up gift", r2=None)
        plan = make_plan(renamed, api)
        assert [(step.kind, step.rule_id) for step in plan.steps] == [
            ("rename_rule", before["Welcome bonus"]),
            ("rename_rule", before["Photo review bonus"]),
            ("publish", None),
        ]
        assert "'Welcome bonus' -> 'Sign-up gift'" in plan.text()
        assert "'Photo review bonus' -> None" in plan.text()
        apply(plan, api)
        assert make_plan(renamed, api).steps == []  # the live side now matches, names included
        versions = list(api.iter_versions(programme.id))
        for version in versions:  # published version 2 and the draft: the same rules (ids), renamed
            if version.number == 1:
                assert [rule.name for rule in version.rules] == [rule.name for rule in _spring().rules]
                continue
            assert [(rule.id, rule.name) for rule in version.rules] == [
                (before["Cashback on orders of 20 or more"], "Cashback on orders of 20 or more"),
                (before["Welcome bonus"], "Sign-up gift"),
                (before["Photo review bonus"], None),
            ]
