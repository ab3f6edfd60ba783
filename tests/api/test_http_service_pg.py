"""`rewards-lab serve --db postgresql://...` as a real process on 127.0.0.1 against the throwaway cluster (issue 32,
increments 6 and 9): the seed's loop over HTTP with one process, readiness checking the database, then `verify`
clean; `--workers 2`: both children answer, a SIGKILLed child is restarted while the service keeps answering, and
SIGTERM stops them all."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

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
