"""Expiry as a replay applies it (issue 19; the live engine's rewards_lab.domain.expiry): which policy a programme's
rewards expire under, until when the replay runs the expiry worker, and when a lot issued at a time expires, as
SQL both engines read.

A reward's lot is issued at its event's `occurred_at` and expires under the programme's `expiry` in the
programme's timezone, else under the asset's own `expiry` in UTC (none: the replay has no lots). `after_days`
adds whole days to the microsecond; `at_end_of` depends only on the local calendar month the reward falls in, so
the replay reads that month in SQL (the engines' time zone conversion, as for `occurred_at.date`) and the
instant it expires comes from `domain.expiry.expires_at` itself, once per month of the history.

`as_of` is the moment the replay ends: the worker has run until then, so every lot with `expires_at <= as_of` has
expired. It defaults to the history's last moment (its last event or redemption) and cannot be earlier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.expiry import ExpiryPolicy, expires_at
from rewards_lab.replay.store import DAY_US

_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class ExpiryPlan:
    """The policy of the replayed rewards, its zone and (once known) `as_of` in epoch microseconds."""

    policy: ExpiryPolicy
    zone: str
    as_of: int = 0

    def local_month(self, local: str) -> str:
        """SQL (DuckDB and Spark) of the month index (year * 12 + month - 1) of a local time."""
        return f"(year({local}) * 12 + month({local}) - 1)"

    def after_days(self, micros: str) -> str | None:
        """SQL of the expiry (epoch microseconds) of a lot issued at `micros`, for `after_days` (else None)."""
        if self.policy.after_days is None:
            return None
        return f"({micros} + CAST({self.policy.after_days * DAY_US} AS BIGINT))"

    def month_ends(self, months: Iterable[int]) -> dict[int, int]:
        """Month index -> the expiry (epoch microseconds) of a lot issued in that local month (`at_end_of`)."""
        zone = ZoneInfo(self.zone)
        found = {}
        for month in months:
            year, index = divmod(int(month), 12)
            inside = datetime(year, index + 1, 15, 12, tzinfo=zone).astimezone(UTC).replace(tzinfo=None)
            found[int(month)] = micros(expires_at(self.policy, inside, self.zone))
        return found


def micros(moment: datetime) -> int:
    """Epoch microseconds of a naive UTC datetime."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def moment(micros_: int) -> datetime:
    """An aware UTC datetime of epoch microseconds."""
    return (_EPOCH + timedelta(microseconds=micros_)).replace(tzinfo=UTC)


def expiry_plan(definition: ProgrammeDefinition) -> ExpiryPlan | None:
    """The replayed rewards' expiry: the programme's (in its timezone), else the asset's (UTC), else None."""
    info, asset = definition.programme, definition.asset
    if info.expiry is not None:
        policy = ExpiryPolicy.of(info.expiry.model_dump())
        return None if policy is None else ExpiryPlan(policy, info.zone)
    if asset.expiry is not None:
        policy = ExpiryPolicy.of(asset.expiry.model_dump())
        return None if policy is None else ExpiryPlan(policy, "UTC")
    return None


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
