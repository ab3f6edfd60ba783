"""The reward-executions repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


class ExecutionRecord(NamedTuple):
    """One reward execution as written by the event worker: (event, version, rule, action), its outcome and the
    values the rule read (`inputs`, JSON text)."""

    id: str
    event_id: str
    external_event_id: str
    customer_id: str
    program_id: str
    version_id: str
    version_number: int
    rule_id: str
    action_index: int
    asset_id: str
    wallet_id: str | None
    amount_minor: int
    status: str
    error_code: str | None
    transaction_id: str | None
    inputs: str
    requested_minor: int | None = None  # what the rule called for, when a cap or the budget cut it
    limited: str | None = None  # the cut (JSON), when one did
    usage_keys: str | None = None  # the cap and budget counters it counted in (JSON), for a reversal to give back
    reversal: str | None = None  # a reverse action's detail (JSON)


class StoredExecution(NamedTuple):
    """An execution as stored and shown: its record and when it was first written and last changed."""

    id: str
    event_id: str
    external_event_id: str
    customer_id: str
    program_id: str
    version_id: str
    version_number: int
    rule_id: str
    action_index: int
    asset_id: str
    wallet_id: str | None
    amount_minor: int
    status: str
    error_code: str | None
    transaction_id: str | None
    inputs: str
    created_at: datetime
    updated_at: datetime
    requested_minor: int | None
    limited: str | None
    usage_keys: str | None
    reversal: str | None
    reversed_minor: int  # what reversals have targeted of this reward
    taken_back_minor: int  # what reversals took back of it from its wallet (at most reversed_minor)


class ExecutionStore(Protocol):
    """What the services need of execution records (DuckDB: store.executions.ExecutionRepository)."""

    def insert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None: ...

    def upsert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None: ...

    def for_events(self, scope: Scope, event_ids: list[str]) -> list[StoredExecution]: ...

    def add_reversed(self, scope: Scope, amounts: dict[str, int]) -> None: ...

    def add_taken_back(self, scope: Scope, amounts: dict[str, int]) -> None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[StoredExecution]: ...
