"""`rewards-lab serve --db postgresql://...` as a real process on 127.0.0.1 against the throwaway cluster (issue 32,
increments 6 and 9): the seed's loop over HTTP with one process, readiness checking the database, then `verify`
clean; `--workers 2`: both children answer, a SIGKILLed child is restarted while the service keeps answering, and
SIGTERM stops them all."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pyarrow.parquet as pq
import pytest

from rewards_lab.store.postgres.store import PARTITIONS_ENV
from rewards_lab.store.secret_box import KEY_ENV
from tests.live_server import LiveServer, cli, start_server
from tests.pg_cluster import PG_SECRET_KEY


@pytest.fixture
def pg_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database's key, inherited by `bootstrap`, `serve` and `verify` (no key file beside a server's data)."""
    monkeypatch.setenv(KEY_ENV, base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii"))


def _ok(response: httpx.Response, status: int) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == status, body
    data: dict[str, Any] = body["data"]
    return data


def _verify(url: str) -> dict[str, Any]:
    verified = subprocess.run(cli("verify", "--db", url), capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stderr
    report: dict[str, Any] = json.loads(verified.stdout)
    return report


@pytest.fixture
def one_process(pg_store_url: str, pg_env: None, tmp_path: Path) -> Iterator[LiveServer]:
    live = start_server(pg_store_url, log_path=tmp_path / "serve.log")
    try:
        yield live
    finally:
        if live.process.poll() is None:
            live.stop()


def test_the_seed_loop_runs_on_a_postgresql_backed_service_and_the_ledger_verifies(
    one_process: LiveServer, pg_store_url: str
) -> None:
    live = one_process
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        ready = http.get("/health/ready")
        assert ready.status_code == 200, ready.text
        checks = ready.json()["data"]
        assert checks["database_write"]["ok"] is True
        assert checks["disk"] == {"ok": True, "reason": None, "free_bytes": None, "min_free_bytes": 256 * 1_048_576}
        customer = _ok(http.post("/customers", json={"external_id": "user-42", "country": "GB"}), 201)
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
        asset = _ok(
            http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}), 201
        )
        assert _ok(http.post(f"/assets/{asset['id']}/activate"), 200)["status"] == "active"
        programme = _ok(http.post("/reward-programs", json={"name": "Spring", "asset_id": asset["id"]}), 201)
        rule = {
            "program_id": programme["id"],
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.05}}],
        }
        _ok(http.post("/reward-rules", json=rule), 201)
        assert _ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)["version"]["number"] == 1
        event_body = (
            '{"type": "order.completed", "external_event_id": "order-1", "customer_id": "user-42", '
            '"data": {"amount": 42.50}}'
        )
        event = _ok(http.post("/events", content=event_body), 202)
        deadline = time.monotonic() + 20
        while _ok(http.get(f"/events/{event['id']}"), 200)["status"] != "processed":
            assert time.monotonic() < deadline, "the event was never processed"
            time.sleep(0.05)
        balances = _ok(http.get(f"/wallets/{wallet['id']}/balances"), 200)["balances"]
        assert [(b["asset_id"], b["balance"]) for b in balances] == [(asset["id"], "2.12")]
        # an idempotent retry answers the first answer and writes once
        issue = {"wallet_id": wallet["id"], "amount": "5", "reason": "welcome"}
        first = _ok(http.post(f"/assets/{asset['id']}/issue", json=issue, headers={"Idempotency-Key": "g-1"}), 201)
        again = _ok(http.post(f"/assets/{asset['id']}/issue", json=issue, headers={"Idempotency-Key": "g-1"}), 201)
        assert again == first
        refused = http.post(
            f"/assets/{asset['id']}/issue", json={**issue, "amount": "6"}, headers={"Idempotency-Key": "g-1"}
        )
        assert (refused.status_code, refused.json()["error"]["code"]) == (409, "idempotency_key_reused")
        assert _ok(http.get(f"/wallets/{wallet['id']}/balances"), 200)["balances"][0]["balance"] == "7.12"
        page = http.get("/transactions", params={"wallet_id": wallet["id"]}).json()
        assert sorted(t["kind"] for t in page["data"]) == ["issue", "reward"], page
        for transaction in page["data"]:
            entries = transaction["entries"]
            assert sum(Decimal(e["amount"]) for e in entries) == 0, entries  # double entry
            assert {e["account_id"] for e in entries} >= {wallet["id"]}
        missing = http.get("/customers/cus_missing")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "customer_not_found"
        assert set(missing.json()) == {"error", "meta"}
    with psycopg.connect(pg_store_url) as conn:  # the service wrote to that database
        assert conn.execute("SELECT status FROM events").fetchall() == [("processed",)]
    assert live.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
    report = _verify(pg_store_url)
    assert report["ok"] is True and report["transactions"] >= 2 and report["problems"] == {}


def test_the_forecast_gate_reads_the_stored_events_from_postgresql(one_process: LiveServer, pg_store_url: str) -> None:
    """The programme forecast (issue 31) reads its window's events, redemptions and customers through the
    PostgreSQL snapshot into Arrow: a draft issuing 1000 per event breaks "at most 1 a day" on two stored events."""
    with httpx.Client(base_url=one_process.base_url, headers=one_process.headers(), timeout=60) as http:
        asset = _ok(http.post("/assets", json={"name": "GA", "symbol": "GA", "type": "points", "decimals": 2}), 201)
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        guards = [{"metric": "issued", "period": "day", "max": "1"}]
        body = {"name": "gated", "asset_id": asset["id"], "guards": guards}
        programme = _ok(http.post("/reward-programs", json=body), 201)
        rule = {
            "program_id": programme["id"],
            "event_type": "order.ga",
            "actions": [{"type": "issue", "amount": {"fixed": "1000"}}],
        }
        _ok(http.post("/reward-rules", json=rule), 201)
        for n in range(2):
            event = {"type": "order.ga", "external_event_id": f"GA-{n}", "customer_id": "GA-c"}
            assert http.post("/events", json=event).status_code == 202
        refused = http.post(f"/reward-programs/{programme['id']}/publish").json()["error"]
        assert refused["code"] == "forecast_guard_failed", refused
        (check,) = refused["details"]["checks"]
        assert (check["draft"], check["passed"], refused["details"]["events"]) == ("2000.00", False, 2)
        table = _ok(http.post(f"/reward-programs/{programme['id']}/forecast"), 200)
        assert table["checks"] == refused["details"]["checks"]


def test_the_event_export_pages_and_resumes_on_postgresql_with_executions_in_both_formats(
    one_process: LiveServer,
) -> None:
    with httpx.Client(base_url=one_process.base_url, headers=one_process.headers(), timeout=30) as http:
        asset = _ok(http.post("/assets", json={"name": "Ex", "symbol": "EX", "type": "points", "decimals": 2}), 201)
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        programme = _ok(http.post("/reward-programs", json={"name": "Ex", "asset_id": asset["id"]}), 201)
        rule = {
            "program_id": programme["id"],
            "event_type": "order.ex",
            "actions": [{"type": "issue", "amount": {"fixed": "1.5"}}],
        }
        _ok(http.post("/reward-rules", json=rule), 201)
        _ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
        ids = []
        for i in range(7):  # ids against time order: the export sorts by time, then id
            body = {
                "type": "order.ex",
                "external_event_id": f"ex-{7 - i}",
                "customer_id": "ex-customer",
                "occurred_at": f"2026-03-0{1 + i // 2}T10:00:00Z",
                "data": {"big": 12345678901234567890, "i": i},
            }
            ids.append(_ok(http.post("/events", json=body), 202)["id"])
        deadline = time.monotonic() + 30
        while any(_ok(http.get(f"/events/{event_id}"), 200)["status"] != "processed" for event_id in ids):
            assert time.monotonic() < deadline, "the events were never processed"
            time.sleep(0.1)
        window = {"since": "2026-03-01T00:00:00Z", "until": "2026-04-01T00:00:00Z", "include": "executions"}
        first = http.get("/events/export", params={**window, "limit": 4})
        assert first.status_code == 200, first.text
        assert (first.headers["x-export-rows"], first.headers["x-export-next-after"]) == ("4", "ex-5")
        rest = http.get("/events/export", params={**window, "limit": 4, "after": "ex-5"})
        assert rest.status_code == 200 and "x-export-next-after" not in rest.headers
        lines = [json.loads(line) for line in (first.content + rest.content).decode().splitlines()]
        expected = sorted((f"2026-03-0{1 + i // 2}T10:00:00Z", f"ex-{7 - i}") for i in range(7))
        assert [(line["occurred_at"], line["external_event_id"]) for line in lines] == expected
        assert '"big": 12345678901234567890' in first.content.decode() or '"big":12345678901234567890' in first.text
        for line in lines:
            (issued,) = line["executions"]
            # March's events are past the programme's default event age: recorded as limited, amount 0
            assert (issued["asset_id"], issued["program_id"], issued["version_number"]) == (
                asset["id"],
                programme["id"],
                1,
            )
            assert issued["status"] in ("issued", "limited") and issued["amount"] in ("1.50", "0.00"), issued
        parquet = http.get("/events/export", params={**window, "format": "parquet"})
        assert parquet.status_code == 200, parquet.text
        table = pq.read_table(io.BytesIO(parquet.content))
        assert table.column("external_event_id").to_pylist() == [e[1] for e in expected]
        assert [json.loads(x) for x in table.column("executions").to_pylist()] == [line["executions"] for line in lines]


# --- serve --workers 2 -------------------------------------------------------------------------------------------
def _children(parent: int) -> set[int]:
    """The uvicorn supervisor's worker processes (multiprocessing spawn children; not its resource tracker)."""
    found = set()
    for task in Path(f"/proc/{parent}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:
                found.add(int(pid))
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def _answering_pid(port: int, pids: set[int]) -> int | None:
    """The process that accepted one fresh connection and answered GET /v1/health on it: the one holding the
    accepted socket (found in /proc/net/tcp by the client's port), asked while the connection is still open."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = conn.recv(65536)
        assert head.startswith(b"HTTP/1.1 200"), head[:200]
        client_port = conn.getsockname()[1]
        inode = None
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client_port:
                inode = fields[9]
        return next((pid for pid in pids if inode in _socket_inodes(pid)), None)


def _all_answer(port: int, pids: set[int], seconds: float = 60) -> None:
    """Fresh connections until each of `pids` has accepted and answered one (a restarted child answers once it has
    started: the kernel hands connections only to processes that accept)."""
    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    while seen != pids:
        assert time.monotonic() < deadline, f"only {seen} of {pids} answered"
        pid = _answering_pid(port, pids)
        if pid is not None:
            seen.add(pid)
        time.sleep(0.1)  # at most 10 probes a second: under the health probes' 600 a minute per address


def _background_lock_holders(url: str) -> int:
    from rewards_lab.store.postgres.store import BACKGROUND_LOCK

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s AND objid = %s",
            [BACKGROUND_LOCK >> 32, BACKGROUND_LOCK & 0xFFFF_FFFF],
        ).fetchone()
    return int(row[0]) if row else 0


def _lease_shares(url: str) -> list[int]:
    """How many event partitions each process's event worker leases, smallest first."""
    from rewards_lab.store.postgres.leases import LEASE_CLASS

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s AND objsubid = 2 "
            "GROUP BY pid ORDER BY 1",
            [LEASE_CLASS],
        ).fetchall()
    return [int(row[0]) for row in rows]


def _wait(condition: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _events_processed(live: LiveServer, ids: list[str]) -> None:
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:

        def done() -> bool:
            return all(_ok(http.get(f"/events/{event_id}"), 200)["status"] == "processed" for event_id in ids)

        _wait(done, "the events were never processed")


def _post_events(live: LiveServer, prefix: str, count: int) -> list[str]:
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        return [
            _ok(
                http.post("/events", json={"type": "visit", "external_event_id": f"{prefix}-{i}", "customer_id": "c"}),
                202,
            )["id"]
            for i in range(count)
        ]


def test_two_workers_both_answer_a_killed_one_is_restarted_and_sigterm_stops_all(
    pg_store_url: str, pg_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PARTITIONS_ENV, "4")  # the event worker runs in both processes, on 2 partitions each
    live = start_server(pg_store_url, serve_args=("--workers", "2"), log_path=tmp_path / "serve.log")
    try:
        port = int(live.base_url.rsplit(":", 1)[1].split("/")[0])
        _wait(lambda: len(_children(live.process.pid)) == 2, "two worker processes")
        first = _children(live.process.pid)
        _all_answer(port, first)  # both children accept and answer
        _wait(lambda: _background_lock_holders(pg_store_url) == 1, "one process runs the single-process workers")
        _wait(lambda: _lease_shares(pg_store_url) == [2, 2], "both processes' event workers share the partitions")
        _events_processed(live, _post_events(live, "before", 10))  # whichever child took them in

        killed = min(first)
        os.kill(killed, signal.SIGKILL)
        with httpx.Client(base_url=live.base_url, timeout=10) as http:  # the survivor keeps answering meanwhile
            assert http.get("/health").status_code == 200
        _wait(lambda: len(_children(live.process.pid) - {killed}) == 2, "the killed child restarted")
        second = _children(live.process.pid)
        assert killed not in second and len(second & first) == 1
        _all_answer(port, second)
        _wait(lambda: _background_lock_holders(pg_store_url) == 1, "the background lock held again")
        _wait(lambda: _lease_shares(pg_store_url) == [2, 2], "the restarted process's worker has its share")
        _events_processed(live, _post_events(live, "after", 10))
    finally:
        children = _children(live.process.pid) if live.process.poll() is None else set()
        status = live.stop(signal.SIGTERM)
    assert status in (0, -signal.SIGTERM)
    for pid in children:  # every child stopped with the supervisor
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z", pid
    report = _verify(pg_store_url)
    assert report["ok"] is True and report["problems"] == {}
