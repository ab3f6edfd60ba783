"""A hostile client against a real `rewards-lab serve` on 127.0.0.1 (issue 14, items 3-6): oversized and endless
bodies, numbers of thousands of digits or huge exponents, deep nesting, forged and tampered cursors. Each must be
a 4xx in the envelope with a registered code and X-Request-ID; the server must keep answering, and the ledger
must verify afterwards. Every socket has a timeout and every loop a bound."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewards_lab.api.http_protocol import BODY_TIMEOUT_S, HEAD_TIMEOUT_S
from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.limits import MAX_BODY_BYTES
from tests.http_helpers import live_client
from tests.live_server import LiveServer, cli, start_server

SOCKET_TIMEOUT_S = 15.0
LISTS = (
    "/customers",
    "/wallets",
    "/assets",
    "/transactions",
    "/reward-programs",
    "/events",
    "/reward-executions",
    "/webhooks",
    "/developer/logs",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("hostile") / "service.duckdb")
    yield live
    live.stop()


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with live_client(server, timeout=SOCKET_TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def world(http: httpx.Client) -> dict[str, str]:
    """A customer with a wallet, an active asset with a funded wallet, a published programme with one rule."""
    customer = _ok(http.post("/customers", json={"external_id": "hostile-1"}))
    wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"]}))
    other = _ok(http.post("/wallets", json={"customer_id": customer["id"]}))
    asset = _ok(http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}))
    _ok(http.post(f"/assets/{asset['id']}/activate"))
    issue = {"wallet_id": wallet["id"], "amount": "100.00", "reason": "seed"}
    _ok(http.post(f"/assets/{asset['id']}/issue", json=issue, headers={"Idempotency-Key": "seed-1"}))
    programme = _ok(http.post("/reward-programs", json={"name": "Spring", "asset_id": asset["id"]}))
    rule = _ok(
        http.post(
            "/reward-rules",
            json={
                "program_id": programme["id"],
                "event_type": "order.completed",
                "conditions": [{"field": "amount", "operator": "gte", "value": 1}],
                "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.5}}],
            },
        )
    )
    _ok(http.post(f"/reward-programs/{programme['id']}/publish"))
    return {
        "customer": customer["id"],
        "wallet": wallet["id"],
        "other_wallet": other["id"],
        "asset": asset["id"],
        "programme": programme["id"],
        "rule": rule["id"],
    }


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code < 300, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def _refused(response: httpx.Response, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    """A 4xx in the envelope with a registered code, X-Request-ID, and (when given) `details.field`."""
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"error", "meta"}, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code and code in REGISTRY, body
    assert error["type"] == REGISTRY[code].type.value
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    if field is not None:
        assert error["details"]["field"] == field, body
    return error


# ---- raw HTTP/1.1 over a socket: what httpx will not send (a lying Content-Length, an endless body) ----------


def _head(server: LiveServer, method: str, path: str, extra: dict[str, str]) -> bytes:
    host = server.base_url.split("//", 1)[1].split("/", 1)[0]
    lines = [f"{method} /v1{path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in {**server.headers(), **extra}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _connect(server: LiveServer) -> socket.socket:
    host, port = server.base_url.split("//", 1)[1].split("/", 1)[0].split(":")
    assert host == "127.0.0.1"
    return socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers and JSON body of one response (read up to its Content-Length, bounded by the timeout)."""
    raw = b""
    deadline = time.monotonic() + SOCKET_TIMEOUT_S
    while b"\r\n\r\n" not in raw:
        assert time.monotonic() < deadline, "no response headers"
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a response: {raw!r}"
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    length = int(headers["content-length"])
    while len(body) < length:
        assert time.monotonic() < deadline, "incomplete response body"
        chunk = sock.recv(65536)
        assert chunk, "the connection closed inside the response body"
        body += chunk
    return int(status_line.split()[1]), headers, json.loads(body[:length])


def _assert_too_large(status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
    assert status == 413, body
    assert body["error"]["code"] == "request_too_large" and body["error"]["details"]["limit_bytes"] == MAX_BODY_BYTES
    assert headers["x-request-id"] == body["meta"]["request_id"]
    assert headers["connection"] == "close"  # the rest of the body is never read


@pytest.mark.parametrize("path", ["/customers", "/events", "/auth/login"])
def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(server: LiveServer, path: str) -> None:
    """The client announces 50 MB and sends 10 bytes: the answer comes at once, without waiting for the rest."""
    with _connect(server) as sock:
        sock.sendall(_head(server, "POST", path, {"Content-Length": str(50_000_000)}) + b'{"a": "b",')
        _assert_too_large(*_read_response(sock))


@pytest.mark.parametrize("path", ["/customers", "/events", "/auth/login"])
def test_an_endless_chunked_body_is_cut_at_the_limit(server: LiveServer, path: str) -> None:
    """Chunks keep coming (no Content-Length, no last chunk): the server answers once the limit is passed and
    closes the connection; the sender stops within a bounded time either way."""
    stop = threading.Event()
    sent = [0]

    def drip(sock: socket.socket) -> None:
        chunk = b" " * 65536
        frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        deadline = time.monotonic() + SOCKET_TIMEOUT_S
        try:
            while not stop.is_set() and time.monotonic() < deadline and sent[0] < 40 * MAX_BODY_BYTES:
                sock.sendall(frame)
                sent[0] += len(chunk)
                time.sleep(0.001)
        except OSError:  # the server closed the connection: what it should do
            return

    with _connect(server) as sock:
        sock.sendall(_head(server, "POST", path, {"Transfer-Encoding": "chunked"}) + b'5\r\n{"a":\r\n')
        sender = threading.Thread(target=drip, args=(sock,), daemon=True)
        sender.start()
        try:
            _assert_too_large(*_read_response(sock))
        finally:
            stop.set()
            sender.join(SOCKET_TIMEOUT_S)
    assert sent[0] < 40 * MAX_BODY_BYTES


def test_a_chunked_body_within_the_limit_is_read(server: LiveServer, http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"external_id": '
        yield b'"chunked-1"}'

    response = http.post("/customers", content=chunks())
    assert response.status_code == 201, response.text


def test_a_request_head_over_the_limit_is_refused(server: LiveServer, http: httpx.Client) -> None:
    """httptools has no header limit of its own: 200 KB of headers get uvicorn's 400 and a closed connection."""
    junk = b"".join(b"X-Junk-%d: %s\r\n" % (index, b"a" * 1000) for index in range(200))
    with _connect(server) as sock:
        sock.sendall(b"GET /v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\n" + junk + b"\r\n")
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"connection: close" in answer.lower()
    assert http.get("/customers").status_code == 200


def test_a_request_head_that_never_ends_is_closed(server: LiveServer) -> None:
    """One header line and then nothing: the connection is closed once the head's deadline passes."""
    started = time.monotonic()
    with _connect(server) as sock:
        sock.sendall(b"GET /v1/customers HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        sock.settimeout(HEAD_TIMEOUT_S + 10)
        assert sock.recv(1024) == b""  # closed by the server, no answer
    assert time.monotonic() - started < HEAD_TIMEOUT_S + 10


def test_a_body_that_trickles_is_closed_at_its_deadline(server: LiveServer, http: httpx.Client) -> None:
    """Content-Length 1,000 and ten bytes, then nothing (on a route and on the hot path at once): each connection
    is closed once the body's deadline passes (the body limit bounds its memory, the deadline its time)."""
    started = time.monotonic()
    sockets = [_connect(server) for _ in range(2)]
    try:
        for sock, path in zip(sockets, ["/customers", "/events"], strict=True):
            sock.sendall(_head(server, "POST", path, {"Content-Length": "1000"}) + b'{"a": "b",')
            sock.settimeout(BODY_TIMEOUT_S + 10)
        for sock in sockets:
            assert sock.recv(1024) == b""
    finally:
        for sock in sockets:
            sock.close()
    assert time.monotonic() - started < BODY_TIMEOUT_S + 10
    assert http.get("/customers").status_code == 200


# ---- numbers ------------------------------------------------------------------------------------------------------

HUGE = "9" * 5000


def test_thousand_digit_amounts_in_every_money_field(http: httpx.Client, world: dict[str, str]) -> None:
    asset = world["asset"]
    bodies = {
        f"/assets/{asset}/issue": {"wallet_id": world["wallet"], "amount": HUGE, "reason": "x"},
        f"/assets/{asset}/redemptions": {"wallet_id": world["wallet"], "amount": HUGE, "reference": "x"},
        f"/assets/{asset}/transfers": {
            "from_wallet_id": world["wallet"],
            "to_wallet_id": world["other_wallet"],
            "amount": HUGE,
        },
    }
    for index, (path, body) in enumerate(bodies.items()):
        response = http.post(path, json=body, headers={"Idempotency-Key": f"huge-{index}"})
        _refused(response, 422, "amount_too_large", "amount")
    leading_zeros = {"wallet_id": world["wallet"], "amount": "0" * 5000 + "1", "reason": "x"}
    _ok(http.post(f"/assets/{asset}/issue", json=leading_zeros, headers={"Idempotency-Key": "zeros"}))
    ceiling = {"name": "Big", "symbol": "BIG", "type": "points", "decimals": 2, "supply_ceiling": HUGE}
    _refused(http.post("/assets", json=ceiling), 422, "amount_too_large", "supply_ceiling")
    fixed = {
        "program_id": world["programme"],
        "event_type": "order.completed",
        "actions": [{"type": "issue", "amount": {"fixed": HUGE}}],
    }
    _refused(http.post("/reward-rules", json=fixed), 422, "amount_too_large")


def _rule(world: dict[str, str], value: str = "1", rate: str = "0.5") -> str:
    return (
        f'{{"program_id": "{world["programme"]}", "event_type": "order.completed", '
        f'"conditions": [{{"field": "amount", "operator": "gte", "value": {value}}}], '
        f'"actions": [{{"type": "issue", "amount": {{"per": "amount", "rate": {rate}}}}}]}}'
    )


@pytest.mark.parametrize(
    ("value", "rate", "field"),
    [
        ("1e1000000", "0.5", "conditions[0].value"),
        ("-1e1000000", "0.5", "conditions[0].value"),
        ("1e99999999999999999999999999", "0.5", "conditions[0].value"),
        (HUGE, "0.5", "conditions[0].value"),
        ("1", "1e1000000", "actions[0].amount.rate"),
        ("1", "1e-1000000", "actions[0].amount.rate"),
        ("1", "1e-99999999999999999999999999", "actions[0].amount.rate"),
    ],
)
def test_huge_exponents_in_thresholds_and_rates(
    http: httpx.Client, world: dict[str, str], value: str, rate: str, field: str
) -> None:
    _refused(http.post("/reward-rules", content=_rule(world, value, rate)), 422, "field_invalid", field)
    patch = _rule(world, value, rate).replace(f'"program_id": "{world["programme"]}", ', "")
    _refused(http.patch(f"/reward-rules/{world['rule']}", content=patch), 422, "field_invalid", field)


@pytest.mark.parametrize(
    "number", ["1e99999999999999999999999999", "1e1000000000", "-1e-1000000000", HUGE, "0e1000000000", "1" * 101]
)
def test_huge_numbers_in_event_data(http: httpx.Client, world: dict[str, str], number: str) -> None:
    event = (
        '{"type": "order.completed", "external_event_id": "hostile-number", "customer_id": "hostile-1", '
        f'"data": {{"amount": 5, "nested": [1, {{"x": {number}}}]}}}}'
    )
    _refused(http.post("/events", content=event), 422, "field_invalid", "data.nested[1].x")
    simulation = f'{{"event": {{"type": "order.completed", "amount": {number}}}}}'
    simulate = f"/reward-rules/{world['rule']}/simulate"
    _refused(http.post(simulate, content=simulation), 422, "field_invalid", "event.amount")


def test_the_largest_accepted_numbers_never_crash_simulate_or_the_worker(
    http: httpx.Client, world: dict[str, str]
) -> None:
    """1E+999999999 is within the limit (event data has always taken it): it is evaluated, never a 500."""
    simulation = '{"event": {"type": "order.completed", "amount": 1e999999999}}'
    assert http.post(f"/reward-rules/{world['rule']}/simulate", content=simulation).status_code == 200
    event = _ok(
        http.post(
            "/events",
            content=(
                '{"type": "order.completed", "external_event_id": "largest", "customer_id": "hostile-1", '
                '"data": {"amount": 1e999999999}}'
            ),
        )
    )
    deadline = time.monotonic() + SOCKET_TIMEOUT_S
    while (stored := _ok(http.get(f"/events/{event['id']}")))["status"] == "received":
        assert time.monotonic() < deadline, "the worker never evaluated the event"
        time.sleep(0.05)
    assert stored["status"] == "failed" and stored["error"]["code"] == "amount_too_large", stored


def test_dates_and_query_values_out_of_range(http: httpx.Client) -> None:
    """Valid ISO 8601 text whose UTC value is past year 9999 (OverflowError), and thousand-digit query numbers."""
    for instant in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"):
        body = {"type": "t", "external_event_id": "far", "customer_id": "hostile-1", "occurred_at": instant}
        _refused(http.post("/events", json=body), 422, "field_invalid", "occurred_at")
        _refused(http.get("/developer/logs", params={"from": instant}), 422, "period_invalid", "from")
    _refused(http.get("/customers", params={"limit": HUGE}), 422, "field_invalid", "limit")
    _refused(http.get("/developer/logs", params={"status": HUGE}), 422, "field_invalid", "status")
    _refused(http.get(f"/customers/{'c' * 5000}"), 404, "customer_not_found")
    for forged_id in ("txn_" + "z" * 32, "txn_" + "f" * 32, "txn_"):
        _refused(http.get(f"/transactions/{forged_id}"), 404, "transaction_not_found")


# ---- nesting ------------------------------------------------------------------------------------------------------


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_deep_event_data_is_refused_and_the_listing_still_answers(http: httpx.Client, world: dict[str, str]) -> None:
    for depth in (17, 100, 900):  # within the parser's reach (about 950 levels): the data limit names the field
        event = (
            f'{{"type": "order.completed", "external_event_id": "deep-{depth}", "customer_id": "hostile-1", '
            f'"data": {_nested(depth)}}}'
        )
        error = _refused(http.post("/events", content=event), 422, "field_invalid")
        assert error["details"]["field"] == "data" + ".a" * 16
    parser_depth = 100_000  # beyond the parser's own recursion limit: refused, never a RecursionError
    event = (
        f'{{"type": "t", "external_event_id": "deepest", "customer_id": "hostile-1", "data": {_nested(parser_depth)}}}'
    )
    _refused(http.post("/events", content=event), 422, "request_malformed")
    _refused(http.post("/customers", content="[" * parser_depth + "]" * parser_depth), 422, "request_malformed")
    simulation = f'{{"event": {{"type": "order.completed", "amount": 2, "x": {_nested(40)}}}}}'
    _refused(http.post(f"/reward-rules/{world['rule']}/simulate", content=simulation), 422, "field_invalid")
    accepted = (
        '{"type": "order.completed", "external_event_id": "deep-ok", "customer_id": "hostile-1", '
        f'"data": {{"amount": 3, "tree": {_nested(15)}}}}}'
    )
    assert http.post("/events", content=accepted).status_code == 202
    assert http.get("/events", params={"limit": 100}).status_code == 200


def test_many_keys_and_long_keys_are_refused_by_field(http: httpx.Client) -> None:
    many = {f"k{i}": i for i in range(1001)}
    body = {"type": "t", "external_event_id": "many-keys", "customer_id": "hostile-1", "data": {"bag": many}}
    _refused(http.post("/events", json=body), 422, "field_invalid", "data.bag")
    body["data"] = {"k" * 256: 1}
    _refused(http.post("/events", json=body), 422, "field_invalid", "data")


# ---- cursors ------------------------------------------------------------------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _forgeries(list_name: str, sort: str) -> list[str]:
    """Unsigned cursors in the old format whose values used to reach SQL, and plain garbage."""
    values: list[object] = ["notatime", {"a": 1}, 12345678901234567890123, [1], True, None, "x" * 2000]
    forged = [_b64(json.dumps([list_name, sort, "asc", value, "id_x"]).encode()) for value in values]
    return [*forged, "bogus!", "....", "a.b", "x" * 5000, _b64(b"\xff\xfe") + "." + _b64(b"\x00" * 16)]


def _tampered(cursor: str) -> list[str]:
    payload, _, signature = cursor.partition(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    name, sort, direction, tag, value, last_id = json.loads(raw)
    changed = [
        [name, sort, direction, tag, 42, last_id],
        [name, sort, direction, "i", value, last_id],
        [name, sort, direction, tag, value, "zzz"],
    ]
    return [f"{_b64(json.dumps(c).encode())}.{signature}" for c in changed] + [payload, f"{payload}.{signature}x"]


@pytest.mark.parametrize("path", LISTS)
def test_forged_and_tampered_cursors_are_refused(http: httpx.Client, world: dict[str, str], path: str) -> None:
    list_name = path.strip("/").replace("reward-programs", "programmes").replace("reward-executions", "executions")
    for cursor in _forgeries(list_name, "created_at"):
        _refused(http.get(path, params={"cursor": cursor}), 422, "cursor_invalid", "cursor")
    assert http.get(path, params={"cursor": ""}).status_code == 200  # an empty cursor is no cursor


def test_a_real_cursor_tampered_with_or_moved_is_refused(http: httpx.Client, world: dict[str, str]) -> None:
    for index in range(3):
        body = {"type": "t", "external_event_id": f"page-{index}", "customer_id": "hostile-1"}
        assert http.post("/events", json=body).status_code == 202
    first = http.get("/events", params={"limit": 1}).json()
    cursor = first["next_cursor"]
    assert cursor
    assert http.get("/events", params={"limit": 1, "cursor": cursor}).status_code == 200
    for forged in _tampered(cursor):
        _refused(http.get("/events", params={"limit": 1, "cursor": forged}), 422, "cursor_invalid", "cursor")
    moved = {"limit": 1, "cursor": cursor}
    _refused(http.get("/events", params={**moved, "direction": "desc"}), 422, "cursor_invalid", "cursor")
    _refused(http.get("/events", params={**moved, "sort": "occurred_at"}), 422, "cursor_invalid", "cursor")
    _refused(http.get("/customers", params=moved), 422, "cursor_invalid", "cursor")


def test_paging_by_occurred_at_over_http_shows_every_event_once(http: httpx.Client) -> None:
    for index in range(4):
        body: dict[str, Any] = {"type": "t", "external_event_id": f"when-{index}", "customer_id": "hostile-1"}
        if index % 2:
            body["occurred_at"] = f"2026-01-0{index}T00:00:00Z"
        assert http.post("/events", json=body).status_code == 202
    everything = {e["id"] for e in http.get("/events", params={"limit": 100}).json()["data"]}
    for direction in ("asc", "desc"):
        seen: list[str] = []
        cursor = ""
        for _ in range(200):
            page = http.get(
                "/events", params={"sort": "occurred_at", "direction": direction, "limit": 2, "cursor": cursor}
            )
            body = page.json()
            assert page.status_code == 200, body
            seen += [e["id"] for e in body["data"]]
            cursor = body["next_cursor"] or ""
            if not cursor:
                break
        assert sorted(seen) == sorted(everything) and len(seen) == len(set(seen))


# ---- afterwards ---------------------------------------------------------------------------------------------------


def test_zz_the_server_still_answers_and_the_ledger_verifies(server: LiveServer, http: httpx.Client) -> None:
    """Runs last in this module (name order within the file is pytest's definition order; kept last)."""
    assert http.get("/customers").status_code == 200
    server.stop()
    result = subprocess.run(cli("verify", "--db", str(server.db)), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["ok"] is True
