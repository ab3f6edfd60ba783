"""A widget comparing the liability of two versions (the draft and the published one by default) over the same
history: each replayed (with the redemptions given and the same opening supply as the notebook's own replays, so
that the widget's liability is the notebook's), its liability forecast (forecasting.liability) drawn with its range,
the difference at the end of the projection, in the asset's unit or, with a value per unit, in money."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import ipywidgets as w
import pandas as pd

from rewards_lab.contract.errors import ServiceError
from rewards_lab.forecasting.liability import LiabilityForecast, forecast_liability
from rewards_lab.lab import plots
from rewards_lab.lab.figure_widgets import figure_size, show_figure
from rewards_lab.lab.units import unit_of
from rewards_lab.lab.widgets import Panel, _button, _guard, _plot_image, _version_options, needs_rules
from rewards_lab.lab.workbench import LabProgramme

MONEY = "in money (value per unit)"
NO_MONEY = "the asset has no value_per_unit; set one to see money"
LIABILITY_HINT = "<i>choose two versions, then <b>compare</b>: the liability of each appears here</i>"


class LiabilityComparison(Panel):
    """Draft against published liability: replays `events` (with `redemptions`, what customers spent) through
    both, forecasts each `days` ahead and plots them side by side with their ranges. `opening_supply`: what
    customers held before the history, as given to the notebook's replays (liability includes it; the figure draws
    it apart)."""

    def __init__(
        self,
        programme: LabProgramme,
        events: pd.DataFrame,
        *,
        redemptions: Any = None,
        opening_supply: Decimal | int | str = 0,
    ) -> None:
        self.programme = programme
        self.events = events
        self.redemptions = redemptions
        self.opening_supply = opening_supply
        self.draft = w.Dropdown(description="draft")
        self.published = w.Dropdown(description="against")
        self.days_ahead = w.IntSlider(description="project days", value=90, min=7, max=365)
        self.money = w.Checkbox(description=MONEY, value=False, indent=False, layout=w.Layout(width="auto"))
        self.run = _button("compare", button_style="primary")
        self.summary = w.HTML(LIABILITY_HINT)
        self.figure = _plot_image()
        self.forecasts: dict[str, LiabilityForecast] = {}
        self.run.on_click(lambda _: _guard(self.summary, self._run, stale=[self.figure]))
        self.view = w.VBox(
            [w.HBox([self.draft, self.published]), w.HBox([self.days_ahead, self.money]), self.run, self.summary]
            + [self.figure]
        )
        self.refresh()

    def refresh(self) -> None:
        options = _version_options(self.programme)
        self.draft.options = options
        self.draft.value = "draft"
        self.published.options = [("nothing", None), *options]
        self.published.value = options[-2][1] if len(options) > 1 else None  # the live version if any
        self._fit_money()

    def _fit_money(self) -> None:
        """Money needs the asset's value per unit: without one the toggle is off and disabled, saying why."""
        asset = self.programme.asset()
        unit = asset.value_per_unit
        self.money.disabled = unit is None
        if unit is None:
            self.money.value = False
            self.money.description = f"{MONEY} (the asset has no value_per_unit)"
            self.money.tooltip = NO_MONEY
        else:
            self.money.description = MONEY
            self.money.tooltip = f"1 {asset.symbol} is worth {unit}"

    def _forecast(self, version: int | str) -> LiabilityForecast:
        result = self.programme.replay(
            self.events, version=version, redemptions=self.redemptions, opening_supply=self.opening_supply
        )
        return forecast_liability(result, days=self.days_ahead.value)

    def _run(self) -> str:
        self.forecasts = {}
        if self.events.empty:
            raise ServiceError("field_invalid", "there are no events to replay", field="events")
        money = self.money.value
        if money and self.programme.asset().value_per_unit is None:
            raise ServiceError("field_invalid", NO_MONEY, field="money")
        needs_rules(self.programme, self.draft.value, field="draft")
        if self.published.value is not None:
            needs_rules(self.programme, self.published.value, field="against")
        draft = self._forecast(self.draft.value)
        published = None if self.published.value is None else self._forecast(self.published.value)
        self.forecasts = {"draft": draft} | ({"published": published} if published is not None else {})
        labels = (self._label(self.draft.value), self._label(self.published.value))
        figure = plots.liability_comparison(draft, published, labels=labels, money=money, size=figure_size(0.5))
        show_figure(self.figure, figure)
        unit, end = unit_of(draft.history), draft.end
        text = (
            f"{labels[0]}: {unit.amount(round(end['mid'], 2))} in {self.days_ahead.value} days "
            f"({unit.amount(round(end['low'], 2))} to {unit.amount(round(end['high'], 2))})"
        )
        if published is not None:
            difference = end["mid"] - published.end["mid"]
            text += f"; {labels[1]}: {unit.amount(round(published.end['mid'], 2))}; difference {difference:+,.2f}"
        return text

    @staticmethod
    def _label(version: int | str | None) -> str:
        return "draft" if version == "draft" else f"version {version}"
