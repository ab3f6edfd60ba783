"""The tier worker on one PostgreSQL database shared by several processes (issue 33, T4): two rounds at once review
each customer once; a round skips the customers another round holds without waiting; an event batch for a customer
a round holds waits for it and then reads what it wrote (one review, the event paid at the reviewed tier). Two
`PostgresStore`s stand for two processes (tests/worker/test_background_claims_pg.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.engine.tier_reviews import review_due
from rewards_lab.service import event_intake, ledger, programmes
from rewards_lab.store.postgres.store import PostgresStore
from tests.conftest import World
from tests.pg_cluster import PG_SECRET_KEY
from tests.store.contract.support import world_of

CUSTOMERS = 10
REVIEWED = datetime(2026, 3, 2)  # after 1 March, the first review of January's gold customers


@pytest.fixture
def two(pg_store_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    first = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    second = PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY)
    try:
        yield first, second
    finally:
        second.close()
        first.close()


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as con:
        return con.execute(sql).fetchall()


def _order(world: World, name: str, at: str, amount: int) -> None:
    body = {
        "type": "order",
        "external_event_id": f"{name}-{at}",
        "customer_id": name,
        "occurred_at": at,
        "data": {"amount": Decimal(amount)},
    }
    event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body))


def _gold_world(store: PostgresStore) -> tuple[World, list[Any]]:
    """CUSTOMERS customers at gold since 10 January 2026 (calendar months, one level at a time)."""
    world = world_of(store)
    asset = world.asset(decimals=0)
    tiers = {
        "metric": {"type": "points"},
        "window": {"type": "calendar", "period": "month"},
        "levels": [
            {"code": "member", "name": "Member"},
            {"code": "silver", "name": "Silver", "entry": "100", "multiplier": "1.5"},
            {"code": "gold", "name": "Gold", "entry": "300", "multiplier": "2"},
        ],
        "downgrade": {"to": "one_level"},
    }
    body = {"name": "Monthly", "asset_id": asset.id, "tiers": tiers, "max_event_age_days": None}
    programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    action = {"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}
    rule = {"program_id": programme.id, "event_type": "order", "actions": [action]}
    programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, rule))
    programmes.publish(world.db, world.scope, programme.id)
    wallets = []
    for index in range(CUSTOMERS):
        name = f"c{index:02d}"
        wallets.append(world.wallet(world.customer(name)))
        _order(world, name, "2026-01-10T10:00:00Z", 300)
    event_processing.process_all(store)
    return world, wallets


def test_two_tier_rounds_at_once_review_each_customer_once(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    _gold_world(first)
    reports = []
    barrier = threading.Barrier(2)

    def run(store: PostgresStore) -> None:
        barrier.wait()
        reports.append(review_due(store, REVIEWED, round_size=3))

    threads = [threading.Thread(target=run, args=(store,)) for store in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(report.customers for report in reports) == CUSTOMERS
    downs = _rows(pg_store_url, "SELECT customer_id FROM tier_changes WHERE kind = 'downgraded'")
    assert len(downs) == CUSTOMERS and len(set(downs)) == CUSTOMERS
    assert Counter(t for (t,) in _rows(pg_store_url, "SELECT tier FROM customer_tiers")) == {"silver": CUSTOMERS}
    assert _rows(pg_store_url, "SELECT count(*) FROM outbox WHERE kind = 'tier.changed'") == [(2 * CUSTOMERS,)]
    assert review_due(second, REVIEWED).customers == 0


def test_a_round_skips_held_customers_and_an_event_waits_for_the_round_holding_its_customer(
    two: tuple[PostgresStore, PostgresStore], pg_store_url: str
) -> None:
    first, second = two
    world, wallets = _gold_world(first)
    parked, release = threading.Event(), threading.Event()

    def park(point: str) -> None:
        if point == "after_tiers":
            parked.set()
            assert release.wait(30)

    first.fault_hook = park
    holder = threading.Thread(target=lambda: review_due(first, REVIEWED, round_size=4))
    holder.start()  # its first round (c00..c03) reviewed, not committed, the rows locked
    try:
        assert parked.wait(30)
        started = time.monotonic()
        report = review_due(second, REVIEWED)
        assert time.monotonic() - started < 5  # skipped, not waited for
        assert (report.customers, report.skipped) == (CUSTOMERS - 4, 4)
        _order(world, "c00", "2026-03-02T10:00:00Z", 10)  # c00 is held by the parked round
        batch = threading.Thread(target=lambda: event_processing.process_all(second))
        batch.start()
        batch.join(1.5)
        assert batch.is_alive()  # waiting for the round's lock on c00's tier row
    finally:
        release.set()
        holder.join(30)
    batch.join(30)
    assert not batch.is_alive()
    (balance,) = ledger.wallet_balances(second, world.scope, wallets[0].id).balances
    assert balance.balance == "315"  # 300, then 10 x 1.5: paid at the tier the round gave
    downs = _rows(pg_store_url, "SELECT customer_id FROM tier_changes WHERE kind = 'downgraded'")
    assert len(downs) == CUSTOMERS and len(set(downs)) == CUSTOMERS  # c00 reviewed once, by the round
    assert _rows(pg_store_url, "SELECT count(*) FROM outbox WHERE kind = 'tier.changed'") == [(2 * CUSTOMERS,)]
