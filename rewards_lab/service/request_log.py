"""The request log: recorded off the request path, flushed in batches, read per tenant.

Requests append a small record to an in-memory queue (no I/O); a background thread writes the queue to the
`request_log` table in one INSERT at least every second and once more at shutdown. Records hold no bodies, no
query strings and no headers other than the request id, so no secret can land in the log. If writing falls
behind by more than `MAX_BUFFERED` records, the oldest are dropped (counted in `dropped`) rather than letting
memory grow or requests wait.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from rewards_lab.contract import developer as d
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.service.presenters import utc
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.request_log import LogFilter
from rewards_lab.store.uow import reader, unit_of_work
from rewards_lab.threads import name_os_thread

log = logging.getLogger(__name__)
FLUSH_INTERVAL_S = 1.0
MAX_BUFFERED = 200_000
DEFAULT_USAGE_DAYS = 30
MAX_USAGE_DAYS = 366
API_PREFIX = "/v1"
_STATUS_RE = re.compile(r"([1-5])([0-9]{2}|xx)", re.IGNORECASE)


class LogRecord(NamedTuple):
    """One request, as the middleware saw it (a tuple: cheap to make on the request path)."""

    organization_id: str | None
    environment: str | None
    request_id: str
    method: str
    path: str
    operation: str | None
    status: int
    duration_ms: float
    principal_id: str | None
    at: float  # time.time() when the request arrived


class RequestLogWriter:
    """The queue and its flushing thread. `record` is safe from any thread and never blocks on the database."""

    def __init__(self, database: Database, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.database = database
        self.flush_interval_s = flush_interval_s
        self.dropped = 0
        self._queue: deque[LogRecord] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)

    def record(self, record: LogRecord) -> None:
        if len(self._queue) >= MAX_BUFFERED:
            self._queue.popleft()
            self.dropped += 1
        self._queue.append(record)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the thread, then write whatever is still queued."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self.flush()

    def flush(self) -> int:
        """Write every queued record in one database transaction; returns how many."""
        batch: list[LogRecord] = []
        while self._queue:
            batch.append(self._queue.popleft())
        if not batch:
            return 0
        # One id per batch and a sequence number: ids stay unique and sort by creation, at no cost per row.
        batch_id = new_id("log_entry")
        ids = [f"{batch_id}{index:06d}" for index in range(len(batch))]
        with unit_of_work(self.database) as uow:
            uow.request_log.add_batch(ids, batch)
        return len(batch)

    def _run(self) -> None:
        name_os_thread()
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the log must never stop the service
                log.exception("request log flush failed")


# Reading -----------------------------------------------------------------------------------------------------
LOG_SORTS = ("created_at",)


def _instant(value: str | None, field: str) -> datetime | None:
    """An ISO 8601 date-time (an offset, or naive meaning UTC) as naive UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)  # OverflowError past year 9999 (or before 1)
    except (ValueError, OverflowError):
        raise ServiceError("period_invalid", f"{field} must be an ISO 8601 date-time", field=field) from None
    return parsed


def log_filter(
    status: str | None, path: str | None, request_id: str | None, since: str | None, until: str | None
) -> LogFilter:
    """`status` is exact (`404`) or a class (`4xx`); `path` is a prefix, taken under /v1 unless it starts with it."""
    where = LogFilter(request_id=request_id, since=_instant(since, "from"), until=_instant(until, "to"))
    if status is not None:
        matched = _STATUS_RE.fullmatch(status)
        if matched is None:
            raise ServiceError("field_invalid", "status is a status code (404) or a class (4xx)", field="status")
        if matched.group(2).lower() == "xx":
            where = replace(where, status_class=int(matched.group(1)))
        else:
            where = replace(where, status=int(status))
    if path is not None:
        if not path.startswith("/"):
            raise ServiceError("field_invalid", "path is a path prefix starting with /", field="path")
        prefixed = path if path == API_PREFIX or path.startswith(API_PREFIX + "/") else API_PREFIX + path
        where = replace(where, path_prefix=prefixed)
    if where.since is not None and where.until is not None and where.until <= where.since:
        raise ServiceError("period_invalid", "to must be after from", field="to")
    return where


def list_logs(
    database: Database,
    scope: Scope,
    page: PageRequest,
    *,
    status: str | None = None,
    path: str | None = None,
    request_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> r.Page[d.RequestLogEntry]:
    """The tenant's requests, newest first unless `direction=asc`; written within about a second."""
    check_page_request(page, LOG_SORTS)
    where = log_filter(status, path, request_id, since, until)
    rows = reader(database).request_log.page(scope, where, page)
    return r.Page[d.RequestLogEntry](
        data=[
            d.RequestLogEntry(
                id=x["id"],
                request_id=x["request_id"],
                method=x["method"],
                path=x["path"],
                operation=x["operation"],
                status=x["status"],
                duration_ms=round(x["duration_ms"], 3),
                principal_id=x["principal_id"],
                environment=x["environment"],
                created_at=utc(x["created_at"]),
            )
            for x in rows.rows
        ],
        next_cursor=rows.next_cursor,
        has_more=rows.has_more,
    )


def _day(value: str | None, field: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ServiceError("period_invalid", f"{field} must be a date (YYYY-MM-DD)", field=field) from None


def usage(database: Database, scope: Scope, *, since: str | None = None, until: str | None = None) -> d.Usage:
    """Requests per day and per operation and status class over [from, to] (UTC days, `to` included; by default
    the last 30 days up to today), plus events received and rewards issued in the same days."""
    last = _day(until, "to") or utcnow().date()
    first = _day(since, "from") or last - timedelta(days=DEFAULT_USAGE_DAYS - 1)
    if last < first:
        raise ServiceError("period_invalid", "to must not be before from", field="to")
    if (last - first).days + 1 > MAX_USAGE_DAYS:
        raise ServiceError("period_invalid", f"a period covers at most {MAX_USAGE_DAYS} days", field="from")
    repositories = reader(database)
    days: dict[date, dict[str, int]] = {first + timedelta(days=i): {} for i in range((last - first).days + 1)}
    totals: dict[str, int] = {}
    for row in repositories.request_log.per_day(scope, first, last):
        status_class = f"{row['status_class']}xx"
        days[row["day"]][status_class] = int(row["requests"])
        totals[status_class] = totals.get(status_class, 0) + int(row["requests"])
    business = repositories.request_log.business_counts(scope, first, last)
    return d.Usage(
        period_from=first,
        period_to=last,
        requests=d.StatusCounts(total=sum(totals.values()), by_status_class=dict(sorted(totals.items()))),
        days=[
            d.UsageDay(date=day, total=sum(counts.values()), by_status_class=dict(sorted(counts.items())))
            for day, counts in days.items()
        ],
        operations=[
            d.UsageOperation(
                method=x["method"],
                operation=x["operation"],
                status_class=f"{x['status_class']}xx",
                requests=int(x["requests"]),
            )
            for x in repositories.request_log.per_operation(scope, first, last)
        ],
        business=d.BusinessCounts(
            events_received=int(business["events_received"]), rewards_issued=int(business["rewards_issued"])
        ),
    )
