"""The request-log repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row, RowPage

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


class RequestLogStore(Protocol):
    """What the services need of the request log (DuckDB: store.request_log.RequestLogRepository)."""

    def add_batch(self, ids: list[str], records: Sequence[Sequence[Any]]) -> None: ...

    def page(self, scope: Scope, where: LogFilter, page: PageRequest) -> RowPage[Row]: ...

    def per_day(self, scope: Scope, first: date, last: date) -> list[Row]: ...

    def per_operation(self, scope: Scope, first: date, last: date) -> list[Row]: ...

    def per_sdk_version(self, scope: Scope, first: date, last: date) -> list[Row]: ...

    def business_counts(self, scope: Scope, first: date, last: date) -> Row: ...
