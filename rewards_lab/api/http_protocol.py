"""uvicorn's httptools protocol with a limit on the request head, and deadlines to receive it and the body.

uvicorn's default HTTP parser (httptools, the fast one the benchmarks measure) has no header size setting
(`h11_max_incomplete_event_size` is the h11 parser's only) and no timeout for a request that trickles in: 2 MB
of headers were read into memory, and a client sending one byte a second held a connection forever.
`BoundedHttpToolsProtocol` counts the request line and headers as they are parsed and closes the connection with
uvicorn's own 400 once they pass `MAX_HEAD_BYTES`, and closes a connection whose request head has not fully
arrived `HEAD_TIMEOUT_S` after the connection opened or the request began, or whose body has not fully arrived
`BODY_TIMEOUT_S` after its head (the body limit bounds a trickling body's memory, this its time; the handler
waiting for it sees a disconnect). Protocol-level refusals come before any request exists, so they are
uvicorn's plain 400 (or a closed connection), not the API's envelope.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEAD_BYTES = 32_768
HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 20.0  # 1 MiB (the body limit) at 52 KB/s; an event's body is a few hundred bytes


class RequestHeadTooLarge(Exception):
    """Raised inside a parser callback: httptools turns it into the HttpParserError uvicorn answers 400 to."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _head_bytes = 0
    _deadline: asyncio.TimerHandle | None = None  # of the request head, then of the body

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(HEAD_TIMEOUT_S)  # a connection that never sends a whole request head is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        if self._deadline is None:
            self._arm(HEAD_TIMEOUT_S)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._arm(BODY_TIMEOUT_S)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise RequestHeadTooLarge

    def _arm(self, timeout_s: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()
