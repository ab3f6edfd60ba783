"""The forecast gate: a history replayed through the draft and through the published version, each guard of the
draft (contract.guard_requests) checked on what the replays and their liability forecasts show.

- `issued` (per day, week, month or year): the largest total the draft issued in one calendar period of the
  history (periods in the programme's timezone, weeks from Monday, as caps count them; gross of refunds);
- `liability_delta`: the draft's projected liability at the end of the forecast (the middle path of
  `forecasting.liability.forecast_liability`, `days` ahead of the history's last day) minus the published
  version's; with nothing published, minus the opening supply (a first version is all new liability);
- `ceiling_exhausted_within_days`: days from the end of the history until the supply ceiling runs out
  (`forecast.exhaustion`: 0 when the history already reached it, infinity when it never does), at least `min`.

`rewards-lab push FILE --history EVENTS`, `Lab.publish(history=...)` and notebook 05 call `evaluate` and refuse
to publish when a guard fails, unless an override reason is given (recorded with the published version). The
module lives below the service (`rewards_lab.forecasting`) so that the server can evaluate the same guards.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd

from rewards_lab.contract.guard_requests import CeilingGuard, Guard, IssuedGuard, LiabilityDeltaGuard
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.liability import LiabilityForecast, forecast_liability
from rewards_lab.replay.entry import run_replay

DEFAULT_DAYS = 90  # how far the liability forecast looks ahead of the history


@dataclass(frozen=True)
class Replayed:
    """One version's replay of the history, as the gate reads it."""

    definition: ProgrammeDefinition
    history: forecast.History
    liability: LiabilityForecast


@dataclass(frozen=True)
class GuardCheck:
    """One row of the guard table: the guard, the limit, what the draft and the published version show, the
    figure the limit judges (`checked`: the draft's, or for liability_delta the difference) and the verdict."""

    guard: Guard
    metric: str
    limit: str
    draft: Decimal | float
    published: Decimal | float | None
    checked: Decimal | float
    passed: bool


class GateRefused(Exception):
    """A guard failed and no override was given: nothing was published."""

    def __init__(self, report: GateReport) -> None:
        self.report = report
        super().__init__("the forecast gate refused to publish: " + "; ".join(report.failures()) + "\n" + report.text())


@dataclass(frozen=True, repr=False)
class GateReport:
    checks: list[GuardCheck]
    draft: Replayed
    published: Replayed | None
    days: int

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.metric} is {_show(c.checked)}, the limit {c.limit}" for c in self.checks if not c.passed]

    def table(self) -> pd.DataFrame:
        rows = [
            {
                "metric": c.metric,
                "limit": c.limit,
                "draft": _show(c.draft),
                "published": "-" if c.published is None else _show(c.published),
                "checked": _show(c.checked),
                "result": "pass" if c.passed else "FAIL",
            }
            for c in self.checks
        ]
        return pd.DataFrame(rows, columns=["metric", "limit", "draft", "published", "checked", "result"])

    def enforce(self, override: str | None = None) -> str:
        """Raise `GateRefused` when a guard failed and no override reason is given; else say what stands."""
        if self.passed:
            return "The forecast gate passes: the draft may be published."
        if not override:
            raise GateRefused(self)
        return f"A guard failed, overridden: {override}"

    def text(self) -> str:
        """The report as plain text (the CLI's form): a title, the table and the verdict."""
        if not self.checks:
            return NO_GUARDS
        return "\n".join([self._title() + ":", self.table().to_string(index=False), self._verdict()])

    def _title(self) -> str:
        return f"Forecast gate ({len(self.checks)} guard(s), liability {self.days} days ahead)"

    def _verdict(self) -> str:
        return "all guards pass" if self.passed else f"{len(self.failures())} guard(s) FAIL"

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        """The report as a notebook shows it: a table with a column per figure and the verdict in colour."""
        if not self.checks:
            return f"<p>{html.escape(NO_GUARDS)}</p>"
        columns = ["guard", "limit", "draft", "published", "checked", "verdict"]
        head = "".join(f"<th style='text-align:left'>{name}</th>" for name in columns)
        rows = []
        for c, row in zip(self.checks, self.table().itertuples(index=False), strict=True):
            tds = f"<td style='text-align:left'>{html.escape(_guard_title(c, self.published is not None))}</td>"
            tds += f"<td style='text-align:left'>{html.escape(c.limit)}</td>"
            figures = (row.draft, row.published, row.checked)
            tds += "".join(f"<td style='text-align:right'>{html.escape(str(cell))}</td>" for cell in figures)
            colour, word = ("#070", "pass") if c.passed else ("#b00", "FAIL")
            tds += f"<td style='text-align:left;color:{colour};font-weight:bold'>{word}</td>"
            rows.append(f"<tr>{tds}</tr>")
        colour = "#070" if self.passed else "#b00"
        return (
            f"<p><b>{html.escape(self._title())}</b></p>"
            f"<table class='rewards-gate'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<p style='color:{colour};font-weight:bold'>{html.escape(self._verdict())}</p>"
        )


NO_GUARDS = "Forecast gate: the draft declares no guards."


def _guard_title(check: GuardCheck, published: bool) -> str:
    """A guard as a designer reads it: `issued per month`, `liability change (draft minus published)`."""
    if check.metric == "liability_delta":
        base = "published" if published else "opening supply"
        return f"liability change (draft minus {base})"
    if check.metric == "ceiling_exhausted_within_days":
        return "days until the supply ceiling runs out"
    return check.metric


def _show(value: Decimal | float) -> str:
    if isinstance(value, float):
        return "never" if math.isinf(value) else f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def replayed(
    definition: ProgrammeDefinition, events: Any, *, days: int = DEFAULT_DAYS, seed: int = 0, **replay_options: Any
) -> Replayed:
    """The history through one version: its issuance table and its liability forecast."""
    result = run_replay(events, definition, **replay_options)
    return Replayed(definition, forecast.history(result), forecast_liability(result, days=days, seed=seed))


def largest_issued(replay: Replayed, period: str) -> Decimal:
    """The largest total issued in one calendar period (the programme's timezone; weeks from Monday)."""
    h = replay.history
    rows = h.issued_rows
    if rows.empty:
        return forecast.amount(0, h.decimals)
    zone = replay.definition.programme.zone
    local = pd.to_datetime(rows["occurred_at"], utc=True).dt.tz_convert(zone).dt.tz_localize(None).dt.normalize()
    frequency = {"week": "W-SUN", "month": "M", "year": "Y"}.get(period)  # W-SUN: the weeks ending on Sunday
    key = local if frequency is None else local.dt.to_period(frequency).dt.start_time
    return forecast.amount(int(rows.groupby(key)["amount_minor"].sum().max()), h.decimals)


def days_to_exhaustion(replay: Replayed, *, seed: int = 0) -> float:
    """Days after the history's last day until the ceiling runs out; 0 when the history reached it, infinity
    when there is no ceiling or it is not reached within the exhaustion forecast's horizon."""
    found = forecast.exhaustion(replay.history, seed=seed)
    if found.kind == "historic":
        return 0.0
    if found.kind != "projected" or found.on is None:
        return math.inf
    return float((found.on - replay.history.day_range()[-1].date()).days)


def _end_liability(replay: Replayed) -> Decimal:
    """The middle path's last day, in the asset's decimals (half to even)."""
    return Decimal(repr(replay.liability.end["mid"])).quantize(Decimal(1).scaleb(-replay.history.decimals))


def check(guard: Guard, draft: Replayed, published: Replayed | None, *, seed: int = 0) -> GuardCheck:
    """One guard on the draft's replay (beside the published version's, when there is one)."""
    if isinstance(guard, IssuedGuard):
        mine = largest_issued(draft, guard.period)
        theirs = None if published is None else largest_issued(published, guard.period)
        passed = mine <= Decimal(guard.max)
        return GuardCheck(guard, f"issued per {guard.period}", f"<= {guard.max}", mine, theirs, mine, passed)
    if isinstance(guard, LiabilityDeltaGuard):
        ours = _end_liability(draft)
        base = draft.history.opening_supply if published is None else _end_liability(published)
        delta = ours - base
        theirs = None if published is None else base
        return GuardCheck(guard, "liability_delta", f"<= {guard.max}", ours, theirs, delta, delta <= Decimal(guard.max))
    assert isinstance(guard, CeilingGuard)
    mine_days = days_to_exhaustion(draft, seed=seed)
    their_days = None if published is None else days_to_exhaustion(published, seed=seed)
    metric, limit = "ceiling_exhausted_within_days", f">= {guard.min}"
    return GuardCheck(guard, metric, limit, mine_days, their_days, mine_days, mine_days >= guard.min)


def evaluate(
    draft: ProgrammeDefinition,
    events: Any,
    *,
    published: ProgrammeDefinition | None = None,
    guards: list[Guard] | None = None,
    days: int = DEFAULT_DAYS,
    seed: int = 0,
    **replay_options: Any,
) -> GateReport:
    """Replay `events` through the draft and the published version (None: nothing published yet) and check the
    draft's guards (or `guards`). `replay_options` go to `run_replay` (engine, opening_supply, customers,
    redemptions)."""
    mine = replayed(draft, events, days=days, seed=seed, **replay_options)
    theirs = None if published is None else replayed(published, events, days=days, seed=seed, **replay_options)
    wanted = draft.programme.guards if guards is None else guards
    return GateReport([check(guard, mine, theirs, seed=seed) for guard in wanted], mine, theirs, days)
