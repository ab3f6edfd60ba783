"""One limit on request bodies for every route, the POST /v1/events hot path included.

`LimitedBody` wraps an HTTP request's `receive` and `send` (pure ASGI; `ServiceApp.__call__` applies it before
it dispatches, so nothing reads a body around it):

- a declared `Content-Length` over the limit is refused at the first `receive`, before a byte of the body is
  read (and before uvicorn answers an `Expect: 100-continue`);
- a body without one (chunked) is counted as it arrives and cut as soon as it passes the limit, so a
  never-ending body costs at most the limit in memory, never a hang;
- both raise `ServiceError("request_too_large")` (HTTP 413) inside the handler that reads, which renders it like
  any other error (envelope, X-Request-ID, RateLimit headers), and the answer then carries `Connection: close`:
  uvicorn closes the connection after it instead of reading (and discarding) the rest of the body.

The uvicorn settings of `rewards-lab serve` (`MAX_CONCURRENCY`, `KEEP_ALIVE_TIMEOUT_S`, and the protocol of
`api/http_protocol.py`) bound what reaches the application at all.
"""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limits import MAX_BODY_BYTES

# uvicorn's own limits for `rewards-lab serve` (docs/security.md): connections and tasks at once beyond which it
# answers 503 (far more than the clients a process serves at once: only a flood reaches it), and seconds an
# idle keep-alive connection stays open. The request head's size and deadline: `api/http_protocol.py`.
MAX_CONCURRENCY = 1_024
KEEP_ALIVE_TIMEOUT_S = 5
_CLOSE = (b"connection", b"close")


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length (first occurrence), or None when absent or not a number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if not value.isdigit():
                return None  # the HTTP parser refuses such a request before it reaches us
            return int(value) if len(value) <= 19 else 10**19  # no int() of a thousand digits
    return None


class LimitedBody:
    """`receive` and `send` of one HTTP request, with its body limited to `limit_bytes`."""

    __slots__ = ("_receive", "_send", "limit_bytes", "received_bytes", "refused")

    def __init__(self, scope: Scope, receive: Receive, send: Send, limit_bytes: int = MAX_BODY_BYTES) -> None:
        self._receive = receive
        self._send = send
        self.limit_bytes = limit_bytes
        self.received_bytes = 0
        declared = declared_length(scope)
        self.refused = declared is not None and declared > limit_bytes

    def _too_large(self) -> ServiceError:
        self.refused = True
        return ServiceError("request_too_large", limit_bytes=self.limit_bytes)

    async def receive(self) -> Message:
        if self.refused:
            raise self._too_large()
        message = await self._receive()
        if message["type"] == "http.request":
            self.received_bytes += len(message.get("body", b""))
            if self.received_bytes > self.limit_bytes:
                raise self._too_large()
        return message

    async def send(self, message: Message) -> None:
        if self.refused and message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), _CLOSE]
        await self._send(message)
