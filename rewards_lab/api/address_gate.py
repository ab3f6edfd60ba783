"""Refusal per client address before authentication, and `Retry-After` on every 429.

A pure ASGI middleware inside `ResponseHeaders` (which counts every request that never authenticated against its
address, `rate_limits.address_bucket`). Before the request reaches authentication, the gate looks at that count:
once the address has spent `UNAUTHENTICATED_LIMIT_PER_MINUTE` in this window, every request from it is answered
429 `rate_limit_exceeded` at once (valid credentials included: the check comes before anything is looked up).
The health probes are counted in a budget of their own (`HEALTH_LIMIT_PER_MINUTE`), so a load balancer's
polling and a client's failures never spend each other's; only readiness (which writes) is refused over it.
POST /v1/events, served before this stack, calls `refuse_spent_address` itself.

The address is the socket peer unless the operator trusts a proxy (`rewards-lab serve --forwarded-allow-ips`).
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards_lab.api.context import request_id_from
from rewards_lab.api.envelope import failure_text
from rewards_lab.api.rate_limits import (
    HEALTH_LIMIT_PER_MINUTE,
    HEALTH_PREFIX,
    UNAUTHENTICATED_LIMIT_PER_MINUTE,
    RateLimiter,
    RateState,
    address_bucket,
)
from rewards_lab.contract.errors import ServiceError

READINESS_PATH = "/v1/health/ready"
HEALTH_PATHS = frozenset({"/v1/health", READINESS_PATH})


def client_host(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def refuse_spent_address(limiter: RateLimiter, scope: Scope, state: dict[str, Any]) -> None:
    """Raise `rate_limit_exceeded` when the client's address has spent its unauthenticated budget (and leave the
    rate state for the RateLimit headers)."""
    rate = limiter.peek(address_bucket(client_host(scope)), UNAUTHENTICATED_LIMIT_PER_MINUTE)
    if rate.exceeded:
        state["rate"] = rate
        raise _refusal(rate)


def _refusal(rate: RateState) -> ServiceError:
    return ServiceError(
        "rate_limit_exceeded",
        "too many requests without valid credentials from this address; wait for the next window",
        retry_after_s=rate.reset_s,
        limit=rate.limit,
    )


def retry_after_header(headers: list[tuple[bytes, bytes]], state: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """`headers` with `Retry-After` (seconds) when absent: the window's reset of the rate state that refused."""
    if any(name == b"retry-after" for name, _ in headers):
        return headers
    rate: RateState | None = state.get("rate")
    return [*headers, (b"retry-after", b"%d" % (rate.reset_s if rate is not None else 1))]


class AddressGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limiter: RateLimiter = scope["app"].state.rate_limiter
        state: dict[str, Any] = scope.setdefault("state", {})
        if scope["path"] in HEALTH_PATHS:
            rate = limiter.charge(HEALTH_PREFIX + client_host(scope), HEALTH_LIMIT_PER_MINUTE)
            state["rate"] = rate  # so ResponseHeaders shows (and does not charge the address with) this budget
            # Liveness only reads and was never refused; readiness writes a row, so it is refused over budget.
            refusal = _refusal(rate) if rate.exceeded and scope["path"] == READINESS_PATH else None
        else:
            try:
                refuse_spent_address(limiter, scope, state)
                refusal = None
            except ServiceError as error:
                refusal = error
        if refusal is not None:
            await self._refuse(scope, state, refusal, send)
            return

        async def send_with_retry_after(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 429:
                message["headers"] = retry_after_header(list(message.get("headers", ())), state)
            await send(message)

        await self.app(scope, receive, send_with_retry_after)

    @staticmethod
    async def _refuse(scope: Scope, state: dict[str, Any], error: ServiceError, send: Send) -> None:
        headers = dict(scope["headers"])
        request_id = state.get("request_id") or request_id_from(headers.get(b"x-request-id", b"").decode("latin-1"))
        state["request_id"] = request_id
        body = failure_text(error, request_id).encode()
        response_headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"x-request-id", request_id.encode("latin-1")),
        ]
        rate: RateState | None = state.get("rate")
        if rate is not None:
            response_headers += rate.raw_headers()
        response_headers = retry_after_header(response_headers, state)
        await send({"type": "http.response.start", "status": error.http_status, "headers": response_headers})
        await send({"type": "http.response.body", "body": body})
