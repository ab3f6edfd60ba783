"""ASGI middleware that records every /v1 request in the request log, off the request path, and audits the
authentication events durably before their answer leaves.

It sits outside everything else, so it sees the final status (a crash inside counts as 500) and the whole
duration. A client that goes away before its body is read (Starlette's `ClientDisconnect`) is logged as 499
(`CLIENT_CLOSED_REQUEST`), with nothing sent and no stack trace: the client's doing, not a server error. It
fixes the request id before the app runs (the same rule as `request_id_of`), so the id in the response and the
one in the log are always the same. The principal is whatever authentication left in the
request state; requests that never authenticated are logged without a tenant.

Logins, logouts and every 401 or 403 answer are audited here, at the one place every answer passes (no handler
can forget it): the response start is held until the audit row is committed (`service.auth_audit.write`), then
sent. A crash after the answer therefore never loses the event; a crash before it loses an answer nobody saw.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards_lab.api.context import request_id_from
from rewards_lab.contract import jsonutil
from rewards_lab.security import auth_audit
from rewards_lab.security.access import Principal
from rewards_lab.service.request_log import API_PREFIX, LogRecord, sdk_version_from
from rewards_lab.worker.request_log_writer import RequestLogWriter

log = logging.getLogger(__name__)
LOGIN_PATH = f"{API_PREFIX}/auth/login"
LOGOUT_PATH = f"{API_PREFIX}/auth/logout"
API_KEYS_PATH = f"{API_PREFIX}/developer/api-keys"
PUBLISH_SUFFIX = "/publish"  # a publish with a guard override is audited by the service
AUDITED_STATUSES = frozenset((401, 403))
# The audit reads the error code from a refusal's body and the ids from a login's answer (small JSON documents);
# a longer body is sent on unread, and the event is recorded without them.
MAX_AUDIT_BODY_BYTES = 65_536
# The email of a login attempt is read from the request body (only to find its account); login bodies are small.
MAX_LOGIN_CAPTURE_BYTES = 8_192
# The status logged for a request whose client disconnected before it was answered (nginx's convention); it is
# never sent (nobody is listening).
CLIENT_CLOSED_REQUEST = 499


def sdk_version_of(scope: Scope) -> str | None:
    """X-SDK-Version of the request, as stored (see `service.request_log.sdk_version_from`)."""
    for name, value in scope["headers"]:
        if name == b"x-sdk-version":
            return sdk_version_from(value.decode("latin-1"))
    return None


def _address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


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
        sdk_version = sdk_version_of(scope)
        status = 500
        audited: AuditedResponse | None = None
        if path in (LOGIN_PATH, LOGOUT_PATH):  # every answer audited
            audited = AuditedResponse(self.writer, scope, send, request_id, sdk_version)
            forward: Send = audited.send
            if path == LOGIN_PATH:
                receive = audited.capture_login(receive)
        else:  # only a 401 or 403
            forward = audit_send(self.writer, scope, send, request_id, sdk_version)
        # Key creation and revocation, and a publish past a failed guard, are audited by the service, with this.
        if path.startswith(API_KEYS_PATH) or path.endswith(PUBLISH_SUFFIX):
            auth_audit.REQUEST.set(
                auth_audit.RequestContext(
                    request_id, scope["method"], path, _address(scope), sdk_version, scope["state"]
                )
            )

        answering = False

        async def send_and_note(message: Message) -> None:
            nonlocal status, answering
            if message["type"] == "http.response.start":
                status, answering = int(message["status"]), True
            await forward(message)

        try:
            await self.app(scope, receive, send_and_note)
        except ClientDisconnect:
            if answering:  # the answer is under way: the server closes the connection
                raise
            status = CLIENT_CLOSED_REQUEST
        finally:
            state: dict[str, Any] = scope.get("state") or {}
            principal: Principal | None = state.get("principal")
            template: str | None = getattr(scope.get("route"), "path", None)
            if template is not None and not template.startswith(API_PREFIX):
                template = API_PREFIX + template  # routes of the routers included under /v1 keep their own path
            elif template is None and status not in (404, 405):
                template = path  # answered before routing (the POST /events fast path): a path without parameters
            record_request(
                self.writer, principal, request_id, scope["method"], path, template, status, started, at, sdk_version
            )
            if audited is not None:
                await audited.finish(status)  # a login or logout that crashed or was abandoned is audited too


class AuditedResponse:
    """Passes a response through, except that an audited one (a login, a logout, any 401 or 403) is held from
    its start until its body is complete and the audit row committed."""

    def __init__(self, writer: RequestLogWriter, scope: Scope, send: Send, request_id: str, sdk: str | None) -> None:
        self.writer = writer
        self.scope = scope
        self.downstream = send
        self.request_id = request_id
        self.sdk_version = sdk
        path = scope.get("path", "")
        self.kind = "login" if path == LOGIN_PATH else "logout" if path == LOGOUT_PATH else "access_denied"
        self.held: list[Message] | None = None
        self.body = bytearray()
        self.login_body: bytearray | None = None
        self.audited = False

    def capture_login(self, receive: Receive) -> Receive:
        """`receive`, keeping a copy of the first bytes of the body (for the attempted email)."""
        captured = self.login_body = bytearray()

        async def receive_and_copy() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(captured) < MAX_LOGIN_CAPTURE_BYTES:
                captured.extend(message.get("body", b"")[: MAX_LOGIN_CAPTURE_BYTES - len(captured)])
            return message

        return receive_and_copy

    async def send(self, message: Message) -> None:
        if self.held is None:
            if message["type"] == "http.response.start" and (
                self.kind != "access_denied" or message["status"] in AUDITED_STATUSES
            ):
                self.held = [message]
                return
            await self.downstream(message)
            return
        self.held.append(message)
        if message["type"] != "http.response.body":
            return
        if len(self.body) <= MAX_AUDIT_BODY_BYTES:
            self.body.extend(message.get("body", b""))
        if message.get("more_body", False):
            return
        held, self.held = self.held, []  # from now on everything passes straight through (held is not None)
        await self._audit(int(held[0]["status"]))
        for item in held:
            await self.downstream(item)

    async def finish(self, status: int = 500) -> None:
        """After the app: a login or logout whose answer never completed (an unexpected error, answered as 500
        by the server's outer layer, or a client gone before its answer, 499) is audited as failed."""
        if not self.audited:
            await self._audit(status)

    async def _audit(self, status: int) -> None:
        self.audited = True
        event, email = self._event(status)
        try:
            await self.writer.audit.write(event, email)
        except Exception:  # noqa: BLE001 - logged loudly; the answer still goes (the client would retry anyway)
            log.exception("writing the authentication audit failed (%s %s)", event.kind, event.reason)

    def _event(self, status: int) -> tuple[auth_audit.AuditEvent, str | None]:
        document = _json(self.body) if len(self.body) <= MAX_AUDIT_BODY_BYTES else {}
        error = document.get("error") if isinstance(document.get("error"), dict) else None
        principal: Principal | None = (self.scope.get("state") or {}).get("principal")
        event = auth_audit.AuditEvent(
            kind=self.kind,
            outcome="succeeded" if 200 <= status < 300 else "failed",
            reason=_text(error.get("code")) if error else None,
            status=status,
            request_id=self.request_id,
            method=self.scope.get("method"),
            path=self.scope.get("path"),
            address=_address(self.scope),
            sdk_version=self.sdk_version,
        )
        email: str | None = None
        if principal is not None:
            event = replace(
                event,
                organization_id=principal.scope.organization_id,
                # a session acts in the environment the request names, but its login and logout are the
                # organization's: those are filed organization-wide
                environment=None if self.kind == "logout" else principal.scope.environment,
                actor_id=principal.actor_id,
                subject_id=principal.key_id,
            )
        elif self.kind == "login" and event.outcome == "succeeded":
            found = document.get("data")
            data: dict[str, Any] = found if isinstance(found, dict) else {}
            event = replace(
                event,
                organization_id=_text(data.get("organization_id")),
                actor_id=_text(data.get("account_id")),
                subject_id=_text(data.get("id")),
            )
        elif self.kind == "login":
            attempted = _json(self.login_body or b"").get("email")
            email = attempted if isinstance(attempted, str) and len(attempted) <= 320 else None
        elif error is not None and isinstance(error.get("details"), dict):
            details = error["details"]
            subject = _text(details.get("key_id")) or _text(details.get("session_id"))
            event = replace(event, subject_id=subject)
        return event, email


def _json(raw: bytes | bytearray) -> dict[str, Any]:
    try:
        document = jsonutil.loads(bytes(raw)) if raw else {}
    except (ValueError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 256 else None


def audit_send(writer: RequestLogWriter, scope: Scope, send: Send, request_id: str, sdk: str | None) -> Send:
    """`send`, auditing a 401 or 403 answer before it leaves (for the POST /events hot path, which answers in
    front of the middleware)."""
    audited: AuditedResponse | None = None

    async def send_audited(message: Message) -> None:
        nonlocal audited
        if audited is None:  # the common case costs one test per message: nothing is made for a 2xx
            if message["type"] != "http.response.start" or message["status"] not in AUDITED_STATUSES:
                await send(message)
                return
            audited = AuditedResponse(writer, scope, send, request_id, sdk)
        await audited.send(message)

    return send_audited


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
    sdk_version: str | None = None,
) -> None:
    """One request into the log: its tenant and actor when it authenticated, its duration from `started`
    (a `perf_counter` reading), its wall-clock start `at` and its SDK version."""
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
            sdk_version,
        )
    )
