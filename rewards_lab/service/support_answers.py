"""Answers to a support desk's questions from the tenant's own records, beside the documentation, without a model.

Three questions come most often, and each is answered from the records that decide it: why an event issued what it
issued (or nothing): its status, its executions with the values their rules read, and, when nothing was issued,
the reasons of every rule of the versions live when it was processed (the simulation's explanation); a customer's
balance and next expiry (the wallets' balances and lots); which programme version was live at a time (the
versions' `published_at`). Anything else is answered from the documentation (`service.knowledge`).

What a question is about is read from the words it uses and the records it names (ids, external ids, programme
names, an ISO date). A follow-up that names none ("why?", "and customer bob?") inherits the earlier turns'
intent and records (`Context`). Every answer cites its sources: record ids first (`evt_...`, `cus_...`,
`prg_... v3`), then documentation sections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import REGISTRY, ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.requests import SimulationRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.money import format_amount
from rewards_lab.engine.simulation import simulate_programme
from rewards_lab.service import knowledge, ledger
from rewards_lab.store.api import Store, reader
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import (
    ProgrammeFilter,
    ProgrammeRow,
    Repositories,
    StoredEvent,
    StoredExecution,
    VersionRow,
    WalletFilter,
)

EVENT, BALANCE, LIVE_VERSION, DOCS = "event_outcome", "balance", "live_version", "docs"
RECORD_SCORE = 1.0  # a record a question names is an exact match: it comes before any passage
DOC_HITS = 3  # passages an answer from the documentation quotes
EXTRA_DOC_HITS = 2  # passages cited after the records of an answer from them
MAX_LOOKUPS = 40  # words of a question looked up as external ids
SHORT_FOLLOW_UP = 4  # a question of at most this many words, naming nothing, continues the last one

_WORDS: dict[str, frozenset[str]] = {
    EVENT: frozenset(
        "why issued issue issuing nothing reward rewarded rewards earn earned get got receive received event "
        "order purchase executed execution executions credited zero".split()
    ),
    BALANCE: frozenset(
        "balance balances expire expires expiry expiring expiration left hold holds wallet wallets many".split()
    ),
    LIVE_VERSION: frozenset("live version versions published active running effect force".split()),
}
_NEEDS = {EVENT: "event_id", BALANCE: "customer_id", LIVE_VERSION: "program_id"}
_STOP = frozenset(
    "a an the and or of for to in on at by is was were be been did does do what which who why how when with "
    "about my our their his her its this that it customer event order programme program version live balance "
    "points point issued issue get got nothing any me we you they not no yes".split()
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+\-]*")
_WORD = re.compile(r"[a-z]+")
_TIME = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?))?Z?\b")
_NOW_WORDS = frozenset({"now", "today", "currently", "current"})


@dataclass(frozen=True, slots=True)
class Context:
    """What a turn is about: its intent and the records it names (ids), and the time it asks about (ISO)."""

    intent: str | None = None
    event_id: str | None = None
    customer_id: str | None = None
    program_id: str | None = None
    at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Context:
        return cls(**{key: value.get(key) for key in ("intent", "event_id", "customer_id", "program_id", "at")})


@dataclass(frozen=True, slots=True)
class Answer:
    content: str
    sources: list[r.KnowledgeHit]
    context: Context  # what the answer was about, resolved: what a follow-up inherits
    named: Context  # what the question itself named


def answer(database: Store, scope: Scope, question: str, history: Sequence[Context] = ()) -> Answer:
    """The answer to `question`, with `history` the resolved contexts of the conversation's earlier answers."""
    uow = reader(database)
    named = _named(uow, scope, question)
    context = _resolve(question, named, list(history))
    if context.intent == EVENT and context.event_id:
        content, sources = _event_answer(database, uow, scope, context.event_id)
        context = _with_event_customer(uow, scope, context, named)
    elif context.intent == BALANCE and context.customer_id:
        content, sources = _balance_answer(database, uow, scope, context.customer_id)
    elif context.intent == LIVE_VERSION and context.program_id:
        content, sources = _live_answer(uow, scope, context.program_id, _when(context.at))
    else:
        return _docs_answer(question, named, context)
    docs = _passages(question, EXTRA_DOC_HITS)
    return Answer(content, sources + docs, context, named)


# what a question names and asks ----------------------------------------------------------------------------------


def _named(uow: Repositories, scope: Scope, question: str) -> Context:
    """The records the question names, each the first it names of its kind, and the time it asks about."""
    tokens = [t.rstrip(".:-") for t in _TOKEN.findall(question)]
    tokens = [t[:-2] if t.endswith(("'s", "’s")) else t for t in tokens if t]
    candidates = [t for t in dict.fromkeys(tokens) if t.lower() not in _STOP][:MAX_LOOKUPS]
    events = {**uow.events.get_by_external_ids(scope, candidates)}
    for token in candidates:
        if token.startswith("evt_") and (found := uow.events.get(scope, token)) is not None:
            events[token] = found
    wallet_owners = {}
    for token in candidates:
        if token.startswith("wal_") and (wallet := uow.wallets.get(scope, token)) is not None:
            wallet_owners[token] = wallet.customer_id
    customers = {ref: row.id for ref, row in uow.customers.resolve_many(scope, candidates).items()}
    customers |= wallet_owners
    event_id = next((events[t].id for t in candidates if t in events), None)
    customer_id = next((customers[t] for t in candidates if t in customers), None)
    return Context(
        event_id=event_id,
        customer_id=customer_id,
        program_id=_programme_named(uow, scope, question, candidates),
        at=_time_named(question),
    )


def _with_event_customer(uow: Repositories, scope: Scope, context: Context, named: Context) -> Context:
    """An answer about an event is about its customer too, unless the question named another ("that customer")."""
    event = uow.events.get(scope, context.event_id or "")
    if event is None or named.customer_id is not None:
        return context
    customer = uow.customers.resolve_many(scope, [event.customer_id]).get(event.customer_id)
    return context if customer is None else replace(context, customer_id=customer.id)


def _programmes(uow: Repositories, scope: Scope) -> list[ProgrammeRow]:
    return list(uow.programmes.page(scope, PageRequest(limit=100), "created_at", ProgrammeFilter()).rows)


def _programme_named(uow: Repositories, scope: Scope, question: str, tokens: list[str]) -> str | None:
    programmes = _programmes(uow, scope)
    ids = {p.id for p in programmes}
    for token in tokens:
        if token in ids:
            return token
    text = question.lower()
    for programme in sorted(programmes, key=lambda p: -len(p.name)):
        if programme.name.lower() in text:
            return programme.id
    return None


def _time_named(question: str) -> str | None:
    match = _TIME.search(question)
    if match is not None:
        day, clock = match.groups()
        try:
            return datetime.fromisoformat(f"{day}T{clock or '23:59:59'}").isoformat()
        except ValueError:
            return None
    if _NOW_WORDS & set(_WORD.findall(question.lower())):
        return utcnow().replace(microsecond=0).isoformat()
    return None


def _when(at: str | None) -> datetime:
    return utcnow() if at is None else datetime.fromisoformat(at)


def _resolve(question: str, named: Context, history: list[Context]) -> Context:
    """The question's intent and records: its own, else (a follow-up) the earlier turns'. An intent is chosen by
    its words and by the records named (a question naming a customer and nothing else asks for a balance); a
    question that names an error code or permission and no record asks the documentation."""
    words = set(_WORD.findall(question.lower()))
    scores = {intent: len(words & vocabulary) for intent, vocabulary in _WORDS.items()}
    for kind, field in _NEEDS.items():
        if getattr(named, field) is not None:  # an event named outweighs its customer named beside it
            scores[kind] += 3 if kind == EVENT else 2
    previous = next((c for c in reversed(history) if c.intent not in (None, DOCS)), None)
    named_any = any(getattr(named, field) for field in _NEEDS.values())
    asks_docs = not named_any and any(w in REGISTRY or "_" in w for w in re.findall(r"[a-z_.]+", question.lower()))
    best = max(scores.values())
    if asks_docs:
        intent: str | None = DOCS
    elif best > 0:
        intent = max(scores, key=lambda kind: (scores[kind], -list(scores).index(kind)))
    elif previous is not None and len(words) <= SHORT_FOLLOW_UP:
        intent = previous.intent
    else:
        intent = DOCS
    resolved = replace(named, intent=intent)
    for earlier in reversed(history):  # the most recent turn that named it
        for field in ("event_id", "customer_id", "program_id", "at"):
            if getattr(resolved, field) is None and getattr(earlier, field) is not None:
                resolved = replace(resolved, **{field: getattr(earlier, field)})
    needed = _NEEDS.get(intent or "")
    if needed is not None and getattr(resolved, needed) is None and previous is not None:
        resolved = replace(resolved, intent=previous.intent)  # its record is nowhere: go on with the last question
    return resolved


# the answers -----------------------------------------------------------------------------------------------------


def _record(source: str, title: str, text: str) -> r.KnowledgeHit:
    return r.KnowledgeHit(source=source, title=title, text=text, score=RECORD_SCORE)


def _version_source(program_id: str, number: int | None) -> str:
    return f"{program_id} v{number}"


def _event_answer(database: Store, uow: Repositories, scope: Scope, event_id: str) -> tuple[str, list[r.KnowledgeHit]]:
    event = uow.events.get(scope, event_id)
    assert event is not None
    executions = uow.executions.for_events(scope, [event_id])
    head = (
        f"Event {event.external_event_id} ({event.id}, type {event.type}, customer {event.customer_id}) "
        f"is {event.status}."
    )
    lines = [head]
    sources = [_record(event.id, f"event {event.external_event_id}", head)]
    if event.status == "received":
        waiting = f" It waits for event {event.waiting_for}." if event.waiting_for else ""
        lines.append(f"It has not been processed yet, so nothing is issued for it yet.{waiting}")
    elif event.status == "failed":
        lines.append(f"Its processing failed with {event.error_code}: {event.error_message}. Nothing was issued.")
    decimals = _decimals(uow, scope, {x.asset_id for x in executions})
    for execution in executions:
        line = _execution_line(execution, decimals.get(execution.asset_id, 0))
        lines.append(line)
        sources.append(_record(_version_source(execution.program_id, execution.version_number), "programme", line))
        sources.append(_record(execution.id, f"execution of rule {execution.rule_id}", line))
    if not executions and event.status == "processed":
        reasons, versions = _why_nothing(database, uow, scope, event)
        lines += reasons
        sources += versions
    return "\n".join(lines), _unique(sources)


def _execution_line(x: StoredExecution, decimals: int) -> str:
    amount = format_amount(int(x.amount_minor), decimals)
    line = f"Programme {x.program_id} v{x.version_number}, rule {x.rule_id} (action {x.action_index}): {x.status}"
    line += f" {amount} of {x.asset_id}" if x.status == "issued" else f" ({x.error_code or 'nothing issued'})"
    if x.requested_minor is not None and x.limited is not None:
        line += f"; the rule asked for {format_amount(int(x.requested_minor), decimals)}, a cap or budget cut it"
    if x.reversed_minor:
        line += f"; reversals took back {format_amount(int(x.taken_back_minor), decimals)} since"
    return f"{line}. The rule read {x.inputs}."


def _why_nothing(
    database: Store, uow: Repositories, scope: Scope, event: StoredEvent
) -> tuple[list[str], list[r.KnowledgeHit]]:
    """The reasons of every rule of the versions live when the event was processed, as the simulation explains
    them for the stored event."""
    at = event.processed_at or event.received_at
    lines, sources = [], []
    for programme in _programmes(uow, scope):
        version = _live_at(uow.programmes.versions(scope, programme.id), at)
        if version is None:
            continue
        try:
            simulated = simulate_programme(
                database, scope, programme.id, _simulation_request(event), version=version.number
            )
        except ServiceError:
            continue
        rules = [rule for rule in simulated.rules if rule.event_type == event.type]
        if not rules:
            continue
        source = _version_source(programme.id, version.number)
        reasons = "; ".join(f"rule {rule.rule_id}: {rule.reason}" for rule in rules)
        line = f"Programme {programme.name} ({source}) was live and issued nothing: {reasons}."
        lines.append(line)
        sources.append(_record(source, f"programme {programme.name}", line))
    if not lines:
        lines.append(f"No live programme had a rule for events of type {event.type}, so nothing was issued.")
    return lines, sources


def _simulation_request(event: StoredEvent) -> SimulationRequest:
    data = event.data_value()
    body: dict[str, Any] = {"event": {**(data if isinstance(data, dict) else {}), "type": event.type}}
    body["customer_id"] = event.customer_id
    if event.occurred_at is not None:
        body["occurred_at"] = event.occurred_at.replace(tzinfo=UTC)
    return validate(SimulationRequest, body)


def _balance_answer(
    database: Store, uow: Repositories, scope: Scope, customer_id: str
) -> tuple[str, list[r.KnowledgeHit]]:
    customer = uow.customers.get(scope, customer_id)
    assert customer is not None
    wallets = uow.wallets.page(scope, PageRequest(limit=100), "created_at", WalletFilter(customer_id=customer_id))
    head = f"Customer {customer.external_id} ({customer.id}) has {len(wallets.rows)} wallet(s)."
    lines, sources = [head], [_record(customer.id, f"customer {customer.external_id}", head)]
    for wallet in wallets.rows:
        balances = ledger.wallet_balances(database, scope, wallet.id)
        parts = []
        for balance in balances.balances:
            part = f"{balance.balance} {balance.symbol} ({balance.asset_id})"
            if balance.next_expiry is not None:
                at = balance.next_expiry.at.isoformat()
                part += f", of which {balance.next_expiry.amount} expires next, at {at}"
            else:
                part += ", nothing due to expire"
            parts.append(part)
        line = f"Wallet {wallet.id} ({wallet.status}): " + ("; ".join(parts) if parts else "no balance yet") + "."
        lines.append(line)
        sources.append(_record(wallet.id, f"wallet of {customer.external_id}", line))
    return "\n".join(lines), sources


def _live_at(versions: list[VersionRow], at: datetime) -> VersionRow | None:
    published = [v for v in versions if v.published_at is not None and v.published_at <= at]
    return max(published, key=lambda v: (v.published_at or at, v.number or 0), default=None)


def _live_answer(uow: Repositories, scope: Scope, program_id: str, at: datetime) -> tuple[str, list[r.KnowledgeHit]]:
    programme = uow.programmes.get(scope, program_id)
    assert programme is not None
    versions = uow.programmes.versions(scope, program_id)
    live = _live_at(versions, at)
    when = at.isoformat()
    if live is None:
        first = min((v.published_at for v in versions if v.published_at is not None), default=None)
        then = f"; its first version was published at {first.isoformat()}" if first else "; it was never published"
        text = f"No version of programme {programme.name} ({program_id}) was live at {when}{then}."
        return text, [_record(program_id, f"programme {programme.name}", text)]
    source = _version_source(program_id, live.number)
    text = (
        f"At {when}, version {live.number} of programme {programme.name} ({source}) was the live one: "
        f"published at {live.published_at.isoformat() if live.published_at else '?'}"
        + (f", based on version {live.based_on}" if live.based_on else "")
        + "."
    )
    if live.starts_at is not None or live.ends_at is not None:
        text += f" Its window: from {live.starts_at or 'the start'} until {live.ends_at or 'no end'}."
    later = sorted((v for v in versions if v.published_at and v.published_at > at), key=lambda v: v.published_at or at)
    if later:
        text += f" Version {later[0].number} replaced it at {later[0].published_at}."
    if programme.status != "active":
        text += f" The programme is {programme.status} now: no version of it is live today."
    return text, [_record(source, f"programme {programme.name}", text), _record(program_id, "programme", text)]


def _docs_answer(question: str, named: Context, context: Context) -> Answer:
    hits = knowledge.index().search(question, DOC_HITS)
    if hits:
        quoted = "\n\n".join(
            f"[{n}] {hit.passage.title} ({hit.passage.source}): {hit.passage.text}" for n, hit in enumerate(hits, 1)
        )
        text = f"From the service's documentation:\n\n{quoted}"
    else:
        text = "Nothing in the tenant's records or the service's documentation matches that question."
    return Answer(text, [knowledge.resource(hit) for hit in hits], replace(context, intent=DOCS), named)


def _passages(question: str, limit: int) -> list[r.KnowledgeHit]:
    """The best documentation passages as citations (the index itself: the answer stands apart from the search
    operation's function)."""
    return [knowledge.resource(hit) for hit in knowledge.index().search(question, limit)]


def _decimals(uow: Repositories, scope: Scope, asset_ids: set[str]) -> dict[str, int]:
    return {a: int(row.decimals) for a, row in uow.assets.get_many(scope, sorted(asset_ids)).items()}


def _unique(hits: list[r.KnowledgeHit]) -> list[r.KnowledgeHit]:
    """Each source once, where it first comes."""
    first: dict[str, r.KnowledgeHit] = {}
    for hit in hits:
        first.setdefault(hit.source, hit)
    return list(first.values())
