"""A real webhook receiver for tests: an HTTP server on 127.0.0.1 in a thread that records every request (raw
body and headers) and answers from a script (a status code, or a delay before answering)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.live_server import LiveServer, cli, free_port, spawn, wait_until_serving


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    answered: int

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed


@dataclass
class Receiver:
    """`script` answers the next requests in order: an int is a status code, a float is seconds to sleep before
    answering 200 (longer than the sender's timeout: a timeout). When it runs out, every answer is 200."""

    port: int = 0
    script: deque[int | float] = field(default_factory=deque)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with owner._lock:
                    step = owner.script.popleft() if owner.script else 200
                if isinstance(step, float):
                    time.sleep(step)
                    step = 200
                with owner._lock:
                    owner.received.append(Received(self.path, dict(self.headers.items()), raw, step))
                self.send_response(step)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def answer(self, steps: Iterable[int | float]) -> None:
        with self._lock:
            self.script.extend(steps)

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout_s: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.snapshot()
            if predicate(got):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver did not get what was expected; got {[r.body for r in got]}")
            time.sleep(0.05)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def wait_until(check: Callable[[], Any], timeout_s: float = 20.0, interval_s: float = 0.05) -> Any:
    """Call `check` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; last value {value!r}")
        time.sleep(interval_s)


def serve_again(previous: LiveServer) -> LiveServer:
    """Start `rewards-lab serve` again on the same file with the same keys (after a stop or a kill)."""
    port = free_port()
    log = (previous.db.parent / f"{previous.db.stem}.restart.log").open("wb")
    process = spawn(cli("serve", "--db", str(previous.db), "--port", str(port)), log)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(base_url, process, log)
    return LiveServer(previous.db, base_url, previous.organization_id, previous.keys, process, log)


def ok(response: httpx.Response, status: int | None = None) -> Any:
    """The envelope's data of a successful response (and, if given, its exact status)."""
    body = response.json()
    assert response.is_success and (status is None or response.status_code == status), body
    return body["data"]


def rewarding_world(http: httpx.Client, customer: str = "user-42") -> dict[str, str]:
    """Customer, wallet, an active STAR asset (2 decimals) and a published rule: every `order.completed` issues
    amount * 0.1 STAR. Returns the ids."""
    customer_id = ok(http.post("/customers", json={"external_id": customer}), 201)["id"]
    wallet_id = ok(http.post("/wallets", json={"customer_id": customer_id, "type": "customer"}), 201)["id"]
    asset = ok(http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"), 200)
    programme = ok(http.post("/reward-programs", json={"name": "Spring", "asset_id": asset["id"]}), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": "order.completed",
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.1}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return {"customer_id": customer_id, "wallet_id": wallet_id, "asset_id": asset["id"], "program_id": programme["id"]}


class Dripper:
    """A receiver that is slow on purpose: it reads the request, then sends `HTTP/1.1 200 OK ...` one byte every
    `drip_s` seconds, for at most `max_s` seconds per connection (bounded), on 127.0.0.1. Counts connections."""

    def __init__(self, drip_s: float = 0.3, max_s: float = 10.0) -> None:
        self.drip_s, self.max_s = drip_s, max_s
        self.connections = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(32)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slow"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\nok"
        deadline = time.monotonic() + self.max_s
        with connection:
            connection.settimeout(1.0)
            try:
                connection.recv(65536)  # the request (small)
                for byte in answer:
                    if self._closed.is_set() or time.monotonic() > deadline:
                        return
                    connection.sendall(bytes([byte]))
                    time.sleep(self.drip_s)
            except OSError:
                return  # the sender gave up

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
