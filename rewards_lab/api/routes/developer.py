"""What developers read about their own use of the API: the request log, usage, the authentication audit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised, listed, page_of
from rewards_lab.contract.operations import AUDIT_KINDS, AUDIT_OUTCOMES, operation
from rewards_lab.contract.permissions import Permission
from rewards_lab.security import auth_audit
from rewards_lab.service import request_log

assert operation("list_request_logs").sorts == request_log.LOG_SORTS
assert operation("list_auth_audit").sorts == auth_audit.AUDIT_SORTS
assert (AUDIT_KINDS, AUDIT_OUTCOMES) == (auth_audit.KINDS, auth_audit.OUTCOMES)


async def _newest_first(request: Request, service: Callable[..., Any], **filters: str | None) -> Response:
    """A page of a log-like listing (LOGS_VIEW), newest first unless `direction` says otherwise."""
    principal = authorised(request, Permission.LOGS_VIEW)
    page = page_of(request)
    if "direction" not in request.query_params:
        page = replace(page, direction="desc")
    result = await run_in_threadpool(service, database_of(request), principal.scope, page, **filters)
    return listed(result, request)


async def list_request_logs(request: Request) -> Response:
    query = request.query_params
    return await _newest_first(
        request,
        request_log.list_logs,
        status=query.get("status"),
        path=query.get("path"),
        request_id=query.get("request_id"),
        since=query.get("from"),
        until=query.get("to"),
        sdk_version=query.get("sdk_version"),
    )


async def api_usage(request: Request) -> Response:
    principal = authorised(request, Permission.USAGE_VIEW)
    query = request.query_params
    result = await run_in_threadpool(
        request_log.usage, database_of(request), principal.scope, since=query.get("from"), until=query.get("to")
    )
    return success(result, request_id_of(request))


async def list_auth_audit(request: Request) -> Response:
    # Its description in the document is the registry's (contract.operations).
    query = request.query_params
    return await _newest_first(
        request,
        auth_audit.list_audit,
        kind=query.get("kind"),
        outcome=query.get("outcome"),
        since=query.get("from"),
        until=query.get("to"),
    )


BINDINGS: dict[str, Endpoint] = {
    "list_request_logs": list_request_logs,
    "api_usage": api_usage,
    "list_auth_audit": list_auth_audit,
}
