"""Push programme files with caps, budgets, clawback and reverse actions (issue 18) to a real `rewards-lab serve`:
the programme's spending settings are planned and applied on the draft like its schedule, rule caps and reverse
actions are part of a rule's fingerprint, a version is never published with spending settings other than the
file's, and verify probes reverse rules (an original neither side holds) and sees when the live side differs."""

from __future__ import annotations

import copy
import io
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import RewardsClient
from rewards_lab.contract import resources as r
from rewards_lab.contract.limit_requests import AmountLimit, Budget, CountLimit
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme, save_programme
from rewards_lab.lab.push import apply, make_plan, push
from rewards_lab.lab.push_verify import ABSENT_ORIGINAL, sample_events, verify
from tests.live_server import LiveServer, start_server

FILE: dict[str, Any] = {
    "programme": {
        "name": "Capped",
        "limits": [{"per": "customer", "period": "month", "max_amount": "25"}],
        "budget": {"period": "day", "max_amount": "1000"},
        "clawback": "negative",
    },
    "asset": {"name": "Capped points", "symbol": "CAP", "type": "points", "decimals": 2},
    "rules": [
        {
            "event_type": "shop.order",
            "conditions": [{"field": "amount", "operator": "gte", "value": 10}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "0.1"}}],
            "limits": [{"per": "customer", "period": "day", "max_count": 2}],
        },
        {
            "event_type": "shop.refund",
            "actions": [
                {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}}
            ],
        },
        {"event_type": "shop.cancel", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]},
        {
            "event_type": "shop.partial",
            "actions": [
                {"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.5"},
                {"type": "issue", "amount": {"fixed": "1"}},
            ],
        },
    ],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push_caps") / "push.duckdb", "Acme")
    yield server
    server.stop()


def client(live: LiveServer, environment: str = "sandbox") -> RewardsClient:
    return RewardsClient(live.base_url, live.keys[environment], live.organization_id, environment)


def definition(tag: str, edit: Any = None) -> ProgrammeDefinition:
    """The file under its own symbol and name (tests share one server without meeting), edited by `edit`."""
    data = copy.deepcopy(FILE)
    data["asset"]["symbol"], data["programme"]["name"] = f"C{tag}", f"Capped {tag}"
    if edit is not None:
        edit(data)
    return parse_programme(data)


def versions(api: RewardsClient, file: ProgrammeDefinition) -> tuple[r.ProgrammeVersion, list[r.ProgrammeVersion]]:
    (programme,) = [p for p in api.iter_programmes() if p.name == file.programme.name]
    found = list(api.iter_versions(programme.id))
    (draft,) = [v for v in found if v.status == "draft"]
    return draft, [v for v in found if v.status == "published"]


def test_spending_settings_rule_caps_and_reverse_actions_are_pushed_and_nothing_is_left_to_do(
    live: LiveServer,
) -> None:
    file = definition("A")
    with client(live) as api:
        plan = make_plan(file, api)
        kinds = [step.kind for step in plan.steps]
        assert kinds == ["create_asset", "activate_asset", "create_programme", *["add_rule"] * 4, "publish"]
        push(file, api)
        draft, (published,) = versions(api, file)
        for version in (draft, published):
            assert (version.limits, version.budget, version.clawback) == (
                [AmountLimit(period="month", max_amount="25")],
                Budget(period="day", max_amount="1000"),
                "negative",
            )
        assert [rule.limits for rule in published.rules] == [[CountLimit(period="day", max_count=2)], [], [], []]
        assert [a.model_dump(mode="json") for a in published.rules[3].actions][0] == {
            "type": "reverse",
            "original": {"field": "order_id"},
            "fraction": "0.5",
        }
        again = make_plan(file, api)
        assert not again.changes, again.text()
        assert any("caps, budget and clawback are the file's" in line for line in again.matches)


@pytest.mark.parametrize(
    ("tag", "edit", "kinds"),
    [
        ("B", lambda d: d["programme"].update(budget={"period": "day", "max_amount": "2000"}), ["update_spending"]),
        ("W", lambda d: d["programme"].update(clawback="none"), ["update_spending"]),
        ("N", lambda d: d["programme"].pop("limits"), ["update_spending"]),
        ("R", lambda d: d["rules"][0]["limits"][0].update(max_count=3), ["remove_rule", "add_rule"]),
        ("F", lambda d: d["rules"][3]["actions"][0].update(fraction="0.25"), ["remove_rule", "add_rule"]),
    ],
    ids=["budget", "clawback", "caps removed", "rule cap", "reverse fraction"],
)
def test_a_changed_setting_is_planned_applied_and_published_as_a_new_version(
    live: LiveServer, tag: str, edit: Any, kinds: list[str]
) -> None:
    file, changed = definition(tag), definition(tag, edit)
    with client(live) as api:
        push(file, api)
        plan = make_plan(changed, api)
        assert [step.kind for step in plan.steps] == [*kinds, "publish"], plan.text()
        assert ("  ~ set the draft's caps " in plan.text()) == ("update_spending" in kinds)
        push(changed, api)
        assert not make_plan(changed, api).changes
        _, published = versions(api, changed)
    assert [v.number for v in published] == [1, 2]
    first, second = ({"limits": v.limits, "budget": v.budget, "clawback": v.clawback} for v in published)
    settings = changed.programme
    assert second == {"limits": settings.limits, "budget": settings.budget, "clawback": settings.clawback}
    original = file.programme
    assert first == {"limits": original.limits, "budget": original.budget, "clawback": original.clawback}


def test_a_hand_edited_draft_is_brought_back_and_never_published(live: LiveServer) -> None:
    file = definition("H")
    with client(live) as api:
        push(file, api)
        (programme,) = [p for p in api.iter_programmes() if p.name == file.programme.name]
        api.update_programme(programme.id, budget={"period": "day", "max_amount": "5"})
        plan = make_plan(file, api)
        assert [step.kind for step in plan.steps] == ["update_spending"]  # the live version is still the file's
        changed = definition("H", lambda d: d["rules"][0]["actions"][0]["amount"].update(rate="0.2"))
        plan = make_plan(changed, api)
        assert [step.kind for step in plan.steps] == ["update_spending", "remove_rule", "add_rule", "publish"]
        # Someone edits the draft again between the plan and its publication: the plan's update_spending runs
        # first, then the hand edit lands, so the publish step finds the draft is not the file's and re-plans.
        real = api.update_programme
        edits = []

        def edited_after(*args: Any, **kwargs: Any) -> r.Programme:
            result = real(*args, **kwargs)
            if not edits:  # once
                edits.append(real(programme.id, clawback="available"))
            return result

        api.update_programme = edited_after  # type: ignore[method-assign]
        try:
            result = apply(plan, api)
        finally:
            del api.update_programme
        assert result.rounds >= 2
        draft, published = versions(api, changed)
    assert [v.number for v in published] == [1, 2]
    assert all(v.clawback == "negative" and v.budget == file.programme.budget for v in published)
    assert draft.clawback == "negative"


def test_verify_probes_reverse_rules_and_sees_an_original_the_live_side_holds(live: LiveServer) -> None:
    file = definition("V")
    refund_samples = sample_events(file.rules[1])
    assert {"type": "shop.refund", "order_id": ABSENT_ORIGINAL, "refund": 1} in refund_samples
    assert {"type": "shop.refund", "refund": 1} in refund_samples  # no original named
    assert {"type": "shop.refund", "order_id": ABSENT_ORIGINAL} in refund_samples  # no share
    with client(live, "production") as api:  # its own environment: the original sent below meets no other test
        push(file, api)
        report = verify(file, api)
        assert report.ok, report.text()
        assert report.checks == sum(len(sample_events(rule)) for rule in file.rules)
        customer = api.create_customer("verify-customer")
        api.create_wallet(customer.id)
        event = api.submit_event("shop.order", ABSENT_ORIGINAL, customer.id, data={"amount": 5})
        deadline = time.monotonic() + 15
        while api.get_event(event.id).status == "received":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        differs = verify(file, api)
    assert not differs.ok
    assert {d.rule_index for d in differs.differences} == {1, 2, 3}
    assert {d.lab for d in differs.differences if d.rule_index == 2} == {"issues refused original_not_found"}
    assert {d.live for d in differs.differences if d.rule_index == 2} == {"issues takes back 0.00"}


def _push_command(live: LiveServer, *args: str) -> tuple[int, str]:
    """`rewards-lab push ...` in-process (the command's own entry point), its status and output."""
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["push", *args, *target])
    return status, out.getvalue() + err.getvalue()


def test_the_push_command_plans_applies_and_verifies_spending_and_refund_rules(
    live: LiveServer, tmp_path: Path
) -> None:
    path = save_programme(definition("P"), tmp_path / "p.json")
    status, output = _push_command(live, str(path), "--yes")
    assert status == 0, output
    assert "Applied 8 step(s)" in output and "no difference" in output
    changed = save_programme(definition("P", lambda d: d["programme"].update(clawback="available")), path)
    status, output = _push_command(live, str(changed), "--plan-only")
    assert status == 0, output
    assert "~ set the draft's caps [" in output and "clawback available" in output and "2 change(s)" in output
