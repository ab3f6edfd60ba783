"""A programme version's window: the event times it rewards (its timezone is checked by the contract).

The window is half-open: an event whose time t (its `occurred_at`, else its time of receipt) satisfies
starts_at <= t < ends_at is rewarded; either bound may be absent. Bounds and event times are compared as epoch
microseconds in UTC, so the worker converts no timestamps to Python objects per event.
"""

from __future__ import annotations

from datetime import UTC, datetime

_EPOCH = datetime(1970, 1, 1)


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware date-time, or of a naive one taken as UTC (as the store keeps)."""
    naive = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment
    delta = naive - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def within_window(at_us: int, starts_at_us: int | None, ends_at_us: int | None) -> bool:
    """starts_at <= t < ends_at, an absent bound holding for every t."""
    return (starts_at_us is None or starts_at_us <= at_us) and (ends_at_us is None or at_us < ends_at_us)
