"""Business events: durable acceptance, deduplication, and processing by the reward engine in batches.

`submit_events` stores events as `received` (one statement for many, so an HTTP front end can group-commit).
`process_pending` takes the oldest received events, evaluates the published rules of every programme whose
rules name the event's type, and issues through the batch posting path, all in one database transaction per
batch. Each issuance is keyed by (event, programme version, rule, action); an event remembers which versions it
was evaluated against, so a replay re-evaluates the same versions and issues only the keys not yet issued.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id, new_ids
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.posting_batch import decide_whole
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.domain.rules_batch import RuleMatch, match_rules
from rewards_lab.service import presenters
from rewards_lab.service.ledger import load_state, write_accepted, write_whole
from rewards_lab.service.notifications import outbox_messages
from rewards_lab.service.programmes import compile_rows
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.events import EventRepository
from rewards_lab.store.queries import Row
from rewards_lab.store.uow import Repositories, reader, unit_of_work

log = logging.getLogger(__name__)
EVENT_SORTS = ("received_at", "occurred_at")
EXECUTION_SORTS = ("created_at",)
DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 10_000


# acceptance -----------------------------------------------------------------------------------------------
def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None)


def submit_events(database: Database, scope: Scope, bodies: list[rq.EventCreate]) -> list[r.Event | ServiceError]:
    """Store many events durably in one transaction; per event, its result or the error refusing it.

    A repeated `external_event_id` with the same payload returns the original event (nothing is stored or
    issued twice); with a different payload it is `event_duplicate_mismatch`.
    """
    (results,) = submit_event_groups(database, [(scope, bodies)])
    return results


def submit_event_groups(
    database: Database, groups: list[tuple[Scope, list[rq.EventCreate]]]
) -> list[list[r.Event | ServiceError]]:
    """`submit_events` for several tenants at once, in ONE transaction (one commit, one fsync): group commit."""
    prepared_groups: list[tuple[Scope, list[PreparedEvent]]] = []
    refused: list[dict[int, ServiceError]] = []
    for scope, bodies in groups:
        prepared, errors = [], {}
        for index, body in enumerate(bodies):
            try:
                prepared.append(prepare_event(body))
            except ServiceError as error:
                errors[index] = error
        prepared_groups.append((scope, prepared))
        refused.append(errors)
    stored = store_prepared(database, prepared_groups)
    results: list[list[r.Event | ServiceError]] = []
    for (_, bodies), outcomes, errors in zip(groups, stored, refused, strict=True):
        remaining = iter(outcomes)
        results.append([errors[i] if i in errors else present_stored(next(remaining)) for i in range(len(bodies))])
    return results


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """An event ready to store: its row (id, payload hash, data text) computed outside the intake's transaction."""

    row: dict[str, Any]

    @property
    def external_event_id(self) -> str:
        return str(self.row["external_event_id"])


def prepare_event(body: rq.EventCreate) -> PreparedEvent:
    """The per-event work of acceptance (hashing, serialising), done by the request before it queues the event,
    so that the intake's one writer thread only runs the statements. `event_payload_too_large` is raised here."""
    data_text = jsonutil.dumps(body.data)
    if len(data_text) > rq.MAX_EVENT_DATA_BYTES:
        raise ServiceError("event_payload_too_large", field="data", limit_bytes=rq.MAX_EVENT_DATA_BYTES)
    occurred = _naive_utc(body.occurred_at)
    payload = {  # what the hash covers (see docs/decisions.md, "Duplicate events")
        "type": body.type,
        "customer_id": body.customer_id,
        "occurred_at": occurred.isoformat() if occurred else None,
        "data": body.data,
    }
    return PreparedEvent(
        {
            "id": new_id("event"),
            "external_event_id": body.external_event_id,
            "type": body.type,
            "customer_id": body.customer_id,
            "occurred_at": occurred,
            "data": data_text,
            "payload_hash": jsonutil.canonical_hash(payload),
        }
    )


def store_prepared(
    database: Database, groups: list[tuple[Scope, list[PreparedEvent]]]
) -> list[list[Row | ServiceError]]:
    """Store prepared events of several tenants in ONE transaction; per event, the stored (or original) row, or
    `event_duplicate_mismatch`. Accepting events never waits for the worker's processing batch: this runs on
    the intake's own cursor (`Database.intake_cursor`).

    Fast path: one INSERT of every new event, its own transaction, no read first; the unique
    (organization, environment, external_event_id) index refuses the whole statement if any id is already
    stored (a client's retry), and then the batch takes the careful path: read the stored originals, insert
    the rest, in one transaction.
    """
    received_at = utcnow()
    fresh: list[tuple[Scope, dict[str, Any]]] = []
    results: list[list[Row | ServiceError]] = []
    for scope, prepared in groups:
        rows, outcomes = _answers(prepared, {}, received_at)
        fresh.extend((scope, row) for row in rows)
        results.append(outcomes)
    with database.intake_cursor() as con:
        stored = EventRepository(con).add_batch(fresh, received_at)
    if not stored:
        with database.intake_transaction() as con:
            uow = Repositories(con, database)
            return [_store(uow, scope, prepared) for scope, prepared in groups]
    return results


def _as_stored(row: dict[str, Any], received_at: datetime) -> Row:
    """A new event's row as inserted: no need to read it back."""
    return {
        **row,
        "status": "received",
        "error_code": None,
        "error_message": None,
        "attempts": 0,
        "received_at": received_at,
        "processed_at": None,
    }


def _mismatch(external_id: str) -> ServiceError:
    return ServiceError("event_duplicate_mismatch", field="external_event_id", external_event_id=external_id)


def present_stored(outcome: Row | ServiceError) -> r.Event | ServiceError:
    return outcome if isinstance(outcome, ServiceError) else presenters.event(outcome)


def _store(uow: Repositories, scope: Scope, prepared: list[PreparedEvent]) -> list[Row | ServiceError]:
    existing = uow.events.get_by_external_ids(scope, sorted({p.external_event_id for p in prepared}))
    received_at = utcnow()
    fresh, outcomes = _answers(prepared, existing, received_at)
    uow.events.add_many(scope, fresh, received_at)
    return outcomes


def _answers(
    prepared: list[PreparedEvent], existing: dict[str, Row], received_at: datetime
) -> tuple[list[dict[str, Any]], list[Row | ServiceError]]:
    """(the rows to insert, each event's answer). An event answers with the stored original of its external id,
    or with its own row if it is the first of that id (then it is inserted); a different payload under a known
    id is `event_duplicate_mismatch`."""
    known: dict[str, Row] = dict(existing)
    fresh: list[dict[str, Any]] = []
    outcomes: list[Row | ServiceError] = []
    for item in prepared:
        original = known.get(item.external_event_id)
        if original is None:
            known[item.external_event_id] = original = _as_stored(item.row, received_at)
            fresh.append(item.row)
        same = original["payload_hash"] == item.row["payload_hash"]
        outcomes.append(original if same else _mismatch(item.external_event_id))
    return fresh, outcomes


def submit_event(database: Database, scope: Scope, body: rq.EventCreate) -> r.Event:
    (result,) = submit_events(database, scope, [body])
    if isinstance(result, ServiceError):
        raise result
    return result


# processing -----------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ProcessReport:
    processed: int = 0
    failed: int = 0
    issued: int = 0
    refused: int = 0

    def add(self, other: ProcessReport) -> None:
        self.processed += other.processed
        self.failed += other.failed
        self.issued += other.issued
        self.refused += other.refused


@dataclass(slots=True)
class _Planned:
    """One issuance an event's rules call for: its execution record and its posting request."""

    record: dict[str, Any]
    request: PostingRequest | None


@dataclass(slots=True)
class _EventPlan:
    row: Row
    versions: list[str]
    planned: list[_Planned] = field(default_factory=list)
    blocker: ServiceError | None = None  # nothing can be issued: no such customer, or no wallet
    error: ServiceError | None = None  # the first issuance refused; the others were still attempted


# Compiled rules of published versions, per database and (scope, version): a published version's rules,
# programme and asset decimals never change, so each batch need not read and compile them again (four statements).
_PUBLISHED: weakref.WeakKeyDictionary[Database, dict[tuple[Scope, str], tuple[Row, list[RuleSpec]]]] = (
    weakref.WeakKeyDictionary()
)
_PUBLISHED_LOCK = threading.Lock()


class _RuleBook:
    """Compiled rules per version, loaded once per batch and scope (once per process for published versions)."""

    def __init__(self, uow: Repositories, scope: Scope) -> None:
        self.uow, self.scope = uow, scope
        self.rules: dict[str, list[RuleSpec]] = {}
        self.meta: dict[str, Row] = {}

    def live_versions(self, event_types: list[str]) -> dict[str, list[str]]:
        """event type -> ids of the live versions that have a rule for it."""
        rows = self.uow.programmes.live_versions(self.scope, event_types)
        self.load([row["id"] for row in rows])
        by_type: dict[str, list[str]] = defaultdict(list)
        for row in rows:
            for spec in self.rules[row["id"]]:
                if row["id"] not in by_type[spec.event_type]:
                    by_type[spec.event_type].append(row["id"])
        return by_type

    def load(self, version_ids: list[str]) -> None:
        published = self._published()
        for version_id in version_ids:
            if version_id not in self.rules and (self.scope, version_id) in published:
                self.meta[version_id], self.rules[version_id] = published[(self.scope, version_id)]
        missing = [v for v in version_ids if v not in self.rules]
        if not missing:
            return
        rows = self.uow.programmes.rules_of(self.scope, missing)
        for version_id in missing:
            meta = self.uow.programmes.get_version(self.scope, version_id)
            assert meta is not None
            programme = self.uow.programmes.get(self.scope, meta["program_id"])
            assert programme is not None
            self.meta[version_id] = {**meta, "asset_id": programme["asset_id"]}
            own = [row for row in rows if row["version_id"] == version_id]
            self.rules[version_id] = compile_rows(self.uow, self.scope, own, programme["asset_id"])
            if meta["status"] != "draft":
                with _PUBLISHED_LOCK:
                    published[(self.scope, version_id)] = (self.meta[version_id], self.rules[version_id])

    def _published(self) -> dict[tuple[Scope, str], tuple[Row, list[RuleSpec]]]:
        if self.uow.database is None:
            return {}
        with _PUBLISHED_LOCK:
            return _PUBLISHED.setdefault(self.uow.database, {})


def _matches(book: _RuleBook, plans: list[_EventPlan]) -> list[list[tuple[str, RuleMatch]]]:
    """Per plan, (version id, match) for every rule that matched its event, in the order of its versions, then
    of their rules (`evaluate_rules`'s order): each version's rules are evaluated once, column-wise, over all
    the events evaluated against that version (`rules_batch.match_rules`)."""
    by_version: dict[str, list[int]] = {}
    for index, plan in enumerate(plans):
        for version_id in plan.versions:
            by_version.setdefault(version_id, []).append(index)
    data: dict[int, Any] = {}
    found: dict[tuple[int, str], list[RuleMatch]] = {}
    for version_id, indices in by_version.items():
        for index in indices:
            if index not in data:
                data[index] = jsonutil.loads(plans[index].row["data"])
        batch = [(plans[index].row["type"], data[index]) for index in indices]
        for index, matches in zip(indices, match_rules(book.rules[version_id], batch), strict=True):
            found[(index, version_id)] = matches
    return [
        [(version_id, match) for version_id in plan.versions for match in found[(index, version_id)]]
        for index, plan in enumerate(plans)
    ]


def _plan_event(
    plan: _EventPlan,
    book: _RuleBook,
    matched: list[tuple[str, RuleMatch]],
    customer: Row | None,
    wallet: Row | None,
    issued_keys: set[tuple[str, str, str, int]],
    existing_ids: dict[tuple[str, str, str, int], str],
    execution_ids: Iterator[str],
) -> None:
    row = plan.row
    for version_id, verdict in matched:
        meta = book.meta[version_id]
        inputs_text: str | None = None
        for action in verdict.actions:
            key = (row["id"], version_id, verdict.rule_id, action.action_index)
            if (not action.issues and action.error_code is None) or key in issued_keys:
                continue
            if inputs_text is None:  # the same provenance for every action of the rule
                inputs_text = jsonutil.dumps({k: presenters.json_value(v) for k, v in verdict.inputs.items()})
            execution_id = existing_ids.get(key) or next(execution_ids)
            record = {
                "id": execution_id,
                "event_id": row["id"],
                "external_event_id": row["external_event_id"],
                "customer_id": customer["id"] if customer else row["customer_id"],
                "program_id": meta["program_id"],
                "version_id": version_id,
                "version_number": meta["number"],
                "rule_id": verdict.rule_id,
                "action_index": action.action_index,
                "asset_id": action.asset_id,
                "wallet_id": wallet["id"] if wallet else None,
                "amount_minor": action.amount_minor,
                "status": "failed",
                "error_code": None,
                "transaction_id": None,
                "inputs": inputs_text,
                "decimals": action.decimals,
            }
            request = None
            if action.error_code is not None:  # refused before reaching the ledger (amount_too_large)
                record["error_code"] = action.error_code
                plan.error = plan.error or ServiceError(action.error_code, action.reason)
            elif wallet is not None:
                request = PostingRequest(
                    transaction_id="",
                    kind="reward",
                    asset_id=action.asset_id,
                    amount_minor=action.amount_minor,
                    wallet_id=wallet["id"],
                    memo=f"{row['type']} {row['external_event_id']}",
                    execution_id=execution_id,
                )
            plan.planned.append(_Planned(record, request))
    if plan.planned:
        if customer is None:
            plan.blocker = ServiceError("customer_not_found", customer_id=row["customer_id"])
        elif wallet is None:
            plan.blocker = ServiceError(
                "wallet_not_found",
                "the customer has no wallet to receive the reward",
                customer_id=customer["id"],
            )


def _recorded_versions(row: Row) -> list[str] | None:
    """The versions an event was evaluated against, or None when none are recorded: never attempted, or failed
    by a server fault before anything was recorded (stored as NULL; before issue 14, as "[]"). A failed event
    never has an empty list otherwise (an event that matched no version cannot fail), so "[]" means unknown."""
    text = row["evaluated_versions"]
    if text is None or text == "[]":
        return None
    return list(jsonutil.loads(text))


def _process_scope(
    uow: Repositories, scope: Scope, rows: list[Row], sink: list[list[_EventPlan]] | None = None
) -> ProcessReport:
    """Evaluate and issue for one tenant's events, in order, through one batch posting.

    The events' plans (with the versions each is evaluated against) are appended to `sink` as soon as they
    are made, so that a caller whose transaction fails still knows which versions were live for each event.
    """
    book = _RuleBook(uow, scope)
    recorded = [_recorded_versions(row) for row in rows]
    live = book.live_versions(sorted({row["type"] for row, known in zip(rows, recorded, strict=True) if known is None}))
    plans = []
    for row, known in zip(rows, recorded, strict=True):
        if known is not None:
            versions = known
            book.load(versions)
        else:
            versions = list(live.get(row["type"], []))
        plans.append(_EventPlan(row, versions))
    if sink is not None:
        sink.append(plans)

    customers = uow.customers.resolve_many(scope, sorted({row["customer_id"] for row in rows}))
    wallets = uow.wallets.reward_wallets(scope, sorted({c["id"] for c in customers.values()}))
    attempted = [row["id"] for row in rows if row["attempts"] > 0]
    previous = uow.executions.for_events(scope, attempted) if attempted else []
    issued_keys = {
        (e["event_id"], e["version_id"], e["rule_id"], e["action_index"]) for e in previous if e["status"] == "issued"
    }
    existing_ids = {(e["event_id"], e["version_id"], e["rule_id"], e["action_index"]): e["id"] for e in previous}
    matches = _matches(book, plans)
    at_most = sum(a.issues or a.error_code is not None for m in matches for _, match in m for a in match.actions)
    execution_ids = iter(new_ids("execution", at_most))  # one call for the batch; ids not needed are dropped
    for plan, matched in zip(plans, matches, strict=True):
        customer = customers.get(plan.row["customer_id"])
        wallet = wallets.get(customer["id"]) if customer else None
        _plan_event(plan, book, matched, customer, wallet, issued_keys, existing_ids, execution_ids)

    requests = [p.request for plan in plans if plan.blocker is None for p in plan.planned if p.request]
    transaction_ids = iter(new_ids("transaction", len(requests)))
    for plan in plans:
        for planned in plan.planned:
            if plan.blocker is None and planned.request is not None:
                planned.request = planned.request._replace(transaction_id=next(transaction_ids))
    return _issue(uow, scope, plans)


def _issue(uow: Repositories, scope: Scope, plans: list[_EventPlan]) -> ProcessReport:
    requests = [p.request for plan in plans if plan.blocker is None for p in plan.planned if p.request]
    state = load_state(uow, scope, requests)
    whole = decide_whole(state, requests)  # every request accepted in one step, or None: decided one by one below
    report = ProcessReport()
    records: list[dict[str, Any]] = []
    issued: list[dict[str, Any]] = []
    outcomes: list[tuple[str, str, str | None, str | None, str | None]] = []
    accepted = []
    for plan in plans:
        for planned in plan.planned:
            record = planned.record
            if record["error_code"] is not None:  # refused when planned (amount_too_large)
                report.refused += 1
            elif plan.blocker is not None or planned.request is None:
                record["error_code"] = plan.blocker.code if plan.blocker else "wallet_not_found"
            else:
                try:
                    if whole is None:
                        accepted.append(state.decide(planned.request))
                    record.update(status="issued", transaction_id=planned.request.transaction_id)
                    issued.append(record)
                    report.issued += 1
                except ServiceError as error:
                    record["error_code"] = error.code
                    plan.error = plan.error or error
                    report.refused += 1
            records.append(record)
        failure = plan.blocker or plan.error
        status = "failed" if failure else "processed"
        outcomes.append(
            (
                plan.row["id"],
                status,
                failure.code if failure else None,
                failure.message if failure else None,
                jsonutil.dumps(plan.versions),
            )
        )
        report.failed += status == "failed"
        report.processed += status == "processed"
    if whole is not None:
        write_whole(uow, scope, state, whole)
    else:
        write_accepted(uow, scope, state, accepted)
    # An event's executions are written in the transaction that counts its attempt, so an event never attempted
    # has none: its records are plainly inserted (DuckDB's ON CONFLICT costs several times an INSERT and grows
    # with the table); only a retried event's records may replace earlier ones.
    retried = {plan.row["id"] for plan in plans if plan.row["attempts"] > 0}
    uow.executions.insert_many(scope, [record for record in records if record["event_id"] not in retried])
    uow.executions.upsert_many(scope, [record for record in records if record["event_id"] in retried])
    uow.outbox.add_many(scope, outbox_messages("reward.issued", [(r["id"], _issued_payload(r)) for r in issued]))
    uow.events.mark_many(scope, outcomes)
    return report


def _issued_payload(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "execution_id": record["id"],
        "event_id": record["event_id"],
        "external_event_id": record["external_event_id"],
        "customer_id": record["customer_id"],
        "wallet_id": record["wallet_id"],
        "program_id": record["program_id"],
        "program_version": record["version_number"],
        "rule_id": record["rule_id"],
        "action_index": record["action_index"],
        "asset_id": record["asset_id"],
        "amount": format_amount(record["amount_minor"], record["decimals"]),
        "transaction_id": record["transaction_id"],
    }


def _by_scope(rows: list[Row]) -> dict[Scope, list[Row]]:
    groups: dict[Scope, list[Row]] = defaultdict(list)
    for row in rows:
        groups[Scope(row["organization_id"], row["environment"])].append(row)
    return groups


# What a tenant sees of an event that failed on a server fault (never the exception's own text).
INTERNAL_FAILURE_MESSAGE = "The event could not be processed because of a server fault; it can be replayed."


def process_pending(database: Database, limit: int = DEFAULT_BATCH_SIZE) -> ProcessReport:
    """Process up to `limit` received events (every tenant) in one database transaction.

    Should the batch hit an unexpected error, it is rolled back and its events are processed again in smaller
    transactions: each tenant's events on their own, and a failing group split in halves (in event order) until
    the events that fail alone are found. Only those are marked `failed` with `internal_error` (a fixed message,
    and the versions they were evaluated against, so that a replay issues what they should have), so one poisoned
    event costs O(log n) extra transactions and never blocks the queue or another tenant's events.
    """
    limit = max(1, min(limit, MAX_BATCH_SIZE))
    planned: list[list[_EventPlan]] = []
    try:
        with unit_of_work(database) as uow:
            report = ProcessReport()
            for scope, rows in _by_scope(uow.events.pending(limit)).items():
                report.add(_process_scope(uow, scope, rows, planned))
            return report
    except Exception:
        log.exception("event batch failed; isolating the events that fail")
    versions = {plan.row["id"]: plan.versions for plans in planned for plan in plans}
    return _process_isolating(database, limit, versions)


def _process_isolating(database: Database, limit: int, versions: dict[str, list[str]]) -> ProcessReport:
    report = ProcessReport()
    groups = _by_scope(reader(database).events.pending(limit))
    for scope, rows in groups.items():
        _bisect(database, scope, [row["id"] for row in rows], versions, report, failed_whole=len(groups) == 1)
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
            versions.update({plan.row["id"]: plan.versions for plans in planned for plan in plans})
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
            if row is None or row["status"] != "received":
                return  # settled meanwhile by someone else: nothing to mark
            if versions is None:
                versions = _RuleBook(uow, scope).live_versions([row["type"]]).get(row["type"], [])
            recorded = None if not versions else jsonutil.dumps(versions)
            uow.events.mark_many(scope, [(event_id, "failed", "internal_error", INTERNAL_FAILURE_MESSAGE, recorded)])
        return
    except Exception:  # noqa: BLE001 - fall through: record the failure without versions
        log.exception("event %s: its versions could not be recorded", event_id)
    with unit_of_work(database) as uow:
        uow.events.mark_many(scope, [(event_id, "failed", "internal_error", INTERNAL_FAILURE_MESSAGE, None)])


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
        row = uow.events.get(scope, event_id)
        if row is None:
            raise ServiceError("event_not_found", event_id=event_id)
        if row["status"] != "failed":
            raise ServiceError("event_not_replayable", event_id=event_id, status=row["status"])
        _process_scope(uow, scope, [row])
        updated = uow.events.get(scope, event_id)
    assert updated is not None
    return presenters.event(updated)


# reads ----------------------------------------------------------------------------------------------------
def get_event(database: Database, scope: Scope, event_id: str) -> r.Event:
    row = reader(database).events.get(scope, event_id)
    if row is None:
        raise ServiceError("event_not_found", event_id=event_id)
    return presenters.event(row)


def list_events(
    database: Database,
    scope: Scope,
    page: PageRequest,
    *,
    status: str | None = None,
    type: str | None = None,
    customer_id: str | None = None,
) -> r.Page[r.Event]:
    sort = check_page_request(page, EVENT_SORTS)
    uow = reader(database)
    references: list[str] | None = None
    if customer_id:  # the customer's events, whichever of its two names each event used (an id wins)
        customer = uow.customers.resolve_many(scope, [customer_id]).get(customer_id)
        references = sorted({customer["id"], customer["external_id"]}) if customer else [customer_id]
    rows = uow.events.page(scope, page, sort, {"status": status, "type": type, "customer_refs": references})
    return r.Page[r.Event](
        data=[presenters.event(x) for x in rows.rows], next_cursor=rows.next_cursor, has_more=rows.has_more
    )


def list_executions(
    database: Database,
    scope: Scope,
    page: PageRequest,
    *,
    customer_id: str | None = None,
    event_id: str | None = None,
    program_id: str | None = None,
    status: str | None = None,
) -> r.Page[r.RewardExecution]:
    uow = reader(database)
    sort = check_page_request(page, EXECUTION_SORTS)
    if customer_id:
        customer = uow.customers.resolve_many(scope, [customer_id]).get(customer_id)
        customer_id = customer["id"] if customer else customer_id
    rows = uow.executions.page(
        scope,
        page,
        sort,
        {"customer_id": customer_id, "event_id": event_id, "program_id": program_id, "status": status},
    )
    decimals = {
        a: int(row["decimals"])
        for a, row in uow.assets.get_many(scope, sorted({x["asset_id"] for x in rows.rows})).items()
    }
    data = [presenters.execution(x, decimals[x["asset_id"]]) for x in rows.rows]
    return r.Page[r.RewardExecution](data=data, next_cursor=rows.next_cursor, has_more=rows.has_more)
