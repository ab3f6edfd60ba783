"""The request log: what is recorded of each /v1 request, and how tenants read it (list, usage).

Records hold no bodies, no query strings and no headers other than the request id and the SDK version, so no
secret can land in the log. They are written off the request path by `worker/request_log_writer.py`: requests
append to a bounded in-memory queue, a thread writes it in one INSERT at least every second and once more at
shutdown. When writing falls behind, the oldest records are dropped and counted (`request_log_dropped` in
`GET /v1/health`); records still queued when the process dies are lost (about a second of traffic at most). The
events that must survive a crash (authentication, 401 and 403) are written durably by `service.auth_audit`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import date, timedelta
from typing import NamedTuple

from rewards_lab import presenters
from rewards_lab.contract import developer as d
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import parse_instant
from rewards_lab.presenters import utc
from rewards_lab.store.api import Store, reader
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import NO_SDK_VERSION, LogFilter, RequestLogRow, SdkVersionCount

log = logging.getLogger(__name__)
DEFAULT_USAGE_DAYS = 30
MAX_USAGE_DAYS = 366
API_PREFIX = "/v1"
_STATUS_RE = re.compile(r"([1-5])([0-9]{2}|xx)", re.IGNORECASE)
MAX_SDK_VERSION_LENGTH = 64
# A product token and version as SDKs send them (`rewards-lab-python/0.1.0`): letters, digits and . _ / + -
_SDK_VERSION_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._/+\-]{{0,{MAX_SDK_VERSION_LENGTH - 1}}}")


def sdk_version_from(supplied: str) -> str | None:
    """X-SDK-Version as stored: the value when it is a sane token of at most 64 characters, else None (absent,
    malformed or too long: never truncated, which would credit requests to a version that did not send them).
    `none` is the filter value of requests without a version, so a client sending it counts as sending none."""
    if not supplied or len(supplied) > MAX_SDK_VERSION_LENGTH or supplied == NO_SDK_VERSION:
        return None
    return supplied if _SDK_VERSION_RE.fullmatch(supplied) else None


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
    sdk_version: str | None = None  # X-SDK-Version, validated by `sdk_version_from`


# Reading -----------------------------------------------------------------------------------------------------
LOG_SORTS = ("created_at",)


def log_filter(
    status: str | None,
    path: str | None,
    request_id: str | None,
    since: str | None,
    until: str | None,
    sdk_version: str | None = None,
) -> LogFilter:
    """`status` is exact (`404`) or a class (`4xx`); `path` is a prefix, taken under /v1 unless it starts with it;
    `sdk_version` is exact, `none` for requests that sent none."""
    if sdk_version is not None and sdk_version != NO_SDK_VERSION and sdk_version_from(sdk_version) is None:
        raise ServiceError(
            "field_invalid",
            f"sdk_version is an SDK version (letters, digits and ._/+-, at most {MAX_SDK_VERSION_LENGTH}) or none",
            field="sdk_version",
        )
    where = LogFilter(
        request_id=request_id,
        sdk_version=sdk_version,
        since=parse_instant(since, "from"),
        until=parse_instant(until, "to"),
    )
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
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    status: str | None = None,
    path: str | None = None,
    request_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    sdk_version: str | None = None,
) -> r.Page[d.RequestLogEntry]:
    """The tenant's requests, newest first unless `direction=asc`; written within about a second."""
    check_page_request(page, LOG_SORTS)
    where = log_filter(status, path, request_id, since, until, sdk_version)
    rows = reader(database).request_log.page(scope, where, page)
    return presenters.page(r.Page[d.RequestLogEntry], rows, _entry)


def _entry(row: RequestLogRow) -> d.RequestLogEntry:
    return d.RequestLogEntry(
        id=row.id,
        request_id=row.request_id,
        method=row.method,
        path=row.path,
        operation=row.operation,
        status=row.status,
        duration_ms=round(row.duration_ms, 3),
        principal_id=row.principal_id,
        environment=row.environment,
        created_at=utc(row.created_at),
        sdk_version=row.sdk_version,
    )


def _day(value: str | None, field: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ServiceError("period_invalid", f"{field} must be a date (YYYY-MM-DD)", field=field) from None


def _default_first_day(last: date) -> date:
    """The first of the default DEFAULT_USAGE_DAYS ending on `last`; a `to` too close to year 1 for that (the
    subtraction would overflow) is refused rather than given a shorter period the client did not ask for."""
    if last.toordinal() < DEFAULT_USAGE_DAYS:
        message = f"without from, to must leave {DEFAULT_USAGE_DAYS} days after 0001-01-01"
        raise ServiceError("period_invalid", message, field="to")
    return last - timedelta(days=DEFAULT_USAGE_DAYS - 1)


def usage(database: Store, scope: Scope, *, since: str | None = None, until: str | None = None) -> d.Usage:
    """Requests per day and per operation and status class over [from, to] (UTC days, `to` included; by default
    the last 30 days up to today), plus events received and rewards issued in the same days."""
    last = _day(until, "to") or utcnow().date()
    first = _day(since, "from") or _default_first_day(last)
    if last < first:
        raise ServiceError("period_invalid", "to must not be before from", field="to")
    if (last - first).days + 1 > MAX_USAGE_DAYS:
        raise ServiceError("period_invalid", f"a period covers at most {MAX_USAGE_DAYS} days", field="from")
    repositories = reader(database)
    days: dict[date, dict[str, int]] = {first + timedelta(days=i): {} for i in range((last - first).days + 1)}
    totals: dict[str, int] = {}
    for row in repositories.request_log.per_day(scope, first, last):
        status_class = f"{row.status_class}xx"
        days[row.day][status_class] = int(row.requests)
        totals[status_class] = totals.get(status_class, 0) + int(row.requests)
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
                method=x.method,
                operation=x.operation,
                status_class=f"{x.status_class}xx",
                requests=int(x.requests),
            )
            for x in repositories.request_log.per_operation(scope, first, last)
        ],
        business=d.BusinessCounts(
            events_received=int(business.events_received), rewards_issued=int(business.rewards_issued)
        ),
        sdk_versions=_per_sdk_version(repositories.request_log.per_sdk_version(scope, first, last)),
    )


def _per_sdk_version(rows: list[SdkVersionCount]) -> list[d.UsageSdkVersion]:
    """One entry per SDK version seen (null: requests without one), with its status classes and last request."""
    versions: dict[str | None, d.UsageSdkVersion] = {}
    for row in rows:
        entry = versions.setdefault(
            row.sdk_version,
            d.UsageSdkVersion(sdk_version=row.sdk_version, total=0, by_status_class={}, last_seen_at=None),
        )
        requests = int(row.requests)
        entry.total += requests
        entry.by_status_class[f"{row.status_class}xx"] = requests
        seen = utc(row.last_seen)
        if entry.last_seen_at is None or (seen is not None and seen > entry.last_seen_at):
            entry.last_seen_at = seen
    return list(versions.values())
