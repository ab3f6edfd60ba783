"""Backpressure: when the event worker falls behind, POST /events still answers fast, the queue depth is visible
on /v1/health, nothing is dropped, and the backlog drains to exactly one reward per event."""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from pathlib import Path

import httpx

from tests.live_server import start_server
from tests.webhook_receiver import ok, rewarding_world, wait_until

EVENTS = 300
THREADS = 8


def test_a_slow_worker_builds_a_visible_queue_while_the_api_stays_fast(tmp_path: Path) -> None:
    # One event per worker transaction: the worker manages far fewer events per second than the senders post.
    server = start_server(
        tmp_path / "slow.duckdb", "Acme", "--plan", "enterprise", serve_args=("--worker-batch-size", "1")
    )
    depths: list[int] = []
    latencies_ms: list[float] = []
    statuses: list[int] = []
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
            ids = rewarding_world(http)
            warm_up = {"type": "order.completed", "external_event_id": "warm-up", "customer_id": "user-42", "data": {}}
            ok(http.post("/events", json=warm_up), 202)  # the first request of a process pays one-off set-up costs
        done = threading.Event()

        def watch() -> None:
            with httpx.Client(base_url=server.base_url, timeout=10) as plain:  # /health needs no credentials
                while not done.is_set():
                    depths.append(ok(plain.get("/health"))["event_queue_depth"])
                    time.sleep(0.02)

        def send(first: int) -> None:
            with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
                for number in range(first, EVENTS, THREADS):
                    body = {
                        "type": "order.completed",
                        "external_event_id": f"bp-{number}",
                        "customer_id": "user-42",
                        "data": {"amount": 10},
                    }
                    started = time.perf_counter()
                    response = http.post("/events", json=body)
                    latencies_ms.append((time.perf_counter() - started) * 1000)
                    statuses.append(response.status_code)

        watcher = threading.Thread(target=watch)
        watcher.start()
        senders = [threading.Thread(target=send, args=(index,)) for index in range(THREADS)]
        for thread in senders:
            thread.start()
        for thread in senders:
            thread.join()
        with httpx.Client(base_url=server.base_url, timeout=10) as plain:
            backlog_after_burst = ok(plain.get("/health"))["event_queue_depth"]
            wait_until(lambda: ok(plain.get("/health"))["event_queue_depth"] == 0, timeout_s=120, interval_s=0.2)
        done.set()
        watcher.join()
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
            balances = ok(http.get(f"/wallets/{ids['wallet_id']}/balances"))["balances"]
            processed = [
                item
                for status in ("processed", "failed", "received")
                for item in _all(http, "/events", {"status": status})
            ]
    finally:
        server.stop()
    assert statuses == [202] * EVENTS  # nothing refused, nothing dropped
    assert backlog_after_burst > 0 and max(depths) > 0  # the worker really fell behind, and it showed
    latencies_ms.sort()
    assert latencies_ms[int(EVENTS * 0.99)] < 1000, latencies_ms[-10:]  # acceptance never waits for processing
    assert {item["status"] for item in processed} == {"processed"} and len(processed) == EVENTS + 1
    assert Decimal(balances[0]["balance"]) == Decimal(EVENTS) * Decimal("1.00")  # 10 * 0.1 each, exactly once


def _all(http: httpx.Client, path: str, params: dict[str, str]) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    cursor = None
    while True:
        page = http.get(path, params={**params, "limit": 100, **({"cursor": cursor} if cursor else {})}).json()
        items += page["data"]
        if not page["has_more"]:
            return items
        cursor = page["next_cursor"]
