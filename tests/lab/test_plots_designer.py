"""Issue 28: figures a programme designer reads without help, on real replays of the sample data: the asset's unit
on every amount axis, thousands separators and no offset corner, sweep parameters in words, titles that say what
is drawn, a sentence where there is nothing to draw, widget figures drawn at the width they are shown at, and one
liability (the notebook's function and the liability widget draw the same numbers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.liability import forecast_liability
from rewards_lab.lab import plots, synthetic
from rewards_lab.lab.figure_widgets import PIXEL_RATIO, PLOT_WIDTH_PX
from rewards_lab.lab.liability_widgets import LiabilityComparison
from rewards_lab.lab.units import Thousands, Unit, grouped
from rewards_lab.lab.widgets import ReplayExplorer
from rewards_lab.lab.workbench import Lab, LabProgramme

ROOT = Path(__file__).resolve().parents[2]
PROGRAMMES = ROOT / "data" / "programmes"
OPENING = "940000"  # as notebook 02: STAR outstanding before the history
GROUPED = re.compile(r"^-?\d{1,3}(,\d{3})*(\.\d+)?$")


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    return pd.read_parquet(ROOT / "data" / "sample_events.parquet")


@pytest.fixture(scope="module")
def spring() -> LabProgramme:
    programme = Lab().load(PROGRAMMES / "spring_launch.json")
    programme.publish()
    return programme


@pytest.fixture(scope="module")
def spring_history(spring: LabProgramme, events: pd.DataFrame) -> forecast.History:
    return forecast.history(spring.replay(events, version="live", opening_supply=OPENING))


def _drawn(figure: Figure) -> Figure:
    plots.png(figure)  # draws: tick labels and offsets are set while drawing
    return figure


def _ticks(axis: Any) -> list[str]:
    return [label.get_text() for label in axis.get_ticklabels() if label.get_text()]


def _assert_amount_axis(axis: Any, unit: str) -> None:
    assert unit in axis.get_label().get_text()
    assert axis.get_offset_text().get_text() == ""  # no 1e6 corner
    ticks = _ticks(axis)
    assert ticks and all(GROUPED.match(t) for t in ticks), ticks
    assert any("," in t for t in ticks), ticks  # the amounts run into thousands: separators


def test_amounts_are_grouped_and_carry_the_unit() -> None:
    assert grouped(forecast.amount(100000000, 2)) == "1,000,000"
    assert Unit("STAR").amount(forecast.amount(100000000, 2)) == "1,000,000 STAR"
    assert Unit("STAR").amount(forecast.amount(1416880, 2)) == "14,168.80 STAR"
    assert Thousands().format_ticks([0, 0.025, 0.05]) == ["0.000", "0.025", "0.050"]
    assert Thousands().format_ticks([940000.0, 960000.0]) == ["940,000", "960,000"]
    with pytest.raises(ValueError, match="STAR has no value_per_unit"):
        Unit("STAR").label("liability", money=True)


def test_the_liability_over_time_has_units_separators_opening_supply_and_ceiling(
    spring_history: forecast.History,
) -> None:
    figure = _drawn(plots.cumulative(spring_history, forecast.project(spring_history, days=60)))
    axes = figure.axes[0]
    _assert_amount_axis(axes.yaxis, "STAR")
    assert axes.get_ylabel() == "liability (STAR)"
    labels = [line.get_label() for line in axes.get_lines()]
    assert "ceiling 1,000,000 STAR" in labels
    assert "opening supply 940,000 STAR (held before the history)" in labels
    assert axes.get_title() == (
        "Spring launch: liability per day (opening supply + issued net of refunds), projected 60 days"
    )


def test_per_rule_bars_say_what_they_total_in_the_unit(spring_history: forecast.History) -> None:
    figure = _drawn(plots.per_rule(spring_history))
    axes = figure.axes[0]
    _assert_amount_axis(axes.xaxis, "STAR")
    assert axes.get_xlabel() == "issued over the history (STAR)"
    assert axes.get_title() == "Spring launch: issued per rule, 2026-01-01 to 2026-03-31"
    assert "per rule and day" not in axes.get_title()
    bar_texts = [t.get_text() for t in axes.texts]
    assert bar_texts and all(t.endswith(" STAR") and "," in t for t in bar_texts)


def test_caps_and_reversals_are_in_the_programme_s_own_unit(events: pd.DataFrame) -> None:
    shop = Lab().load(PROGRAMMES / "fair_shop.json")
    figure = _drawn(plots.limits_and_reversals(forecast.history(shop.replay(events.head(4000), version="draft"))))
    axes = figure.axes[0]
    _assert_amount_axis(axes.yaxis, "SHOP")
    assert "what the rules called for per week" in axes.get_title()
    spring = Lab().load(PROGRAMMES / "spring_launch.json")
    nothing = plots.limits_and_reversals(forecast.history(spring.replay(events.head(200), version="draft")))
    assert nothing.message == "Spring launch has no caps, budget or reversals: nothing was cut or taken back."
    assert [a.axison for a in nothing.axes] == [False] and not nothing.axes[0].get_lines()


def test_the_sweep_heat_map_names_its_parameters_in_words(spring: LabProgramme, events: pd.DataFrame) -> None:
    rate, threshold = "rules[0].actions[0].amount.rate", "rules[0].conditions[0].value"
    grid = spring.sweep(events, {rate: [0.02, 0.05], threshold: [0, 50]}, version="live", opening_supply=OPENING)
    figure = _drawn(plots.sweep_heatmap(grid, x=rate, y=threshold))
    axes, bar = figure.axes
    assert axes.get_xlabel() == "1 · Cashback on orders of 20 or more: rate"  # as every list of rules names it
    assert axes.get_ylabel() == "1 · Cashback on orders of 20 or more: amount at least"
    _assert_amount_axis(bar.yaxis, "STAR")
    assert bar.get_ylabel() == "issued over the history (STAR)"
    assert axes.get_title().startswith("Spring launch: issued over the history (STAR), for each pair of values")
    liability = _drawn(plots.sweep_heatmap(grid, x=rate, y=threshold, value="liability"))
    assert liability.axes[1].get_ylabel() == "liability at the end of the history (STAR)"
    assert all("," in t for t in _ticks(liability.axes[1].yaxis))  # about 1,000,000: never a 1e6 corner


def test_a_one_parameter_sweep_is_a_line_in_words(events: pd.DataFrame) -> None:
    shop = Lab().load(PROGRAMMES / "fair_shop.json")
    cap = "programme.limits[0].max_amount"
    grid = shop.sweep(events.head(3000), {cap: ["300", "800"]})
    figure = _drawn(plots.sweep_line(grid, x=cap))
    axes = figure.axes[0]
    assert axes.get_xlabel() == "programme cap per customer a month: max amount (SHOP)"
    _assert_amount_axis(axes.yaxis, "SHOP")
    assert (
        axes.get_title()
        .replace("\n", " ")
        .startswith("Fair shop: liability at the end of the history, for each programme cap")
    )


def test_the_liability_figure_in_money_names_the_value_per_unit(events: pd.DataFrame) -> None:
    gated = Lab().load(PROGRAMMES / "spring_gated.json")  # value_per_unit 0.01
    outlook = forecast_liability(
        gated.replay(events.head(3000), version="draft", opening_supply=OPENING), days=20, draws=50
    )
    figure = _drawn(plots.liability(outlook, money=True))
    axes = figure.axes[0]
    assert axes.get_ylabel() == "liability (money at 0.01 per STAR)"
    _assert_amount_axis(axes.yaxis, "money")
    assert "opening supply 9,400 in money (held before the history)" in [ln.get_label() for ln in axes.get_lines()]
    points = _drawn(plots.liability(outlook))
    assert "ceiling 1,000,000 STAR" in [line.get_label() for line in points.axes[0].get_lines()]


def test_versions_issuing_the_same_say_so_instead_of_an_empty_difference_plot(
    spring_history: forecast.History,
) -> None:
    same = forecast.compare(spring_history, spring_history, ("the published version", "the draft"))
    figure = plots.compare(same)
    sentence = "The draft and the published version issue the same amounts over this history."
    assert figure.message == sentence
    left, right = figure.axes
    assert not right.patches and not right.axison and sentence.split()[0] in right.texts[0].get_text()
    _drawn(figure)
    _assert_amount_axis(left.yaxis, "STAR")


def test_nothing_issued_is_a_sentence_not_empty_axes(spring: LabProgramme, events: pd.DataFrame) -> None:
    unrewarded = events[events["type"] == "booking.completed"].head(50)  # no rule of Spring launch for bookings
    h = forecast.history(spring.replay(unrewarded))
    figure = plots.per_rule(h)
    assert figure.message == "Spring launch: no rule issued anything over this history."
    assert not figure.axes[0].patches


def test_the_replay_explorer_draws_at_the_width_it_shows(spring: LabProgramme, events: pd.DataFrame) -> None:
    explorer = ReplayExplorer(spring, events.head(4000), opening_supply=OPENING)
    explorer.version.value = 1
    explorer.compare_with.value = "draft"  # published as it is: the draft issues what version 1 does
    explorer.run.click()
    assert "color:#070" in explorer.summary.value
    for image in (explorer.cumulative, explorer.per_rule, explorer.comparison):
        width, height = plots.png_size(bytes(image.value))
        assert image.layout.width == f"{PLOT_WIDTH_PX}px"  # not stretched to the box: shown at this width
        assert width == PLOT_WIDTH_PX * PIXEL_RATIO  # and drawn with every pixel it is shown at (and more)
        assert image.layout.height == "auto" and image.layout.max_width == "100%"
    # two versions issuing the same: the difference panel says so (a version against itself is refused)
    same = plots.compare(explorer.compared) if explorer.compared is not None else None
    assert same is not None and same.message == "The draft and version 1 issue the same amounts over this history."


def test_the_liability_widget_and_the_notebook_draw_one_liability(spring: LabProgramme, events: pd.DataFrame) -> None:
    """Notebook 02: the draft with expiry, synthetic redemptions, the opening supply; the widget used to replay
    without the opening supply (14k against the notebook's 954k)."""
    draft = Lab().load(PROGRAMMES / "spring_launch.json")
    draft.publish()
    draft.set_spending(expiry={"after_days": 30})
    history = events.head(6000)
    spent = synthetic.redemptions(draft.replay(history, version="live"), seed=1, share=0.4)
    outlook = forecast_liability(
        draft.replay(history, version="draft", opening_supply=OPENING, redemptions=spent), days=60
    )
    notebook = plots.liability(outlook, label="draft").axes[0]
    widget = LiabilityComparison(draft, history, redemptions=spent, opening_supply=OPENING)
    widget.published.value = None
    widget.days_ahead.value = 60
    widget.run.click()
    assert "color:#070" in widget.summary.value, widget.summary.value
    figure = plots.liability_comparison(widget.forecasts["draft"], None, size=(8, 4))
    drawn = {line.get_label(): list(line.get_ydata()) for line in figure.axes[0].get_lines()}
    expected = {line.get_label(): list(line.get_ydata()) for line in notebook.get_lines()}
    for label in ("draft: liability", "draft: projected", "opening supply 940,000 STAR (held before the history)"):
        assert drawn[label] == expected[label]
    assert drawn["draft: liability"][0] > 940000  # the opening supply is in the liability, drawn apart
    width, _ = plots.png_size(bytes(widget.figure.value))
    assert widget.figure.layout.width == f"{PLOT_WIDTH_PX}px" and width == PLOT_WIDTH_PX * PIXEL_RATIO
    assert "STAR" in widget.summary.value
