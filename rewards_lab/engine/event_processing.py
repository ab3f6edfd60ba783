"""Event processing: the reward engine over the queue of received events, in batches.

`process_pending` takes the oldest received events, evaluates the published rules of every programme whose rules
name the event's type (`rule_evaluation.evaluate`), and issues through the one posting path
(`ledger.apply_postings`), all in one database transaction per batch. Each issuance is keyed by (event,
programme version, rule, action); an event remembers which versions it was evaluated against, so a replay
re-evaluates the same versions and issues only the keys not yet issued.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import chain, count
from typing import Any, cast

from rewards_lab import presenters
from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.ids import new_id, new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.conditions import EventFacts
from rewards_lab.domain.expiry import ExpiryPolicy, expires_at
from rewards_lab.domain.limits import Cap, CapCheck, Grant, checks_for
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.domain.processing_order import REFUND_WAIT, refunds_after_originals, segments
from rewards_lab.domain.rule_evaluation import RuleMatch, evaluate
from rewards_lab.domain.rules import ActionOutcome, RuleSpec
from rewards_lab.domain.schedule import epoch_us, too_old, within_window
from rewards_lab.engine.ledger_probe import LedgerProbe
from rewards_lab.engine.limit_book import LimitBook
from rewards_lab.engine.lot_book import LotTerms
from rewards_lab.engine.notifications import outbox_messages
from rewards_lab.engine.postings import apply_postings, asset_row
from rewards_lab.engine.reversals import ReversalPlan, Reverser, give_back_taken, reversal_record
from rewards_lab.engine.rule_book import CompiledVersions, cache_of, compile_rows, estimated_bytes
from rewards_lab.engine.rule_facts import customer_facts, reads_customer, reads_segments, segment_codes
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces import (
    CustomerRow,
    EventOutcome,
    ExecutionRecord,
    PendingEvent,
    Repositories,
    StoredEvent,
)
from rewards_lab.store.uow import reader, unit_of_work

log = logging.getLogger(__name__)
DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 10_000
# What a tenant sees of an event that failed on a server fault (never the exception's own text).
INTERNAL_FAILURE_MESSAGE = "The event could not be processed because of a server fault; it can be replayed."

ExecutionKey = tuple[str, str, str, int]  # (event, version, rule, action)
BENEFICIARY_NOT_FOUND = "beneficiary_not_found"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class ProcessReport:
    processed: int = 0
    failed: int = 0
    issued: int = 0
    refused: int = 0
    reversed: int = 0  # reverse actions that took back rewards
    waiting: int = 0  # refunds set to wait for their original

    def add(self, other: ProcessReport) -> None:
        self.processed += other.processed
        self.failed += other.failed
        self.issued += other.issued
        self.refused += other.refused
        self.reversed += other.reversed
        self.waiting += other.waiting


@dataclass(frozen=True, slots=True)
class _Planned:
    """One issuance an event's rules call for: its execution's key and provenance, and its posting request
    (None when refused before the ledger, or when there is no wallet to post to)."""

    execution_id: str
    version: VersionMeta
    rule_id: str
    action: ActionOutcome
    inputs: str
    request: PostingRequest | None
    recipient: _Recipient | None = None  # the beneficiary, when the action names one
    grant: Grant | None = None  # what its caps and budget allowed, when it has any
    reversal: ReversalPlan | None = None  # a reverse action's: what it takes back (set in processing order)


@dataclass(frozen=True, slots=True)
class _Recipient:
    """A beneficiary as resolved: its customer and wallet, or the code its action fails with."""

    customer_id: str
    wallet_id: str | None
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class VersionMeta:
    """What an execution records of the programme version whose rule it ran, and the version's schedule: its
    IANA timezone and the window of event times it rewards (epoch microseconds, UTC; None: unbounded)."""

    version_id: str
    program_id: str
    number: int
    asset_id: str
    published: bool
    timezone: str = "UTC"
    starts_at_us: int | None = None
    ends_at_us: int | None = None
    caps: tuple[Cap, ...] = ()  # the programme's caps per customer, then its budget (domain.limits)
    clawback: str = "available"
    expiry: ExpiryPolicy | None = None  # when its rewards expire (None: as the asset's points do)
    max_event_age_days: int | None = None  # how long before its receipt an event may have occurred (None: any)


@dataclass(slots=True)
class _EventPlan:
    event: PendingEvent
    versions: list[str]
    customer_id: str = ""
    wallet_id: str | None = None
    planned: list[_Planned] = field(default_factory=list)
    blocker: ServiceError | None = None  # nothing can be issued: no such customer, or no wallet (no requests made)
    references: list[str] = field(default_factory=list)  # the originals its reverse actions name


Compiled = tuple[VersionMeta, list[RuleSpec]]


def compiled_cache(database: object) -> CompiledVersions[Compiled]:
    """Compiled rules of published versions, per database and (scope, version): a published version's rules,
    programme and asset decimals never change, so each batch need not read and compile them again. Bounded
    (`service.compiled_versions`)."""
    return cast(CompiledVersions[Compiled], cache_of(database))


class _RuleBook:
    """Compiled rules per version, loaded once per batch and scope (once per process for published versions)."""

    def __init__(self, uow: Repositories, scope: Scope) -> None:
        self.uow, self.scope = uow, scope
        self.rules: dict[str, list[RuleSpec]] = {}
        self.meta: dict[str, VersionMeta] = {}

    def live_versions(self, event_types: list[str]) -> dict[str, list[str]]:
        """event type -> ids of the live versions that have a rule for it."""
        rows = self.uow.programmes.live_versions(self.scope, event_types)
        self.load([row.id for row in rows])
        by_type: dict[str, list[str]] = defaultdict(list)
        for row in rows:
            for spec in self.rules[row.id]:
                if row.id not in by_type[spec.event_type]:
                    by_type[spec.event_type].append(row.id)
        return by_type

    def in_window(self, version_ids: list[str], event: PendingEvent) -> list[str]:
        """Those of these loaded versions whose window holds the event's time (starts_at <= t < ends_at)."""
        return [
            v
            for v in version_ids
            if within_window(event.event_time_us, self.meta[v].starts_at_us, self.meta[v].ends_at_us)
        ]

    def load(self, version_ids: list[str]) -> None:
        cache = None if self.uow.database is None else compiled_cache(self.uow.database)
        for version_id in version_ids:
            found = None if cache is None or version_id in self.rules else cache.get(self.scope, version_id)
            if found is not None:
                self.meta[version_id], self.rules[version_id] = found
        missing = [v for v in version_ids if v not in self.rules]
        if not missing:
            return
        rows = self.uow.programmes.rules_of(self.scope, missing)
        for version_id in missing:
            version = self.uow.programmes.get_version(self.scope, version_id)
            assert version is not None
            programme = self.uow.programmes.get(self.scope, version.program_id)
            assert programme is not None
            assert version.number is not None, "the worker evaluates published versions only"
            spending = version.spending  # decoded by the store as it read the row
            caps: tuple[Cap, ...] = ()
            if spending.capped:
                caps = spending.caps(int(asset_row(self.uow, self.scope, programme.asset_id).decimals))
            meta = VersionMeta(
                version_id,
                version.program_id,
                version.number,
                programme.asset_id,
                version.status != "draft",
                version.timezone,
                None if version.starts_at is None else epoch_us(version.starts_at),
                None if version.ends_at is None else epoch_us(version.ends_at),
                caps,
                spending.clawback,
                spending.expiry,
                spending.max_event_age_days,
            )
            own = [row for row in rows if row.version_id == version_id]
            self.meta[version_id] = meta
            self.rules[version_id] = compile_rows(self.uow, self.scope, own, meta.asset_id, meta.timezone)
            if meta.published and cache is not None:
                value = (meta, self.rules[version_id])
                cache.put(self.scope, version_id, value, meta.program_id, meta.number, estimated_bytes(own))


def compile_outside_lock(database: Database, limit: int) -> str | None:
    """Compile, on this thread's read cursor and before the batch takes the write lock, the live versions the
    next batch's events will be evaluated against: a published version's compiled rules never change, so the
    batch finds them in the cache, while what is live and pending is read again inside its unit of work. Returns
    the id of the last pending event read (None: none is pending): the batch takes no event received after it,
    so that an event's versions are compiled here, not under the lock. A failure here only leaves the compiling
    to the batch."""
    pending = reader(database).events.pending(limit)
    if not pending:
        return None
    try:
        uow = reader(database)
        for scope, events in _by_scope(pending).items():
            _RuleBook(uow, scope).live_versions(sorted({event.type for event in events}))
    except Exception:  # noqa: BLE001 - the batch compiles (under the lock) what could not be compiled here
        log.exception("compiling the live versions before the batch failed")
    return pending[-1].id


def _matches(
    uow: Repositories, scope: Scope, book: _RuleBook, plans: list[_EventPlan], customers: dict[str, CustomerRow]
) -> list[list[tuple[str, RuleMatch]]]:
    """Per plan, (version id, match) for every rule that matched its event, in the order of its versions, then
    of their rules: each version's rules are evaluated once, column-wise, over all the events evaluated against
    that version."""
    by_version: dict[str, list[int]] = {}
    for index, plan in enumerate(plans):
        for version_id in plan.versions:
            by_version.setdefault(version_id, []).append(index)
    data: dict[int, Any] = {}
    found: dict[tuple[int, str], list[RuleMatch]] = {}
    facts = _Facts(uow, scope, customers)
    for version_id, indices in by_version.items():
        for index in indices:
            if index not in data:
                data[index] = plans[index].event.data_value()
        batch = [(plans[index].event.type, data[index]) for index in indices]
        rules = book.rules[version_id]
        known = facts.of(rules, [plans[index].event for index in indices])
        results = evaluate(rules, batch) if known is None else evaluate(rules, batch, facts=known)
        for index, matches in zip(indices, results, strict=True):
            found[(index, version_id)] = matches
    return [
        [(version_id, match) for version_id in plan.versions for match in found[(index, version_id)]]
        for index, plan in enumerate(plans)
    ]


class _Facts:
    """What rules read beyond the data (`service.rule_facts`), built only for versions whose rules read it: the
    event's time, and its customer's attributes, country and (derived once per batch) segments."""

    def __init__(self, uow: Repositories, scope: Scope, customers: dict[str, CustomerRow]) -> None:
        self.uow, self.scope, self.customers = uow, scope, customers
        self.segments: dict[str, tuple[str, ...]] | None = None

    def of(self, rules: list[RuleSpec], events: list[PendingEvent]) -> list[EventFacts] | None:
        time, customer = any(r.reads("time") for r in rules), reads_customer(rules)
        if not time and not customer:
            return None
        segments = self._segments() if reads_segments(rules) else {}
        result = []
        for event in events:
            row = self.customers.get(event.customer_id) if customer else None
            about = customer_facts(row, segments.get(row.id, ())) if row is not None else None
            result.append(EventFacts(_event_time(event) if time else None, about))
        return result

    def _segments(self) -> dict[str, tuple[str, ...]]:
        if self.segments is None:
            rows = list(self.customers.values())
            self.segments = segment_codes(self.uow.segments, self.scope, rows, utcnow())
        return self.segments


def _event_time(event: PendingEvent) -> datetime:
    """The event's time (occurred_at, else its time of receipt), aware UTC."""
    return EPOCH + timedelta(microseconds=event.event_time_us)


def _plan_event(
    plan: _EventPlan,
    book: _RuleBook,
    matched: list[tuple[str, RuleMatch]],
    recipients: dict[str, _Recipient],
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
                action = replace(action, error_code=EVENT_TOO_OLD, reason=_too_old_reason(book.meta[version_id]))
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
                _Planned(execution_id, book.meta[version_id], verdict.rule_id, action, inputs_text, request, recipient)
            )


def _too_old_reason(meta: VersionMeta) -> str:
    days = meta.max_event_age_days
    return f"not issued: the event occurred more than {days} days before it was received (max_event_age_days)"


def _recipients(uow: Repositories, scope: Scope, matches: list[list[tuple[str, RuleMatch]]]) -> dict[str, _Recipient]:
    """The beneficiaries the matched actions name, resolved like an event's customer (an id first, else an
    external id): an unknown one fails its action with `beneficiary_not_found`."""
    references = sorted(
        {a.beneficiary for m in matches for _, match in m for a in match.actions if a.beneficiary is not None}
    )
    if not references:
        return {}
    customers = uow.customers.resolve_many(scope, references)
    wallets = uow.wallets.reward_wallets(scope, sorted({c.id for c in customers.values()}))
    found: dict[str, _Recipient] = {}
    for reference in references:
        customer = customers.get(reference)
        if customer is None:
            found[reference] = _Recipient(reference, None, BENEFICIARY_NOT_FOUND)
        else:
            wallet = wallets.get(customer.id)
            found[reference] = _Recipient(customer.id, wallet.id if wallet else None)
    return found


def _recorded_versions(event: PendingEvent) -> list[str] | None:
    """The versions an event was evaluated against, or None when none are recorded: never attempted, or failed
    by a server fault before anything was recorded (stored as NULL; before issue 14, as "[]"). A failed event
    never has an empty list otherwise (an event that matched no version cannot fail), so "[]" means unknown."""
    return event.versions_value() or None


def _process_scope(
    uow: Repositories, scope: Scope, events: list[PendingEvent], sink: list[list[_EventPlan]] | None = None
) -> ProcessReport:
    """Evaluate and issue for one tenant's events, in order, through one batch posting.

    The events' plans (with the versions each is evaluated against) are appended to `sink` as soon as they
    are made, so that a caller whose transaction fails still knows which versions were live for each event.
    """
    book = _RuleBook(uow, scope)
    events = _with_waiting_refunds(uow, scope, events)
    recorded = [_recorded_versions(event) for event in events]
    unknown_types = sorted({e.type for e, known in zip(events, recorded, strict=True) if known is None})
    live = book.live_versions(unknown_types)
    plans = []
    for event, known in zip(events, recorded, strict=True):
        if known is not None:
            book.load(known)
        # A replay keeps the versions first recorded; a first attempt takes the live ones whose window holds it.
        plans.append(_EventPlan(event, known if known is not None else book.in_window(live.get(event.type, []), event)))
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
    matches = _matches(uow, scope, book, plans, customers)
    report = ProcessReport()
    plans, matches, originals = _order_refunds(uow, scope, plans, matches, report)
    at_most = sum(
        a.issues or a.error_code is not None or a.reversal is not None
        for m in matches
        for _, match in m
        for a in match.actions
    )
    execution_ids = iter(new_ids("execution", at_most))  # one call each for the batch; ids not needed are dropped
    transaction_ids = chain(new_ids("transaction", at_most), (new_id("transaction") for _ in count()))
    recipients = _recipients(uow, scope, matches)
    for plan, matched in zip(plans, matches, strict=True):
        customer = customers.get(plan.event.customer_id)
        wallet = wallets.get(customer.id) if customer else None
        plan.customer_id = customer.id if customer else plan.event.customer_id
        plan.wallet_id = wallet.id if wallet else None
        _plan_event(plan, book, matched, recipients, issued_keys, existing_ids, execution_ids, transaction_ids)
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
    external_ids = [plan.event.external_event_id for plan in plans]
    references = [plan.references for plan in plans]
    for part in segments(range(len(plans)), external_ids, references):
        segment = [plans[index] for index in part]
        while segment:  # a reward after a reversal it could get room from waits for that reversal's posting
            decided = _decide_in_order(uow, scope, book, segment, originals, transaction_ids)
            report.add(_issue(uow, scope, segment[:decided]))
            segment = segment[decided:]
    return report


def _with_waiting_refunds(uow: Repositories, scope: Scope, events: list[PendingEvent]) -> list[PendingEvent]:
    """These events and the refunds waiting for one of them (they are processed right after their original).
    Only a tenant with a published reverse action can have waiting refunds (a cheap check on its rules first)."""
    if not events or not uow.programmes.has_reversals(scope):
        return events
    waiting = uow.events.waiting_on(scope, [event.external_event_id for event in events])
    known = {event.id for event in events}
    extra = [event for event in waiting if event.id not in known]
    return sorted([*events, *extra], key=lambda event: event.id) if extra else events


def _order_refunds(
    uow: Repositories,
    scope: Scope,
    plans: list[_EventPlan],
    matches: list[list[tuple[str, RuleMatch]]],
    report: ProcessReport,
) -> tuple[list[_EventPlan], list[list[tuple[str, RuleMatch]]], dict[str, StoredEvent]]:
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


def _decide_in_order(
    uow: Repositories,
    scope: Scope,
    book: _RuleBook,
    plans: list[_EventPlan],
    originals: dict[str, StoredEvent],
    transaction_ids: Iterator[str],
) -> int:
    """In processing order: cut rewards to what their caps and budgets allow (`domain.limits`: a reward cut to
    nothing posts nothing, one the ledger will refuse gives its grant straight back, `service.ledger_probe`), and
    plan what reverse actions take back (`service.reward_reversals`). What a reversal gives back to the counters is
    what the wallets give: at once when the wallet surely gives the whole target, else once posted; the plans
    decided then stop before the first event with a reward checked against a counter such a reversal here gives
    back to (it is decided after the reversal is posted). Returns how many plans were decided (at least one)."""
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
    if not checks_of and not reversing:
        return len(plans)
    reverser = Reverser(uow, scope, {k: v for k, v in originals.items() if k in reversing}) if reversing else None
    keys: list[Sequence[str]] = [check.key for checks in checks_of.values() for check in checks]
    if reverser is not None:
        keys += list(reverser.usage_keys(reversing))
    limits = LimitBook(uow, scope, keys) if keys else None
    ledger = None  # what the ledger will refuse, decided in the same order: a refused reward counts nowhere
    if checks_of:
        ledger = LedgerProbe(uow, scope, [p.request for plan in plans for p in plan.planned if p.request])
    giving: set[tuple[str, str, str, str]] = set()  # counters the reversals planned so far give back to
    decided = len(plans)
    for number, plan in enumerate(plans):
        if giving and any(
            check.key in giving for index in range(len(plan.planned)) for check in checks_of.get((number, index), [])
        ):
            decided = number
            break
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
                plan.planned[index] = replace(planned, request=request, grant=grant)
            elif planned.request is not None and ledger is not None:
                ledger.accepts(planned.request)
    if limits is not None:
        limits.save()
    if reverser is not None:
        reverser.save()
    return decided


def _lot_terms(plans: list[_EventPlan]) -> dict[str, LotTerms]:
    """What only the worker knows of its postings' lots (used where the asset tracks lots): a reward is issued at
    its event's time and expires under its programme's policy (else the asset's); a reversal takes first from the
    lots of the reward it takes back."""
    terms: dict[str, LotTerms] = {}
    for plan in plans:
        issued_at = _event_time(plan.event).replace(tzinfo=None)
        for planned in plan.planned:
            if planned.request is not None:
                policy = planned.version.expiry
                if policy is None:
                    terms[planned.request.transaction_id] = LotTerms(issued_at)
                else:
                    expiry = expires_at(policy, issued_at, planned.version.timezone)
                    terms[planned.request.transaction_id] = LotTerms(issued_at, expiry, dated=True)
            elif planned.reversal is not None:
                for item in planned.reversal.items:
                    terms[item.request.transaction_id] = LotTerms(first=(item.original.transaction_id or "",))
    return terms


def _issue(uow: Repositories, scope: Scope, plans: list[_EventPlan]) -> ProcessReport:
    requests = []
    for plan in plans:
        for planned in plan.planned:
            if planned.request is not None:
                requests.append(planned.request)
            elif planned.reversal is not None:
                requests.extend(item.request for item in planned.reversal.items)
    decision = apply_postings(uow, scope, requests, lot_terms=lambda: _lot_terms(plans))  # made only if needed
    rejected = {request.transaction_id: error for request, error in decision.rejected}
    taken: dict[str, int] = {}  # a reversal's transaction -> what the wallet gave (a refused one gave nothing)
    reversals = [planned.reversal for plan in plans for planned in plan.planned if planned.reversal is not None]
    if reversals:
        taken = {p.transaction_id: p.amount_minor for p in decision.accepted if p.kind == "reversal"}
        give_back_taken(uow, scope, reversals, taken)  # the counters get back what the wallets gave
    report = ProcessReport()
    records: list[ExecutionRecord] = []
    issued: list[tuple[ExecutionRecord, int]] = []
    reversed_: list[tuple[ExecutionRecord, int]] = []
    outcomes: list[EventOutcome] = []
    for plan in plans:
        event = plan.event
        refused_when_planned: ServiceError | None = None  # the first, else the ledger's first refusal
        refused_by_ledger: ServiceError | None = None
        for planned in plan.planned:
            action, request, recipient = planned.action, planned.request, planned.recipient
            status, code, transaction_id = "failed", action.error_code, None
            customer_id = plan.customer_id if recipient is None else recipient.customer_id
            wallet_id = plan.wallet_id if recipient is None else recipient.wallet_id
            grant, reversal = planned.grant, planned.reversal
            amount_minor = action.amount_minor if grant is None else grant.amount_minor
            if code is None and reversal is not None and reversal.error is not None:  # original_not_found, ...
                code = reversal.error.code
                action = replace(action, error_code=code, reason=reversal.error.message)
            if code is None and recipient is not None and recipient.error_code is not None:
                code = recipient.error_code
                why = f"no customer has the id or external id '{recipient.customer_id}' named by the beneficiary"
                action = replace(action, error_code=code, reason=why)
            if code == EVENT_TOO_OLD:  # older than its programme takes live events: processed, nothing issued
                status, amount_minor = "limited", 0
            elif code is not None:  # refused when planned (amount_too_large, beneficiary_missing / _not_found)
                report.refused += 1
                refused_when_planned = refused_when_planned or ServiceError(code, action.reason)
            elif reversal is not None:  # what the wallets gave back, after the clawback policy
                status, customer_id, wallet_id = "reversed", reversal.customer_id or plan.customer_id, None
                amount_minor = sum(taken.get(item.request.transaction_id, 0) for item in reversal.items)
                report.reversed += 1
            elif grant is not None and grant.amount_minor == 0:  # a cap or the budget let nothing through
                status = "limited"
            elif request is None and recipient is not None:  # a beneficiary without a wallet
                code = "wallet_not_found"
                refused_when_planned = refused_when_planned or ServiceError(
                    code, "the beneficiary has no wallet to receive the reward", customer_id=customer_id
                )
            elif request is None:
                code = plan.blocker.code if plan.blocker else "wallet_not_found"
            elif request.transaction_id in rejected:
                refusal = rejected[request.transaction_id]
                code, refused_by_ledger = refusal.code, refused_by_ledger or refusal
                report.refused += 1
            else:
                status, transaction_id = "issued", request.transaction_id
                report.issued += 1
            record = ExecutionRecord(
                planned.execution_id,
                event.id,
                event.external_event_id,
                customer_id,
                planned.version.program_id,
                planned.version.version_id,
                planned.version.number,
                planned.rule_id,
                action.action_index,
                action.asset_id,
                wallet_id,
                amount_minor,
                status,
                code,
                transaction_id,
                planned.inputs,
                None if grant is None or grant.cut is None else action.amount_minor,
                None if grant is None else grant.cut,
                () if grant is None else grant.keys,
                None if reversal is None or code is not None else reversal_record(reversal, taken),
            )
            records.append(record)
            if status == "issued":
                issued.append((record, action.decimals))
            elif status == "reversed" and reversal is not None and reversal.items:
                reversed_.append((record, action.decimals))
        error = plan.blocker or refused_when_planned or refused_by_ledger
        status = "failed" if error else "processed"
        message = error.message if error else None
        outcomes.append(EventOutcome(event.id, status, error.code if error else None, message, plan.versions))
        report.failed += status == "failed"
        report.processed += status == "processed"
    # An event's executions are written in the transaction that counts its attempt, so an event never attempted
    # has none: its records are plainly inserted (DuckDB's ON CONFLICT costs several times an INSERT and grows
    # with the table); only a retried event's records may replace earlier ones.
    retried = {plan.event.id for plan in plans if plan.event.attempts > 0}
    uow.executions.insert_many(scope, [record for record in records if record.event_id not in retried])
    uow.executions.upsert_many(scope, [record for record in records if record.event_id in retried])
    uow.outbox.add_many(scope, outbox_messages("reward.issued", [(r.id, _issued_payload(r, d)) for r, d in issued]))
    if reversed_:
        payloads = [(r.id, _reversed_payload(r, d)) for r, d in reversed_]
        uow.outbox.add_many(scope, outbox_messages("reward.reversed", payloads))
    uow.events.mark_many(scope, outcomes)
    return report


def _reversed_payload(record: ExecutionRecord, decimals: int) -> dict[str, Any]:
    """The `reward.reversed` webhook's body: the reverse action's execution and what it took back, reward by
    reward (the same `reversal` object as the execution resource)."""
    assert record.reversal is not None
    body = _issued_payload(record, decimals)
    body["reversal"] = presenters.reversal(record.reversal, decimals).model_dump(mode="json")
    return body


def _issued_payload(record: ExecutionRecord, decimals: int) -> dict[str, Any]:
    return {
        "execution_id": record.id,
        "event_id": record.event_id,
        "external_event_id": record.external_event_id,
        "customer_id": record.customer_id,
        "wallet_id": record.wallet_id,
        "program_id": record.program_id,
        "program_version": record.version_number,
        "rule_id": record.rule_id,
        "action_index": record.action_index,
        "asset_id": record.asset_id,
        "amount": format_amount(record.amount_minor, decimals),
        "transaction_id": record.transaction_id,
    }


def _by_scope(events: list[PendingEvent]) -> dict[Scope, list[PendingEvent]]:
    groups: dict[Scope, list[PendingEvent]] = defaultdict(list)
    for event in events:
        groups[Scope(event.organization_id, event.environment)].append(event)
    return groups


def process_pending(database: Database, limit: int = DEFAULT_BATCH_SIZE) -> ProcessReport:
    """Process up to `limit` received events (every tenant) in one database transaction.

    Should the batch hit an unexpected error, it is rolled back and its events are processed again in smaller
    transactions: each tenant's events on their own, and a failing group split in halves (in event order) until
    the events that fail alone are found. Only those are marked `failed` with `internal_error` (a fixed message,
    and the versions they were evaluated against, so that a replay issues what they should have), so one poisoned
    event costs O(log n) extra transactions and never blocks the queue or another tenant's events.
    """
    limit = max(1, min(limit, MAX_BATCH_SIZE))
    horizon = compile_outside_lock(database, limit)
    if horizon is None:
        return ProcessReport()  # nothing pending: the write lock is not taken at all
    planned: list[list[_EventPlan]] = []
    try:
        with unit_of_work(database) as uow:
            report = ProcessReport()
            pending = [event for event in uow.events.pending(limit) if event.id <= horizon]
            for scope, events in _by_scope(pending).items():
                report.add(_process_scope(uow, scope, events, planned))
            return report
    except Exception:
        log.exception("event batch failed; isolating the events that fail")
    versions = {plan.event.id: plan.versions for plans in planned for plan in plans}
    return _process_isolating(database, limit, versions)


def _process_isolating(database: Database, limit: int, versions: dict[str, list[str]]) -> ProcessReport:
    report = ProcessReport()
    groups = _by_scope(reader(database).events.pending(limit))
    for scope, events in groups.items():
        _bisect(database, scope, [e.id for e in events], versions, report, failed_whole=len(groups) == 1)
    return report


def _bisect(
    database: Database,
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
        planned: list[list[_EventPlan]] = []
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


def _mark_broken(database: Database, scope: Scope, event_id: str, versions: list[str] | None) -> None:
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
                book = _RuleBook(uow, scope)
                versions = book.in_window(book.live_versions([row.type]).get(row.type, []), pending)
            uow.events.mark_many(scope, [_broken(event_id, versions or None)])
        return
    except Exception:  # noqa: BLE001 - fall through: record the failure without versions
        log.exception("event %s: its versions could not be recorded", event_id)
    with unit_of_work(database) as uow:
        uow.events.mark_many(scope, [_broken(event_id, None)])


def _broken(event_id: str, versions: list[str] | None) -> EventOutcome:
    return EventOutcome(event_id, "failed", "internal_error", INTERNAL_FAILURE_MESSAGE, versions)


def process_all(database: Database, batch_size: int = DEFAULT_BATCH_SIZE) -> ProcessReport:
    """Process until no received event is left (used by tests, demos and backfills)."""
    total = ProcessReport()
    while True:
        report = process_pending(database, batch_size)
        total.add(report)
        if report.processed + report.failed == 0:
            return total


def replay_event(database: Database, scope: Scope, event_id: str) -> r.Event:
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
