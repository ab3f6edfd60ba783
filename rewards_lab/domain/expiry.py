"""When a lot expires (pure; no I/O): the instant an expiry policy gives an issuance.

Times are naive UTC datetimes, as the store keeps them. `after_days` adds whole days to the issuance's instant;
`at_end_of` finds the calendar period (month, quarter, year) the issuance falls in, in the policy's timezone,
moves `after` periods on, and expires at the first instant of the period after that one (local midnight, so
"the end of March" is 1 April 00:00 local, converted back to UTC).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

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


def _expires_at(policy: ExpiryPolicy, issued_at: datetime, timezone: str) -> datetime:
    if policy.after_days is not None:
        return issued_at + timedelta(days=policy.after_days)
    assert policy.at_end_of is not None
    zone = _zone(timezone)
    local = issued_at.replace(tzinfo=UTC).astimezone(zone)
    step = _MONTHS[policy.at_end_of]
    first_month = (local.month - 1) // step * step  # 0-based month opening the issuance's period
    month_index = local.year * 12 + first_month + step * (policy.after + 1)  # the period after the last one
    year, month = divmod(month_index, 12)
    end = datetime(year, month + 1, 1, tzinfo=zone)
    return end.astimezone(UTC).replace(tzinfo=None)
