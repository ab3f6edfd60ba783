"""What rules read beyond an event's data, as the live engine knows it when it evaluates the event: the event's time
(`occurred_at`, else its time of receipt) and its customer (attributes and country as they are then, and the
segments the customer is in then). The values read are recorded in each execution's provenance, like data fields.

Reading segments costs two queries per customer, so they are derived only for the events of versions whose rules
read `customer.segments`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rewards_lab.contract import attributes
from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.domain import segments as seg
from rewards_lab.domain.conditions import CustomerFacts
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.store.interfaces import CustomerRow, SegmentStore


def reads_customer(rules: Sequence[RuleSpec]) -> bool:
    return any(rule.reads("customer") for rule in rules)


def reads_segments(rules: Sequence[RuleSpec]) -> bool:
    return any("customer.segments" in rule.fields() for rule in rules)


def customer_facts(row: CustomerRow, segments: Sequence[str] = ()) -> CustomerFacts:
    return CustomerFacts(attributes.from_json(row.attributes), row.country, tuple(segments))


def segment_codes(
    queries: SegmentStore, scope: Scope, customers: Sequence[CustomerRow], now: datetime
) -> dict[str, tuple[str, ...]]:
    """customer id -> the codes of the segments the customer is in at `now`."""
    return {
        row.id: tuple(code for code, _ in classify_customer(queries, scope, row, now))
        for row in {row.id: row for row in customers}.values()
    }


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
