"""Event intake: durable acceptance and deduplication of business events.

A request prepares its event (`prepare_event`: id, payload hash, data text), and `store_events` stores prepared
events of any tenants as `received` in ONE transaction (one commit: the group commit of POST /v1/events). It is
the one intake function; its fast path (one INSERT, no read first) and its careful path (read the stored
originals of a retried batch, insert the rest) are private and chosen inside. `submit_event(s)` are the same for
callers outside HTTP (the demo, backfills, tests).
"""

from __future__ import annotations

from datetime import UTC, datetime

from rewards_lab import presenters
from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import MAX_FUTURE_SKEW
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store, intake_events, intake_unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import NewEvent, Repositories, StoredEvent

Stored = StoredEvent | ServiceError  # an event's stored (or original) row, or the error refusing it
_FUTURE_MESSAGE = (
    f"occurred_at must not be in the future (at most {int(MAX_FUTURE_SKEW.total_seconds() // 60)} minutes "
    "ahead of the service's clock)"
)


def submit_events(
    database: Store, scope: Scope, bodies: list[rq.EventCreate], received_at: datetime | None = None
) -> list[r.Event | ServiceError]:
    """Store many events durably in one transaction; per event, its result or the error refusing it.

    A repeated `external_event_id` with the same payload returns the original event (nothing is stored or
    issued twice); with a different payload it is `event_duplicate_mismatch`. `received_at` (naive UTC; default
    now) is for in-process callers only, e.g. a history played through the live engine as it was received
    (each event when it occurred: docs/replay.md); HTTP clients never set it.
    """
    prepared: list[NewEvent] = []
    refused: dict[int, ServiceError] = {}
    for index, body in enumerate(bodies):
        try:
            prepared.append(prepare_event(body, received_at))
        except ServiceError as error:
            refused[index] = error
    (stored,) = store_events(database, [(scope, prepared)], received_at)
    remaining = iter(stored)
    return [refused[i] if i in refused else present_stored(next(remaining)) for i in range(len(bodies))]


def submit_event(database: Store, scope: Scope, body: rq.EventCreate) -> r.Event:
    (result,) = submit_events(database, scope, [body])
    if isinstance(result, ServiceError):
        raise result
    return result


def prepare_event(body: rq.EventCreate, now: datetime | None = None) -> NewEvent:
    """The per-event work of acceptance (hashing, serialising), done by the request before it queues the event,
    so that the intake's one writer thread only runs the statements. `event_payload_too_large` is raised here, and
    `field_invalid` for an `occurred_at` in the future (beyond `MAX_FUTURE_SKEW` of the service's clock)."""
    data_text = jsonutil.dumps(body.data)
    if len(data_text) > rq.MAX_EVENT_DATA_BYTES:
        raise ServiceError("event_payload_too_large", field="data", limit_bytes=rq.MAX_EVENT_DATA_BYTES)
    occurred = _naive_utc(body.occurred_at)
    if occurred is not None and occurred - (now or utcnow()) > MAX_FUTURE_SKEW:  # never overflows at year 9999
        raise ServiceError("field_invalid", _FUTURE_MESSAGE, field="occurred_at")
    payload = {  # what the hash covers (docs/decisions.md, "Events and the worker": duplicates)
        "type": body.type,
        "customer_id": body.customer_id,
        "occurred_at": occurred.isoformat() if occurred else None,
        "data": body.data,
    }
    return NewEvent(
        new_id("event"),
        body.external_event_id,
        body.type,
        body.customer_id,
        occurred,
        data_text,
        jsonutil.canonical_hash(payload),
    )


def store_events(
    database: Store, groups: list[tuple[Scope, list[NewEvent]]], received_at: datetime | None = None
) -> list[list[Stored]]:
    """Store prepared events of several tenants in ONE transaction; per event, the stored (or original) row, or
    `event_duplicate_mismatch`. Accepting events never waits for the worker's processing batch: this runs on
    the intake's own cursor (`DuckDBStore.intake_cursor`).

    Fast path: one INSERT of every new event, its own transaction, no read first; the unique
    (organization, environment, external_event_id) index refuses the whole statement if any id is already
    stored (a client's retry), and then the batch takes the careful path: read the stored originals, insert
    the rest, in one transaction.
    """
    received_at = received_at or utcnow()
    fresh: list[tuple[Scope, NewEvent]] = []
    results: list[list[Stored]] = []
    for scope, prepared in groups:
        rows, outcomes = _answers(prepared, {}, received_at)
        fresh.extend((scope, row) for row in rows)
        results.append(outcomes)
    with intake_events(database) as events:
        stored = events.add(fresh, received_at)
    if not stored:
        with intake_unit_of_work(database) as uow:
            return [_store_carefully(uow, scope, prepared, received_at) for scope, prepared in groups]
    return results


def present_stored(outcome: Stored) -> r.Event | ServiceError:
    return outcome if isinstance(outcome, ServiceError) else presenters.event(outcome)


def _store_carefully(uow: Repositories, scope: Scope, prepared: list[NewEvent], received_at: datetime) -> list[Stored]:
    existing = uow.events.get_by_external_ids(scope, sorted({p.external_event_id for p in prepared}))
    fresh, outcomes = _answers(prepared, existing, received_at)
    inserted = uow.events.add([(scope, row) for row in fresh], received_at)
    assert inserted, "the originals were read in this transaction: no new event can collide"
    return outcomes


def _answers(
    prepared: list[NewEvent], existing: dict[str, StoredEvent], received_at: datetime
) -> tuple[list[NewEvent], list[Stored]]:
    """(the rows to insert, each event's answer). An event answers with the stored original of its external id,
    or with its own row if it is the first of that id (then it is inserted); a different payload under a known
    id is `event_duplicate_mismatch`."""
    known: dict[str, StoredEvent] = dict(existing)
    fresh: list[NewEvent] = []
    outcomes: list[Stored] = []
    for item in prepared:
        original = known.get(item.external_event_id)
        if original is None:
            known[item.external_event_id] = original = _as_stored(item, received_at)
            fresh.append(item)
        if original.payload_hash == item.payload_hash:
            outcomes.append(original)
        else:
            outcomes.append(
                ServiceError(
                    "event_duplicate_mismatch", field="external_event_id", external_event_id=item.external_event_id
                )
            )
    return fresh, outcomes


def _as_stored(row: NewEvent, received_at: datetime) -> StoredEvent:
    """A new event's row as inserted: no need to read it back."""
    return StoredEvent(*row, "received", None, None, 0, received_at, None, None, None)


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None)
