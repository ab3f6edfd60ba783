"""The lab on real replays: the vectorised replay agrees with the engine's own per-event simulation, and the
replay explorer widget replays, compares and plots when clicked."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from rewards_lab.forecasting import forecast
from rewards_lab.lab import plots
from rewards_lab.lab.synthetic import generate_events
from rewards_lab.lab.widgets import ReplayExplorer
from rewards_lab.lab.workbench import Lab, LabProgramme

ROOT = Path(__file__).resolve().parents[2]
SPRING = ROOT / "data" / "programmes" / "spring_launch.json"


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    return generate_events(1500, 150, seed=7, days=20).to_pandas()


@pytest.fixture
def spring() -> LabProgramme:
    programme = Lab().load(SPRING)
    programme.publish()
    programme.update_rule(0, amount={"per": "amount", "rate": "0.1"})
    return programme


def test_replay_per_rule_totals_equal_the_engines_simulation(spring: LabProgramme, events: pd.DataFrame) -> None:
    for version in ("live", "draft"):
        history = forecast.history(spring.replay(events, version=version))
        replayed = dict(
            zip(forecast.per_rule(history)["rule_index"], forecast.per_rule(history)["issued"], strict=True)
        )
        simulated = spring.simulate_table(events, version=version).groupby("rule_index")["amount"].sum()
        assert {int(k): Decimal(v) for k, v in simulated.items() if v} == {int(k): v for k, v in replayed.items()}
        assert history.decimals == 2 and history.ceiling == Decimal("1000000.00")


def test_the_replay_explorer_replays_compares_and_plots(spring: LabProgramme, events: pd.DataFrame) -> None:
    explorer = ReplayExplorer(spring, events)
    assert [label for label, _ in explorer.version.options] == ["version 1", "draft"]
    assert explorer.version.value == 1 and explorer.compare_with.value is None
    explorer.run.click()
    assert bytes(explorer.cumulative.value).startswith(b"\x89PNG") and bytes(explorer.per_rule.value).startswith(
        b"\x89PNG"
    )
    assert bytes(explorer.comparison.value) == b"" and f"{len(events)} events" in explorer.summary.value
    explorer.compare_with.value = "draft"
    explorer.end.value = explorer.start.value + timedelta(days=4)
    explorer.run.click()
    window = explorer.window()
    occurred = pd.to_datetime(window["occurred_at"], utc=True).dt.date
    assert 0 < len(window) < len(events) and occurred.max() <= explorer.end.value
    assert explorer.compared is not None and bytes(explorer.comparison.value).startswith(b"\x89PNG")
    difference = explorer.compared.totals.set_index("metric").loc["issued", "difference"]
    assert difference > 0 and f"the draft minus version 1: {difference}" in explorer.summary.value
    explorer.start.value = explorer.end.value = explorer.start.value - timedelta(days=30)
    explorer.run.click()
    day = explorer.start.value.isoformat()
    assert f"no events from {day} to {day}: the history runs from 2026-01-01" in explorer.summary.value


def test_the_lab_replays_a_lab_programme_or_a_file(spring: LabProgramme, events: pd.DataFrame) -> None:
    from_file = forecast.history(spring.lab.replay(events, SPRING))
    live = forecast.history(spring.lab.replay(events, spring))
    draft = forecast.history(spring.lab.replay(events, spring, version="draft"))
    assert forecast.per_rule(from_file).equals(forecast.per_rule(live))
    assert forecast.compare(live, draft).totals.set_index("metric").loc["issued", "difference"] > 0


def test_the_readme_lab_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "rewards_lab.lab" in b)
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the documented example, run as written
    out = capsys.readouterr().out
    assert "issue amount x 0.05 issue amount x 0.07" in out and "closing liability" in out  # the diff in words
    assert isinstance(namespace["figure"], plots.LabFigure)
