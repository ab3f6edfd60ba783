"""The request log: one row per /v1 request, written in batches; read per tenant with filters and cursors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.interfaces import (
    NO_SDK_VERSION,
    BusinessCounts,
    DayCount,
    LogFilter,
    OperationCount,
    RequestLogRow,
    SdkVersionCount,
)
from rewards_lab.store.queries import RowPage, created_between, paginate

CountT = TypeVar("CountT", DayCount, OperationCount, SdkVersionCount, BusinessCounts)
COLUMNS = (
    "id",
    "organization_id",
    "environment",
    "request_id",
    "method",
    "path",
    "operation",
    "status",
    "duration_ms",
    "principal_id",
    "created_at",
    "sdk_version",
)
_ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("organization_id", pa.string()),
        ("environment", pa.string()),
        ("request_id", pa.string()),
        ("method", pa.string()),
        ("path", pa.string()),
        ("operation", pa.string()),
        ("status", pa.int32()),
        ("duration_ms", pa.float64()),
        ("principal_id", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("sdk_version", pa.string()),
    ]
)
# The record's fields after `id`, in `LogRecord`'s order: the columns up to `principal_id`, then the arrival time
# (epoch seconds), then the SDK version.
_PLAIN = len(COLUMNS) - 3


def _deleted(row: tuple[Any, ...] | None) -> int:
    """The count DuckDB returns for a DELETE."""
    return int(row[0]) if row else 0


class RequestLogRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add_batch(self, ids: list[str], records: Sequence[Sequence[Any]]) -> None:
        """One INSERT for the whole batch, from an Arrow table. `records` hold the columns after `id` up to
        `principal_id`, then the time as epoch seconds (converted here without pandas: Arrow casts int64
        microseconds), then the SDK version."""
        columns = list(zip(*records, strict=True))
        arrays = [pa.array(ids, type=pa.string())]
        for column, field in zip(columns[:_PLAIN], list(_ARROW_SCHEMA)[1 : 1 + _PLAIN], strict=True):
            arrays.append(pa.array(column, type=field.type))
        micros = pa.array([int(at * 1_000_000) for at in columns[_PLAIN]], type=pa.int64())
        arrays.append(micros.cast(pa.timestamp("us")))
        arrays.append(pa.array(columns[_PLAIN + 1], type=pa.string()))
        batch = pa.Table.from_arrays(arrays, schema=_ARROW_SCHEMA)
        names = ", ".join(COLUMNS)
        self.con.register("request_log_batch", batch)
        try:
            self.con.execute(f"INSERT INTO request_log ({names}) SELECT {names} FROM request_log_batch")
        finally:
            self.con.unregister("request_log_batch")

    def page(self, scope: Scope, where: LogFilter, page: PageRequest) -> RowPage[RequestLogRow]:
        clauses = ["organization_id = ?", "environment = ?"]
        params: list[Any] = [*scope.params]
        if where.status is not None:
            clauses.append("status = ?")
            params.append(where.status)
        if where.status_class is not None:
            clauses.append("status // 100 = ?")
            params.append(where.status_class)
        if where.path_prefix is not None:
            clauses.append("starts_with(path, ?)")
            params.append(where.path_prefix)
        if where.request_id is not None:
            clauses.append("request_id = ?")
            params.append(where.request_id)
        if where.sdk_version == NO_SDK_VERSION:
            clauses.append("sdk_version IS NULL")
        elif where.sdk_version is not None:
            clauses.append("sdk_version = ?")
            params.append(where.sdk_version)
        created_between(clauses, params, where.since, where.until)
        select_sql = f"SELECT * FROM request_log WHERE {' AND '.join(clauses)}"
        listed = paginate(
            self.con, list_name="request_log", select_sql=select_sql, params=params, page=page, sort="created_at"
        )
        return listed.typed(RequestLogRow)

    def per_day(self, scope: Scope, first: date, last: date) -> list[DayCount]:
        """(day, status class, count) over [first, last], days in UTC."""
        return self._counts(
            DayCount,
            "SELECT CAST(created_at AS DATE) AS day, status // 100 AS status_class, count(*) AS requests "
            "FROM request_log WHERE organization_id = ? AND environment = ? "
            "AND created_at >= ? AND created_at < CAST(? AS DATE) + INTERVAL 1 DAY GROUP BY ALL ORDER BY ALL",
            [*scope.params, first, last],
        )

    def per_operation(self, scope: Scope, first: date, last: date) -> list[OperationCount]:
        """(method, operation path template, status class, count); unknown paths share one row over [first, last]."""
        return self._counts(
            OperationCount,
            "SELECT method, coalesce(operation, '(no operation)') AS operation, status // 100 AS status_class, "
            "count(*) AS requests FROM request_log WHERE organization_id = ? AND environment = ? "
            "AND created_at >= ? AND created_at < CAST(? AS DATE) + INTERVAL 1 DAY GROUP BY ALL ORDER BY ALL",
            [*scope.params, first, last],
        )

    def per_sdk_version(self, scope: Scope, first: date, last: date) -> list[SdkVersionCount]:
        """(SDK version or NULL, status class, count) over [first, last]: whom a deprecation would reach."""
        return self._counts(
            SdkVersionCount,
            "SELECT sdk_version, status // 100 AS status_class, count(*) AS requests, max(created_at) AS last_seen "
            "FROM request_log WHERE organization_id = ? AND environment = ? "
            "AND created_at >= ? AND created_at < CAST(? AS DATE) + INTERVAL 1 DAY GROUP BY ALL "
            "ORDER BY sdk_version NULLS LAST, status_class",
            [*scope.params, first, last],
        )

    def business_counts(self, scope: Scope, first: date, last: date) -> BusinessCounts:
        """Events received and rewards issued in the period: two counts over the tenant's rows."""
        params = [*scope.params, first, last]
        window = "organization_id = ? AND environment = ? AND {c} >= ? AND {c} < CAST(? AS DATE) + INTERVAL 1 DAY"
        (counts,) = self._counts(
            BusinessCounts,
            f"SELECT (SELECT count(*) FROM events WHERE {window.format(c='received_at')}) AS events_received, "
            f"(SELECT count(*) FROM reward_executions WHERE status = 'issued' AND "
            f"{window.format(c='created_at')}) AS rewards_issued",
            params + params,
        )
        return counts

    def _counts(self, row_type: type[CountT], sql: str, params: list[Any]) -> list[CountT]:
        return [row_type(*values) for values in self.con.execute(sql, params).fetchall()]
