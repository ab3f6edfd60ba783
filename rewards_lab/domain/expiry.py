"""When a lot expires (pure; no I/O): the instant an expiry policy gives an issuance.

Times are naive UTC datetimes, as the store keeps them. `after_days` adds whole days to the issuance's instant;
`at_end_of` finds the calendar period (month, quarter, year) the issuance falls in, in the policy's timezone,
moves `after` periods on, and expires at the first instant of the period after that one (local midnight, so
"the end of March" is 1 April 00:00 local, converted back to UTC).

Under `at_end_of` the instant depends only on the local month of the issuance (`month_index`), so the replay
computes each event's month index over its columns (`month_index` is a formula, `domain.formulas`) and asks
`month_end` once per month of the history; under `after_days` it adds `after_us` to each event's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, cast
from zoneinfo import ZoneInfo

from rewards_lab.domain.formulas import W
from rewards_lab.domain.schedule import DAY_US

_MONTHS = {"month": 1, "quarter": 3, "year": 12}


@dataclass(frozen=True, slots=True)
class ExpiryPolicy:
    """An expiry as the engine applies it: `after_days`, or `at_end_of` with `after` periods."""

    after_days: int | None = None
    at_end_of: str | None = None
    after: int = 0

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> ExpiryPolicy | None:
        """The policy of a stored expiry (its JSON form); None: points never expire."""
        if not stored:
            return None
        if stored.get("after_days") is not None:
            return cls(after_days=int(stored["after_days"]))
        return cls(at_end_of=str(stored["at_end_of"]), after=int(stored.get("after", 0)))

    @property
    def after_us(self) -> int | None:
        """What `after_days` adds to the issuance's instant, in microseconds (None: an `at_end_of` policy)."""
        return None if self.after_days is None else self.after_days * DAY_US

    def as_json(self) -> dict[str, Any]:
        """The JSON form a request carries and the store keeps (`of` reads it back)."""
        if self.after_days is not None:
            return {"after_days": self.after_days}
        return {"at_end_of": self.at_end_of, "after": self.after}


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


LAST_INSTANT = datetime.max  # an expiry past the calendar's end (year 9999) is its last instant


def expires_at(policy: ExpiryPolicy, issued_at: datetime, timezone: str = "UTC") -> datetime:
    """The instant (naive UTC) a lot issued at `issued_at` (naive UTC) expires under `policy`; an instant past the
    end of year 9999 (an event dated there, a hundred periods on) is the calendar's last instant."""
    try:
        return _expires_at(policy, issued_at, timezone)
    except (OverflowError, ValueError):  # beyond year 9999 (or before year 1 in the zone's local time)
        return LAST_INSTANT


def reward_expiry(
    programme: ExpiryPolicy | None, timezone: str, asset: ExpiryPolicy | None
) -> tuple[ExpiryPolicy, str] | None:
    """Which expiry governs a reward, and in which timezone: its programme's, in the programme's timezone; else its
    asset's, in UTC (as points issued outside a programme); else none (it never expires). The worker and both
    replays ask this."""
    if programme is not None:
        return programme, timezone
    if asset is not None:
        return asset, "UTC"
    return None


def month_index(year: W, month: W) -> W:
    """A calendar month as one number: year * 12 + month - 1 (a formula: the replay renders it over its columns)."""
    return cast(W, year * 12 + month - 1)


def month_end(policy: ExpiryPolicy, month: int, timezone: str) -> datetime:
    """The instant (naive UTC) a lot issued in local month `month` (`month_index`) expires under an `at_end_of`
    policy; past the end of year 9999, the calendar's last instant."""
    try:
        return _month_end(policy, month, timezone)
    except (OverflowError, ValueError):
        return LAST_INSTANT


def _month_end(policy: ExpiryPolicy, month: int, timezone: str) -> datetime:
    assert policy.at_end_of is not None
    step = _MONTHS[policy.at_end_of]
    first = month // step * step  # the month opening the issuance's period (a period never spans two years)
    year, after = divmod(first + step * (policy.after + 1), 12)  # the period after the last one
    end = datetime(year, after + 1, 1, tzinfo=_zone(timezone))
    return end.astimezone(UTC).replace(tzinfo=None)


def _expires_at(policy: ExpiryPolicy, issued_at: datetime, timezone: str) -> datetime:
    if policy.after_us is not None:
        return issued_at + timedelta(microseconds=policy.after_us)
    local = issued_at.replace(tzinfo=UTC).astimezone(_zone(timezone))
    return _month_end(policy, month_index(local.year, local.month), timezone)
