"""Issue 14 item 14: readiness (`GET /v1/health/ready`) beside liveness: a test write, free disk space of the
database's filesystem against a threshold the operator sets, and worker liveness; 200 when ready, 503 naming the
failing checks when not. No credentials, no tenant data."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import httpx

from rewards_lab.api.rate_limits import HEALTH_LIMIT_PER_MINUTE, WINDOW_S
from rewards_lab.service.health import readiness
from rewards_lab.store.database import Database
from tests.live_server import start_server


def test_ready_with_a_test_write_disk_space_and_live_workers(tmp_path: Path) -> None:
    db = tmp_path / "ready.duckdb"
    live = start_server(db, "Ready")
    try:
        response = httpx.get(f"{live.base_url}/health/ready", timeout=10)  # no credentials
        assert response.status_code == 200, response.text
        body = response.json()
        assert response.headers["x-request-id"] == body["meta"]["request_id"] and "ratelimit-limit" in response.headers
        ready = body["data"]
        assert ready["status"] == "ready" and ready["failing"] == []
        assert ready["database_write"] == {"ok": True, "reason": None}
        assert ready["disk"]["ok"] is True and ready["disk"]["free_bytes"] > ready["disk"]["min_free_bytes"] > 0
        assert ready["workers"]["ok"] is True and set(ready["workers"]["workers"]) == {"events", "deliveries"}
        assert live.organization_id not in response.text and str(db) not in response.text
        # Liveness stays as it was.
        assert httpx.get(f"{live.base_url}/health", timeout=10).json()["data"]["status"] == "ok"
    finally:
        live.stop()
    with duckdb.connect(str(db), read_only=True) as con:  # the test write really reached the file
        assert con.execute("SELECT count(*) FROM health_probe").fetchone() == (1,)


def test_not_ready_when_free_disk_space_is_under_the_operators_threshold(tmp_path: Path) -> None:
    live = start_server(tmp_path / "full.duckdb", "Full", serve_args=("--min-free-disk-mb", "1000000000"))
    try:
        response = httpx.get(f"{live.base_url}/health/ready", timeout=10)
        assert response.status_code == 503, response.text
        ready = response.json()["data"]
        assert ready["status"] == "not_ready" and ready["failing"] == ["disk"]
        assert ready["disk"]["ok"] is False and ready["disk"]["min_free_bytes"] == 1_000_000_000 * 1_048_576
        assert ready["database_write"]["ok"] is True
        assert response.headers["retry-after"]  # for the load balancer: when to look again
        assert httpx.get(f"{live.base_url}/health", timeout=10).status_code == 200  # alive, just not ready
    finally:
        live.stop()


def test_a_database_that_refuses_writes_is_not_ready_and_says_so_without_raw_error_text(tmp_path: Path) -> None:
    database = Database(tmp_path / "closed.duckdb")
    assert readiness(database, {}, min_free_disk_bytes=1).status == "ready"
    database.close()
    report = readiness(database, {"events": (False, None)}, min_free_disk_bytes=1)
    assert report.status == "not_ready" and report.failing == ["database_write", "workers"]
    assert report.database_write.reason == "the database refused a test write"


def test_probes_have_their_own_budget_and_only_readiness_is_refused_over_it(tmp_path: Path) -> None:
    live = start_server(tmp_path / "probes.duckdb", "Probes", serve_args=("--unauthenticated-limit-per-minute", "2"))
    try:
        left_s = WINDOW_S - time.time() % WINDOW_S
        if left_s < 20:  # no window ends while the budget is spent (bounded: one short sleep)
            time.sleep(left_s + 0.2)
        with httpx.Client(base_url=live.base_url, timeout=10) as http:
            statuses = [http.get("/health/ready").status_code for _ in range(HEALTH_LIMIT_PER_MINUTE + 1)]
            assert statuses.count(200) == HEALTH_LIMIT_PER_MINUTE and statuses[-1] == 429
            assert http.get("/health").status_code == 200  # liveness only reads: never refused
            # Probes did not spend the address's budget for requests without credentials (2 here).
            assert http.get("/customers").status_code == 401
    finally:
        live.stop()
