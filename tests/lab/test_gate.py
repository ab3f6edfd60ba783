"""The forecast gate (issue 19): each guard's figure worked out by hand on a small history replayed on DuckDB, the
Lab refusing to publish a draft that breaks a guard (and publishing it with an override recorded), and
`rewards-lab push --history` against a real `rewards-lab serve`: the table, exit 3 with nothing published, the
draft updated, `--override` recorded with the version, a draft within its guards published."""

from __future__ import annotations

import copy
import io
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme, save_programme
from rewards_lab.forecasting.gate import GateRefused, evaluate
from rewards_lab.lab.push_gate import evaluate_for
from rewards_lab.lab.workbench import Lab
from tests.live_server import LiveServer, start_server

# Jan 5: alice 100, bob 50; Feb 5: alice 80. 32 days; at rate 1 the published version issues 150 in January, 230 in
# all; a draft at rate 2 issues 300 in January, 460 in all.
EVENTS = pd.DataFrame(
    {
        "external_event_id": ["o1", "o2", "o3"],
        "type": ["order.completed"] * 3,
        "customer_id": ["alice", "bob", "alice"],
        "occurred_at": [
            datetime(2026, 1, 5, 10, tzinfo=UTC),
            datetime(2026, 1, 5, 12, tzinfo=UTC),
            datetime(2026, 2, 5, 10, tzinfo=UTC),
        ],
        "amount": [100, 50, 80],
    }
)
FILE: dict[str, Any] = {
    "programme": {"name": "Gated", "guards": [{"metric": "issued", "period": "month", "max": "200"}]},
    "asset": {"name": "Gate points", "symbol": "GATE", "type": "points", "decimals": 0, "supply_ceiling": "1000"},
    "rules": [
        {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}]}
    ],
}


def definition(rate: str, guards: list[dict[str, Any]] | None = None, tag: str = "") -> ProgrammeDefinition:
    data = copy.deepcopy(FILE)
    data["rules"][0]["actions"][0]["amount"]["rate"] = rate
    data["programme"]["name"] += tag
    data["asset"]["symbol"] += tag
    if guards is not None:
        data["programme"]["guards"] = guards
    return parse_programme(data)


def test_each_guard_is_the_figure_worked_out_by_hand() -> None:
    """Liability 10 days ahead (nothing redeemed or expired: issuance at the mean of 32 days): draft
    460 + 460/32 x 10 = 603.75 -> 604, published 230 + 230/32 x 10 = 301.875 -> 302: delta 302. Ceiling: the
    exhaustion forecast's last 28 days hold only Feb 5: the draft's 540 of headroom at 160/28 a day runs out in
    ceil(94.5) = 95 days, the published version's 770 at 80/28 in ceil(269.5) = 270."""
    guards = [
        {"metric": "issued", "period": "month", "max": "200"},
        {"metric": "issued", "period": "day", "max": "300"},
        {"metric": "liability_delta", "max": "301"},
        {"metric": "ceiling_exhausted_within_days", "min": 90},
        {"metric": "ceiling_exhausted_within_days", "min": 96},
    ]
    report = evaluate(definition("2", guards), EVENTS, published=definition("1"), days=10)
    table = report.table()
    assert list(table.columns) == ["metric", "limit", "draft", "published", "checked", "result"]
    assert list(table["draft"]) == ["300", "300", "604", "95", "95"]
    assert list(table["published"]) == ["150", "150", "302", "270", "270"]
    assert list(table["checked"]) == ["300", "300", "302", "95", "95"]
    assert list(table["result"]) == ["FAIL", "pass", "FAIL", "pass", "FAIL"]
    assert not report.passed and len(report.failures()) == 3
    assert "3 guard(s) FAIL" in report.text() and "issued per month" in report.text()
    # nothing published yet: the delta is the draft's whole liability; no ceiling: never exhausted
    first = evaluate(definition("1", guards[2:4]), EVENTS, days=10)
    assert list(first.table()["published"]) == ["-", "-"] and first.checks[0].checked == Decimal(302)
    loose = definition("1", [{"metric": "ceiling_exhausted_within_days", "min": 36500}])
    unbounded = loose.model_copy(update={"asset": loose.asset.model_copy(update={"supply_ceiling": None})})
    assert evaluate(unbounded, EVENTS).table()["draft"].tolist() == ["never"]
    assert evaluate(unbounded, EVENTS).passed
    # a draft that issues nothing over the history: nothing issued, no liability added, the ceiling never reached
    idle = definition("1", guards[:1] + guards[2:4])
    idle.rules[0].event_type = "order.never"
    checked = evaluate(idle, EVENTS, published=definition("1"), days=10).table()["checked"]
    assert checked.tolist() == ["0", "-302", "never"]


def test_the_lab_refuses_to_publish_a_draft_that_breaks_a_guard_unless_overridden(tmp_path: Path) -> None:
    with Lab(tmp_path / "lab.duckdb") as lab:
        programme = lab.load(definition("1"))
        first = programme.publish(history=EVENTS)  # January: 150 of at most 200
        assert first.version.number == 1 and programme.gate is not None and programme.gate.passed
        programme.update_rule(0, amount={"per": "amount", "rate": "2"})
        with pytest.raises(GateRefused, match="issued per month is 300, the limit <= 200") as refused:
            programme.publish(history=EVENTS)
        assert refused.value.report.checks[0].published == Decimal(150)
        assert programme.info().current_version == 1  # nothing published
        second = programme.publish(history=EVENTS, override="a one-off January campaign")
        recorded = second.version.guard_override
        assert recorded is not None and (recorded.reason, recorded.given_by) == ("a one-off January campaign", "lab")
        programme.update_rule(0, amount={"per": "amount", "rate": "1.2"})  # 180 in January
        third = programme.publish(history=EVENTS, override="not needed")
        assert third.version.number == 3 and third.version.guard_override is None  # nothing failed to override
        assert programme.publish().version.number == 4  # without a history: as before the gate existed


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("gate") / "gate.duckdb", "Acme")
    yield server
    server.stop()


def _push(live: LiveServer, *args: str) -> tuple[int, str]:
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["push", *args, *target])
    return status, out.getvalue() + err.getvalue()


def test_push_with_a_history_refuses_a_draft_that_breaks_its_guard_and_publishes_one_within_it(
    live: LiveServer, tmp_path: Path
) -> None:
    history = tmp_path / "history.parquet"
    EVENTS.to_parquet(history)
    path = tmp_path / "gated.json"
    save_programme(definition("1", tag="P"), path)
    status, output = _push(live, str(path), "--history", str(history), "--yes")
    assert status == 0, output
    assert "issued per month" in output and "all guards pass" in output
    save_programme(definition("2", tag="P"), path)
    status, output = _push(live, str(path), "--history", str(history), "--yes")
    assert status == 3, output
    assert "FAIL" in output and "Not published" in output
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        programme = next(p for p in api.iter_programmes() if p.name == "GatedP")
        versions = list(api.iter_versions(programme.id))
        assert [v.number for v in versions] == [1, None]  # nothing published
        action = versions[-1].rules[0].actions[0].model_dump(mode="json")
        assert action["amount"]["rate"] == 2  # the draft holds the file
    status, output = _push(live, str(path), "--history", str(history), "--plan-only")
    assert status == 3 and "FAIL" in output, output
    status, output = _push(live, str(path), "--history", str(history), "--yes", "--override", "approved: ticket 7")
    assert status == 0, output
    save_programme(definition("1.2", tag="P"), path)
    status, output = _push(live, str(path), "--history", str(history), "--yes")
    assert status == 0 and "all guards pass" in output, output
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as api:
        published = [v for v in api.iter_versions(programme.id) if v.number is not None]
        overrides = [v.guard_override.reason if v.guard_override else None for v in published]
        assert overrides == [None, "approved: ticket 7", None]
    # --override also answers the server's own gate (tests/cli/test_push_server_gate.py), but needs a reason
    status, output = _push(live, str(path), "--override", " ")
    assert status == 2 and "--override needs a reason" in output
    # notebook 05 given a deployment: the file against the live published version (reads only)
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}):
        report = evaluate_for(path, history, base_url=live.base_url, organization=live.organization_id)
    assert report.table()[["draft", "published", "result"]].values.tolist() == [["180", "180", "pass"]]
