"""Customer segments: derived from activity and rewards, read-only. Thresholds are named here, once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

NEW_WITHIN = timedelta(days=30)
ACTIVE_WITHIN = timedelta(days=30)
DORMANT_AFTER = timedelta(days=90)
HIGH_VALUE_WINDOW = timedelta(days=90)
HIGH_VALUE_QUANTILE = 0.9
HIGH_VALUE_MIN_PEERS = 10

SEGMENT_NAMES = {
    "new": "New",
    "active": "Active",
    "lapsing": "Lapsing",
    "dormant": "Dormant",
    "high_value": "High value",
}


@dataclass(frozen=True, slots=True)
class Activity:
    created_at: datetime
    last_event_at: datetime | None
    events_last_30_days: int
    high_value_assets: tuple[str, ...]  # assets in whose top decile of rewards the customer sits


def classify(now: datetime, activity: Activity) -> list[tuple[str, str]]:
    """(code, reason) for every segment the customer is in, in a fixed order."""
    segments: list[tuple[str, str]] = []
    age = now - activity.created_at
    if age < NEW_WITHIN:
        segments.append(("new", f"created {age.days} days ago (under {NEW_WITHIN.days})"))
    last = activity.last_event_at
    if last is not None and now - last < ACTIVE_WITHIN:
        segments.append(("active", f"{activity.events_last_30_days} events in the last {ACTIVE_WITHIN.days} days"))
    elif last is not None and now - last < DORMANT_AFTER:
        segments.append(("lapsing", f"last event {(now - last).days} days ago"))
    elif age >= NEW_WITHIN:
        since = "ever" if last is None else f"for {(now - last).days} days"
        segments.append(("dormant", f"no event {since}"))
    for asset_id in activity.high_value_assets:
        segments.append(
            (
                "high_value",
                f"rewards of {asset_id} in the last {HIGH_VALUE_WINDOW.days} days are in the top "
                f"{round((1 - HIGH_VALUE_QUANTILE) * 100)}% of customers",
            )
        )
    return segments
