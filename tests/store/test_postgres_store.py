"""`PostgresStore` on a throwaway PostgreSQL (tests/pg_cluster.py): the `Store` Protocol (migrations, collation,
units of work), then the repositories through the services on both stores, which must give the same answers."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import customers, event_intake, event_queries, ledger, organizations
from rewards_lab.store.api import Store
from rewards_lab.store.database import DuckDBStore
from rewards_lab.store.postgres.store import PostgresStore, StoreUnavailable
from tests.conftest import World
from tests.pg_cluster import PG_SECRET_KEY, PgCluster
from tests.store.test_store_api import _read_through_the_protocol, _write_through_the_protocol

ID = re.compile(r"\b[a-z]+_[0-9a-f]{32}\b")


def _world(store: Store) -> World:
    org = organizations.create_organization(store, "Both stores Ltd")
    return World(store, Scope(org.id, "sandbox"))  # type: ignore[arg-type]  # World is typed on DuckDB's name


def _versions(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [(int(v), str(d)) for v, d in conn.execute("SELECT version, description FROM schema_migrations")]


def test_postgres_store_has_every_method_of_the_protocol_with_its_parameters(pg_store: PostgresStore) -> None:
    methods = [
        n for n, m in vars(Store).items() if callable(m) and (not n.startswith("_") or n in ("__enter__", "__exit__"))
    ]
    assert {"unit_of_work", "probe_write", "close", "__exit__"} <= set(methods)
    for name in methods:
        theirs = inspect.signature(getattr(PostgresStore, name)).parameters
        assert list(theirs) == list(inspect.signature(getattr(Store, name)).parameters), name
    assert (
        pg_store.path.startswith("postgresql://rewards_test@127.0.0.1:") and ":" not in pg_store.path[13:].split("@")[0]
    )
    assert pg_store.secret_box is not None


def test_migrating_twice_changes_nothing_and_a_second_open_finds_it_migrated(pg_store_url: str) -> None:
    before = _versions(pg_store_url)
    assert max(v for v, _ in before) >= 24 and len(before) == len(set(before))
    with PostgresStore(pg_store_url, secret_key=PG_SECRET_KEY) as store:
        store.migrate()
        store.migrate()
    assert _versions(pg_store_url) == before


def test_a_database_that_does_not_sort_bytewise_is_refused(pg_cluster: PgCluster) -> None:
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE natural_order LC_COLLATE 'C.utf8' LC_CTYPE 'C.utf8' TEMPLATE template0")
    try:
        with pytest.raises(StoreUnavailable, match="collation is 'C.utf8'.*collation \"C\"") as caught:
            PostgresStore(pg_cluster.dsn("natural_order"), secret_key=PG_SECRET_KEY)
        assert pg_cluster.password not in str(caught.value)
        with psycopg.connect(pg_cluster.dsn("natural_order")) as conn:  # refused before migrating anything
            assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,)
    finally:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute("DROP DATABASE natural_order WITH (FORCE)")


def test_an_unreachable_server_is_refused_without_the_password(pg_cluster: PgCluster) -> None:
    url = pg_cluster.dsn("nowhere").replace(f":{pg_cluster.port}/", ":1/")
    with pytest.raises(StoreUnavailable, match="cannot connect") as caught:
        PostgresStore(url, secret_key=PG_SECRET_KEY)
    assert pg_cluster.password not in str(caught.value) and "postgresql://rewards_test@127.0.0.1:1/nowhere" in str(
        caught.value
    )


def test_a_wrong_secret_key_is_refused(pg_store_url: str) -> None:
    with pytest.raises(Exception, match="REWARDS_LAB_SECRET_KEY"):
        PostgresStore(pg_store_url, secret_key=bytes(32))


def _scenario(store: Store) -> str:
    """Customers, wallets, an asset, postings, balances, pages and idempotent retries through the services: every
    answer, ids replaced by their order of appearance and times dropped (they differ between runs)."""
    world = _world(store)
    answers: list[Any] = []
    people = [world.customer(f"ext-{name}", email=f"{name}@example.com") for name in ("b", "a", "B", "c")]
    wallets = [world.wallet(person) for person in people]
    asset = world.asset()
    issue = rq.IssueRequest(wallet_id=wallets[0].id, amount="9999999999999999.99", reason="big")
    answers.append(ledger.issue(store, world.scope, asset.id, issue, idempotency_key="k-1"))
    answers.append(ledger.issue(store, world.scope, asset.id, issue, idempotency_key="k-1"))  # the same answer
    answers += [ledger.issue(store, world.scope, asset.id, issue) for _ in range(19)]  # 20 x (10^18 - 1) > 2^64
    with pytest.raises(ServiceError) as reused:
        ledger.issue(store, world.scope, asset.id, issue.model_copy(update={"amount": "1.00"}), idempotency_key="k-1")
    answers.append(reused.value.code)
    move = rq.TransferRequest(from_wallet_id=wallets[0].id, to_wallet_id=wallets[1].id, amount="10.50")
    answers.append(ledger.transfer(store, world.scope, asset.id, move))
    spend = rq.RedemptionRequest(wallet_id=wallets[1].id, amount="0.50", reference="coffee")
    answers.append(ledger.redeem(store, world.scope, asset.id, spend))
    with pytest.raises(ServiceError) as short:
        ledger.redeem(store, world.scope, asset.id, spend.model_copy(update={"amount": "10.01"}))
    answers.append(short.value.code)
    answers += [ledger.wallet_balances(store, world.scope, w.id) for w in wallets]
    for sort in ("created_at", "external_id"):
        for direction in ("asc", "desc"):
            cursor, seen = None, []
            while True:
                page = customers.list_customers(
                    store, world.scope, PageRequest(limit=3, sort=sort, direction=direction, cursor=cursor)
                )
                seen += [c.external_id for c in page.data]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            answers.append(seen)
    answers.append(ledger.list_transactions(store, world.scope, PageRequest(limit=10)).data)
    rows = store.reader_repositories().ledger.wallet_balances(world.scope, wallets[0].id)
    answers.append([(type(row.balance_minor).__name__, row.balance_minor) for row in rows])  # int past 2^64, exact
    report = store.verify_ledger()
    assert report.ok, report.problems
    answers.append((report.transactions, report.entries, report.balances))
    return _normalised(answers)


def _normalised(value: Any) -> str:
    text = repr(value)
    names: dict[str, str] = {}
    text = ID.sub(lambda m: names.setdefault(m.group(0), f"id{len(names)}"), text)
    text = re.sub(r"datetime\.datetime\([^)]*\)", "T", text)
    return re.sub(r"'\d{4}-\d\d-\d\dT[0-9:.]+Z?'", "'T'", text)


def test_the_services_give_the_same_answers_on_both_stores(db: DuckDBStore, pg_store: PostgresStore) -> None:
    on_duckdb, on_postgres = _scenario(db), _scenario(pg_store)
    assert "'199999999999999989.30'" in on_duckdb  # the balance past 2^64 minor units, after the transfer
    assert "('int', 19999999999999998930)" in on_duckdb
    assert on_postgres == on_duckdb


def _events_scenario(store: Store) -> str:
    """A programme with a rate, a supply ceiling and a threshold; events accepted (a duplicate, a mismatch, a
    customer made on the fly), processed by the engine; then the events, balances and transactions read back."""
    world = _world(store)
    customer = world.customer("shopper")
    wallet = world.wallet(customer)
    asset = world.asset(supply_ceiling="100.00")
    world.per_rate_programme(asset, rate="0.05", threshold=20)

    def event(external_id: str, amount: str, who: str = "shopper") -> rq.EventCreate:
        body = {"type": "order.completed", "external_event_id": external_id, "customer_id": who, "data": {}}
        body["data"] = {"amount": Decimal(amount)}
        return validate(rq.EventCreate, body)

    answers: list[Any] = [
        event_intake.submit_events(
            store, world.scope, [event("o-1", "42.50"), event("o-1", "42.5"), event("o-1", "43"), event("o-2", "19")]
        ),
        event_intake.submit_event(store, world.scope, event("o-3", "1990")),  # past the ceiling: refused whole
        event_intake.submit_event(store, world.scope, event("o-4", "100", who="newcomer")),
    ]
    answers.append(event_processing.process_all(store))
    answers.append(ledger.wallet_balances(store, world.scope, wallet.id))
    answers.append(event_queries.list_events(store, world.scope, PageRequest(limit=10)).data)
    answers.append(ledger.list_transactions(store, world.scope, PageRequest(limit=10)).data)
    with store.snapshot_repositories() as uow:
        answers.append(uow.outbox.of_scope(world.scope))
    report = store.verify_ledger()
    assert report.ok, report.problems
    return _normalised(answers)


def test_events_are_accepted_and_processed_alike_on_both_stores(db: DuckDBStore, pg_store: PostgresStore) -> None:
    on_duckdb, on_postgres = _events_scenario(db), _events_scenario(pg_store)
    assert "'2.12'" in on_duckdb and "event_duplicate_mismatch" in on_duckdb and "processed" in on_duckdb
    assert on_postgres == on_duckdb


def test_the_protocols_side_unit_retention_and_probe_on_postgres(pg_store: PostgresStore) -> None:
    organization_id = new_id("organization")
    _write_through_the_protocol(pg_store, organization_id)
    _read_through_the_protocol(pg_store, organization_id)
    with psycopg.connect(pg_store.url) as conn:
        assert conn.execute("SELECT name FROM organizations WHERE id = %s", [organization_id]).fetchall() == [
            ("Protocol Ltd",)
        ]
        assert conn.execute("SELECT count(*) FROM auth_audit").fetchall() == [(1,)]  # two written, one deleted
        assert conn.execute("SELECT count(*) FROM health_probe").fetchall() == [(1,)]


def test_the_ledger_writers_fault_points_fire_inside_the_unit_of_work(pg_store: PostgresStore) -> None:
    """The crash tests' hook sees the writer's points in order, and a fault there rolls the whole write back."""
    world = _world(pg_store)
    wallet, asset = world.wallet(), world.asset()
    seen: list[str] = []

    def hook(point: str) -> None:
        seen.append(point)
        if point == "after_balances":
            raise RuntimeError("killed")

    pg_store.fault_hook = hook
    body = rq.IssueRequest(wallet_id=wallet.id, amount="5.00", reason="crash")
    with pytest.raises(RuntimeError, match="killed"):
        ledger.issue(pg_store, world.scope, asset.id, body)
    pg_store.fault_hook = None
    assert seen == ["after_entries", "after_balances"]
    assert ledger.wallet_balances(pg_store, world.scope, wallet.id).balances == []  # nothing of it committed
    assert ledger.list_transactions(pg_store, world.scope, PageRequest()).data == []
