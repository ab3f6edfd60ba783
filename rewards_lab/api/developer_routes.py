"""Operations of people and developers: login and logout (sessions), the request log and API usage."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, json_body, principal_of, request_id_of
from rewards_lab.api.envelope import failure, success
from rewards_lab.api.openapi_doc import query_parameters, responds
from rewards_lab.api.routes import BODY_CODES, PAGE_CODES, REQUEST_MODELS, _authorised, _list, _page, operation
from rewards_lab.contract import developer as d
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.permissions import Permission
from rewards_lab.service import auth_audit, request_log, sessions
from rewards_lab.service.login_guard import LoginGuard

router = APIRouter()


LOGIN_CODES = (
    *BODY_CODES,
    "field_invalid",
    "field_required",
    "credentials_invalid",
    "second_factor_required",
    "second_factor_invalid",
    "organization_mismatch",
    "rate_limit_exceeded",
)
REQUEST_MODELS["LoginRequest"] = d.LoginRequest


@router.post(
    "/auth/login",
    openapi_extra={
        # No x-permission and no bearer: there is no principal yet; the password (and second factor) make one.
        "security": [],
        "x-idempotent": "none",
        "x-error-codes": sorted(LOGIN_CODES),
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/LoginRequest"}}},
        },
    }
    | responds(201, d.SessionCreated),
)
async def login(request: Request) -> Response:
    body = await json_body(request, d.LoginRequest)
    guard: LoginGuard = request.app.state.login_guard
    # The socket peer, or the client a trusted proxy names (`rewards-lab serve --forwarded-allow-ips`).
    address = request.client.host if request.client else "unknown"
    try:
        result = await run_in_threadpool(
            sessions.login,
            database_of(request),
            guard,
            body,
            address=address,
            organization_id=request.headers.get("x-organization-id"),
            lifetime_s=request.app.state.session_lifetime_s,
        )
    except ServiceError as error:
        if error.code != "rate_limit_exceeded":
            raise
        refused = failure(error, request_id_of(request))
        refused.headers["Retry-After"] = str(error.details["retry_after_s"])
        return refused
    return success(result, request_id_of(request), 201)


@router.post(
    "/auth/logout",
    # Any live session may end itself: no permission beyond holding the token (so no x-permission).
    openapi_extra={
        key: value
        for key, value in operation(Permission.API_KEYS_MANAGE, errors=("session_expired", "session_revoked")).items()
        if key != "x-permission"
    }
    | responds(200, d.Session),
)
async def logout(request: Request) -> Response:
    principal = principal_of(request)
    if principal.account_id is None:
        raise ServiceError(
            "field_invalid",
            "logout ends a session; an API key is revoked with DELETE /developer/api-keys/{key_id}",
            field="Authorization",
        )
    token = request.headers["authorization"].partition(" ")[2].strip()
    result = await run_in_threadpool(sessions.logout, database_of(request), token)
    return success(result, request_id_of(request))


async def _newest_first(request: Request, service: Callable[..., Any], **filters: str | None) -> Response:
    """A page of a log-like listing (LOGS_VIEW), newest first unless `direction` says otherwise."""
    principal = _authorised(request, Permission.LOGS_VIEW)
    page = _page(request)
    if "direction" not in request.query_params:
        page = replace(page, direction="desc")
    result = await run_in_threadpool(service, database_of(request), principal.scope, page, **filters)
    return _list(result, request)


@router.get(
    "/developer/logs",
    openapi_extra=operation(Permission.LOGS_VIEW, errors=(*PAGE_CODES, "period_invalid"))
    | responds(200, list[d.RequestLogEntry])
    | query_parameters(
        "status",
        "path",
        "request_id",
        "from",
        "to",
        "sdk_version",
        listing=True,
        sorts=request_log.LOG_SORTS,
        typed={
            "status": {"type": "string", "pattern": "^[1-5]([0-9]{2}|[xX]{2})$"},
            "path": {"type": "string", "pattern": "^/"},
            "from": {"type": "string", "format": "date-time"},
            "to": {"type": "string", "format": "date-time"},
            "sdk_version": {"type": "string", "pattern": "^(none|[A-Za-z0-9][A-Za-z0-9._/+-]{0,63})$"},
        },
    ),
)
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


@router.get(
    "/developer/usage",
    openapi_extra=operation(Permission.USAGE_VIEW, errors=("period_invalid",))
    | responds(200, d.Usage)
    | query_parameters("from", "to", typed={name: {"type": "string", "format": "date"} for name in ("from", "to")}),
)
async def api_usage(request: Request) -> Response:
    principal = _authorised(request, Permission.USAGE_VIEW)
    query = request.query_params
    result = await run_in_threadpool(
        request_log.usage, database_of(request), principal.scope, since=query.get("from"), until=query.get("to")
    )
    return success(result, request_id_of(request))


def _enumerated(declared: dict[str, Any], **choices: tuple[str, ...]) -> dict[str, Any]:
    """Declared query parameters, with the values of the named ones enumerated in their schema."""
    for parameter in declared["parameters"]:
        if parameter["name"] in choices:
            parameter["schema"] = {"type": "string", "enum": list(choices[parameter["name"]])}
    return declared


@router.get(
    "/developer/audit",
    openapi_extra=operation(Permission.LOGS_VIEW, errors=(*PAGE_CODES, "period_invalid"))
    | responds(200, list[d.AuthAuditEntry])
    | _enumerated(
        query_parameters("kind", "outcome", "from", "to", listing=True, sorts=auth_audit.AUDIT_SORTS),
        kind=auth_audit.KINDS,
        outcome=auth_audit.OUTCOMES,
    ),
)
async def list_auth_audit(request: Request) -> Response:
    """Authentication events (logins, logouts, API key changes, 401 and 403 answers), durable and complete."""
    query = request.query_params
    return await _newest_first(
        request,
        auth_audit.list_audit,
        kind=query.get("kind"),
        outcome=query.get("outcome"),
        since=query.get("from"),
        until=query.get("to"),
    )
