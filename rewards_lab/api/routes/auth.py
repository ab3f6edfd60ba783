"""Sessions of people: logging in (no principal yet) and logging out (any live session may end itself)."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, json_body, principal_of, request_id_of
from rewards_lab.api.envelope import failure, success
from rewards_lab.api.routes._binding import Endpoint
from rewards_lab.contract import developer as d
from rewards_lab.contract.errors import ServiceError
from rewards_lab.security import sessions
from rewards_lab.security.login_guard import Guard


async def login(request: Request) -> Response:
    body = await json_body(request, d.LoginRequest)
    guard: Guard = request.app.state.login_guard
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


BINDINGS: dict[str, Endpoint] = {"login": login, "logout": logout}
