"""POST /v1/events served in front of FastAPI's own middleware stack (the hottest operation).

At thousands of events per second, FastAPI's per-request layers (server-error, telemetry and body-limit
middleware, the route table's linear match) and even our own three thin ASGI layers (request log, response
headers, handler), each with its `send` wrapper, Starlette `Request` and `Response` objects, cost as much as the
operation. `ServiceApp.__call__` sends POST /v1/events to `EventsHotPath`, ONE function that does what that chain
did, in the same order and with the same functions: the request id (`request_id_from`), authentication and the
header checks (`context.authorise`), the permission, the body (`context.parse_body`), the intake, then the
envelope (`presenters.event_text`, `envelope.failure_text`) with X-Request-ID and the RateLimit headers, and one
request-log record (499, with nothing sent, for a client that disconnects before its body is read, as the
request-log middleware logs it on the other routes). The route stays declared (and documented) in the router,
and answers the same when the hot path is off (`tests/api/test_hot_path.py` compares the two, errors included).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import State
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from rewards_lab import presenters
from rewards_lab.api.address_gate import refuse_spent_address, retry_after_header
from rewards_lab.api.body_limit import LimitedBody
from rewards_lab.api.context import authorise, parse_body, request_id_from
from rewards_lab.api.envelope import API_VERSION, failure_text
from rewards_lab.api.rate_limits import PUBLIC_LIMIT_PER_MINUTE, RateState
from rewards_lab.api.request_log import CLIENT_CLOSED_REQUEST, audit_send, record_request
from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.permissions import Permission
from rewards_lab.security.access import Principal
from rewards_lab.service import event_intake
from rewards_lab.service.request_log import sdk_version_from
from rewards_lab.worker.request_log_writer import RequestLogWriter

log = logging.getLogger(__name__)
EVENTS_PATH = f"/{API_VERSION}/events"
_WANTED = frozenset((b"x-request-id", b"authorization", b"x-organization-id", b"x-environment", b"x-sdk-version"))
_JSON = (b"content-type", b"application/json")
_META_TAIL = f',"version":"{API_VERSION}"}}}}'


def _headers_of(scope: Scope) -> dict[bytes, str]:
    """The request headers the operation reads, first occurrence of each (as Starlette's `Headers.get`)."""
    found: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        if name in _WANTED and name not in found:
            found[name] = value.decode("latin-1")
    return found


async def _read_body(receive: Receive) -> bytes:
    """The whole request body, as Starlette's `Request.body()` reads it (a disconnect raises `ClientDisconnect`)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class EventsHotPath:
    """The ASGI app of POST /v1/events: request log, response headers, handler and envelope in one call."""

    def __init__(self, app_state: State, writer: RequestLogWriter) -> None:
        self.state = app_state
        self.writer = writer

    async def _accept(self, scope: Scope, receive: Receive, headers: dict[bytes, str], state: dict[str, Any]) -> str:
        """The event's envelope (202), after the commit; raises ServiceError exactly as `routes.submit_event`."""
        app_state = self.state
        refuse_spent_address(app_state.rate_limiter, scope, state)  # before authentication, as AddressGate
        principal = authorise(
            app_state.database,
            app_state.rate_limiter,
            state,
            headers.get(b"authorization", ""),
            headers.get(b"x-organization-id"),
            headers.get(b"x-environment"),
        )
        principal.require(Permission.EVENTS_WRITE.value)
        body = parse_body(await _read_body(receive), rq.EventCreate)
        stored = await app_state.intake.submit(principal.scope, event_intake.prepare_event(body))  # after the commit
        data = presenters.event_text(stored)
        return f'{{"data":{data},"meta":{{"request_id":{jsonutil.string(state["request_id"])}{_META_TAIL}'

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        at = time.time()
        started = time.perf_counter()
        headers = _headers_of(scope)
        request_id = request_id_from(headers.get(b"x-request-id", ""))
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        sdk_version = sdk_version_from(headers.get(b"x-sdk-version", ""))
        send = audit_send(self.writer, scope, send, request_id, sdk_version)  # 401 and 403 audited before sent
        status = 500
        try:
            try:
                text = await self._accept(scope, receive, headers, state)
                status = 202
            except ServiceError as error:
                text, status = failure_text(error, request_id), error.http_status
            except ClientDisconnect:  # gone before its body was read: nobody to answer, and no server error
                status = CLIENT_CLOSED_REQUEST
                return
            except Exception:  # noqa: BLE001 - never a stack trace to the client
                log.exception("unexpected error on POST %s", EVENTS_PATH)
                internal = ServiceError("internal_error")
                text, status = failure_text(internal, request_id), internal.http_status
            body = text.encode()
            rate: RateState | None = state.get("rate")
            if rate is None:  # never authenticated: counted per client address, as ResponseHeaders does
                client = scope.get("client")
                address = client[0] if client else "unknown"
                rate = self.state.rate_limiter.charge(f"address/{address}", PUBLIC_LIMIT_PER_MINUTE)
            response_headers = [
                (b"content-length", b"%d" % len(body)),
                _JSON,
                (b"x-request-id", request_id.encode("latin-1")),
                *rate.raw_headers(),
            ]
            if status == 429:
                response_headers = retry_after_header(response_headers, state)
            await send({"type": "http.response.start", "status": status, "headers": response_headers})
            await send({"type": "http.response.body", "body": body})
        finally:
            principal: Principal | None = state.get("principal")
            record_request(
                self.writer, principal, request_id, "POST", EVENTS_PATH, EVENTS_PATH, status, started, at, sdk_version
            )


class ServiceApp(FastAPI):
    """FastAPI, plus `hot_path`: the ASGI app that answers POST /v1/events before FastAPI's stack, and the one
    body limit (`body_limit.LimitedBody`) around both."""

    hot_path: EventsHotPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            limited = LimitedBody(scope, receive, send)
            receive, send = limited.receive, limited.send
        if (
            self.hot_path is not None
            and scope["type"] == "http"
            and scope["path"] == EVENTS_PATH
            and scope["method"] == "POST"
            and not self.root_path
        ):
            scope["app"] = self  # what Starlette sets: handlers reach app.state through the request
            await self.hot_path(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
