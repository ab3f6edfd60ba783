"""Event processing: the reward engine over the queue of received events, in batches.

`process_pending` takes the oldest received events, evaluates the published rules of every programme whose rules
name the event's type (`rule_evaluation.evaluate`), and issues through the one posting path
(`engine/postings.apply_postings`), all in one database transaction per batch. Each issuance is keyed by (event,
programme version, rule, action); an event remembers which versions it was evaluated against, so a replay
re-evaluates the same versions and issues only the keys not yet issued.

A batch is split by job: the rule book of live versions (`rule_book.LiveRuleBook`), each event's matches and
plan (`event_matching.py`), processing order with caps, budgets and reversals decided in it (`batch_order.py`),
and the issuing itself (`reward_issuing.py`); this module runs them per tenant and isolates a poison event.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, count

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.ids import new_id, new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.processing_order import segments
from rewards_lab.domain.rule_evaluation import RuleMatch
from rewards_lab.engine.batch_order import decide_in_order, order_refunds, with_waiting_refunds
from rewards_lab.engine.batch_plan import (
    EventPlan,
    ExecutionKey,
    ProcessReport,
    Recipient,
)
from rewards_lab.engine.event_matching import (
    match_rules,
    plan_event,
    recorded_versions,
    resolve_recipients,
)
from rewards_lab.engine.reward_issuing import issue_planned
from rewards_lab.engine.rule_book import (
    LiveRuleBook,
)
from rewards_lab.engine.tier_book import TierBook
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.interfaces import (
    CustomerRow,
    EventOutcome,
    EventPartitions,
    PendingEvent,
    Repositories,
    WalletRow,
    WriteConflict,
)

log = logging.getLogger(__name__)
DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 10_000
CONFLICT_RETRIES = 1  # a batch cancelled by a deadlock runs once more whole before it is split (plan 5.2)
# What a tenant sees of an event that failed on a server fault (never the exception's own text).
INTERNAL_FAILURE_MESSAGE = "The event could not be processed because of a server fault; it can be replayed."


def _process_scope(
    uow: Repositories, scope: Scope, events: list[PendingEvent], sink: list[list[EventPlan]] | None = None
) -> ProcessReport:
    """Evaluate and issue for one tenant's events, in order, through one batch posting.

    The events' plans (with the versions each is evaluated against) are appended to `sink` as soon as they
    are made, so that a caller whose transaction fails still knows which versions were live for each event.
    """
    book = LiveRuleBook(uow, scope)
    events = with_waiting_refunds(uow, scope, events)
    recorded = [recorded_versions(event) for event in events]
    unknown_types = sorted({e.type for e, known in zip(events, recorded, strict=True) if known is None})
    live = book.live_versions(unknown_types)
    plans = []
    for event, known in zip(events, recorded, strict=True):
        if known is not None:
            book.load(known)
        # A replay keeps the versions first recorded; a first attempt takes the live ones whose window holds it.
        plans.append(EventPlan(event, known if known is not None else book.in_window(live.get(event.type, []), event)))
    if sink is not None:
        sink.append(plans)

    customers = uow.customers.resolve_many(scope, sorted({e.customer_id for e in events}))
    wallets = uow.wallets.reward_wallets(scope, sorted({c.id for c in customers.values()}))
    attempted = [e.id for e in events if e.attempts > 0]
    previous = uow.executions.for_events(scope, attempted) if attempted else []
    issued_keys = {  # decided: issued, cut to nothing by a cap (its counters already moved), or reversed
        (e.event_id, e.version_id, e.rule_id, e.action_index)
        for e in previous
        if e.status in ("issued", "limited", "reversed")
    }
    existing_ids = {(e.event_id, e.version_id, e.rule_id, e.action_index): e.id for e in previous}
    tiers = TierBook.for_batch(uow, scope, book, plans)  # None unless a version of the batch has tiers
    if tiers is not None:
        tiers.preload(row.id for row in customers.values())
    matches = match_rules(uow, scope, book, plans, customers, tiers)
    report = ProcessReport()
    plans, matches, originals = order_refunds(uow, scope, plans, matches, report)
    at_most = sum(
        a.issues or a.error_code is not None or a.reversal is not None
        for m in matches
        for _, match in m
        for a in match.actions
    )
    # One call each for the batch (ids not needed are dropped); more one by one if events are matched again.
    execution_ids = chain(new_ids("execution", at_most), (new_id("execution") for _ in count()))
    transaction_ids = chain(new_ids("transaction", at_most), (new_id("transaction") for _ in count()))
    recipients = resolve_recipients(uow, scope, matches)
    planning = _Planning(book, customers, wallets, issued_keys, existing_ids, execution_ids, transaction_ids)
    for plan, matched in zip(plans, matches, strict=True):
        planning.plan(plan, matched, recipients)
    external_ids = [plan.event.external_event_id for plan in plans]
    references = [plan.references for plan in plans]
    for part in segments(range(len(plans)), external_ids, references):
        segment = [plans[index] for index in part]
        while segment:  # a reward after a reversal it could get room from waits for that reversal's posting
            decided = decide_in_order(uow, scope, book, segment, originals, transaction_ids, tiers)
            if decided:
                report.add(issue_planned(uow, scope, segment[:decided]))
            segment = segment[decided:]
            if segment and tiers is not None and tiers.changed_under(segment[0]):
                _match_again(uow, scope, book, segment, customers, tiers, planning)
    if tiers is not None:
        tiers.save()
        report.rematched += tiers.rematches
        if uow.database is not None:
            fault = getattr(uow.database, "fault", None)
            if fault is not None:
                fault("after_tiers")
    return report


@dataclass(slots=True)
class _Planning:
    """What planning an event's matches needs, kept for events matched again (fresh ids from the same iterators)."""

    book: LiveRuleBook
    customers: dict[str, CustomerRow]
    wallets: dict[str, WalletRow]
    issued_keys: set[ExecutionKey]
    existing_ids: dict[ExecutionKey, str]
    execution_ids: Iterator[str]
    transaction_ids: Iterator[str]

    def plan(self, plan: EventPlan, matched: list[tuple[str, RuleMatch]], recipients: dict[str, Recipient]) -> None:
        customer = self.customers.get(plan.event.customer_id)
        wallet = self.wallets.get(customer.id) if customer else None
        plan.customer_id = customer.id if customer else plan.event.customer_id
        plan.wallet_id = wallet.id if wallet else None
        plan.planned, plan.blocker = [], None
        plan_event(
            plan,
            self.book,
            matched,
            recipients,
            self.issued_keys,
            self.existing_ids,
            self.execution_ids,
            self.transaction_ids,
        )
        own = [  # to the event's customer (an event too old issues nothing: no wallet is needed)
            p
            for p in plan.planned
            if p.recipient is None and p.action.reversal is None and p.action.error_code != EVENT_TOO_OLD
        ]
        if own and customer is None:
            plan.blocker = ServiceError("customer_not_found", customer_id=plan.event.customer_id)
        elif own and wallet is None:
            plan.blocker = ServiceError(
                "wallet_not_found", "the customer has no wallet to receive the reward", customer_id=plan.customer_id
            )


def _match_again(
    uow: Repositories,
    scope: Scope,
    book: LiveRuleBook,
    segment: list[EventPlan],
    customers: dict[str, CustomerRow],
    tiers: TierBook,
    planning: _Planning,
) -> None:
    """Match and plan the rest of a segment again with the tiers as they are now (an earlier event of the batch
    moved a tier one of them was matched with); their order and references stay (plan section 4.2)."""
    tiers.forget(segment)
    matches = match_rules(uow, scope, book, segment, customers, tiers)
    recipients = resolve_recipients(uow, scope, matches)
    for plan, matched in zip(segment, matches, strict=True):
        planning.plan(plan, matched, recipients)


def _by_scope(events: list[PendingEvent]) -> dict[Scope, list[PendingEvent]]:
    groups: dict[Scope, list[PendingEvent]] = defaultdict(list)
    for event in events:
        groups[Scope(event.organization_id, event.environment)].append(event)
    return groups


def process_pending(
    database: Store, limit: int = DEFAULT_BATCH_SIZE, partitions: EventPartitions | None = None
) -> ProcessReport:
    """Process up to `limit` received events (every tenant; on PostgreSQL only those of the `partitions` this
    worker leases, None: all) in one database transaction.

    A batch cancelled by the database because it waited in a cycle with another process's unit of work
    (`WriteConflict`: a deadlock) is run once more, whole. Should the batch hit another unexpected error, it is
    rolled back and its events are processed again in smaller transactions: each tenant's events on their own,
    and a failing group split in halves (in event order) until the events that fail alone are found. Only those
    are marked `failed` with `internal_error` (a fixed message, and the versions they were evaluated against, so
    that a replay issues what they should have), so one poisoned event costs O(log n) extra transactions and never
    blocks the queue or another tenant's events.
    """
    limit = max(1, min(limit, MAX_BATCH_SIZE))
    horizon = compile_outside_lock(database, limit, partitions)
    if horizon is None:
        return ProcessReport()  # nothing pending: the write lock is not taken at all
    planned: list[list[EventPlan]] = []
    for attempt in range(1 + CONFLICT_RETRIES):
        planned = []
        try:
            with unit_of_work(database) as uow:
                report = ProcessReport()
                pending = [event for event in uow.events.pending(limit, partitions) if event.id <= horizon]
                for scope, events in _by_scope(pending).items():
                    report.add(_process_scope(uow, scope, events, planned))
                return report
        except WriteConflict:
            if attempt < CONFLICT_RETRIES:
                log.warning("event batch cancelled by a write conflict (deadlock); running it again")
                continue
            log.exception("event batch failed; isolating the events that fail")
        except Exception:
            log.exception("event batch failed; isolating the events that fail")
        break
    versions = {plan.event.id: plan.versions for plans in planned for plan in plans}
    return _process_isolating(database, limit, versions, partitions)


def _process_isolating(
    database: Store, limit: int, versions: dict[str, list[str]], partitions: EventPartitions | None
) -> ProcessReport:
    report = ProcessReport()
    groups = _by_scope(reader(database).events.pending(limit, partitions))
    for scope, events in groups.items():
        _bisect(database, scope, [e.id for e in events], versions, report, failed_whole=len(groups) == 1)
    return report


def _bisect(
    database: Store,
    scope: Scope,
    event_ids: list[str],
    versions: dict[str, list[str]],
    report: ProcessReport,
    *,
    failed_whole: bool = False,
) -> None:
    """Process these events (of one tenant, in order) in one transaction; if it fails, each half in turn
    (`failed_whole`: they just failed together, so go straight to the halves)."""
    if not event_ids:
        return
    if not failed_whole:
        planned: list[list[EventPlan]] = []
        try:
            with unit_of_work(database) as uow:
                part = _process_scope(uow, scope, uow.events.received(scope, event_ids), planned)
            report.add(part)
            return
        except Exception:  # noqa: BLE001 - one poisoned event must not block the rest
            log.exception("%d events failed together", len(event_ids))
            versions.update({plan.event.id: plan.versions for plans in planned for plan in plans})
    if len(event_ids) == 1:
        log.error("event %s failed to process alone: marked failed (internal_error)", event_ids[0])
        _mark_broken(database, scope, event_ids[0], versions.get(event_ids[0]))
        report.failed += 1
        return
    middle = len(event_ids) // 2
    _bisect(database, scope, event_ids[:middle], versions, report)
    _bisect(database, scope, event_ids[middle:], versions, report)


def _mark_broken(database: Store, scope: Scope, event_id: str, versions: list[str] | None) -> None:
    """Mark an event that fails alone `failed` (`internal_error`), with the versions it was planned against
    (resolved again if it failed before planning); if even that fails, with none: a replay resolves them."""
    try:
        with unit_of_work(database) as uow:
            row = uow.events.get(scope, event_id)
            if row is None or row.status != "received":
                return  # settled meanwhile by someone else: nothing to mark
            if versions is None:  # resolved as a first attempt would: live versions whose window holds it
                pending = uow.events.to_process(scope, event_id)
                assert pending is not None
                book = LiveRuleBook(uow, scope)
                versions = book.in_window(book.live_versions([row.type]).get(row.type, []), pending)
            uow.events.mark_many(scope, [_broken(event_id, versions or None)])
        return
    except Exception:  # noqa: BLE001 - fall through: record the failure without versions
        log.exception("event %s: its versions could not be recorded", event_id)
    with unit_of_work(database) as uow:
        uow.events.mark_many(scope, [_broken(event_id, None)])


def _broken(event_id: str, versions: list[str] | None) -> EventOutcome:
    return EventOutcome(event_id, "failed", "internal_error", INTERNAL_FAILURE_MESSAGE, versions)


def process_all(database: Store, batch_size: int = DEFAULT_BATCH_SIZE) -> ProcessReport:
    """Process until no received event is left (used by tests, demos and backfills)."""
    total = ProcessReport()
    while True:
        report = process_pending(database, batch_size)
        total.add(report)
        if report.processed + report.failed == 0:
            return total


def replay_event(database: Store, scope: Scope, event_id: str) -> r.Event:
    """Reprocess a failed event against the versions it was first evaluated with; issues only what is missing."""
    with unit_of_work(database) as uow:
        event = uow.events.to_process(scope, event_id)
        row = uow.events.get(scope, event_id)
        if event is None or row is None:
            raise ServiceError("event_not_found", event_id=event_id)
        if row.status != "failed":
            raise ServiceError("event_not_replayable", event_id=event_id, status=row.status)
        _process_scope(uow, scope, [event])
        updated = uow.events.get(scope, event_id)
    assert updated is not None
    return presenters.event(updated)


def compile_outside_lock(database: Store, limit: int, partitions: EventPartitions | None = None) -> str | None:
    """Compile, on this thread's read cursor and before the batch takes the write lock, the live versions the
    next batch's events will be evaluated against: a published version's compiled rules never change, so the
    batch finds them in the cache, while what is live and pending is read again inside its unit of work. Returns
    the id of the last pending event read (None: none is pending): the batch takes no event received after it,
    so that an event's versions are compiled here, not under the lock. A failure here only leaves the compiling
    to the batch."""
    pending = reader(database).events.pending(limit, partitions)
    if not pending:
        return None
    try:
        uow = reader(database)
        for scope, events in _by_scope(pending).items():
            LiveRuleBook(uow, scope).live_versions(sorted({event.type for event in events}))
    except Exception:  # noqa: BLE001 - the batch compiles (under the lock) what could not be compiled here
        log.exception("compiling the live versions before the batch failed")
    return pending[-1].id
