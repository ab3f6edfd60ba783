"""A batch in processing order: refunds after their originals (or waiting for them), then each reward's caps,
budget and reversal decided in that order."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace

from rewards_lab.contract.scope import Scope
from rewards_lab.domain.limits import CapCheck, checks_for
from rewards_lab.domain.processing_order import REFUND_WAIT, refunds_after_originals
from rewards_lab.domain.rule_evaluation import RuleMatch
from rewards_lab.engine.batch_plan import (
    EventPlan,
    ProcessReport,
)
from rewards_lab.engine.ledger_probe import LedgerProbe
from rewards_lab.engine.limit_book import LimitBook
from rewards_lab.engine.reversals import Reverser
from rewards_lab.engine.rule_book import (
    LiveRuleBook,
)
from rewards_lab.engine.tier_book import TierBook
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import (
    PendingEvent,
    Repositories,
    StoredEvent,
)

log = logging.getLogger(__name__)


def with_waiting_refunds(uow: Repositories, scope: Scope, events: list[PendingEvent]) -> list[PendingEvent]:
    """These events and the refunds waiting for one of them (they are processed right after their original).
    Only a tenant with a published reverse action can have waiting refunds (a cheap check on its rules first)."""
    if not events or not uow.programmes.has_reversals(scope):
        return events
    waiting = uow.events.waiting_on(scope, [event.external_event_id for event in events])
    known = {event.id for event in events}
    extra = [event for event in waiting if event.id not in known]
    return sorted([*events, *extra], key=lambda event: event.id) if extra else events


def order_refunds(
    uow: Repositories,
    scope: Scope,
    plans: list[EventPlan],
    matches: list[list[tuple[str, RuleMatch]]],
    report: ProcessReport,
) -> tuple[list[EventPlan], list[list[tuple[str, RuleMatch]]], dict[str, StoredEvent]]:
    """Refunds whose original has not arrived wait (a first attempt; a later one fails `original_not_found`);
    the rest are ordered after their originals (`domain.processing_order`). Returns the plans and matches to
    process, in order, and the originals that have arrived (external id -> event)."""
    for plan, matched in zip(plans, matches, strict=True):
        plan.references = sorted(
            {a.reversal.original for _, m in matched for a in m.actions if a.reversal is not None and not a.error_code}
        )
    named = sorted({name for plan in plans for name in plan.references})
    if not named:
        return plans, matches, {}
    in_batch = {plan.event.external_event_id for plan in plans}
    found = uow.events.get_by_external_ids(scope, named)
    arrived = {k: v for k, v in found.items() if v.status != "received" or k in in_batch}
    keep, waits = [], {}
    for index, plan in enumerate(plans):
        missing = [name for name in plan.references if name not in arrived]
        if missing and plan.event.attempts == 0 and plan.event.waiting_for is None:
            waits[plan.event.id] = missing[0]
        else:
            keep.append(index)
    if waits:
        uow.events.wait(scope, waits, utcnow() + REFUND_WAIT)
        report.waiting += len(waits)
    plans, matches = [plans[i] for i in keep], [matches[i] for i in keep]
    order = refunds_after_originals([p.event.external_event_id for p in plans], [p.references for p in plans])
    return [plans[i] for i in order], [matches[i] for i in order], arrived


def decide_in_order(
    uow: Repositories,
    scope: Scope,
    book: LiveRuleBook,
    plans: list[EventPlan],
    originals: dict[str, StoredEvent],
    transaction_ids: Iterator[str],
    tiers: TierBook | None = None,
) -> int:
    """In processing order: cut rewards to what their caps and budgets allow (`domain.limits`: a reward cut to
    nothing posts nothing, one the ledger will refuse gives its grant straight back, `service.ledger_probe`), and
    plan what reverse actions take back (`service.reward_reversals`). What a reversal gives back to the counters is
    what the wallets give: at once when the wallet surely gives the whole target, else once posted; the plans
    decided then stop before the first event with a reward checked against a counter such a reversal here gives
    back to (it is decided after the reversal is posted). With `tiers` (issue 33), each decided plan's contributions
    and upgrades are recorded in order, and the plans decided stop before the first whose tiers have moved since it
    was matched (`TierBook.changed_under`: it is matched again). Returns how many plans were decided (at least one,
    but for such a first plan: none)."""
    rule_caps = {(v, spec.rule_id): spec.limits for v, specs in book.rules.items() for spec in specs}
    checks_of: dict[tuple[int, int], list[CapCheck]] = {}
    reversing: list[str] = []
    for number, plan in enumerate(plans):
        for index, planned in enumerate(plan.planned):
            if planned.action.reversal is not None:
                reversing.append(planned.action.reversal.original)
                continue
            meta, caps = planned.version, rule_caps.get((planned.version.version_id, planned.rule_id), ())
            if planned.request is None or not (caps or meta.caps):
                continue
            customer = plan.customer_id if planned.recipient is None else planned.recipient.customer_id
            at_us = plan.event.event_time_us
            checks = checks_for(meta.program_id, planned.rule_id, customer, at_us, meta.timezone, caps, meta.caps)
            checks_of[(number, index)] = checks
    if not checks_of and not reversing and tiers is None:
        return len(plans)
    reverser = Reverser(uow, scope, {k: v for k, v in originals.items() if k in reversing}) if reversing else None
    keys: list[Sequence[str]] = [check.key for checks in checks_of.values() for check in checks]
    if reverser is not None:
        keys += list(reverser.usage_keys(reversing))
    limits = LimitBook(uow, scope, keys) if keys else None
    ledger = None  # what the ledger will refuse, decided in the same order: a refused reward counts nowhere
    if checks_of or tiers is not None:
        ledger = LedgerProbe(uow, scope, [p.request for plan in plans for p in plan.planned if p.request])
    giving: set[tuple[str, str, str, str]] = set()  # counters the reversals planned so far give back to
    decided = len(plans)
    for number, plan in enumerate(plans):
        if giving and any(
            check.key in giving for index in range(len(plan.planned)) for check in checks_of.get((number, index), [])
        ):
            decided = number
            break
        if tiers is not None and tiers.changed_under(plan):
            decided = number
            break
        refused: set[str] = set()  # the transactions of this plan the ledger will refuse
        for index, planned in enumerate(plan.planned):
            call = planned.action.reversal
            if call is not None and reverser is not None:
                meta, memo = planned.version, f"{plan.event.type} {plan.event.external_event_id}"
                reversal = reverser.plan(
                    call,
                    meta.program_id,
                    meta.clawback,
                    planned.execution_id,
                    memo,
                    transaction_ids,
                    plan.customer_id,
                    limits,
                )
                giving.update(reverser.given_keys(reversal))
                plan.planned[index] = replace(planned, reversal=reversal)
                for item in reversal.items:
                    if ledger is not None:
                        ledger.accepts(item.request)
            elif (number, index) in checks_of and limits is not None:
                assert planned.request is not None
                grant = limits.grant(planned.request.amount_minor, checks_of[(number, index)])
                request = planned.request._replace(amount_minor=grant.amount_minor) if grant.amount_minor else None
                if request is not None and ledger is not None and not ledger.accepts(request):
                    grant = limits.refused(grant)
                    refused.add(request.transaction_id)
                plan.planned[index] = replace(planned, request=request, grant=grant)
            elif planned.request is not None and ledger is not None and not ledger.accepts(planned.request):
                refused.add(planned.request.transaction_id)
        if tiers is not None:
            tiers.record(plan, refused)
    if limits is not None:
        limits.save()
    if reverser is not None:
        reverser.save()
    return decided
