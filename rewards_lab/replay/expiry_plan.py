"""Expiry as a replay applies it (issue 19; the live engine's rewards_lab.domain.expiry): which policy a programme's
rewards expire under, until when the replay runs the expiry worker, and when a lot issued at a time expires, as
SQL both engines read.

A reward's lot is issued at its event's `occurred_at` and expires under the programme's `expiry` in the
programme's timezone, else under the asset's own `expiry` in UTC (none: the replay has no lots). `after_days`
adds whole days to the microsecond (`ExpiryPolicy.after_us`); `at_end_of` depends only on the local calendar month
the reward falls in, so the replay reads that month in SQL (the engines' time zone conversion, as for
`occurred_at.date`; `domain.expiry.month_index` rendered over it) and the instant it expires comes from
`domain.expiry.month_end` itself, once per month of the history.

`as_of` is the moment the replay ends: the worker has run until then, so every lot with `expires_at <= as_of` has
expired. It defaults to the history's last moment (its last event or redemption) and cannot be earlier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
from sqlglot import exp

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.expiry import ExpiryPolicy, month_end, month_index, reward_expiry
from rewards_lab.domain.schedule import epoch_us
from rewards_lab.replay.sql_values import call


@dataclass(frozen=True)
class ExpiryPlan:
    """The policy of the replayed rewards, its zone and (once known) `as_of` in epoch microseconds."""

    policy: ExpiryPolicy
    zone: str
    as_of: int = 0

    def local_month(self, local: exp.Expr) -> exp.Expr:
        """The month index (`domain.expiry.month_index`) of a local time, as an expression (DuckDB and Spark SQL)."""
        year: exp.Expr = call("year", local)
        return month_index(year, call("month", local))

    def after_days(self, micros: str) -> str | None:
        """SQL of the expiry (epoch microseconds) of a lot issued at `micros`, for `after_days` (else None)."""
        if self.policy.after_us is None:
            return None
        return f"({micros} + CAST({self.policy.after_us} AS BIGINT))"

    def month_ends(self, months: Iterable[int]) -> dict[int, int]:
        """Month index -> the expiry (epoch microseconds) of a lot issued in that local month (`at_end_of`)."""
        return {int(month): epoch_us(month_end(self.policy, int(month), self.zone)) for month in months}


def expiry_plan(definition: ProgrammeDefinition) -> ExpiryPlan | None:
    """The replayed rewards' expiry (`domain.expiry.reward_expiry`: the programme's in its timezone, else the
    asset's in UTC), None when they never expire."""
    info, asset = definition.programme, definition.asset
    programme = None if info.expiry is None else ExpiryPolicy.of(info.expiry.model_dump())
    own = None if asset.expiry is None else ExpiryPolicy.of(asset.expiry.model_dump())
    governing = reward_expiry(programme, info.zone, own)
    return None if governing is None else ExpiryPlan(*governing)


def as_of_micros(value: Any) -> int:
    """Epoch microseconds of an `as_of` (a datetime, pandas Timestamp or ISO text; naive is UTC)."""
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise ServiceError("field_invalid", f"as_of must be a date-time, not {value!r}", field="as_of") from None
    if pd.isna(stamp):
        raise ServiceError("field_invalid", "as_of must be a date-time", field="as_of")
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1000)


def until(plan: ExpiryPlan, as_of: Any, last: int | None) -> ExpiryPlan:
    """The plan with its `as_of`: the one given (not before `last`, the history's last moment), else `last`."""
    if as_of is None:
        return replace(plan, as_of=last if last is not None else 0)
    moment = as_of_micros(as_of)
    if last is not None and moment < last:
        raise ServiceError(
            "field_invalid",
            "as_of must not be before the history's last event or redemption "
            f"({pd.Timestamp(last * 1000, tz='UTC').isoformat()})",
            field="as_of",
        )
    return replace(plan, as_of=moment)
