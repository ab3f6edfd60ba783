"""What the processes serving one PostgreSQL database share (issue 32, increment 8), with two `PostgresStore`s on
one database standing for two processes (each its own pool and connections, as a process has): rate counters, the
login guard's failures, Idempotency-Keys in progress. A DuckDB store shares nothing (`shared_state()` is None) and
keeps its in-process limiter and guard."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from pydantic import BaseModel

from rewards_lab.api.rate_limits import WINDOW_S, RateLimiter, SharedRateLimiter, limiter_for
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.security.login_guard import Backoff, LoginGuard, SharedLoginGuard, guard_for
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import DuckDBStore
from rewards_lab.store.postgres.store import PostgresStore
from rewards_lab.store.shared_state import LoginRecords, SharedState, SharedStateUnavailable
from tests.pg_cluster import PG_SECRET_KEY

SCOPE = Scope("org_shared", "sandbox")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def two_stores(pg_store_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    first = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    second = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_a_duckdb_store_shares_nothing_and_keeps_the_in_process_limiter_and_guard(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "one.duckdb") as store:
        assert store.shared_state() is None
        assert type(limiter_for(store.shared_state(), unauthenticated_limit_per_minute=7)) is RateLimiter
        assert type(guard_for(store.shared_state())) is LoginGuard


def test_a_limit_of_n_a_minute_allows_n_across_both_processes_then_refuses_in_both(
    two_stores: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    clock = Clock(1_000 * WINDOW_S + 10.2)
    limiters = [SharedRateLimiter(store.shared_state(), clock=clock) for store in two_stores]
    states = [limiters[i % 2].charge("org_a/sandbox", 5) for i in range(5)]
    assert [s.remaining for s in states] == [4, 3, 2, 1, 0] and not any(s.exceeded for s in states)
    assert states[0].headers() == {"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "50"}
    assert limiters[1].peek("org_a/sandbox", 5).exceeded  # its budget is spent: the next one is over
    for limiter in limiters:
        refused = limiter.charge("org_a/sandbox", 5)
        assert refused.exceeded and refused.remaining == 0 and refused.reset_s == 50
    assert not limiters[0].charge("org_b/sandbox", 5).exceeded  # another tenant's bucket
    # each process saw the bucket spent (the first by its 5th charge, the second by its peek): the refusals made
    # no round trip, and the counter stays at the budget
    assert _rows(pg_store_url, "SELECT bucket, count FROM rate_counters ORDER BY bucket") == [
        ("org_a/sandbox", 5),
        ("org_b/sandbox", 1),
    ]

    clock.now += WINDOW_S  # the next window: fresh budgets, the old window's rows deleted by its first charge
    assert limiters[1].charge("org_a/sandbox", 5).remaining == 4
    assert not limiters[0].charge("org_a/sandbox", 5).exceeded
    assert _rows(pg_store_url, "SELECT bucket, window_start, count FROM rate_counters") == [
        ("org_a/sandbox", 1_001 * WINDOW_S, 2)
    ]


def test_addresses_are_counted_per_network_and_the_operator_s_budget_across_processes(
    two_stores: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    clock = Clock(500 * WINDOW_S)
    limiters = [
        SharedRateLimiter(store.shared_state(), clock=clock, unauthenticated_limit_per_minute=3) for store in two_stores
    ]
    limiters[0].charge("address/2001:db8:1:2::1", 100)  # the caller's 100 is replaced by the operator's 3
    limiters[1].charge("address/2001:db8:1:2::99", 100)  # the same /64
    assert not limiters[1].peek("address/2001:db8:1:2::5", 100).exceeded
    limiters[0].charge("address/2001:db8:1:2:ffff::1", 100)
    spent = limiters[1].peek("address/2001:db8:1:2::7", 100)
    assert spent.exceeded and spent.limit == 3 and spent.remaining == 0
    assert not limiters[0].peek("address/2001:db8:1:3::1", 100).exceeded  # another network
    # the health probes' budget stays in each process (liveness never waits on the database)
    assert [limiters[0].charge("health/192.0.2.1", 2).exceeded for _ in range(3)] == [False, False, True]
    assert not limiters[1].charge("health/192.0.2.1", 2).exceeded
    assert [bucket for (bucket,) in _rows(pg_store_url, "SELECT bucket FROM rate_counters")] == [
        "address/2001:db8:1:2::/64"
    ]


class _Down:
    """A database that does not answer."""

    def count_request(self, bucket: str, window_start: int) -> int:
        raise SharedStateUnavailable("down")

    request_count = count_request

    def forget_windows_before(self, window_start: int) -> None:
        raise SharedStateUnavailable("down")


def test_without_the_database_a_process_counts_on_its_own() -> None:
    limiter = SharedRateLimiter(_Down(), clock=Clock(60.0))  # type: ignore[arg-type]
    assert [limiter.charge("org/sandbox", 2).exceeded for _ in range(3)] == [False, False, True]
    assert limiter.peek("org/sandbox", 2).exceeded


def test_failed_logins_through_both_processes_share_one_backoff(
    two_stores: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    clock = Clock(1_700_000_000.0)
    guards = [SharedLoginGuard(store.shared_state(), clock=clock) for store in two_stores]
    for attempt in range(5):  # the pair's free failures, spread over both processes
        guards[attempt % 2].admit("ann@example.com", "192.0.2.7")
        guards[attempt % 2].failed("ann@example.com", "192.0.2.7")
    for guard in guards:
        with pytest.raises(ServiceError) as refused:
            guard.admit("ann@example.com", "192.0.2.7")
        assert refused.value.code == "rate_limit_exceeded" and refused.value.details["retry_after_s"] == 1
    guards[0].admit("ann@example.com", "198.51.100.1")  # the owner's own address has its own count
    guards[0].succeeded("ann@example.com", "198.51.100.1")  # ...and the right password clears the account's
    clock.now += 1.0  # the wait is over: checked again; a right password clears the pair too
    guards[1].admit("ann@example.com", "192.0.2.7")
    guards[1].succeeded("ann@example.com", "192.0.2.7")
    assert _rows(pg_store_url, "SELECT key, failures FROM login_failures ORDER BY key") == [
        ("address/192.0.2.7", 5)  # the address keeps its own failures, less the attempts given back
    ]
    guards[0].admit("bob@example.com", "192.0.2.8")
    guards[1].not_a_guess("bob@example.com", "192.0.2.8")  # given back in the other process
    assert len(_rows(pg_store_url, "SELECT key FROM login_failures")) == 1

    clock.now += 2 * 3600  # forgotten an hour after the last failure, by the next admission
    guards[0].admit("carl@example.com", "192.0.2.9")
    assert {key for (key,) in _rows(pg_store_url, "SELECT key FROM login_failures")} == {
        "pair/carl@example.com/192.0.2.9",
        "address/192.0.2.9",
        "account/carl@example.com",
    }


class _SlowRecords:
    """A process slow between reading a record and writing it back (a busy host): the race a lock must close."""

    def __init__(self, records: LoginRecords) -> None:
        self._records = records

    def get(self, key: str) -> tuple[int, float] | None:
        found = self._records.get(key)
        time.sleep(0.01)
        return found

    def put(self, key: str, failures: int, last_failure_at: float) -> None:
        self._records.put(key, failures, last_failure_at)

    def drop(self, key: str) -> None:
        self._records.drop(key)


class _Slow:
    def __init__(self, shared: SharedState) -> None:
        self._shared = shared

    @contextmanager
    def login_records(self, keys: Sequence[str]) -> Iterator[_SlowRecords]:
        with self._shared.login_records(keys) as records:
            yield _SlowRecords(records)

    def forget_login_failures_before(self, at: float) -> None:
        self._shared.forget_login_failures_before(at)


def test_concurrent_guesses_in_two_processes_get_exactly_the_free_failures(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    clock = Clock(1_700_000_000.0)
    guards = [
        SharedLoginGuard(_Slow(store.shared_state()), clock=clock, per_account_address=Backoff(4, 60.0))  # type: ignore[arg-type]
        for store in two_stores
    ]

    def attempt(i: int) -> bool:
        try:
            guards[i % 2].admit("dee@example.com", "203.0.113.4")
        except ServiceError:
            return False
        return True

    with ThreadPoolExecutor(max_workers=8) as pool:
        admitted = list(pool.map(attempt, range(16)))
    assert sum(admitted) == 4  # each admission is counted before the next one is checked, whichever process


class Answer(BaseModel):
    value: int


def test_an_idempotency_key_in_progress_in_one_process_is_refused_at_once_in_the_other_then_replayed(
    two_stores: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two_stores
    inside, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def slow_write(uow: object) -> Answer:
        runs.append(1)
        inside.set()
        assert release.wait(10)
        return Answer(value=7)

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(run_write, first, SCOPE, "op", {"a": 1}, slow_write, Answer, idempotency_key="k-1")
        assert inside.wait(10)
        with pytest.raises(ServiceError) as refused:  # not a wait for the first's row: answered at once
            run_write(second, SCOPE, "op", {"a": 1}, slow_write, Answer, idempotency_key="k-1")
        assert (refused.value.code, refused.value.http_status) == ("idempotency_request_in_progress", 409)
        other = run_write(second, SCOPE, "op", {"a": 1}, lambda uow: Answer(value=8), Answer, idempotency_key="k-2")
        assert other == Answer(value=8)  # another key is not held up
        release.set()
        assert pending.result(10) == Answer(value=7)
    replay = run_write(second, SCOPE, "op", {"a": 1}, slow_write, Answer, idempotency_key="k-1")
    assert replay == Answer(value=7) and len(runs) == 1
    assert _rows(pg_store_url, "SELECT key FROM idempotency_keys ORDER BY key") == [("k-1",), ("k-2",)]


def test_a_key_is_held_per_scope_until_its_unit_of_work_ends_however_it_ends(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = two_stores
    with pytest.raises(RuntimeError), first.unit_of_work() as uow:
        assert uow.idempotency.hold(SCOPE, "k-9")
        with second.unit_of_work() as other:
            assert not other.idempotency.hold(SCOPE, "k-9")  # held by the first unit, in "another process"
            assert other.idempotency.hold(SCOPE, "k-10")
            assert other.idempotency.hold(Scope(SCOPE.organization_id, "production"), "k-9")
        raise RuntimeError("the write failed")  # rolled back: the key is released with it
    with second.unit_of_work() as uow:
        assert uow.idempotency.hold(SCOPE, "k-9")
