"""Matplotlib figures for the lab. Each function returns a `Figure` built without pyplot (no global state, no
display needed): Jupyter shows a returned figure once (as PNG), widgets embed it (`png`), reports keep it.

Every amount axis carries the asset's unit and thousands separators (`lab.units`), titles say what is plotted and
over what, and a figure with nothing to draw says so in a sentence (`LabFigure.message`) instead of empty axes."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.liability import LiabilityForecast
from rewards_lab.lab.units import Thousands, Unit, amount_axis, grouped, unit_of


class LabFigure(Figure):
    """A Figure that Jupyter shows as PNG by itself: no pyplot, no `%matplotlib inline` needed. Laid out with
    matplotlib's constrained layout, so that a PNG of its own size (`png(..., tight=False)`) cuts nothing.
    `message`: the sentence drawn instead of a plot when there was nothing to plot (None otherwise)."""

    message: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("layout", "constrained")
        super().__init__(*args, **kwargs)

    def _repr_png_(self) -> bytes:
        return png(self)


def png(figure: Figure, dpi: int = 90, *, tight: bool = True) -> bytes:
    """The figure as PNG; `tight=False` keeps the figure's own size (figsize x dpi pixels), as widgets need."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return buffer.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels (from its header)."""
    if not data.startswith(b"\x89PNG"):
        raise ValueError("not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def say(figure: LabFigure, sentence: str) -> LabFigure:
    """Replace the figure's plots with a sentence (nothing to plot): no empty axes."""
    figure.clear()
    figure.set_figheight(min(figure.get_figheight(), 1.5))  # a line of text, not a plot's worth of white
    axes = figure.add_subplot()
    axes.set_axis_off()
    width = max(30, int(figure.get_figwidth() * 9))  # about the characters a line of the figure holds
    axes.text(0.5, 0.5, textwrap.fill(sentence, width), ha="center", va="center", fontsize="large")
    figure.message = sentence
    return figure


def _say_in(axes: Any, sentence: str) -> None:
    """One panel's sentence instead of its plot (the figure's other panels stay)."""
    axes.clear()
    axes.set_axis_off()
    axes.text(0.5, 0.5, textwrap.fill(sentence, 34), ha="center", va="center", transform=axes.transAxes)


def _legend(figure: Figure, axes: Any) -> None:
    """The legend under the plot, outside it: inside, it hid the ceiling and the lines near it."""
    handles, labels = axes.get_legend_handles_labels()
    columns = 2 if max((len(label) for label in labels), default=0) > 40 else 3
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize="small", frameon=False)


def _period(days: Any) -> str:
    """`2026-01-01 to 2026-03-31`: the days a figure covers."""
    values = [d for d in days if d is not None]
    return "" if not values else f"{min(values)} to {max(values)}"


def _level_lines(axes: Any, unit: Unit, opening: Decimal, ceiling: Decimal | None, money: bool = False) -> None:
    """The opening supply (what customers held before the history: part of the liability, drawn apart) and the
    supply ceiling, as labelled horizontal lines."""
    scale = float(unit.value_per_unit or 1) if money else 1.0
    if opening:
        label = f"opening supply {unit.amount(opening, money=money)} (held before the history)"
        axes.axhline(float(opening) * scale, color="tab:gray", linestyle=":", linewidth=1.2, label=label)
    if ceiling is not None:
        axes.axhline(
            float(ceiling) * scale, color="tab:red", linewidth=1, label=f"ceiling {unit.amount(ceiling, money=money)}"
        )


def cumulative(
    source: Any,
    projection: forecast.Projection | None = None,
    *,
    title: str | None = None,
    size: tuple[float, float] = (8, 4),
) -> Figure:
    """Liability per day (opening supply + what the history issued, net of refunds), the projection's expected
    path and range, the opening supply and the supply ceiling with the day it was (or would be) reached."""
    h = forecast.history(source)
    unit = unit_of(h)
    figure = LabFigure(figsize=size)
    table = forecast.liability(h)
    if table.empty:
        return say(figure, f"{h.label}: the history has no rows, so there is no liability to draw.")
    axes = figure.add_subplot()
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
    _level_lines(axes, unit, h.opening_supply, h.ceiling)
    if h.ceiling is not None:
        ends = forecast.exhaustion(h)
        if ends.on is not None:  # a date: matplotlib's date units convert it
            axes.axvline(
                cast(float, ends.on), color="tab:red", linestyle=":", label=f"ceiling reached {ends.on} ({ends.kind})"
            )
    ahead = "" if projection is None else f", projected {len(projection.frame)} days"
    default = f"{h.label}: liability per day (opening supply + issued net of refunds){ahead}"
    axes.set_title(title or default, fontsize="medium")
    axes.set_xlabel("day")
    amount_axis(axes.yaxis, unit, "liability")
    _legend(figure, axes)
    figure.autofmt_xdate()
    return figure


def per_rule(source: Any, *, title: str | None = None, size: tuple[float, float] = (8, 3.5)) -> Figure:
    """Issued per rule over the whole history (horizontal bars, each with its amount)."""
    h = forecast.history(source)
    unit = unit_of(h)
    table = forecast.per_rule(h)
    figure = LabFigure(figsize=size)
    if table.empty or not any(table["issued"]):
        return say(figure, f"{h.label}: no rule issued anything over this history.")
    axes = figure.add_subplot()
    bars = axes.barh([str(label) for label in table["rule"]], _floats(table["issued"]), color="tab:green")
    axes.bar_label(bars, labels=[unit.amount(v) for v in table["issued"]], padding=3, fontsize="small")
    axes.margins(x=0.15)  # room for the bars' labels
    axes.invert_yaxis()
    amount_axis(axes.xaxis, unit, "issued over the history")
    period = _period(forecast.daily(h)["day"]) if not h.issued_rows.empty else ""
    axes.set_title(title or f"{h.label}: issued per rule, {period}", fontsize="medium")
    return figure


def compare(result: forecast.Comparison, *, size: tuple[float, float] = (10, 4)) -> Figure:
    """Two versions over the same history: cumulative issuance side by side, and the difference per event type
    (a sentence instead when they issue the same)."""
    a, b = result.labels
    unit = Unit(result.symbol)
    figure = LabFigure(figsize=size)
    if result.daily.empty:
        return say(figure, f"{b} and {a}: the history has no rows to compare.")
    left, right = figure.subplots(1, 2, width_ratios=[3, 2])
    left.plot(result.daily["day"], _floats(result.daily[a]), label=a)
    left.plot(result.daily["day"], _floats(result.daily[b]), label=b, linestyle="--")
    left.set_title("issued so far, per day", fontsize="medium")
    left.set_xlabel("day")
    amount_axis(left.yaxis, unit, "issued so far")
    left.legend(loc="upper left", fontsize="small")
    for label in left.get_xticklabels():
        label.set_rotation(30)
        label.set_ha("right")
    differences = _floats(result.by_event_type["difference"])
    if not any(differences):
        issued = any(_floats(result.by_event_type[a]))
        sentence = f"{b} and {a} issue the same amounts over this history."
        if not issued:
            sentence = f"Neither {b} nor {a} issues anything over this history."
        _say_in(right, sentence[0].upper() + sentence[1:])
        figure.message = sentence[0].upper() + sentence[1:]
        return figure
    colours = ["tab:red" if d > 0 else "tab:green" for d in differences]
    right.barh(list(result.by_event_type["event_type"]), differences, color=colours)
    right.axvline(0, color="black", linewidth=0.8)
    amount_axis(right.xaxis, unit, f"{b} minus {a}")
    right.set_title(f"{b} minus {a}: issued per event type", fontsize="medium")
    return figure


VALUE_WORDS = {
    "issued": "issued over the history",
    "liability": "liability at the end of the history",
    "issuances": "rewards issued",
    "failed": "rewards refused",
}
COUNTS = ("issuances", "failed")


def _sweep_context(
    frame: pd.DataFrame, labels: Mapping[str, str] | None, symbol: str | None
) -> tuple[dict[str, str], Unit, str]:
    """A sweep frame's parameter labels, unit and programme name: given, else from the frame's attrs
    (`LabProgramme.sweep` records them)."""
    names = {**frame.attrs.get("labels", {}), **(labels or {})}
    unit = Unit(symbol or frame.attrs.get("symbol") or "points")
    programme = frame.attrs.get("programme")
    return names, unit, f"{programme}: " if programme else ""


def _value_axis(axis: Any, unit: Unit, value: str) -> None:
    if value in COUNTS:
        axis.set_major_formatter(Thousands())
        axis.set_label_text(VALUE_WORDS[value])
    else:
        amount_axis(axis, unit, VALUE_WORDS.get(value, value))


def sweep_heatmap(
    frame: pd.DataFrame,
    x: str,
    y: str,
    value: str = "issued",
    *,
    labels: Mapping[str, str] | None = None,
    symbol: str | None = None,
    size: tuple[float, float] = (7, 5),
) -> Figure:
    """A sweep's grid as a heat map of `value` over two of its parameter columns; cells where the ceiling ran
    out are marked with the day it did. Parameters are labelled as `lab.sweep_labels` writes them (`labels`,
    else the frame's own), amounts in the asset's unit."""
    names, unit, programme = _sweep_context(frame, labels, symbol)
    figure = LabFigure(figsize=size)
    if frame.empty:
        return say(figure, f"{programme}the sweep has no grid points to draw.")
    grid = frame.assign(**{value: _floats(frame[value])}).pivot_table(index=y, columns=x, values=value, aggfunc="first")
    axes = figure.add_subplot()
    image = axes.imshow(grid.to_numpy(dtype=float), origin="lower", aspect="auto", cmap="viridis")
    axes.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
    axes.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    axes.set_xlabel(names.get(x, x))
    axes.set_ylabel(names.get(y, y))
    bar = figure.colorbar(image, ax=axes)
    _value_axis(bar.ax.yaxis, unit, value)
    exhausted = {}
    if "exhausted_on" in frame.columns:
        exhausted = {(row[y], row[x]): row["exhausted_on"] for _, row in frame.iterrows()}
    low, high = float(np.nanmin(grid.to_numpy(dtype=float))), float(np.nanmax(grid.to_numpy(dtype=float)))
    ran_out = False
    for row_index, y_value in enumerate(grid.index):
        for column_index, x_value in enumerate(grid.columns):
            cell = grid.loc[y_value, x_value]
            day = exhausted.get((y_value, x_value))
            out = day is not None and not pd.isna(day)
            ran_out = ran_out or out
            text = grouped(cell, 0) + (f"\nout {day}" if out else "")
            bright = high > low and (cell - low) / (high - low) > 0.6  # viridis turns yellow: dark text there
            colour = "black" if bright else "white"
            axes.text(column_index, row_index, text, ha="center", va="center", color=colour, fontsize="x-small")
    what = VALUE_WORDS.get(value, value) + ("" if value in COUNTS else f" ({unit.symbol})")
    note = "\n(out: the day the supply ceiling ran out)" if ran_out else ""
    axes.set_title(f"{programme}{what}, for each pair of values{note}", fontsize="medium")
    return figure


def sweep_line(
    frame: pd.DataFrame,
    x: str,
    value: str = "liability",
    *,
    labels: Mapping[str, str] | None = None,
    symbol: str | None = None,
    size: tuple[float, float] = (6, 3),
) -> Figure:
    """A sweep over one parameter: `value` at each of its values, each point labelled with its amount."""
    names, unit, programme = _sweep_context(frame, labels, symbol)
    figure = LabFigure(figsize=size)
    if frame.empty:
        return say(figure, f"{programme}the sweep has no grid points to draw.")
    xs, ys = _floats(frame[x]), _floats(frame[value])
    axes = figure.add_subplot()
    axes.plot(xs, ys, marker="o")
    for px, py in zip(xs, ys, strict=True):
        axes.annotate(
            grouped(py, 0), (px, py), textcoords="offset points", xytext=(0, 6), ha="center", fontsize="small"
        )
    axes.margins(y=0.2)
    axes.set_xlabel(names.get(x, x))
    axes.xaxis.set_major_formatter(Thousands())
    _value_axis(axes.yaxis, unit, value)
    title = f"{programme}{VALUE_WORDS.get(value, value)}, for each {names.get(x, x)}"
    axes.set_title(textwrap.fill(title, int(figure.get_figwidth() * 11)), fontsize="medium")
    return figure


def limits_and_reversals(
    source: Any, *, title: str | None = None, size: tuple[float, float] = (9, 4), weekly: bool = True
) -> Figure:
    """Per week (or day): what the rules called for, split into what was issued and kept (net), what refunds
    took back and what caps and budgets cut (stacked bars), so that the three effects read at a glance."""
    h = forecast.history(source)
    unit = unit_of(h)
    table = forecast.limits_and_reversals(h)
    figure = LabFigure(figsize=size)
    if table.empty:
        return say(figure, f"{h.label} has no caps, budget or reversals: nothing was cut or taken back.")
    axes = figure.add_subplot()
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
    period = "per week" if weekly else "per day"
    axes.set_title(title or f"{h.label}: what the rules called for {period}, and what became of it", fontsize="medium")
    amount_axis(axes.yaxis, unit, f"amount {period}")
    _legend(figure, axes)
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


def _check_money(result: LiabilityForecast, money: bool) -> Unit:
    unit = unit_of(result.history)
    if money and unit.value_per_unit is None:
        raise ValueError(f"the asset {unit.symbol} has no value_per_unit to value the liability in money")
    return unit


def liability(
    result: LiabilityForecast,
    *,
    title: str | None = None,
    label: str | None = None,
    money: bool = False,
    size: tuple[float, float] = (8, 4),
) -> Figure:
    """Outstanding liability per day (the opening supply + issued - redeemed - expired - reversed over the
    history: forecasting.liability's one definition), its projection with the range of the redemption and breakage
    model, the opening supply drawn apart and the supply ceiling; `money`: valued per unit. `label` names the
    version in the legend and title (default: the programme's name)."""
    unit = _check_money(result, money)
    past = result.history
    name = label or past.label
    figure = LabFigure(figsize=size)
    if past.frame.empty:
        return say(figure, f"{name}: nothing was issued, redeemed or expired over this history.")
    axes = figure.add_subplot()
    _liability_band(axes, result, name, "tab:blue", money)
    _level_lines(axes, unit, past.opening_supply, past.ceiling, money)
    model = result.model
    breakage = "no breakage observed" if model.breakage is None else f"breakage {model.breakage:.1%}"
    rates = f"redeemed {model.redemption_rate:.2%} a day, expired {model.expiry_rate:.2%} a day, {breakage}"
    heading = f"{name}: liability per day, projected {len(result.projection)} days"
    axes.set_title(title or f"{heading}\n({rates})", fontsize="medium")
    axes.set_xlabel("day")
    amount_axis(axes.yaxis, unit, "liability", money=money)
    _legend(figure, axes)
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
    range, the opening supply drawn apart, and the difference at the end of the projection in the title."""
    unit = _check_money(draft, money)
    figure = LabFigure(figsize=size)
    if draft.history.frame.empty:
        return say(figure, f"{labels[0]}: nothing was issued, redeemed or expired over this history.")
    axes = figure.add_subplot()
    _liability_band(axes, draft, labels[0], "tab:orange", money)
    title = f"{labels[0]}: liability per day, projected {len(draft.projection)} days"
    if published is not None:
        _liability_band(axes, published, labels[1], "tab:blue", money)
        delta = draft.end["mid"] - published.end["mid"]
        scale = float(unit.value_per_unit or 1) if money else 1.0
        what = "in money" if money else unit.symbol
        title = (
            f"{labels[0]} against {labels[1]}: liability per day\n"
            f"at the end of the projection, {labels[0]} minus {labels[1]}: {delta * scale:+,.2f} {what}"
        )
    _level_lines(axes, unit, draft.history.opening_supply, draft.history.ceiling, money)
    axes.set_title(title, fontsize="medium")
    axes.set_xlabel("day")
    amount_axis(axes.yaxis, unit, "liability", money=money)
    _legend(figure, axes)
    figure.autofmt_xdate()
    return figure
