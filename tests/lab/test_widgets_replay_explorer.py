"""The replay explorer before and after its first run: no broken images, only plots that exist are shown."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rewards_lab.lab.synthetic import generate_events
from rewards_lab.lab.widgets import ReplayExplorer
from rewards_lab.lab.workbench import Lab, LabProgramme

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    return generate_events(300, 40, seed=3, days=10).to_pandas()


@pytest.fixture
def spring() -> LabProgramme:
    programme = Lab().load(SPRING)
    programme.publish()
    return programme


def _shown(explorer: ReplayExplorer) -> list[str]:
    images = {"cumulative": explorer.cumulative, "per_rule": explorer.per_rule, "comparison": explorer.comparison}
    return [name for name, image in images.items() if image.layout.display != "none"]


def test_before_the_first_replay_no_image_is_shown_only_a_hint(spring: LabProgramme, events: pd.DataFrame) -> None:
    explorer = ReplayExplorer(spring, events)
    assert _shown(explorer) == []
    assert "replay" in explorer.summary.value and "plots appear here" in explorer.summary.value


def test_a_replay_shows_its_plots_and_the_comparison_only_when_asked(
    spring: LabProgramme, events: pd.DataFrame
) -> None:
    explorer = ReplayExplorer(spring, events)
    explorer.run.click()
    assert _shown(explorer) == ["cumulative", "per_rule"]
    assert all(bytes(image.value).startswith(b"\x89PNG") for image in (explorer.cumulative, explorer.per_rule))
    explorer.compare_with.value = "draft"
    explorer.run.click()
    assert _shown(explorer) == ["cumulative", "per_rule", "comparison"]
    explorer.compare_with.value = None
    explorer.run.click()
    assert _shown(explorer) == ["cumulative", "per_rule"] and bytes(explorer.comparison.value) == b""
