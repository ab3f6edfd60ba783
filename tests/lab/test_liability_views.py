"""What shows liability (issue 19): the figures draw the forecast's own numbers, a synthetic redemption stream is
spent from real rewards and never refused, and the comparison widget replays both versions on a DuckDB file."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from rewards_lab.forecasting.liability import forecast_liability
from rewards_lab.lab import plots, synthetic
from rewards_lab.lab.liability_widgets import LIABILITY_HINT, LiabilityComparison
from rewards_lab.lab.workbench import Lab, LabProgramme
from rewards_lab.replay.engine import replay
from tests.lab.test_liability import replayed, shop

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


def test_the_liability_figure_draws_history_projection_range_and_ceiling() -> None:
    result = forecast_liability(replayed(shop(ceiling="150", value="0.5")), days=5, draws=50)
    axes = plots.liability(result).axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert list(lines["Shop: liability"].get_ydata()) == [100.0, 70.0, 98.0]
    assert list(lines["Shop: projected"].get_ydata()) == list(result.projection["mid"])
    assert list(lines["ceiling 150 PTS"].get_ydata()) == [150.0, 150.0]
    assert len(axes.collections) == 1 and "redeemed 13.55% a day" in axes.get_title()
    money = plots.liability(result, money=True).axes[0]
    assert list(money.get_lines()[0].get_ydata()) == [50.0, 35.0, 49.0]
    with pytest.raises(ValueError, match="value_per_unit"):
        plots.liability(forecast_liability(replayed(), days=2, draws=10), money=True)


def test_the_comparison_figure_draws_both_versions_and_the_difference() -> None:
    draft = forecast_liability(replayed(), days=3, draws=20)
    published = forecast_liability(replayed(spends=None), days=3, draws=20)
    figure = plots.liability_comparison(draft, published)
    axes = figure.axes[0]
    labels = [line.get_label() for line in axes.get_lines()]
    assert labels[:2] == ["draft: liability", "draft: projected"] and "published: liability" in labels
    assert f"{draft.end['mid'] - published.end['mid']:+,.2f}" in axes.get_title()
    assert len(axes.collections) == 2
    assert plots.png(plots.liability_comparison(draft, None)).startswith(b"\x89PNG")


def test_synthetic_redemptions_spend_rewards_their_customers_earned() -> None:
    events = synthetic.generate_events(800, 60, seed=5, days=30).to_pandas()
    first = replay(events, SPRING)
    spent = synthetic.redemptions(first, seed=2, share=0.5, mean_delay_days=3)
    assert list(spent.columns) == ["customer_id", "amount", "occurred_at"] and len(spent) > 20
    assert spent["occurred_at"].is_monotonic_increasing
    assert set(spent["customer_id"]) <= set(first.to_pandas()["customer_id"])
    again = replay(events, SPRING, redemptions=spent)
    totals = again.totals()
    assert totals["redemptions_refused"] == 0  # each spends part of one reward, earned before
    assert totals["redeemed"] == sum(Decimal(amount) for amount in spent["amount"])
    assert synthetic.redemptions(first, seed=2, share=0.5, mean_delay_days=3).equals(spent)  # seeded


@pytest.fixture
def spring(tmp_path: Path) -> LabProgramme:
    programme = Lab(tmp_path / "lab.duckdb").load(SPRING)
    programme.publish()
    programme.update_rule(0, amount={"per": "amount", "rate": "0.1"})
    return programme


def test_the_widget_compares_draft_and_published_liability(spring: LabProgramme) -> None:
    events = synthetic.generate_events(400, 40, seed=3, days=20).to_pandas()
    widget = LiabilityComparison(spring, events)
    assert widget.summary.value == LIABILITY_HINT and widget.figure.layout.display == "none"
    assert (widget.draft.value, widget.published.value) == ("draft", 1)
    widget.days_ahead.value = 30
    widget.run.click()
    assert bytes(widget.figure.value).startswith(b"\x89PNG") and widget.figure.layout.display is None
    draft, published = widget.forecasts["draft"], widget.forecasts["published"]
    assert draft.end["mid"] > published.end["mid"]  # twice the rate on orders
    assert "difference +" in widget.summary.value and "version 1" in widget.summary.value
    widget.money.value = True
    widget.run.click()
    assert "value_per_unit" in widget.summary.value and "field_invalid" in widget.summary.value


def test_the_widget_values_the_liability_in_money_when_the_asset_has_a_value_per_unit(tmp_path: Path) -> None:
    gated = SPRING.with_name("spring_gated.json")  # value_per_unit 0.01
    programme = Lab(tmp_path / "lab.duckdb").load(gated)
    programme.publish()
    widget = LiabilityComparison(programme, synthetic.generate_events(300, 30, seed=4, days=15).to_pandas())
    widget.money.value = True
    widget.days_ahead.value = 10
    widget.run.click()
    draft = widget.forecasts["draft"]
    assert draft.history.value_per_unit == Decimal("0.01") and "difference +0.00" in widget.summary.value
    assert list(draft.history.frame["value"]) == [v * Decimal("0.01") for v in draft.history.frame["liability"]]
    assert bytes(widget.figure.value).startswith(b"\x89PNG")
