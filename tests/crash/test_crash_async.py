"""Crash safety of the asynchronous path, against a real server process killed with SIGKILL mid-burst.

Several threads send a bounded burst of events while the webhook receiver is down (every delivery is refused
and waits for its retry); the server is killed mid-burst, restarted on the same file, and left to drain. Then:
every event whose POST got a 2xx is stored and processed exactly once (accepted = processed), each issued what
the rule says, the wallet holds the sum, every reward.issued reached the receiver at least once (deduplicated
by delivery id) with a valid signature, and the ledger verifies.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, verify
from tests.live_server import LiveServer, cli, free_port, start_server
from tests.webhook_receiver import Receiver, ok, rewarding_world, serve_again, wait_until

THREADS = 4
EVENTS_PER_THREAD = 60
KILL_AFTER_ACCEPTED = 90
RATE = Decimal("0.1")


def _amount(thread: int, index: int) -> str:
    return f"{(thread * EVENTS_PER_THREAD + index) % 97 + 1}.37"


def _reward(amount: str) -> Decimal:
    return (Decimal(amount) * RATE).quantize(Decimal("0.01"), rounding=ROUND_DOWN)


def _burst(live: LiveServer, kill_now: threading.Event) -> tuple[dict[str, str], set[str], list[float]]:
    """Send the events from THREADS threads; returns (accepted external id -> amount, ids whose fate is unknown,
    the seconds each accepted POST took)."""
    accepted: dict[str, str] = {}
    unknown: set[str] = set()
    latencies: list[float] = []
    lock = threading.Lock()

    def sender(thread: int) -> None:
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
            for index in range(EVENTS_PER_THREAD):
                external_id = f"burst-{thread}-{index}"
                amount = _amount(thread, index)
                body = (
                    f'{{"type": "order.completed", "external_event_id": "{external_id}", '
                    f'"customer_id": "user-42", "data": {{"amount": {amount}}}}}'
                )
                started = time.monotonic()
                try:
                    response = http.post("/events", content=body)
                except httpx.TransportError:
                    with lock:
                        unknown.add(external_id)
                    return  # the server is gone
                with lock:
                    if response.is_success:
                        accepted[external_id] = amount
                        latencies.append(time.monotonic() - started)
                        if len(accepted) >= KILL_AFTER_ACCEPTED:
                            kill_now.set()
                    else:
                        unknown.add(external_id)

    threads = [threading.Thread(target=sender, args=(number,)) for number in range(THREADS)]
    for thread in threads:
        thread.start()
    kill_now.wait(60)
    status = live.stop(signal.SIGKILL)
    for thread in threads:
        thread.join(30)
    assert status == -signal.SIGKILL
    return accepted, unknown, latencies


def _all(http: httpx.Client, path: str, **params: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": "100", **({"cursor": cursor} if cursor else {})}
        body = http.get(path, params=query).json()
        items += body["data"]
        if not body["has_more"]:
            return items
        cursor = body["next_cursor"]


def _state_after_kill(db: Path) -> dict[str, int]:
    """What the killed server left in the file (read-only; the restarted server recovers it for real)."""
    with duckdb.connect(str(db), read_only=True) as con:

        def count(sql: str) -> int:
            row = con.execute(sql).fetchone()
            assert row is not None
            return int(row[0])

        return {
            "received": count("SELECT count(*) FROM events WHERE status = 'received'"),
            "outbox_undispatched": count("SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"),
            "pending_deliveries": count("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'"),
            "events": count("SELECT count(*) FROM events"),
        }


def test_kill_9_mid_burst_loses_nothing_and_does_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # deliveries retry every ~1 s for a minute: long enough to still be pending across the kill and restart
    monkeypatch.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", ",".join(["1"] * 60))
    monkeypatch.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")  # the receiver listens on 127.0.0.1
    db = tmp_path / "service.duckdb"
    live = start_server(db, "Acme", "--plan", "enterprise")
    port = free_port()  # the receiver is down until the restart: every delivery is refused and stays pending
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        world = rewarding_world(http)
        hook = ok(http.post("/webhooks", json={"url": f"http://127.0.0.1:{port}/h", "events": ["reward.issued"]}))

    accepted, unknown, latencies = _burst(live, threading.Event())
    assert len(accepted) >= KILL_AFTER_ACCEPTED
    left = _state_after_kill(db)

    receiver = Receiver(port=port)
    restarted = serve_again(live)
    restarted_at = time.monotonic()
    try:
        with httpx.Client(base_url=restarted.base_url, headers=restarted.headers(), timeout=10) as http:

            def drained() -> dict[str, Any] | None:
                health: dict[str, Any] = ok(httpx.get(f"{restarted.base_url}/health", timeout=10))
                queues = ("event_queue_depth", "outbox_undispatched", "pending_deliveries")
                return health if all(health[name] == 0 for name in queues) else None

            wait_until(drained, timeout_s=60, interval_s=0.2)
            drain_s = time.monotonic() - restarted_at
            events = {e["external_event_id"]: e for e in _all(http, "/events")}
            executions = _all(http, "/reward-executions")
            balances = ok(http.get(f"/wallets/{world['wallet_id']}/balances"))["balances"]
            deliveries = _all(http, f"/webhooks/{hook['id']}/deliveries")
    finally:
        receiver.close()
        assert restarted.stop() in (0, -signal.SIGTERM)

    # accepted = processed, exactly once, as the rule says
    assert set(accepted) <= set(events)
    assert all(event["status"] == "processed" for event in events.values()), Counter(
        e["status"] for e in events.values()
    )
    assert set(events) <= set(accepted) | unknown  # nothing appeared that was never sent
    per_event = Counter(execution["event_id"] for execution in executions)
    assert set(per_event.values()) == {1} and len(per_event) == len(events)
    for execution in executions:
        assert execution["status"] == "issued"
        sent = accepted.get(execution["external_event_id"])
        if sent is not None:
            assert Decimal(execution["amount"]) == _reward(sent)
    total = sum((Decimal(execution["amount"]) for execution in executions), Decimal(0))
    assert [(b["asset_id"], Decimal(b["balance"])) for b in balances] == [(world["asset_id"], total)]

    # every reward.issued reached the receiver at least once, signed; duplicates share the delivery id
    got = receiver.snapshot()
    assert all(verify(d.raw, d.headers[SIGNATURE_HEADER], hook["signing_secret"]) for d in got)
    unique = {d.body["id"]: d.body for d in got}
    assert {body["data"]["execution_id"] for body in unique.values()} == {e["id"] for e in executions}
    assert len(deliveries) == len(executions) and all(d["status"] == "succeeded" for d in deliveries)

    # the ledger still nets to zero and every snapshot balance equals its recomputation
    verified = subprocess.run(cli("verify", "--db", str(db)), capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["ok"] is True
    latencies.sort()
    with capsys.disabled():
        print(
            f"\ncrash test: {len(accepted)} accepted, {len(unknown)} unknown at the kill, {len(events)} stored; "
            f"left by the kill: {left}; receiver got {len(got)} requests for {len(unique)} deliveries; "
            f"POST /events with {THREADS} threads, receiver down: p50 {latencies[len(latencies) // 2] * 1000:.0f} ms, "
            f"p95 {latencies[int(len(latencies) * 0.95)] * 1000:.0f} ms; drained {drain_s:.1f} s after restart"
        )
