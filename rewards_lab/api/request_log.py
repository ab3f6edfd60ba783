"""ASGI middleware that records every /v1 request in the request log, off the request path.

It sits outside everything else, so it sees the final status (a crash inside counts as 500) and the whole
duration. It fixes the request id before the app runs (the same rule as `request_id_of`), so the id in the
response and the one in the log are always the same. The principal is whatever authentication left in the
request state; requests that never authenticated are logged without a tenant.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards_lab.api.context import request_id_from
from rewards_lab.service.access import Principal
from rewards_lab.service.request_log import API_PREFIX, LogRecord, RequestLogWriter


class RequestLogMiddleware:
    def __init__(self, app: ASGIApp, writer: RequestLogWriter) -> None:
        self.app = app
        self.writer = writer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == API_PREFIX or path.startswith(API_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        at = time.time()
        started = time.perf_counter()
        supplied = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
        request_id = request_id_from(supplied.decode("latin-1"))
        scope.setdefault("state", {})["request_id"] = request_id  # what `request_id_of` returns from now on
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            state: dict[str, Any] = scope.get("state") or {}
            principal: Principal | None = state.get("principal")
            template: str | None = getattr(scope.get("route"), "path", None)
            if template is not None and not template.startswith(API_PREFIX):
                template = API_PREFIX + template  # routes of the routers included under /v1 keep their own path
            elif template is None and status not in (404, 405):
                template = path  # answered before routing (the POST /events fast path): a path without parameters
            record_request(self.writer, principal, request_id, scope["method"], path, template, status, started, at)


def record_request(
    writer: RequestLogWriter,
    principal: Principal | None,
    request_id: str,
    method: str,
    path: str,
    template: str | None,
    status: int,
    started: float,
    at: float,
) -> None:
    """One request into the log: its tenant and actor when it authenticated, its duration from `started`
    (a `perf_counter` reading) and its wall-clock start `at`."""
    writer.record(
        LogRecord(
            principal.scope.organization_id if principal else None,
            principal.scope.environment if principal else None,
            request_id,
            method,
            path,
            template,
            status,
            (time.perf_counter() - started) * 1000,
            principal.actor_id if principal else None,
            at,
        )
    )
