"""A hostile client against a real server on 127.0.0.1 (issue 14's "checked by").

Oversized and malformed bodies, hostile numbers and nesting, forged cursors, methods a path does not declare,
webhook URLs aimed at every loopback address form in both environments, and a failed event replayed after its
cause is fixed. Each refusal must be a 4xx in the envelope with a registered code and `X-Request-ID` (never a 500
or a hang), no connection may reach loopback, nothing may be lost, and the ledger must verify afterwards.
Everything here is bounded: fixed counts, short timeouts, loopback only.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewards_lab.contract.errors import REGISTRY
from tests.http_helpers import live_client
from tests.live_server import LiveServer, cli, start_server
from tests.webhook_receiver import ok, rewarding_world, wait_until

HOSTILE_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", "0.2")
        env.setenv("REWARDS_LAB_WEBHOOK_TIMEOUT_S", "1")
        live = start_server(tmp_path_factory.mktemp("hostile") / "service.duckdb", "Acme", "--plan", "enterprise")
    yield live
    assert live.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a graceful stop
    verified = subprocess.run(cli("verify", "--db", str(live.db)), capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with live_client(server, timeout=HOSTILE_TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def world(http: httpx.Client) -> dict[str, str]:
    return rewarding_world(http)


def refused(response: httpx.Response, *codes: str) -> dict[str, Any]:
    """A 4xx in the envelope with a registered code (one of `codes` when given) and the request id."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    body = response.json()
    assert set(body) == {"error", "meta"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"type", "code", "message", "details"}, error
    assert error["code"] in REGISTRY, error
    assert REGISTRY[error["code"]].http_status == response.status_code, error
    assert not codes or error["code"] in codes, error
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    return error


def test_oversized_bodies_are_refused_before_they_are_read(http: httpx.Client) -> None:
    big = b'{"external_id": "' + b"x" * (8 * 1024 * 1024) + b'"}'
    refused(http.post("/customers", content=big, headers={"Content-Type": "application/json"}))

    def chunks() -> Iterator[bytes]:
        yield b'{"type": "order.completed", "external_event_id": "big", "customer_id": "c", "data": {"p": "'
        for _ in range(8 * 1024):
            yield b"y" * 1024
        yield b'"}}'

    refused(http.post("/events", content=chunks(), headers={"Content-Type": "application/json"}))
    login = httpx.post(f"{http.base_url}/auth/login", content=big, timeout=HOSTILE_TIMEOUT_S)
    refused(login)


def test_malformed_bodies(http: httpx.Client) -> None:
    for raw in (b"{", b"[]", b"null", b'{"external_id": 1}', b"\xff\xfe", b'{"external_id": "a", "a": ' * 10):
        refused(http.post("/customers", content=raw, headers={"Content-Type": "application/json"}))


def test_hostile_numbers_never_cost_a_500(http: httpx.Client, world: dict[str, str]) -> None:
    issue = f"/assets/{world['asset_id']}/issue"
    for amount in ("1" * 5000, "1e1000000", "1e99999999999999999999999999", "-0", "NaN", "Infinity", "0x10", "1_0"):
        refused(http.post(issue, json={"wallet_id": world["wallet_id"], "amount": amount, "reason": "r"}))
    for threshold in ("1e1000000", "1e99999999999999999999999999", "9" * 5000):
        rule = {
            "program_id": world["program_id"],
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": threshold}],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        }
        body = json.dumps(rule).replace(f'"{threshold}"', threshold).encode()
        refused(http.post("/reward-rules", content=body, headers={"Content-Type": "application/json"}))


def test_hostile_event_data_is_refused_or_harmless(http: httpx.Client, world: dict[str, str]) -> None:
    """Numbers with huge exponents or thousands of digits, and deep nesting, in event data: refused at intake,
    or stored and processed without breaking the listing."""
    deep = '{"a":' * 900 + "1" + "}" * 900
    hostile = {
        "exp": '{"amount": 1e99999999999999999999999999}',
        "digits": '{"amount": ' + "9" * 5000 + "}",
        "deep": deep,
        "keys": "{" + ",".join(f'"k{i}": {i}' for i in range(20000)) + "}",
    }
    for name, data in hostile.items():
        raw = (
            f'{{"type": "order.completed", "external_event_id": "hostile-{name}", '
            f'"customer_id": "user-42", "data": {data}}}'
        ).encode()
        response = http.post("/events", content=raw, headers={"Content-Type": "application/json"})
        if response.status_code >= 400:
            refused(response)
        else:
            assert response.status_code in (200, 201, 202), response.text[:300]
    for sort in ("received_at", "occurred_at"):
        for direction in ("asc", "desc"):
            listed = http.get("/events", params={"limit": 100, "sort": sort, "direction": direction})
            assert listed.status_code == 200, listed.text[:500]


def _forged(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_forged_cursors_are_refused(http: httpx.Client, world: dict[str, str]) -> None:
    for index in range(3):
        ok(http.post("/customers", json={"external_id": f"paged-{index}"}), 201)
    page = ok_page(http.get("/customers", params={"limit": 1}))
    cursor = page["next_cursor"]
    assert cursor
    tampered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    forgeries = [
        tampered,
        _forged({"sort": "created_at", "value": "not a timestamp", "id": "cus_x"}),
        _forged(["'; DROP TABLE customers; --", 1]),
        _forged({"v": 10**400}),
        "%%%",
        "A" * 5000,
    ]
    for forged in forgeries:
        for path in ("/customers", "/events", "/reward-executions", "/transactions"):
            refused(http.get(path, params={"cursor": forged}))
    assert http.get("/customers", params={"cursor": ""}).status_code == 200


def ok_page(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text[:500]
    body: dict[str, Any] = response.json()
    return body


def test_paging_by_a_nullable_field_shows_every_row_once(http: httpx.Client, world: dict[str, str]) -> None:
    ids = []
    for index in range(7):
        event: dict[str, Any] = {
            "type": "page.test",
            "external_event_id": f"paging-{index}",
            "customer_id": "user-42",
            "data": {},
        }
        if index % 2:
            event["occurred_at"] = f"2026-01-0{index}T00:00:00Z"
        ids.append(ok(http.post("/events", json=event))["id"])
    for direction in ("asc", "desc"):
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(100):
            params: dict[str, Any] = {"limit": 2, "sort": "occurred_at", "direction": direction, "type": "page.test"}
            if cursor:
                params["cursor"] = cursor
            page = ok_page(http.get("/events", params=params))
            seen += [event["id"] for event in page["data"]]
            cursor = page["next_cursor"]
            if not page["has_more"]:
                break
        assert sorted(seen) == sorted(ids), direction


def test_undeclared_methods_and_unknown_paths(http: httpx.Client) -> None:
    refused(http.request("PATCH", "/events"))
    refused(http.request("DELETE", "/customers"))
    refused(http.get("/no-such-thing"))
    refused(http.get("/customers/" + "x" * 10000))


class LoopbackTrap:
    """Counts every TCP connection that reaches one port on 127.0.0.1 and on ::1."""

    def __init__(self) -> None:
        self.accepted = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(listener.getsockname()[1])
        self._sockets.append(listener)
        try:
            self._sockets.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
        except OSError:  # no IPv6 loopback here: the IPv6 forms are still refused by the guard
            pass
        for listening in self._sockets:
            listening.settimeout(0.2)
            threading.Thread(target=self._accept, args=(listening,), daemon=True).start()
        self._closing = False

    def _accept(self, listening: socket.socket) -> None:
        while not getattr(self, "_closing", False):
            try:
                connection, _ = listening.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._closing = True
        for listening in self._sockets:
            listening.close()


def _loopback_forms(port: int, scheme: str) -> list[str]:
    hosts = [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0x7f.0.0.1",
        "017700000001",
        "0177.0.0.1",
        "0",
        "0.0.0.0",
        "localhost",
        "LOCALHOST.",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[0:0:0:0:0:0:0:1]",
    ]
    return [f"{scheme}://{host}:{port}/hook" for host in hosts]


def test_webhooks_never_reach_loopback_in_either_environment(server: LiveServer) -> None:
    trap = LoopbackTrap()
    try:
        registered: list[tuple[str, str]] = []
        for environment, scheme in (("sandbox", "http"), ("sandbox", "https"), ("production", "https")):
            with httpx.Client(base_url=server.base_url, headers=server.headers(environment), timeout=10) as http:
                for url in _loopback_forms(trap.port, scheme):
                    response = http.post("/webhooks", json={"url": url, "events": ["reward.issued"]})
                    if response.status_code == 201:
                        webhook_id = response.json()["data"]["id"]
                        registered.append((environment, webhook_id))
                        tested = http.post(f"/webhooks/{webhook_id}/test")
                        assert tested.status_code < 500, tested.text[:300]
                    else:
                        refused(response)
        time.sleep(3.0)  # several delivery rounds and a retry
        assert trap.accepted == 0, f"{trap.accepted} connection(s) reached loopback"
        for environment, webhook_id in registered:
            with httpx.Client(base_url=server.base_url, headers=server.headers(environment), timeout=10) as http:
                text = http.get(f"/webhooks/{webhook_id}/deliveries").text.lower()
                for leak in ("refused", "errno", "connecterror", "traceback"):
                    assert leak not in text, text[:500]
    finally:
        trap.close()


def test_a_failed_event_issues_once_when_replayed_after_its_cause_is_fixed(
    http: httpx.Client, world: dict[str, str]
) -> None:
    ok(http.post(f"/assets/{world['asset_id']}/pause"))
    event = ok(
        http.post(
            "/events",
            json={
                "type": "order.completed",
                "external_event_id": "paused-1",
                "customer_id": "user-42",
                "data": {"amount": 50},
            },
        )
    )

    def settled() -> dict[str, Any] | None:
        current: dict[str, Any] = ok(http.get(f"/events/{event['id']}"))
        return current if current["status"] != "received" else None

    assert wait_until(settled)["status"] == "failed"
    before = ok(http.get(f"/wallets/{world['wallet_id']}/balances"))
    ok(http.post(f"/assets/{world['asset_id']}/resume"))
    replayed = ok(http.post(f"/events/{event['id']}/replay"))
    assert replayed["status"] == "processed"
    refused(http.post(f"/events/{event['id']}/replay"), "event_not_replayable")
    executions = ok(http.get("/reward-executions", params={"event_id": event["id"], "status": "issued"}))
    assert len(executions) == 1 and executions[0]["amount"] == "5.00", executions
    after = ok(http.get(f"/wallets/{world['wallet_id']}/balances"))
    assert before != after
