"""Matplotlib figures for the lab. Each function returns a `Figure` built without pyplot (no global state, no
display needed): Jupyter shows a returned figure once (as PNG), widgets embed it (`png`), reports keep it."""

from __future__ import annotations

import io
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rewards_lab.lab import forecast
from rewards_lab.lab.liability import LiabilityForecast


class LabFigure(Figure):
    """A Figure that Jupyter shows as PNG by itself: no pyplot, no `%matplotlib inline` needed."""

    def _repr_png_(self) -> bytes:
        return png(self)


def png(figure: Figure, dpi: int = 90) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def cumulative(
    source: Any,
    projection: forecast.Projection | None = None,
    *,
    title: str | None = None,
    size: tuple[float, float] = (8, 4),
) -> Figure:
    """Liability (opening supply + cumulative issuance) per day, the projection's expected path and range, and
    the supply ceiling with the day it was (or would be) reached."""
    h = forecast.history(source)
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    table = forecast.liability(h)
    axes.plot(table["day"], _floats(table["liability"]), color="tab:blue", label=f"{h.label}: liability")
    if projection is not None:
        frame = projection.frame
        axes.plot(frame["day"], frame["expected"], color="tab:blue", linestyle="--", label="projected")
        axes.fill_between(
            frame["day"],
            frame["low"],
            frame["high"],
            color="tab:blue",
            alpha=0.2,
            label=f"{projection.level:.0%} range",
        )
    if h.ceiling is not None:
        axes.axhline(float(h.ceiling), color="tab:red", linewidth=1, label=f"ceiling {h.ceiling}")
        ends = forecast.exhaustion(h)
        if ends.on is not None:  # a date: matplotlib's date units convert it
            axes.axvline(
                cast(float, ends.on), color="tab:red", linestyle=":", label=f"ceiling reached {ends.on} ({ends.kind})"
            )
    axes.set_title(title or f"{h.label}: outstanding supply")
    axes.set_xlabel("day")
    axes.set_ylabel("outstanding supply")
    axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    return figure


def per_rule(source: Any, *, title: str | None = None, size: tuple[float, float] = (8, 3.5)) -> Figure:
    """Issued per rule (horizontal bars)."""
    h = forecast.history(source)
    table = forecast.per_rule(h)
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    axes.barh([str(label) for label in table["rule"]], _floats(table["issued"]), color="tab:green")
    axes.invert_yaxis()
    axes.set_xlabel("issued")
    axes.set_title(title or f"{h.label}: issued per rule")
    return figure


def compare(result: forecast.Comparison, *, size: tuple[float, float] = (10, 4)) -> Figure:
    """Two versions over the same history: cumulative issuance side by side, and the difference per event type."""
    a, b = result.labels
    figure = LabFigure(figsize=size)
    left, right = figure.subplots(1, 2, width_ratios=[3, 2])
    left.plot(result.daily["day"], _floats(result.daily[a]), label=a)
    left.plot(result.daily["day"], _floats(result.daily[b]), label=b, linestyle="--")
    left.set_title("cumulative issuance")
    left.set_xlabel("day")
    left.legend(loc="upper left", fontsize="small")
    for label in left.get_xticklabels():
        label.set_rotation(30)
    differences = _floats(result.by_event_type["difference"])
    colours = ["tab:red" if d > 0 else "tab:green" for d in differences]
    right.barh(list(result.by_event_type["event_type"]), differences, color=colours)
    right.axvline(0, color="black", linewidth=0.8)
    right.set_title(f"{b} minus {a}, per event type")
    figure.tight_layout()
    return figure


def sweep_heatmap(
    frame: pd.DataFrame, x: str, y: str, value: str = "issued", *, size: tuple[float, float] = (7, 5)
) -> Figure:
    """A sweep's grid as a heat map of `value` over two of its parameter columns; cells where the ceiling ran
    out are marked with the day it did."""
    grid = frame.assign(**{value: _floats(frame[value])}).pivot_table(index=y, columns=x, values=value, aggfunc="first")
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    image = axes.imshow(grid.to_numpy(dtype=float), origin="lower", aspect="auto", cmap="viridis")
    axes.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    axes.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    axes.set_xlabel(x)
    axes.set_ylabel(y)
    figure.colorbar(image, ax=axes, label=value)
    exhausted = {}
    if "exhausted_on" in frame.columns:
        exhausted = {(row[y], row[x]): row["exhausted_on"] for _, row in frame.iterrows()}
    low, high = float(np.nanmin(grid.to_numpy(dtype=float))), float(np.nanmax(grid.to_numpy(dtype=float)))
    for row_index, y_value in enumerate(grid.index):
        for column_index, x_value in enumerate(grid.columns):
            cell = grid.loc[y_value, x_value]
            day = exhausted.get((y_value, x_value))
            text = f"{cell:,.0f}" + ("" if day is None or pd.isna(day) else f"\nout {day}")
            bright = high > low and (cell - low) / (high - low) > 0.6  # viridis turns yellow: dark text there
            colour = "black" if bright else "white"
            axes.text(column_index, row_index, text, ha="center", va="center", color=colour, fontsize="x-small")
    axes.set_title(f"{value} per grid point")
    return figure


def limits_and_reversals(
    source: Any, *, title: str | None = None, size: tuple[float, float] = (9, 4), weekly: bool = True
) -> Figure:
    """Per week (or day): what the rules called for, split into what was issued and kept (net), what refunds
    took back and what caps and budgets cut (stacked bars), so that the three effects read at a glance."""
    h = forecast.history(source)
    table = forecast.limits_and_reversals(h)
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    if table.empty:
        axes.set_title(f"{h.label}: no caps, budget or reversals")
        return figure
    frame = pd.DataFrame(
        {
            "kept": _floats(table["net"]),
            "taken back by refunds": _floats(table["reversed"]),
            "cut by rule caps": _floats(table["cut_by_rule_caps"]),
            "cut by programme caps": _floats(table["cut_by_programme_caps"]),
            "cut by the budget": _floats(table["cut_by_budget"]),
        },
        index=pd.to_datetime(table["day"]),
    )
    if weekly:
        frame = frame.resample("W-MON", label="left", closed="left").sum()
    bottom = np.zeros(len(frame))
    colours = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "tab:gray")
    width = 5.5 if weekly else 0.8
    for (label, values), colour in zip(frame.items(), colours, strict=True):
        axes.bar(frame.index, values.to_numpy(), width=width, bottom=bottom, color=colour, label=label, align="edge")
        bottom += values.to_numpy()
    axes.set_title(title or f"{h.label}: what the rules called for, {'per week' if weekly else 'per day'}")
    axes.set_ylabel("amount")
    axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    return figure


def _liability_band(axes: Any, result: LiabilityForecast, label: str, colour: str, money: bool) -> None:
    """One version's liability: the history (solid), the projection's middle path (dashed) and its range."""
    past, ahead = result.history, result.projection
    history_values = past.frame["value"] if money else past.frame["liability"]
    prefix = "value_" if money else ""
    axes.plot(past.frame["day"], _floats(history_values), color=colour, label=f"{label}: liability")
    axes.plot(ahead["day"], ahead[f"{prefix}mid"], color=colour, linestyle="--", label=f"{label}: projected")
    level = result.model.level
    axes.fill_between(ahead["day"], ahead[f"{prefix}low"], ahead[f"{prefix}high"], color=colour, alpha=0.2)
    axes.plot([], [], color=colour, alpha=0.3, linewidth=6, label=f"{label}: {level:.0%} range")


def liability(
    result: LiabilityForecast, *, title: str | None = None, money: bool = False, size: tuple[float, float] = (8, 4)
) -> Figure:
    """Outstanding liability (issued - redeemed - expired - reversed) per day, its projection with the range of
    the redemption and breakage model (lab.liability), and the supply ceiling; `money`: valued per unit."""
    if money and result.history.value_per_unit is None:
        raise ValueError("the asset has no value_per_unit to value the liability in money")
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    _liability_band(axes, result, result.history.label, "tab:blue", money)
    ceiling = result.history.ceiling
    if ceiling is not None and not money:
        axes.axhline(float(ceiling), color="tab:red", linewidth=1, label=f"ceiling {ceiling}")
    model = result.model
    breakage = "no breakage observed" if model.breakage is None else f"breakage {model.breakage:.1%}"
    rates = f"redeemed {model.redemption_rate:.2%} a day, expired {model.expiry_rate:.2%} a day, {breakage}"
    axes.set_title(title or f"{result.history.label}: liability ({rates})", fontsize="medium")
    axes.set_xlabel("day")
    axes.set_ylabel("liability (money)" if money else "liability")
    axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    return figure


def liability_comparison(
    draft: LiabilityForecast,
    published: LiabilityForecast | None,
    *,
    labels: tuple[str, str] = ("draft", "published"),
    money: bool = False,
    size: tuple[float, float] = (8, 4),
) -> Figure:
    """The draft's liability and the published version's over the same history and projection, each with its
    range, and the difference at the end of the projection in the title."""
    figure = LabFigure(figsize=size)
    axes = figure.add_subplot()
    _liability_band(axes, draft, labels[0], "tab:orange", money)
    title = f"{labels[0]}: liability"
    if published is not None:
        _liability_band(axes, published, labels[1], "tab:blue", money)
        delta = draft.end["mid"] - published.end["mid"]
        unit = float(draft.history.value_per_unit or 1) if money else 1.0
        title = f"{labels[0]} minus {labels[1]} at the end of the projection: {delta * unit:+,.2f}"
    axes.set_title(title, fontsize="medium")
    axes.set_xlabel("day")
    axes.set_ylabel("liability (money)" if money else "liability")
    axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    return figure
