"""Which rules an event matches and what they call for: the facts rules read, the versions in window, the
beneficiaries, the plan of one event."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from rewards_lab import presenters
from rewards_lab.contract import jsonutil
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.conditions import EventFacts
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.domain.rule_evaluation import RuleMatch, evaluate
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.domain.schedule import too_old
from rewards_lab.engine.batch_plan import (
    BENEFICIARY_NOT_FOUND,
    EventPlan,
    ExecutionKey,
    Planned,
    Recipient,
)
from rewards_lab.engine.rule_book import (
    LiveRuleBook,
    VersionMeta,
)
from rewards_lab.engine.rule_facts import customer_facts, reads_customer, reads_segments, segment_codes
from rewards_lab.engine.tier_book import TierBook, multiplies, reads_progress, reads_tiers
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import (
    CustomerRow,
    PendingEvent,
    Repositories,
)

log = logging.getLogger(__name__)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def match_rules(
    uow: Repositories,
    scope: Scope,
    book: LiveRuleBook,
    plans: list[EventPlan],
    customers: dict[str, CustomerRow],
    tiers: TierBook | None = None,
) -> list[list[tuple[str, RuleMatch]]]:
    """Per plan, (version id, match) for every rule that matched its event, in the order of its versions, then
    of their rules: each version's rules are evaluated once, column-wise, over all the events evaluated against
    that version. With `tiers`, rules read (and multiplied actions use) the tiers the book holds now."""
    by_version: dict[str, list[int]] = {}
    for index, plan in enumerate(plans):
        for version_id in plan.versions:
            by_version.setdefault(version_id, []).append(index)
    data: dict[int, Any] = {}
    found: dict[tuple[int, str], list[RuleMatch]] = {}
    facts = FactsReader(uow, scope, customers, tiers)
    for version_id, indices in by_version.items():
        for index in indices:
            if index not in data:
                data[index] = plans[index].event.data_value()
        batch = [(plans[index].event.type, data[index]) for index in indices]
        rules = book.rules[version_id]
        known = facts.of(rules, [plans[index].event for index in indices], book.meta[version_id])
        results = evaluate(rules, batch) if known is None else evaluate(rules, batch, facts=known)
        for index, matches in zip(indices, results, strict=True):
            found[(index, version_id)] = matches
    return [
        [(version_id, match) for version_id in plan.versions for match in found[(index, version_id)]]
        for index, plan in enumerate(plans)
    ]


class FactsReader:
    """What rules read beyond the data (`service.rule_facts`), built only for versions whose rules read it: the
    event's time, and its customer's attributes, country, (derived once per batch) segments and tier; and the
    recipients' tier multipliers for versions whose actions multiply (`engine.tier_book`)."""

    def __init__(
        self, uow: Repositories, scope: Scope, customers: dict[str, CustomerRow], tiers: TierBook | None = None
    ) -> None:
        self.uow, self.scope, self.customers, self.tiers = uow, scope, customers, tiers
        self.segments: dict[str, tuple[str, ...]] | None = None

    def of(
        self, rules: list[RuleSpec], events: list[PendingEvent], meta: VersionMeta | None = None
    ) -> list[EventFacts] | None:
        time, customer = any(r.reads("time") for r in rules), reads_customer(rules)
        tiers = self.tiers if meta is not None and meta.tier_model is not None else None
        tier, multiplied = tiers is not None and reads_tiers(rules), tiers is not None and multiplies(rules)
        if not time and not customer and not multiplied:
            return None
        with_progress = tier and reads_progress(rules)
        segments = self._segments() if reads_segments(rules) else {}
        result = []
        for event in events:
            row = self.customers.get(event.customer_id)
            about = customer_facts(row, segments.get(row.id, ())) if row is not None and customer else None
            multipliers = None
            if tiers is not None and meta is not None:
                if about is not None and row is not None and tier:
                    about = replace(about, tier=tiers.tier_of(meta, event, row.id, with_progress=with_progress))
                if multiplied:
                    multipliers = tiers.multipliers(meta, event, None if row is None else row.id)
            result.append(EventFacts(event_time(event) if time else None, about, multipliers))
        return result

    def _segments(self) -> dict[str, tuple[str, ...]]:
        if self.segments is None:
            rows = list(self.customers.values())
            self.segments = segment_codes(self.uow.segments, self.scope, rows, utcnow())
        return self.segments


def event_time(event: PendingEvent) -> datetime:
    """The event's time (occurred_at, else its time of receipt), aware UTC."""
    return EPOCH + timedelta(microseconds=event.event_time_us)


def plan_event(
    plan: EventPlan,
    book: LiveRuleBook,
    matched: list[tuple[str, RuleMatch]],
    recipients: dict[str, Recipient],
    issued_keys: set[ExecutionKey],
    existing_ids: dict[ExecutionKey, str],
    execution_ids: Iterator[str],
    transaction_ids: Iterator[str],
) -> None:
    event = plan.event
    for version_id, verdict in matched:
        inputs_text: str | None = None
        stale = too_old(event.event_time_us, event.received_at_us, book.meta[version_id].max_event_age_days)
        for action in verdict.actions:
            key = (event.id, version_id, verdict.rule_id, action.action_index)
            if (not action.issues and action.error_code is None and action.reversal is None) or key in issued_keys:
                continue
            if stale and action.reversal is None and action.error_code is None:  # rewards nothing; said why
                action = replace(action, error_code=EVENT_TOO_OLD, reason=too_old_reason(book.meta[version_id]))
            if inputs_text is None:  # the same provenance for every action of the rule
                inputs_text = jsonutil.dumps({k: presenters.json_value(v) for k, v in verdict.inputs.items()})
            execution_id = existing_ids.get(key) or next(execution_ids)
            recipient = recipients[action.beneficiary] if action.beneficiary is not None else None
            wallet_id = plan.wallet_id if recipient is None else recipient.wallet_id
            request = None
            usable = action.reversal is None and action.error_code is None
            if usable and wallet_id is not None and (recipient is None or not recipient.error_code):
                request = PostingRequest(
                    next(transaction_ids),
                    "reward",
                    action.asset_id,
                    action.amount_minor,
                    wallet_id,
                    memo=f"{event.type} {event.external_event_id}",
                    execution_id=execution_id,
                )
            plan.planned.append(
                Planned(execution_id, book.meta[version_id], verdict.rule_id, action, inputs_text, request, recipient)
            )


def too_old_reason(meta: VersionMeta) -> str:
    days = meta.max_event_age_days
    return f"not issued: the event occurred more than {days} days before it was received (max_event_age_days)"


def resolve_recipients(
    uow: Repositories, scope: Scope, matches: list[list[tuple[str, RuleMatch]]]
) -> dict[str, Recipient]:
    """The beneficiaries the matched actions name, resolved like an event's customer (an id first, else an
    external id): an unknown one fails its action with `beneficiary_not_found`."""
    references = sorted(
        {a.beneficiary for m in matches for _, match in m for a in match.actions if a.beneficiary is not None}
    )
    if not references:
        return {}
    customers = uow.customers.resolve_many(scope, references)
    wallets = uow.wallets.reward_wallets(scope, sorted({c.id for c in customers.values()}))
    found: dict[str, Recipient] = {}
    for reference in references:
        customer = customers.get(reference)
        if customer is None:
            found[reference] = Recipient(reference, None, BENEFICIARY_NOT_FOUND)
        else:
            wallet = wallets.get(customer.id)
            found[reference] = Recipient(customer.id, wallet.id if wallet else None)
    return found


def recorded_versions(event: PendingEvent) -> list[str] | None:
    """The versions an event was evaluated against, or None when none are recorded: never attempted, or failed
    by a server fault before anything was recorded (stored as NULL; before issue 14, as "[]"). A failed event
    never has an empty list otherwise (an event that matched no version cannot fail), so "[]" means unknown."""
    return event.versions_value() or None
