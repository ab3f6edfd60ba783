"""The pieces under login, in process: password hashes, the failed-login guard's backoff, the request-log queue,
and bootstrap refusing a bad owner account before it creates anything."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.security.login_guard import Backoff, LoginGuard
from rewards_lab.security.passwords import hash_password, verify_password
from rewards_lab.service.request_log import LogRecord
from rewards_lab.store.database import Database
from rewards_lab.worker import request_log_writer
from rewards_lab.worker.request_log_writer import RequestLogWriter
from tests.live_server import cli


def test_password_hashes_are_salted_self_describing_and_verify_only_the_password() -> None:
    first, second = hash_password("pass phrase one"), hash_password("pass phrase one")
    assert first != second and first.startswith("scrypt$14$8$5$")
    assert verify_password("pass phrase one", first) and verify_password("pass phrase one", second)
    assert not verify_password("pass phrase two", first)
    assert not verify_password("pass phrase one", "scrypt$14$8$5$not-base64")
    assert not verify_password("pass phrase one", "bcrypt$whatever")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _refused_for(guard: LoginGuard, email: str, address: str) -> int:
    with pytest.raises(ServiceError) as refused:
        guard.admit(email, address)
    assert refused.value.code == "rate_limit_exceeded"
    retry_after_s: int = refused.value.details["retry_after_s"]
    return retry_after_s


def test_the_guard_backs_off_exponentially_per_account_and_address_and_never_locks_out() -> None:
    clock = _Clock()
    guard = LoginGuard(
        per_account_address=Backoff(2, 8.0), per_address=Backoff(5, 100.0), per_account=Backoff(4, 3.0), clock=clock
    )
    for _ in range(2):
        guard.admit("a@x.test", "10.0.0.1")  # two free failures (each counted from its admission)
    assert _refused_for(guard, "a@x.test", "10.0.0.1") == 1
    guard.admit("a@x.test", "10.0.0.2")  # the owner's own address is not held up
    guard.admit("b@x.test", "10.0.0.1")  # nor another account from the same address
    clock.now += 1.0
    guard.admit("a@x.test", "10.0.0.1")  # the wait is over: checked again (and failed again)
    assert _refused_for(guard, "a@x.test", "10.0.0.1") == 2  # doubled
    clock.now += 2.0
    guard.admit("a@x.test", "10.0.0.1")
    # Five failures at the account from all addresses: its own backoff holds every address now, for 2 s.
    assert _refused_for(guard, "a@x.test", "10.0.0.3") == 2
    clock.now += 2.0
    guard.admit("a@x.test", "10.0.0.3")
    guard.succeeded("a@x.test", "10.0.0.3")  # the right password clears the account's counts...
    guard.admit("a@x.test", "10.0.0.4")
    assert _refused_for(guard, "a@x.test", "10.0.0.1") >= 1  # ...not those of the guessing address
    clock.now += 8.0
    guard.admit("a@x.test", "10.0.0.1")  # capped at 8 s: never locked for good
    guard.not_a_guess("a@x.test", "10.0.0.1")


def test_a_failures_wait_runs_from_its_answer_not_from_its_admission() -> None:
    clock = _Clock()
    guard = LoginGuard(per_account_address=Backoff(1, 60.0), clock=clock)
    guard.admit("slow@x.test", "10.0.0.1")
    clock.now += 5.0  # checking the password took long (a busy host)
    guard.failed("slow@x.test", "10.0.0.1")
    clock.now += 0.5
    assert _refused_for(guard, "slow@x.test", "10.0.0.1") == 1


def test_a_flood_of_new_keys_never_resets_a_backoff_and_memory_stays_bounded() -> None:
    clock = _Clock()
    guard = LoginGuard(per_account_address=Backoff(1, 60.0), max_tracked=50, forget_after_s=100.0, clock=clock)
    guard.admit("owner@x.test", "10.0.0.1")
    assert _refused_for(guard, "owner@x.test", "10.0.0.1") == 1
    for number in range(500):  # new emails from new addresses: far more keys than the guard holds
        try:
            guard.admit(f"u{number}@x.test", f"10.1.{number // 250}.{number % 250}")
        except ServiceError:
            pass  # (none is refused now: newcomers evict free keys, never a shared record)
    assert guard.tracked() <= 50
    assert _refused_for(guard, "owner@x.test", "10.0.0.1") == 1  # still held: not cleared by the flood
    clock.now += 101.0
    guard.admit("owner@x.test", "10.0.0.1")  # forgotten after its quiet time, room again for everyone
    assert guard.tracked() <= 3


def test_the_request_log_queue_drops_the_oldest_when_full_and_writes_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(request_log_writer, "MAX_BUFFERED", 3)
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
