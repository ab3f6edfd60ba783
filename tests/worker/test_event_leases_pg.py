"""Several event workers on one PostgreSQL database (issue 32, increment 7): each leases event partitions, so
every event is processed exactly once and each customer's events in order; caps, budgets and balances are locked
in one order, so a customer cap and a programme budget hold exactly, with API transfers running at the same time;
a killed worker's partitions are taken over."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine.event_processing import process_all, process_pending
from rewards_lab.service import ledger, programmes
from rewards_lab.service.writes import run_write
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import EventPartitions, NewEvent, WriteConflict
from rewards_lab.store.postgres.leases import LEASE_CLASS
from rewards_lab.store.postgres.store import PostgresStore
from rewards_lab.worker.events import EventWorker
from tests.conftest import World
from tests.pg_cluster import PG_SECRET_KEY, PgCluster
from tests.store.contract.support import world_of

PARTITIONS = 8
CUSTOMERS = 16
EVENTS_EACH = 20
REWARD_MINOR = 100  # "1.00" at 2 decimals
CAP_MINOR = 1_000  # per customer and day: 10 rewards
BUDGET_MINOR = 10_000  # per day: 100 rewards of the 160 the caps would allow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def second_url(pg_cluster: PgCluster, pg_template: str) -> Iterator[str]:
    """Another database cloned from the template (the single-worker run's)."""
    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    try:
        yield pg_cluster.dsn(name)
    finally:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _open(url: str, partitions: int = PARTITIONS) -> PostgresStore:
    return PostgresStore(url, secret_key=PG_SECRET_KEY, event_partitions=partitions)


def _setup(store: PostgresStore) -> tuple[World, str, list[str]]:
    """A programme giving 1.00 an event, capped per customer and by a budget; customers with wallets (each given
    50.00 by the API first). The asset's id and the wallets' ids."""
    world = world_of(store)
    asset = world.asset()
    body = {
        "name": "Capped",
        "asset_id": asset.id,
        "limits": [{"per": "customer", "period": "day", "max_amount": "10.00"}],
        "budget": {"period": "day", "max_amount": "100.00"},
    }
    programme = programmes.create_programme(store, world.scope, validate(rq.ProgrammeCreate, body))
    world.rule(programme, amount={"fixed": "1.00"})
    programmes.publish(store, world.scope, programme.id)
    wallets = []
    for n in range(CUSTOMERS):
        wallet = world.wallet(world.customer(f"c-{n:02}"))
        issued = validate(rq.IssueRequest, {"wallet_id": wallet.id, "amount": "50.00", "reason": "start"})
        ledger.issue(store, world.scope, asset.id, issued)
        wallets.append(wallet.id)
    return world, asset.id, wallets


def _burst(store: PostgresStore, scope: Scope) -> None:
    """EVENTS_EACH events per customer, interleaved, half naming the customer by external id, half by id."""
    occurred = utcnow() - timedelta(minutes=1)
    reader = store.reader_repositories()
    ids = {f"c-{n:02}": reader.customers.resolve_many(scope, [f"c-{n:02}"])[f"c-{n:02}"].id for n in range(CUSTOMERS)}
    events = []
    for round_ in range(EVENTS_EACH):
        for external, customer_id in ids.items():
            reference = external if round_ % 2 else customer_id
            events.append(
                (
                    scope,
                    NewEvent(
                        new_id("event"), f"{external}-{round_}", "order.completed", reference, occurred, "{}", "h"
                    ),
                )
            )
    with store.intake_events() as intake:
        assert intake.add(events, utcnow())


def _rows(url: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _outcome(url: str) -> dict[str, Any]:
    """What the run left: every event's status and attempts; each customer's rewards in event order."""
    events = _rows(url, "SELECT status, attempts, count(*) FROM events GROUP BY 1, 2")
    given = _rows(
        url,
        "SELECT c.external_id, x.amount_minor FROM reward_executions x JOIN events e ON e.id = x.event_id "
        "JOIN customers c ON c.id = x.customer_id ORDER BY e.id",
    )
    per_customer: dict[str, list[int]] = defaultdict(list)
    for customer, amount in given:
        per_customer[customer].append(int(amount))
    usage = _rows(url, "SELECT counter, sum(amount_minor) FROM limit_usage GROUP BY 1")
    wallets = _rows(url, "SELECT sum(balance_minor) FROM balances WHERE starts_with(account_id, 'wal_')")[0][0]
    return {"events": sorted(events), "per_customer": dict(per_customer), "usage": dict(usage), "wallets": wallets}


def _check_exact(outcome: dict[str, Any]) -> None:
    assert outcome["events"] == [("processed", 1, CUSTOMERS * EVENTS_EACH)]  # each once, none retried or failed
    per_customer = outcome["per_customer"]
    assert sum(len(amounts) for amounts in per_customer.values()) == CUSTOMERS * EVENTS_EACH  # one execution each
    for customer, amounts in per_customer.items():
        assert sum(amounts) <= CAP_MINOR, customer
        # in event order the rewards only shrink (full, at most one cut, then none): the customer's order was kept
        assert amounts == sorted(amounts, reverse=True), (customer, amounts)
    assert sum(sum(amounts) for amounts in per_customer.values()) == BUDGET_MINOR


def test_two_workers_process_a_burst_exactly_once_in_order_within_caps_and_budget(
    pg_store_url: str, second_url: str
) -> None:
    one, two = _open(pg_store_url), _open(pg_store_url)
    workers = [EventWorker(one, batch_size=16), EventWorker(two, batch_size=16)]
    try:
        world, asset_id, wallets = _setup(one)
        _burst(one, world.scope)
        # The leases balanced before they start: the first takes all 8, then gives 4 to the second.
        assert workers[0].leases is not None and workers[1].leases is not None
        assert len(workers[0].leases.claim().held) == PARTITIONS
        assert workers[1].leases.claim().held == ()
        assert len(workers[0].leases.claim().held) == PARTITIONS // 2
        assert len(workers[1].leases.claim().held) == PARTITIONS // 2
        holders = _rows(
            pg_store_url,
            "SELECT pid, count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objsubid = 2 "
            "GROUP BY pid",
            [LEASE_CLASS],
        )
        assert sorted(count for _, count in holders) == [PARTITIONS // 2] * 2

        # API transfers in both directions between the same wallets, from both stores, while the workers run.
        def transfers(store: PostgresStore, pairs: list[tuple[str, str]]) -> None:
            for source, target in pairs * 3:
                body = {"from_wallet_id": source, "to_wallet_id": target, "amount": "1.00"}
                ledger.transfer(store, world.scope, asset_id, validate(rq.TransferRequest, body))

        forward = list(zip(wallets, wallets[1:], strict=False))
        backward = [(target, source) for source, target in forward]
        movers = [
            threading.Thread(target=transfers, args=(one, forward)),
            threading.Thread(target=transfers, args=(two, backward)),
        ]
        for thread in [*movers]:
            thread.start()
        for worker in workers:
            worker.start()
        for thread in movers:
            thread.join(60)
        deadline = time.monotonic() + 30
        while _rows(pg_store_url, "SELECT count(*) FROM events WHERE status = 'received'")[0][0] and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
    finally:
        for worker in workers:
            worker.stop()
        two.close()
    try:
        report = one.verify_ledger()
        assert report.ok, report
    finally:
        one.close()
    outcome = _outcome(pg_store_url)
    _check_exact(outcome)
    assert outcome["usage"] == {"budget:day": BUDGET_MINOR, "programme:day": BUDGET_MINOR}  # the cap: per customer
    assert outcome["wallets"] == CUSTOMERS * 5_000 + BUDGET_MINOR  # the transfers moved, created nothing

    # The same burst with one worker on its own database: the same totals.
    single = _open(second_url, partitions=1)
    try:
        world, _, _ = _setup(single)
        _burst(single, world.scope)
        process_all(single, 16)
        assert single.verify_ledger().ok
    finally:
        single.close()
    alone = _outcome(second_url)
    _check_exact(alone)
    assert (alone["usage"], alone["wallets"]) == (outcome["usage"], outcome["wallets"])


def test_a_customers_events_are_in_one_partition_whichever_way_they_name_it(pg_store: PostgresStore) -> None:
    world, _, _ = _setup(pg_store)
    _burst(pg_store, world.scope)
    reader = pg_store.reader_repositories().events
    partition_of: dict[str, set[int]] = defaultdict(set)
    seen = []
    for partition in range(PARTITIONS):
        for event in reader.pending(1000, EventPartitions(PARTITIONS, (partition,))):
            partition_of[event.external_event_id.rsplit("-", 1)[0]].add(partition)
            seen.append(event.id)
    assert sorted(seen) == [event.id for event in reader.pending(1000)]  # every event in exactly one partition
    assert len(partition_of) == CUSTOMERS and all(len(parts) == 1 for parts in partition_of.values())
    assert len({part for parts in partition_of.values() for part in parts}) > 1  # spread (16 customers over 8)
    assert reader.pending(1000, EventPartitions(PARTITIONS, ())) == []


_HOLDER = """
import sys, time, psycopg
from rewards_lab.store.postgres.leases import EventLeases
leases = EventLeases(lambda: psycopg.connect(sys.argv[1], autocommit=True), int(sys.argv[2]))
print(len(leases.claim().held), flush=True)
time.sleep(120)
"""


def test_a_killed_workers_partitions_are_taken_over(pg_store_url: str) -> None:
    store = _open(pg_store_url, partitions=4)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, pg_store_url, "4"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    leases = store.event_leases()
    try:
        world, _, _ = _setup(store)
        _burst(store, world.scope)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "4"  # alone: every partition
        partitions = leases.claim()  # two alive: a share of 2, but none is free
        assert partitions.held == ()
        assert process_pending(store, 1000, partitions).processed == 0
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 10
        while len(partitions.held) < 4 and time.monotonic() < deadline:  # its session ends, its locks with it
            time.sleep(0.02)
            partitions = leases.claim()
        assert partitions.held == (0, 1, 2, 3)
        while process_pending(store, 64, partitions).processed:
            pass
        assert store.verify_ledger().ok
    finally:
        leases.close()
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
        store.close()
    outcome = _outcome(pg_store_url)
    _check_exact(outcome)


def test_redemptions_from_two_processes_never_overdraw_and_are_refused_by_the_policy(pg_store_url: str) -> None:
    """Two stores redeem 1.00 at a time from one wallet holding 10.00 (and one without a balance row yet): exactly
    ten succeed, every other is the policy's `insufficient_balance` (not the CHECK's `internal_error`, which a
    decision on a stale balance would meet)."""
    one, two = _open(pg_store_url), _open(pg_store_url)
    try:
        world = world_of(one)
        asset = world.asset()
        wallet, empty = world.wallet(), world.wallet()
        issued = validate(rq.IssueRequest, {"wallet_id": wallet.id, "amount": "10.00", "reason": "start"})
        ledger.issue(one, world.scope, asset.id, issued)
        answers: list[str] = []

        def redeem(store: PostgresStore) -> None:
            for n in range(12):
                for target in (wallet.id, empty.id):
                    body = {"wallet_id": target, "amount": "1.00", "reference": f"r-{n}"}
                    try:
                        ledger.redeem(store, world.scope, asset.id, validate(rq.RedemptionRequest, body))
                        answers.append("redeemed")
                    except ServiceError as error:
                        answers.append(error.code)

        threads = [threading.Thread(target=redeem, args=(store,)) for store in (one, two)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(set(answers)) == ["insufficient_balance", "redeemed"]
        assert answers.count("redeemed") == 10 and len(answers) == 48
        assert one.reader_repositories().ledger.balances_of(world.scope, [wallet.id]) == {(wallet.id, asset.id): 0}
        assert one.verify_ledger().ok
    finally:
        one.close()
        two.close()


def test_a_unit_of_work_cancelled_by_a_deadlock_runs_once_more(pg_store: PostgresStore) -> None:
    """Two units of work locking two rows in opposite orders: PostgreSQL cancels one (`WriteConflict`), and
    `run_write` runs it again, so both writes land."""
    world = world_of(pg_store)
    asset = world.asset()
    first, second = world.wallet(), world.wallet()
    for wallet in (first, second):
        body = validate(rq.IssueRequest, {"wallet_id": wallet.id, "amount": "5.00", "reason": "start"})
        ledger.issue(pg_store, world.scope, asset.id, body)
    other = _open(pg_store.url)
    barrier = threading.Barrier(2, timeout=10)
    runs: list[str] = []
    done: list[str] = []

    def write(store: PostgresStore, order: tuple[str, str], name: str) -> None:
        def locking(uow: Any) -> r.Wallet:
            runs.append(name)
            con = uow.ledger.con
            con.execute_native("SELECT 1 FROM balances WHERE account_id = %s FOR UPDATE", [order[0]])
            if runs.count(name) == 1:
                barrier.wait()  # both hold their first row: the second lock closes the cycle
            con.execute_native("SELECT 1 FROM balances WHERE account_id = %s FOR UPDATE", [order[1]])
            return world_wallet

        run_write(store, world.scope, "test", {}, locking, r.Wallet)
        done.append(name)

    world_wallet = first
    try:
        threads = [
            threading.Thread(target=write, args=(pg_store, (first.id, second.id), "a")),
            threading.Thread(target=write, args=(other, (second.id, first.id), "b")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        other.close()
    assert sorted(runs) in (["a", "a", "b"], ["a", "b", "b"])  # one of them was cancelled and ran again
    assert sorted(done) == ["a", "b"]


def _second_reader_wait(other: PostgresStore, scope: Scope, wallet_id: str, asset_id: str) -> list[float]:
    waited: list[float] = []

    def read() -> None:
        started = time.monotonic()
        with other.unit_of_work() as uow:
            uow.ledger.ledger_state(scope, {wallet_id}, {asset_id: {wallet_id}})
        waited.append(time.monotonic() - started)

    thread = threading.Thread(target=read)
    thread.start()
    time.sleep(0.4)  # while the caller's unit of work holds its locks
    waited.append(-1.0 if thread.is_alive() else 0.0)  # -1: still waiting after 0.4 s
    return waited


@pytest.mark.parametrize("ceiling", [False, True])
def test_a_unit_of_work_holds_the_balances_it_decides_on_until_it_ends(pg_store_url: str, ceiling: bool) -> None:
    """The same wallet: the second unit of work waits for the first. Another wallet of the same asset: it waits
    only when the asset has a supply ceiling (the issuance account is then locked too)."""
    one, two = _open(pg_store_url), _open(pg_store_url)
    try:
        world = world_of(one)
        asset = world.asset(**({"supply_ceiling": "1000.00"} if ceiling else {}))
        first, second = world.wallet(), world.wallet()
        for wallet in (first, second):
            body = validate(rq.IssueRequest, {"wallet_id": wallet.id, "amount": "5.00", "reason": "start"})
            ledger.issue(one, world.scope, asset.id, body)
        for other_wallet, should_wait in ((first.id, True), (second.id, ceiling)):
            with one.unit_of_work() as uow:
                uow.ledger.ledger_state(world.scope, {first.id}, {asset.id: {first.id}})
                waited = _second_reader_wait(two, world.scope, other_wallet, asset.id)
                assert (waited[-1] == -1.0) is should_wait, (other_wallet, waited)
            deadline = time.monotonic() + 10
            while len(waited) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(waited) == 2  # and it went on once the first ended
    finally:
        one.close()
        two.close()


def test_an_event_batch_cancelled_by_a_deadlock_runs_once_more_whole(pg_store: PostgresStore) -> None:
    """A batch whose write is cancelled once (`WriteConflict`) is run again whole: its one event is processed and
    rewarded once, not isolated and marked `failed` as an event failing alone would be."""
    world = world_of(pg_store)
    programme = world.programme(world.asset())
    world.rule(programme, amount={"fixed": "1.00"})
    programmes.publish(pg_store, world.scope, programme.id)
    customer = world.customer("solo")
    world.wallet(customer)
    with pg_store.intake_events() as intake:
        event = NewEvent(new_id("event"), "solo-1", "order.completed", customer.id, None, "{}", "h")
        assert intake.add([(world.scope, event)], utcnow())
    cancelled: list[str] = []

    def cancel_once(point: str) -> None:
        if point == "after_entries" and not cancelled:
            cancelled.append(point)
            raise WriteConflict("deadlock detected (made by the test)")

    pg_store.fault_hook = cancel_once
    report = process_pending(pg_store)
    assert cancelled == ["after_entries"] and (report.processed, report.failed) == (1, 0)
    rows = _rows(pg_store.url, "SELECT status, attempts FROM events")
    assert rows == [("processed", 1)]
    assert _rows(pg_store.url, "SELECT count(*), sum(amount_minor) FROM reward_executions") == [(1, 100)]
    assert pg_store.verify_ledger().ok
