"""The request-log repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage

NO_SDK_VERSION = "none"  # the filter value that selects requests without an SDK version


@dataclass(frozen=True, slots=True)
class LogFilter:
    status: int | None = None  # exact status
    status_class: int | None = None  # 4 for 4xx
    path_prefix: str | None = None
    request_id: str | None = None
    sdk_version: str | None = None  # exact; "none" for requests that sent no (valid) X-SDK-Version
    since: datetime | None = None  # inclusive, naive UTC
    until: datetime | None = None  # exclusive, naive UTC


class RequestLogRow(NamedTuple):
    """One /v1 request as logged."""

    id: str
    organization_id: str | None
    environment: str | None
    request_id: str
    method: str
    path: str
    operation: str | None
    status: int
    duration_ms: float
    principal_id: str | None
    created_at: datetime
    sdk_version: str | None


class DayCount(NamedTuple):
    day: date
    status_class: int
    requests: int


class OperationCount(NamedTuple):
    method: str
    operation: str  # the path template, or "(no operation)"
    status_class: int
    requests: int


class SdkVersionCount(NamedTuple):
    sdk_version: str | None
    status_class: int
    requests: int
    last_seen: datetime


class BusinessCounts(NamedTuple):
    events_received: int
    rewards_issued: int


class RequestLogStore(Protocol):
    """What the services need of the request log (DuckDB: store.request_log.RequestLogRepository)."""

    def add_batch(self, ids: list[str], records: Sequence[Sequence[Any]]) -> None: ...

    def page(self, scope: Scope, where: LogFilter, page: PageRequest) -> RowPage[RequestLogRow]: ...

    def per_day(self, scope: Scope, first: date, last: date) -> list[DayCount]: ...

    def per_operation(self, scope: Scope, first: date, last: date) -> list[OperationCount]: ...

    def per_sdk_version(self, scope: Scope, first: date, last: date) -> list[SdkVersionCount]: ...

    def business_counts(self, scope: Scope, first: date, last: date) -> BusinessCounts: ...
