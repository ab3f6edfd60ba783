"""Tiers in the event worker (issue 33, T3; reports/i33-tiers-plan.md sections 3.5 and 4.2): each customer's tier
state in each tiered programme of a batch, moved event by event in processing order, and saved in the batch's unit
of work (state, contributions with their daily sums, the history and the `tier.changed` outbox messages).

Matching is optimistic: rules read, and multiplied amounts use, the tier the book holds when the event is matched
(`facts`, `multipliers`: the opening state of the batch with due reviews applied at the event's clock), and the
book remembers what each event was matched with (`seen`). Deciding in processing order (`batch_order`) asks
`changed_under` before each event: when an earlier event of the batch has since moved a tier the event was matched
with, the batch stops there, issues what was decided, and matches the rest again (`event_processing`). After each
decided event, `record` applies the order of plan section 3.5: due reviews of the customers involved, the event's
contributions (points the programme issued, a reversal's target on its original's day, a `sum`/`count` metric's
event), then upgrades. The event itself is paid at the tier it found; the next one at the new tier.

Retries count nothing twice: points are keyed by execution (a retried event re-issues only what was not issued),
`sum`/`count` by event, and for retried events the sources counted before are read first (`known_sources`).
Downgrades by the clock alone (no event) are the tier worker's (`engine.tier_reviews`, through `review`); the book
applies only the reviews due at or before the clock of an event it processes (`domain.tiers.apply_due`), so the
two agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.tier_requests import TIER_FIELDS
from rewards_lab.domain.conditions import ConditionSpec, EventFacts, TierFacts, node_holds
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.rules import RuleSpec, condition_node, read
from rewards_lab.domain.settings import Tiers
from rewards_lab.domain.tiers import (
    ONE,
    TierChange,
    TierModel,
    TierState,
    after_event,
    apply_due,
    day_start,
    enrol,
    local_day,
    progress,
    sum_contribution,
    tier_facts,
)
from rewards_lab.engine.batch_plan import EventPlan
from rewards_lab.engine.notifications import outbox_messages
from rewards_lab.engine.rule_book import LiveRuleBook, VersionMeta
from rewards_lab.store.interfaces import PendingEvent, Repositories
from rewards_lab.store.tiers import TierChangeRow, TierContribution, TierStateRow

TIER_CHANGED = "tier.changed"  # the webhook kind (engine.notifications.WEBHOOK_KINDS)
NOTIFIED = ("upgraded", "downgraded")  # the changes `tier.changed` announces (the rest are in the history only)
Seen = tuple[str, str, int, Decimal | None]  # (programme, customer, rank, progress when read) an event matched with


def reads_tiers(rules: Sequence[RuleSpec]) -> bool:
    """Whether these rules read `customer.tier*` (so their facts need the tier)."""
    return any(name in TIER_FIELDS for rule in rules for name in rule.fields())


def reads_progress(rules: Sequence[RuleSpec]) -> bool:
    return any("customer.tier_progress" in rule.fields() for rule in rules)


def multiplies(rules: Sequence[RuleSpec]) -> bool:
    return any(action.multiply for rule in rules for action in rule.actions)


def metric_key(meta: VersionMeta) -> str:
    """The fingerprint of a version's metric: counts are kept per metric, so a changed metric starts afresh."""
    assert meta.tiers is not None
    return metric_key_of(meta.tiers)


def metric_key_of(tiers: Tiers) -> str:
    """The fingerprint a tier model's metric is counted under (`tier_days`, `tier_contributions`)."""
    return jsonutil.canonical_hash(dict(tiers.metric))[:32]


def state_of(model: TierModel, row: TierStateRow) -> TierState:
    """A stored state as `domain.tiers` reads it (for readers outside the batch: the API, simulation)."""
    return _state_of(model, row)


def event_clock(event: PendingEvent) -> datetime:
    """The event's time as a naive UTC instant (how `domain.tiers` and the store keep instants)."""
    return datetime(1970, 1, 1) + timedelta(microseconds=event.event_time_us)


@dataclass(slots=True)
class _Holder:
    """One customer's tier in one programme as the batch moves it."""

    state: TierState | None  # None: not enrolled yet
    days: dict[date, int]  # the metric per local day, as counted so far
    stored: TierStateRow | None = None
    dirty: bool = False
    enrolled_at: datetime | None = None  # when the batch enrolled it (the stored row's otherwise)

    def metric(self, first: date, last: date) -> int:
        return sum(amount for day, amount in self.days.items() if first <= day <= last)


@dataclass(slots=True)
class _Pending:
    """What `save` writes: contributions per programme and the changes in order."""

    contributions: dict[str, list[TierContribution]] = field(default_factory=lambda: defaultdict(list))
    changes: list[tuple[str, str, TierChange, str | None, TierState]] = field(default_factory=list)


class TierBook:
    """The tier state of a batch's customers in the tiered programmes its events are evaluated against."""

    def __init__(self, uow: Repositories, scope: Scope, programmes: Mapping[str, VersionMeta]) -> None:
        self.uow, self.scope = uow, scope
        self.programmes = dict(programmes)  # program id -> its newest tiered version in the batch
        self.version_programme: dict[str, str] = {}  # every tiered version of the batch -> its programme
        self.holders: dict[tuple[str, str], _Holder] = {}
        self.seen: dict[str, set[Seen]] = {}
        self.known: set[tuple[str, str, str]] = set()  # (programme, source, customer) counted by an earlier attempt
        self.references: dict[str, str | None] = {}  # a beneficiary reference -> its customer id (None: nobody)
        self.pending = _Pending()
        self.rematches = 0
        self.customer_ids: set[str] = set()  # the batch's events' customers that exist

    @classmethod
    def for_batch(
        cls, uow: Repositories, scope: Scope, book: LiveRuleBook, plans: Sequence[EventPlan]
    ) -> TierBook | None:
        """The book of a batch, or None when none of its events is evaluated against a version with tiers (then
        nothing is read)."""
        programmes: dict[str, VersionMeta] = {}
        tiered: dict[str, str] = {}
        for version_id in sorted({v for plan in plans for v in plan.versions}):
            meta = book.meta[version_id]
            if meta.tier_model is None:
                continue
            tiered[version_id] = meta.program_id
            newest = programmes.get(meta.program_id)
            if newest is None or meta.number > newest.number:
                programmes[meta.program_id] = meta
        if not programmes:
            return None
        tiers = cls(uow, scope, programmes)
        tiers.version_programme = tiered
        retried = sorted({plan.event.id for plan in plans if plan.event.attempts > 0})
        for program_id, meta in programmes.items():
            for source, customer in uow.tiers.known_sources(scope, program_id, metric_key(meta), retried):
                tiers.known.add((program_id, source, customer))
        return tiers

    def preload(self, customer_ids: Iterable[str]) -> None:
        """Read the state and daily sums of these customers in every tiered programme (two queries each)."""
        wanted = sorted(set(customer_ids))
        self.customer_ids.update(wanted)
        for program_id, meta in self.programmes.items():
            missing = [c for c in wanted if (program_id, c) not in self.holders]
            if missing:
                self._load(program_id, meta, missing)

    def _load(self, program_id: str, meta: VersionMeta, customer_ids: list[str]) -> None:
        model = meta.tier_model
        assert model is not None
        rows = self.uow.tiers.load(self.scope, program_id, customer_ids)
        days = self.uow.tiers.days(self.scope, program_id, metric_key(meta), customer_ids)
        for customer_id in customer_ids:
            row = rows.get(customer_id)
            state = None if row is None else _state_of(model, row)
            self.holders[(program_id, customer_id)] = _Holder(state, days.get(customer_id, {}), row)

    def _holder(self, program_id: str, customer_id: str) -> _Holder:
        holder = self.holders.get((program_id, customer_id))
        if holder is None:
            self._load(program_id, self.programmes[program_id], [customer_id])
            holder = self.holders[(program_id, customer_id)]
        return holder

    def _model(self, program_id: str) -> TierModel:
        model = self.programmes[program_id].tier_model
        assert model is not None
        return model

    def _at_entry(self, program_id: str, customer_id: str, clock: datetime) -> tuple[TierState, list[TierChange]]:
        """The customer's state at an event's entry (enrolled at the event when new; due reviews applied), without
        moving the book."""
        model, holder = self._model(program_id), self._holder(program_id, customer_id)
        state = holder.state if holder.state is not None else enrol(model, clock)
        return apply_due(model, state, clock, holder.metric)

    # matching ---------------------------------------------------------------------------------------------------
    def tier_of(self, meta: VersionMeta, event: PendingEvent, customer_id: str, *, with_progress: bool) -> TierFacts:
        """The tier rules read for an event's customer (remembered as what the event was matched with)."""
        program_id, clock = meta.program_id, event_clock(event)
        model, holder = self._model(program_id), self._holder(program_id, customer_id)
        state, _ = self._at_entry(program_id, customer_id, clock)
        facts = tier_facts(model, state, progress(model, state, clock, holder.metric))
        self.seen.setdefault(event.id, set()).add(
            (program_id, customer_id, state.rank, facts.progress if with_progress else None)
        )
        return facts

    def multipliers(self, meta: VersionMeta, event: PendingEvent, customer_id: str | None) -> Callable[[Any], Decimal]:
        """Each recipient's multiplier for an event's multiplied actions (None: the event's customer, else a
        beneficiary's reference; a reference naming nobody multiplies by 1: its action fails anyway)."""
        program_id, clock = meta.program_id, event_clock(event)
        model = self._model(program_id)

        def of(recipient: Any) -> Decimal:
            target = customer_id if recipient is None else self._resolve(recipient)
            if target is None:
                return ONE
            state, _ = self._at_entry(program_id, target, clock)
            self.seen.setdefault(event.id, set()).add((program_id, target, state.rank, None))
            return model.multiplier(state.rank)

        return of

    def _resolve(self, reference: Any) -> str | None:
        if not isinstance(reference, str) or not reference:
            return None
        if reference not in self.references:
            found = self.uow.customers.resolve_many(self.scope, [reference])
            row = found.get(reference)
            self.references[reference] = None if row is None else row.id
        return self.references[reference]

    def forget(self, plans: Iterable[EventPlan]) -> None:
        """Before matching these events again: what they were matched with no longer holds."""
        for plan in plans:
            self.seen.pop(plan.event.id, None)
        self.rematches += 1

    # deciding ---------------------------------------------------------------------------------------------------
    def changed_under(self, plan: EventPlan) -> bool:
        """Whether a tier this event was matched with has moved since (an earlier event of the batch upgraded it)."""
        clock = event_clock(plan.event)
        for program_id, customer_id, rank, seen_progress in self.seen.get(plan.event.id, ()):
            state, _ = self._at_entry(program_id, customer_id, clock)
            if state.rank != rank:
                return True
            if seen_progress is not None:
                model, holder = self._model(program_id), self._holder(program_id, customer_id)
                now = tier_facts(model, state, progress(model, state, clock, holder.metric)).progress
                if now != seen_progress:
                    return True
        return False

    def record(self, plan: EventPlan, refused: set[str]) -> None:
        """After an event's actions are decided: due reviews of the customers it involves, its contributions, then
        upgrades (plan section 3.5, steps 1, 5 and 6). `refused`: transactions the ledger will refuse (they issue
        nothing, so they count nothing)."""
        event, clock = plan.event, event_clock(plan.event)
        programmes = sorted({self.version_programme[v] for v in plan.versions if v in self.version_programme})
        for program_id in programmes:
            meta = self.programmes[program_id]
            model = self._model(program_id)
            involved = [plan.customer_id] if plan.customer_id in self.customer_ids else []
            counted = self._contributions(plan, meta, model, refused, clock)
            for planned in plan.planned:
                recipient = planned.recipient
                if planned.version.program_id == program_id and recipient is not None and not recipient.error_code:
                    involved.append(recipient.customer_id)
            involved += [c.customer_id for c in counted]
            for customer_id in dict.fromkeys(involved):
                self._step(program_id, model, customer_id, clock, None)
            totals: dict[str, int] = defaultdict(int)
            for contribution in counted:
                key = (program_id, contribution.source_id, contribution.customer_id)
                if key in self.known:
                    continue
                self.known.add(key)
                holder = self._holder(program_id, contribution.customer_id)
                holder.days[contribution.day] = holder.days.get(contribution.day, 0) + contribution.amount_minor
                totals[contribution.customer_id] += contribution.amount_minor
                self.pending.contributions[program_id].append(contribution)
            for customer_id in dict.fromkeys(involved):
                self._step(program_id, model, customer_id, clock, event.id, totals.get(customer_id, 0))

    def _step(
        self, program_id: str, model: TierModel, customer_id: str, clock: datetime, event_id: str | None, added: int = 0
    ) -> None:
        """Move one customer: due reviews (`event_id` None), or after the event's contributions (`added`)."""
        holder = self._holder(program_id, customer_id)
        if holder.state is None:
            holder.state, holder.dirty, holder.enrolled_at = enrol(model, clock), True, clock
        if event_id is None:
            state, changes = apply_due(model, holder.state, clock, holder.metric)
        else:
            state, changes = after_event(model, holder.state, clock, holder.metric, added)
        if state != holder.state:
            holder.state, holder.dirty = state, True
        for change in changes:
            self.pending.changes.append((program_id, customer_id, change, event_id, state))

    def review(self, program_id: str, rows: Mapping[str, TierStateRow], as_of: datetime) -> int:
        """The tier worker's share (`engine.tier_reviews`): apply every review and grace end due by `as_of` to these
        stored customers of a programme (read under the round's claim), as `record` does before an event; returns
        how many changes that made."""
        meta, model = self.programmes[program_id], self._model(program_id)
        ids = sorted(rows)
        days = self.uow.tiers.days(self.scope, program_id, metric_key(meta), ids)
        before = len(self.pending.changes)
        for customer_id in ids:
            row = rows[customer_id]
            self.holders[(program_id, customer_id)] = _Holder(_state_of(model, row), days.get(customer_id, {}), row)
            self._step(program_id, model, customer_id, as_of, None)
        return len(self.pending.changes) - before

    def _contributions(
        self, plan: EventPlan, meta: VersionMeta, model: TierModel, refused: set[str], clock: datetime
    ) -> list[TierContribution]:
        """What an event adds to its programme's metric, per (source, customer): points issued and reversal
        targets (`points`), or the event itself (`sum`, `count`)."""
        assert meta.tiers is not None
        metric, program_id = meta.tiers.metric, meta.program_id
        day = local_day(clock, model.timezone)
        found: dict[tuple[str, str], TierContribution] = {}

        def add(source: str, customer_id: str, on: date, amount: int) -> None:
            before = found.get((source, customer_id))
            total = amount if before is None else before.amount_minor + amount
            found[(source, customer_id)] = TierContribution(source, customer_id, on, total)

        if metric["type"] == "points":
            for planned in plan.planned:
                if planned.version.program_id != program_id:
                    continue
                request = planned.request
                if request is not None and request.transaction_id not in refused:
                    if request.asset_id == meta.asset_id and request.amount_minor > 0:
                        holder = plan.customer_id if planned.recipient is None else planned.recipient.customer_id
                        add(planned.execution_id, holder, day, request.amount_minor)
                reversal = planned.reversal
                if reversal is not None and reversal.original is not None:
                    original = reversal.original
                    when = original.occurred_at or original.received_at
                    on = local_day(when.replace(tzinfo=None), model.timezone)
                    for item in reversal.items:
                        if item.original.program_id == program_id and item.original.asset_id == meta.asset_id:
                            add(planned.execution_id, item.original.customer_id, on, -item.target_minor)
            return list(found.values())
        amount = self._event_amount(plan, meta, metric)
        if amount and plan.customer_id in self.customer_ids:
            add(plan.event.id, plan.customer_id, day, amount)
        return list(found.values())

    def _event_amount(self, plan: EventPlan, meta: VersionMeta, metric: Mapping[str, Any]) -> int:
        """A `sum`/`count` metric's count of one event (its `less` part negative)."""
        event = plan.event
        return event_metric_amount(metric, event.type, event.data_value(), _aware(event_clock(event)), meta.timezone)

    # saving -----------------------------------------------------------------------------------------------------
    def save(self) -> None:
        """Write what the batch moved: the state of every customer it enrolled or changed, the contributions and
        their daily sums, the history and the `tier.changed` messages (all in the batch's unit of work)."""
        tiers, scope = self.uow.tiers, self.scope
        states = []
        for (program_id, customer_id), holder in self.holders.items():
            if holder.dirty and holder.state is not None:
                states.append(self._row(program_id, customer_id, holder))
        tiers.save(scope, states)
        for program_id, contributions in self.pending.contributions.items():
            tiers.add_contributions(scope, program_id, metric_key(self.programmes[program_id]), contributions)
        rows = self._clear_of_stored(self._change_rows())
        tiers.add_changes(scope, rows)
        messages = [(row.id, self._payload(row)) for row in rows if row.kind in NOTIFIED]
        if messages:
            self.uow.outbox.add_many(scope, outbox_messages(TIER_CHANGED, messages))

    def _row(self, program_id: str, customer_id: str, holder: _Holder) -> TierStateRow:
        state, meta = holder.state, self.programmes[program_id]
        assert state is not None
        model = self._model(program_id)
        enrolled_at = holder.stored.enrolled_at if holder.stored is not None else holder.enrolled_at
        if enrolled_at is None:
            enrolled_at = day_start(state.enrolled, model.timezone)
        return TierStateRow(
            program_id,
            customer_id,
            model.level(state.rank).code,
            state.since or enrolled_at,
            state.anchor or state.enrolled,
            state.review_at,
            state.grace_until,
            None if state.grace_target is None else model.level(state.grace_target).code,
            enrolled_at,
            metric_key(meta),
            meta.version_id,
        )

    def _change_rows(self) -> list[TierChangeRow]:
        """The batch's changes as history rows, in order."""
        ids = iter(new_ids("tier_change", len(self.pending.changes)))
        rows = []
        for program_id, customer_id, change, event_id, state in self.pending.changes:
            model, meta = self._model(program_id), self.programmes[program_id]
            window = change.window
            rows.append(
                TierChangeRow(
                    next(ids),
                    program_id,
                    customer_id,
                    change.at,
                    change.kind,
                    model.level(change.from_rank).code,
                    model.level(change.to_rank).code,
                    change.metric,
                    None if window is None else window[0],
                    None if window is None else window[1],
                    event_id,
                    meta.version_id,
                    state.review_at,
                    state.grace_until,
                    None if state.grace_target is None else model.level(state.grace_target).code,
                )
            )
        return rows

    def _clear_of_stored(self, rows: list[TierChangeRow]) -> list[TierChangeRow]:
        """The history keeps one change per customer, instant and kind: a change at the instant of another (two
        events at one time, both upgrading, in one batch or two) is written a microsecond later, so the history
        is the same however the events were batched."""
        by_programme: dict[str, list[TierChangeRow]] = defaultdict(list)
        for row in rows:
            by_programme[row.program_id].append(row)
        cleared = []
        for program_id, own in by_programme.items():
            customers, instants = [row.customer_id for row in own], [row.changed_at for row in own]
            last = max(instants) + timedelta(seconds=1)  # past any earlier shift (a microsecond per clash)
            taken = self.uow.tiers.changes_between(self.scope, program_id, customers, min(instants), last)
            for row in own:
                at = row.changed_at
                while (row.customer_id, at, row.kind) in taken:
                    at += timedelta(microseconds=1)
                taken.add((row.customer_id, at, row.kind))
                cleared.append(row if at == row.changed_at else replace(row, changed_at=at))
        return cleared

    def _payload(self, row: TierChangeRow) -> dict[str, Any]:
        """The `tier.changed` webhook's body (plan section 4.4)."""
        model, meta = self._model(row.program_id), self.programmes[row.program_id]
        ranks = {level.code: level.rank for level in model.levels}
        up = ranks.get(row.to_tier, 1) > ranks.get(row.from_tier or "", 1)
        window = None
        if row.window_start is not None and row.window_end is not None:
            window = {"start": row.window_start.isoformat(), "end": row.window_end.isoformat()}
        return {
            "change_id": row.id,
            "customer_id": row.customer_id,
            "program_id": row.program_id,
            "program_version": meta.number,
            "from": row.from_tier,
            "to": row.to_tier,
            "direction": "up" if up else "down",
            "kind": row.kind,
            "at": _aware(row.changed_at).isoformat().replace("+00:00", "Z"),
            "event_id": row.event_id,
            "metric": None if row.metric_minor is None else format_amount(row.metric_minor, model.decimals),
            "window": window,
            "review_at": None if row.review_at is None else _aware(row.review_at).isoformat().replace("+00:00", "Z"),
        }


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)


def _state_of(model: TierModel, row: TierStateRow) -> TierState:
    """A stored state as `domain.tiers` reads it; a code the version lacks reads as the base (the tier worker moves
    such holders, plan section 2.3)."""
    ranks = {level.code: level.rank for level in model.levels}
    rank = ranks.get(row.tier, 1)
    target = None if row.grace_target is None else ranks.get(row.grace_target, 1)
    return TierState(
        local_day(row.enrolled_at, model.timezone),
        rank,
        row.since,
        row.anchor,
        row.review_at,
        row.grace_until if target is not None else None,
        target,
    )


def event_metric_amount(
    metric: Mapping[str, Any], event_type: str, data: Mapping[str, Any], occurred_at: datetime, timezone: str
) -> int:
    """What one event adds to a `sum`/`count` metric (its `less` part negative; 0 for a `points` metric, which
    counts what is issued)."""
    parts = [(metric, False)]
    if isinstance(metric.get("less"), Mapping):
        parts.append((metric["less"], True))
    total = 0
    facts = EventFacts(occurred_at)

    def holds(leaf: ConditionSpec) -> bool:
        return leaf.holds(read(data, leaf.field, facts, timezone))

    for part, less in parts:
        if metric.get("type") == "points" or part.get("event_type") != event_type:
            continue
        if not all(node_holds(condition_node(item), holds) for item in part.get("conditions") or []):
            continue
        if metric["type"] == "count":
            total += -1 if less else 1
            continue
        value = read(data, str(part["field"]), facts, timezone)
        if isinstance(value, Decimal) and not isinstance(value, bool):
            total += sum_contribution(value, int(metric.get("decimals", 2)), less=less)
    return total
