"""The pieces under login, in process: password hashes, the failed-login guard's windows, the request-log queue,
and bootstrap refusing a bad owner account before it creates anything."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.service import request_log
from rewards_lab.service.login_guard import LoginGuard
from rewards_lab.service.passwords import hash_password, verify_password
from rewards_lab.service.request_log import LogRecord, RequestLogWriter
from rewards_lab.store.database import Database
from tests.live_server import cli


def test_password_hashes_are_salted_self_describing_and_verify_only_the_password() -> None:
    first, second = hash_password("pass phrase one"), hash_password("pass phrase one")
    assert first != second and first.startswith("scrypt$14$8$5$")
    assert verify_password("pass phrase one", first) and verify_password("pass phrase one", second)
    assert not verify_password("pass phrase two", first)
    assert not verify_password("pass phrase one", "scrypt$14$8$5$not-base64")
    assert not verify_password("pass phrase one", "bcrypt$whatever")


def test_the_guard_locks_an_email_after_its_failures_and_forgets_them_after_the_window() -> None:
    guard = LoginGuard(per_email=2, per_address=5, window_s=0.5)
    guard.check("a@x.test", "10.0.0.1")
    guard.failed("a@x.test", "10.0.0.1")
    guard.failed("a@x.test", "10.0.0.1")
    with pytest.raises(ServiceError) as locked:
        guard.check("a@x.test", "10.0.0.2")
    assert locked.value.code == "rate_limit_exceeded" and locked.value.details["retry_after_s"] >= 1
    guard.check("b@x.test", "10.0.0.2")  # another email from another address is not locked
    time.sleep(0.6)
    guard.check("a@x.test", "10.0.0.1")  # the window passed
    for email in ("c@x.test", "d@x.test", "e@x.test"):
        guard.failed(email, "10.0.0.9")
        guard.failed(email, "10.0.0.9")
        guard.succeeded(email)  # success clears the email's count, not the address's
    with pytest.raises(ServiceError):
        guard.check("f@x.test", "10.0.0.9")


def test_the_request_log_queue_drops_the_oldest_when_full_and_writes_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(request_log, "MAX_BUFFERED", 3)
    database = Database(":memory:")
    writer = RequestLogWriter(database)
    for number in range(5):
        writer.record(LogRecord("org_1", "sandbox", f"r{number}", "GET", "/v1/x", None, 200, 1.5, "key_1", time.time()))
    assert writer.dropped == 2 and writer.flush() == 3 and writer.flush() == 0
    rows = database.reader().execute("SELECT request_id FROM request_log ORDER BY id").fetchall()
    assert [row[0] for row in rows] == ["r2", "r3", "r4"]


def test_bootstrap_refuses_a_weak_owner_account_before_creating_anything(tmp_path: Path) -> None:
    db = tmp_path / "refused.duckdb"
    arguments = ("--email", "owner@acme.test", "--password", "short")
    result = subprocess.run(
        cli("bootstrap", "--db", str(db), "--org", "Acme", *arguments), capture_output=True, text=True
    )
    assert result.returncode != 0 and "at least 12 characters" in result.stderr and result.stdout == ""
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM organizations").fetchone() == (0,)
    result = subprocess.run(
        cli("bootstrap", "--db", str(db), "--org", "Acme", "--totp"), capture_output=True, text=True
    )
    assert result.returncode != 0 and "--totp needs --email" in result.stderr
