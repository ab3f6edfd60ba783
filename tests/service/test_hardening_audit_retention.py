"""Issue 14, item 13: every growing table has a retention window and a job that applies it. Old rows go, recent
ones stay, pending webhook deliveries are never deleted, and an Idempotency-Key past its window is new again."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import customers, organizations
from rewards_lab.service.retention import RetentionSettings, run_once
from rewards_lab.store import idempotency
from rewards_lab.store.database import Database, utcnow
from tests.live_server import cli

NOW = datetime(2026, 6, 1, 12, 0, 0)
OLD = NOW - timedelta(days=400)
RECENT = NOW - timedelta(hours=1)


def _seed(con: object, stamp: datetime, tag: str, *, pending: bool = False) -> None:
    """One row of each growing table, made at `stamp`."""
    execute = con.execute  # type: ignore[attr-defined]
    execute(
        "INSERT INTO request_log (id, organization_id, environment, request_id, method, path, status, duration_ms, "
        "created_at) VALUES (?, 'org_a', 'sandbox', ?, 'GET', '/v1/x', 200, 1.0, ?)",
        [f"log_{tag}", tag, stamp],
    )
    execute(
        "INSERT INTO idempotency_keys VALUES ('org_a', 'sandbox', ?, 'op', 'hash', '{}', 200, ?)", [f"key-{tag}", stamp]
    )
    execute(
        "INSERT INTO auth_audit (id, organization_id, kind, outcome, created_at) VALUES (?, 'org_a', 'login', "
        "'succeeded', ?)",
        [f"aud_{tag}", stamp],
    )
    execute(
        "INSERT INTO sessions (id, account_id, organization_id, token_hash, created_at, expires_at) "
        "VALUES (?, 'usr_a', 'org_a', ?, ?, ?)",
        [f"ses_{tag}", f"hash-{tag}", stamp, stamp + timedelta(hours=12)],
    )
    execute(
        "INSERT INTO outbox (id, organization_id, environment, kind, resource_id, payload, created_at, dispatched_at) "
        "VALUES (?, 'org_a', 'sandbox', 'reward.issued', 'rex_1', '{}', ?, ?)",
        [f"obx_{tag}", stamp, stamp],
    )
    execute(
        "INSERT INTO webhook_deliveries (id, organization_id, environment, endpoint_id, outbox_id, kind, body, status, "
        "attempt_count, round_attempts, next_attempt_at, created_at, completed_at) "
        "VALUES (?, 'org_a', 'sandbox', 'whk_1', ?, 'reward.issued', '{}', ?, 1, 1, ?, ?, ?)",
        [f"dlv_{tag}", f"obx_{tag}", "pending" if pending else "succeeded", stamp, stamp, None if pending else stamp],
    )
    execute(
        "INSERT INTO webhook_attempts (delivery_id, number, organization_id, environment, attempted_at, duration_ms, "
        "status_code, succeeded) VALUES (?, 1, 'org_a', 'sandbox', ?, 5, 200, true)",
        [f"dlv_{tag}", stamp],
    )
    execute(  # a day older: OLD is exactly the contributions' 400 days before NOW
        "INSERT INTO tier_contributions VALUES ('org_a', 'sandbox', 'prg_1', 'metric', ?, 'cus_1', ?, 5, ?)",
        [f"exe_{tag}", (stamp - timedelta(days=1)).date(), stamp - timedelta(days=1)],
    )


def _ids(database: Database, table: str, column: str = "id") -> set[str]:
    return {row[0] for row in database.reader().execute(f"SELECT {column} FROM {table}").fetchall()}


def test_old_rows_go_and_recent_ones_stay_in_every_table(tmp_path: Path) -> None:
    with Database(tmp_path / "retention.duckdb") as database:
        with database.transaction() as con:
            for number in range(5):  # more than one chunk of 2
                _seed(con, OLD - timedelta(minutes=number), f"old{number}")
            _seed(con, RECENT, "recent")
            _seed(con, OLD, "stuck", pending=True)  # a delivery still being retried: kept however old
        report = run_once(database, RetentionSettings(), now=NOW, limit=2)
        assert report.deleted == {
            "request_log": 6,  # the stuck one's request-log row is old too
            "idempotency_keys": 6,
            "auth_audit": 6,
            "sessions": 6,
            "outbox": 6,
            "tier_contributions": 6,
            "webhook_deliveries": 5,
            "webhook_attempts": 5,
        }
        assert _ids(database, "request_log") == {"log_recent"}
        assert _ids(database, "idempotency_keys", "key") == {"key-recent"}
        assert _ids(database, "auth_audit") == {"aud_recent"}
        assert _ids(database, "sessions") == {"ses_recent"}
        assert _ids(database, "outbox") == {"obx_recent"}
        assert _ids(database, "tier_contributions", "source_id") == {"exe_recent"}  # the sums stay in tier_days
        assert _ids(database, "webhook_deliveries") == {"dlv_recent", "dlv_stuck"}
        assert _ids(database, "webhook_attempts", "delivery_id") == {"dlv_recent", "dlv_stuck"}
        again = run_once(database, RetentionSettings(), now=NOW)
        assert set(again.deleted.values()) == {0}


def test_each_window_is_a_setting_and_zero_keeps_forever(tmp_path: Path) -> None:
    settings = RetentionSettings.from_env({"REWARDS_LAB_RETENTION_REQUEST_LOG_DAYS": "0"})
    assert settings.request_log is None and settings.idempotency_keys == timedelta(hours=168)
    assert settings.auth_audit == timedelta(days=365) and settings.webhooks == timedelta(days=30)
    with Database(tmp_path / "forever.duckdb") as database:
        with database.transaction() as con:
            _seed(con, OLD, "old")
        report = run_once(database, settings, now=NOW)
        assert report.deleted["request_log"] == 0 and _ids(database, "request_log") == {"log_old"}
        assert report.deleted["auth_audit"] == 1
    for bad in ({"REWARDS_LAB_RETENTION_AUTH_AUDIT_DAYS": "a year"}, {"REWARDS_LAB_RETENTION_WEBHOOK_DAYS": "-1"}):
        with pytest.raises(ValueError, match="REWARDS_LAB_RETENTION_"):
            RetentionSettings.from_env(bad)


def test_an_idempotency_key_past_its_window_is_treated_as_new(tmp_path: Path) -> None:
    with Database(tmp_path / "keys.duckdb") as database:
        org = organizations.create_organization(database, "Keys")
        scope = Scope(org.id, "sandbox")
        first = customers.create_customer(
            database, scope, validate(rq.CustomerCreate, {"external_id": "k-1"}), idempotency_key="same-key"
        )
        again = customers.create_customer(
            database, scope, validate(rq.CustomerCreate, {"external_id": "k-1"}), idempotency_key="same-key"
        )
        assert again.id == first.id  # inside the window: the original answer
        with pytest.raises(ServiceError) as reused:
            customers.create_customer(
                database, scope, validate(rq.CustomerCreate, {"external_id": "k-2"}), idempotency_key="same-key"
            )
        assert reused.value.code == "idempotency_key_reused"
        with database.transaction() as con:  # the key ages past the window; the job has not run yet
            con.execute("UPDATE idempotency_keys SET created_at = ?", [utcnow() - timedelta(hours=169)])
        fresh = customers.create_customer(
            database, scope, validate(rq.CustomerCreate, {"external_id": "k-2"}), idempotency_key="same-key"
        )
        assert fresh.id != first.id and fresh.external_id == "k-2"  # a new write, not `idempotency_key_reused`
        rows = database.reader().execute("SELECT count(*), max(created_at) FROM idempotency_keys").fetchone()
        assert rows is not None and rows[0] == 1 and rows[1] > utcnow() - timedelta(minutes=5)
        try:
            idempotency.set_retention(None)  # 0 in the setting: keys never expire
            with database.transaction() as con:
                con.execute("UPDATE idempotency_keys SET created_at = ?", [utcnow() - timedelta(days=3650)])
            kept = customers.create_customer(
                database, scope, validate(rq.CustomerCreate, {"external_id": "k-2"}), idempotency_key="same-key"
            )
            assert kept.id == fresh.id
        finally:
            idempotency.set_retention(idempotency.DEFAULT_RETENTION)


def test_the_retention_command_runs_once(tmp_path: Path) -> None:
    db = tmp_path / "cli.duckdb"
    with Database(db) as database, database.transaction() as con:
        _seed(con, utcnow() - timedelta(days=400), "old")
        _seed(con, utcnow(), "recent")
    result = subprocess.run(cli("retention", "--db", str(db)), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["deleted"]["request_log"] == 1
    refused = subprocess.run(
        cli("retention", "--db", str(db)),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REWARDS_LAB_RETENTION_SESSIONS_DAYS": "soon"},
    )
    assert refused.returncode == 2 and "REWARDS_LAB_RETENTION_SESSIONS_DAYS" in refused.stderr
