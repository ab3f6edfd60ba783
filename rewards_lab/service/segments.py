"""Customer segments (derived, read-only): new, active, lapsing, dormant, high_value."""

from __future__ import annotations

from datetime import datetime

from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.domain import segments as seg
from rewards_lab.service.customers import get_customer
from rewards_lab.service.presenters import utc
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces.customers import CustomerRow
from rewards_lab.store.interfaces.segments import SegmentStore
from rewards_lab.store.uow import reader


def classify_customer(
    queries: SegmentStore, scope: Scope, customer: r.Customer | CustomerRow, now: datetime
) -> list[tuple[str, str]]:
    """(code, reason) of every segment the customer is in at `now` (the API and the rules read the same)."""
    last_event, recent = queries.event_activity(scope, [customer.id, customer.external_id], now - seg.ACTIVE_WITHIN)
    high_value = queries.high_value_assets(
        scope, customer.id, now - seg.HIGH_VALUE_WINDOW, seg.HIGH_VALUE_QUANTILE, seg.HIGH_VALUE_MIN_PEERS
    )
    activity = seg.Activity(customer.created_at.replace(tzinfo=None), last_event, recent, tuple(high_value))
    return seg.classify(now, activity)


def customer_segments(database: Database, scope: Scope, reference: str) -> r.CustomerSegments:
    customer = get_customer(database, scope, reference)
    now = utcnow()
    segments = [
        r.Segment(code=code, name=seg.SEGMENT_NAMES[code], reason=reason)
        for code, reason in classify_customer(reader(database).segments, scope, customer, now)
    ]
    return r.CustomerSegments(customer_id=customer.id, segments=segments, as_of=utc(now))
