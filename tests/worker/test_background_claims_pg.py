"""The background work shared by several processes on one PostgreSQL database (issue 32, increment 7): deliveries
leased to one sender, the outbox fanned out once, each due lot expired once, retention run by one process at a
time. Two `PostgresStore`s on one throwaway database stand for two processes: each has its own pool and sessions,
which is all PostgreSQL's locks know of a process."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.validation import validate
from rewards_lab.engine.expiry import ExpiryReport, expire_due
from rewards_lab.service import deliveries, ledger
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import AttemptOutcome, DeliverySettings
from rewards_lab.service.retention import RetentionSettings, run_once
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueDelivery
from rewards_lab.store.postgres.store import PostgresStore
from rewards_lab.worker.deliveries import DeliveryWorker
from tests.conftest import World
from tests.pg_cluster import PG_SECRET_KEY
from tests.store.contract.support import world_of
from tests.webhook_receiver import Receiver, wait_until

T = TypeVar("T")
MESSAGES = 40
WALLETS = 10


@pytest.fixture
def two(pg_store_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database: two processes, as PostgreSQL sees them."""
    first = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    second = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    try:
        yield first, second
    finally:
        second.close()
        first.close()
        with PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY) as store:
            report = store.verify_ledger()
        assert report.ok, report.problems


def _together(*calls: Callable[[], T]) -> list[T]:
    """Run `calls` at once in threads (released by one barrier); their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], T]) -> None:
        barrier.wait()
        try:
            results[index] = call()
        except BaseException as error:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as con:
        return con.execute(sql).fetchall()


def _endpoint(world: World, url: str) -> str:
    body = validate(rq.WebhookCreate, {"url": url, "events": ["reward.issued"]})
    return hooks.create_webhook(world.db, world.scope, body, allow_private=True).id


def _claim(store: Store, owner: str, lease_s: float = 40.0) -> list[DueDelivery]:
    return deliveries.claim(store, 100, [], 100, per_tenant=100, exclude_endpoints=[], owner=owner, lease_s=lease_s)


class CountingWorker(DeliveryWorker):
    """A sender that counts what it attempts (to see that both senders took part)."""

    def __init__(self, database: Store, settings: DeliverySettings) -> None:
        super().__init__(database, settings)
        self.attempted: list[str] = []

    def _attempt(self, delivery: DueDelivery) -> None:
        self.attempted.append(delivery.id)
        super()._attempt(delivery)


def test_two_senders_fan_out_once_and_never_send_one_delivery_twice(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    world = world_of(first)
    receiver = Receiver()
    receiver.answer([0.02] * MESSAGES)  # slow enough that both senders have requests in flight at once
    try:
        endpoint = _endpoint(world, receiver.url)
        with first.unit_of_work() as uow:
            uow.outbox.add_many(world.scope, [(f"obx_{n:03}", "reward.issued", f"r{n}", "{}") for n in range(MESSAGES)])
        settings = DeliverySettings(allow_private_targets=True, per_endpoint=4)
        senders = [CountingWorker(first, settings), CountingWorker(second, settings)]
        for sender in senders:
            sender.start()
        try:
            received = receiver.wait_for(lambda got: len(got) >= MESSAGES, timeout_s=20)
            wait_until(lambda: first.reader_repositories().webhooks.pending_count() == 0)
        finally:
            for sender in senders:
                sender.stop()
    finally:
        receiver.close()
    ids = [r.headers["X-Rewards-Delivery"] for r in received]
    assert len(ids) == MESSAGES and len(set(ids)) == MESSAGES  # each sent once
    assert all(sender.attempted for sender in senders), [len(s.attempted) for s in senders]  # both took part
    assert not set(senders[0].attempted) & set(senders[1].attempted)
    rows = _rows(
        pg_store_url,
        f"SELECT outbox_id, status, attempt_count, lease_until, leased_by FROM webhook_deliveries "
        f"WHERE endpoint_id = '{endpoint}'",
    )
    assert sorted(r[0] for r in rows) == [f"obx_{n:03}" for n in range(MESSAGES)]  # one per message: fanned out once
    assert {r[1:] for r in rows} == {("succeeded", 1, None, None)}  # recorded once, the lease cleared
    assert _rows(pg_store_url, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL") == [(0,)]


def test_a_killed_senders_lease_passes_and_another_sender_retries_its_deliveries(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    world = world_of(first)
    _endpoint(world, "http://127.0.0.1:9/hooks")
    with first.unit_of_work() as uow:
        uow.outbox.add_many(world.scope, [(f"obx_{n}", "reward.issued", f"r{n}", "{}") for n in range(6)])
    assert deliveries.fan_out(second) == 6 and deliveries.fan_out(first) == 0
    held = _claim(first, "killed", lease_s=0.5)  # then the sender dies: nothing recorded, nothing released
    assert len(held) == 6
    leases = _rows(
        pg_store_url, "SELECT DISTINCT leased_by, lease_until > now() AT TIME ZONE 'UTC' FROM webhook_deliveries"
    )
    assert leases == [("killed", True)]
    assert _claim(second, "survivor") == []  # leased elsewhere: not due
    assert [d.id for d in deliveries.due(second, 100, [])] == []
    first.close()
    time.sleep(0.6)
    retried = _claim(second, "survivor")
    assert sorted(d.id for d in retried) == sorted(d.id for d in held)  # due again: at least once
    settings = DeliverySettings()
    for delivery in retried:
        deliveries.record_outcome(second, settings, delivery, AttemptOutcome(utcnow(), 5, 200, None))
    rows = _rows(pg_store_url, "SELECT status, attempt_count, lease_until, leased_by FROM webhook_deliveries")
    assert rows == [("succeeded", 1, None, None)] * 6


def test_a_released_claim_is_due_at_once_for_another_sender(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    world = world_of(first)
    _endpoint(world, "http://127.0.0.1:9/hooks")
    with first.unit_of_work() as uow:
        uow.outbox.add_many(world.scope, [(f"obx_{n}", "reward.issued", f"r{n}", "{}") for n in range(4)])
    deliveries.fan_out(first)
    mine = _claim(first, "a")
    assert [d.next_attempt_at for d in mine] == sorted(d.next_attempt_at for d in mine) and len(mine) == 4
    deliveries.release(first, [d.id for d in mine[2:]], "b")  # not b's: nothing released
    assert _claim(second, "b") == []
    deliveries.release(first, [d.id for d in mine[2:]], "a")
    assert [d.id for d in _claim(second, "b")] == [d.id for d in mine[2:]]


def _expiring_world(store: PostgresStore) -> tuple[World, list[str]]:
    """WALLETS wallets with two lots each, due in 30 days."""
    world = world_of(store)
    asset = world.asset(decimals=0, expiry={"after_days": 30})
    wallets = [world.wallet().id for _ in range(WALLETS)]
    for wallet in wallets:
        for amount in ("70", "30"):
            body = validate(rq.IssueRequest, {"wallet_id": wallet, "amount": amount, "reason": "grant"})
            ledger.issue(store, world.scope, asset.id, body)
    return world, wallets


def test_two_expiry_workers_expire_each_lot_exactly_once(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    _, wallets = _expiring_world(first)
    later = utcnow() + timedelta(days=31)
    reports: list[ExpiryReport] = _together(
        lambda: expire_due(first, later, round_size=3), lambda: expire_due(second, later, round_size=3)
    )
    assert sum(r.lots for r in reports) == 2 * WALLETS and not any(r.refused for r in reports)
    expired = _rows(pg_store_url, "SELECT memo FROM transactions WHERE kind = 'expire'")
    assert len(expired) == 2 * WALLETS and len(set(expired)) == 2 * WALLETS  # one expire posting per lot
    lots = _rows(pg_store_url, "SELECT remaining_minor, expired_minor = amount_minor FROM lots")
    assert lots == [(0, True)] * (2 * WALLETS)
    balances = Counter(
        int(b) for (b,) in _rows(pg_store_url, "SELECT balance_minor FROM balances WHERE account_id LIKE 'wal_%'")
    )
    assert balances == Counter({0: WALLETS})
    assert expire_due(second, later) == ExpiryReport()  # nothing left due


def test_an_expiry_round_skips_the_wallets_another_holds_without_waiting(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    world, wallets = _expiring_world(first)
    later = utcnow() + timedelta(days=31)
    due = first.reader_repositories().lots.due(later, 100)
    held = [lot.id for lot in due if lot.wallet_id in wallets[:3]]
    with first.unit_of_work() as uow:
        assert sorted(lot.id for lot in uow.lots.due_among(world.scope, held, later)) == sorted(held)
        started = time.monotonic()
        report = expire_due(second, later)
        assert time.monotonic() - started < 5  # skipped, not waited for
        assert report.lots == 2 * (WALLETS - 3)
    assert expire_due(second, later).lots == 6  # released: the held wallets' lots expire now
    assert _rows(pg_store_url, "SELECT count(*) FROM lots WHERE remaining_minor > 0") == [(0,)]


def test_retention_runs_in_one_process_at_a_time(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    settings = RetentionSettings()
    with first.exclusive("retention") as held:
        assert held
        skipped = run_once(second, settings)
        assert skipped.held_elsewhere and skipped.deleted == {}
        with second.exclusive("retention") as also:
            assert not also
    report = run_once(second, settings)  # released with the block
    assert not report.held_elsewhere and report.deleted["request_log"] == 0
    with first.exclusive("retention") as held:
        assert held
