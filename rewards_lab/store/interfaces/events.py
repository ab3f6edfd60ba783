"""The events repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.store.queries import RowPage


class NewEvent(NamedTuple):
    """An accepted event as first stored (`received`): prepared by the request, outside the intake's transaction."""

    id: str
    external_event_id: str
    type: str
    customer_id: str
    occurred_at: datetime | None
    data: str  # the JSON text
    payload_hash: str


class StoredEvent(NamedTuple):
    """An event as the API shows it (`presenters.event`)."""

    id: str
    external_event_id: str
    type: str
    customer_id: str
    occurred_at: datetime | None
    data: str  # the JSON text
    payload_hash: str
    status: str
    error_code: str | None
    error_message: str | None
    attempts: int
    received_at: datetime
    processed_at: datetime | None
    waiting_for: str | None  # a refund waiting for its original: that event's external_event_id
    wait_until: datetime | None


class PendingEvent(NamedTuple):
    """What processing reads of a `received` event (not the times, hash, status and error, whose conversion to
    Python objects would cost the worker's thread the GIL)."""

    id: str
    organization_id: str
    environment: EnvironmentName
    external_event_id: str
    type: str
    customer_id: str
    data: str
    attempts: int
    evaluated_versions: str | None
    # The event's time as epoch microseconds (UTC): its occurred_at, else its time of receipt. An integer, not a
    # datetime, for the same reason; what a version's window is checked against.
    event_time_us: int
    # Set when the event (a refund) waited for its original: `pending` returns it again once its wait is over.
    waiting_for: str | None = None
    # Its time of receipt as epoch microseconds (UTC): what a programme's bound on an event's age is counted from.
    received_at_us: int = 0


class EventOutcome(NamedTuple):
    """An attempt's result for one event; `versions` is the JSON list of versions it was evaluated against."""

    event_id: str
    status: str
    error_code: str | None
    error_message: str | None
    versions: str | None


class EventStore(Protocol):
    """What the services need of stored events (DuckDB: store.events.EventRepository)."""

    def add(self, events: list[tuple[Scope, NewEvent]], received_at: datetime) -> bool: ...

    def get(self, scope: Scope, event_id: str) -> StoredEvent | None: ...

    def get_by_external_ids(self, scope: Scope, external_ids: list[str]) -> dict[str, StoredEvent]: ...

    def pending(self, limit: int) -> list[PendingEvent]: ...

    def received(self, scope: Scope, event_ids: list[str]) -> list[PendingEvent]: ...

    def wait(self, scope: Scope, waits: dict[str, str], until: datetime) -> None: ...

    def waiting_on(self, scope: Scope, external_ids: list[str]) -> list[PendingEvent]: ...

    def to_process(self, scope: Scope, event_id: str) -> PendingEvent | None: ...

    def mark_many(self, scope: Scope, outcomes: list[EventOutcome]) -> None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[StoredEvent]: ...
