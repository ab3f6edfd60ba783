"""Customer segments (derived, read-only): new, active, lapsing, dormant, high_value."""

from __future__ import annotations

from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.domain import segments as seg
from rewards_lab.engine.rule_facts import classify_customer
from rewards_lab.presenters import utc
from rewards_lab.service.customers import get_customer
from rewards_lab.store.api import Store, reader
from rewards_lab.store.database import utcnow


def customer_segments(database: Store, scope: Scope, reference: str) -> r.CustomerSegments:
    customer = get_customer(database, scope, reference)
    now = utcnow()
    segments = [
        r.Segment(code=code, name=seg.SEGMENT_NAMES[code], reason=reason)
        for code, reason in classify_customer(reader(database).segments, scope, customer, now)
    ]
    return r.CustomerSegments(customer_id=customer.id, segments=segments, as_of=utc(now))
