"""A programme version's window: the event times it rewards (its timezone is checked by the contract).

The window is half-open: an event whose time t (its `occurred_at`, else its time of receipt) satisfies
starts_at <= t < ends_at is rewarded; either bound may be absent. Bounds and event times are compared as epoch
microseconds in UTC, so the worker converts no timestamps to Python objects per event.

A programme may also bound how old an event may be when it is received (`too_old`): its `occurred_at` more than
`max_event_age_days` before its receipt. Replay receives each event when it occurred, so there none is too old.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1)
_AWARE_EPOCH = _EPOCH.replace(tzinfo=UTC)


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware date-time, or of a naive one taken as UTC (as the store keeps)."""
    naive = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment
    delta = naive - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def instant(at_us: int) -> datetime:
    """The aware UTC date-time of epoch microseconds (exact)."""
    return _AWARE_EPOCH + timedelta(microseconds=at_us)


def within_window(at_us: int, starts_at_us: int | None, ends_at_us: int | None) -> bool:
    """starts_at <= t < ends_at, an absent bound holding for every t."""
    return (starts_at_us is None or starts_at_us <= at_us) and (ends_at_us is None or at_us < ends_at_us)


DAY_US = 86_400_000_000


def too_old(at_us: int, received_us: int, max_age_days: int | None) -> bool:
    """Whether an event of time t received at r is older than the programme's bound: t < r - max_age (a bound of
    None holds for every event; an event exactly max_age old is still rewarded)."""
    return max_age_days is not None and at_us < received_us - max_age_days * DAY_US
