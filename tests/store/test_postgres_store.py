"""`PostgresStore` on a throwaway PostgreSQL (tests/pg_cluster.py): the `Store` Protocol (migrations, collation,
units of work), then the repositories through the services on both stores, which must give the same answers."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import customers, event_intake, event_queries, ledger, organizations
from rewards_lab.store import ledger as ledger_store
from rewards_lab.store.api import Store
from rewards_lab.store.database import DuckDBStore, utcnow
from rewards_lab.store.interfaces import EventOutcome, LotFilter, LotTaken, NewDelivery, NewEvent, NewLot
from rewards_lab.store.postgres.store import PostgresStore, StoreUnavailable
from tests.conftest import World
from tests.pg_cluster import PG_SECRET_KEY, PgCluster
from tests.store.test_store_api import _read_through_the_protocol, _write_through_the_protocol

ID = re.compile(r"\b[a-z]+_[0-9a-f]{32}\b")


@pytest.fixture(params=["duckdb", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The test's store: a DuckDB file (`db`) or a PostgreSQL database cloned from the migrated template."""
    yield request.getfixturevalue("db" if request.param == "duckdb" else "pg_store")


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


def test_a_unit_of_work_commits_whole_or_not_at_all(store: Store) -> None:
    kept, dropped = new_id("organization"), new_id("organization")
    with store.unit_of_work() as uow:
        uow.organizations.add(kept, "Kept Ltd", "business", None)
    with pytest.raises(RuntimeError), store.unit_of_work() as uow:
        uow.organizations.add(dropped, "Dropped Ltd", "business", None)
        assert uow.organizations.get(dropped) is not None  # seen inside its own transaction
        raise RuntimeError("abandon")
    reader = store.reader_repositories()
    assert reader.organizations.get(kept) is not None
    assert reader.organizations.get(dropped) is None
    with store.snapshot_repositories() as snap:
        assert snap.organizations.get(kept) is not None
    assert store.probe_write(5.0) is True
    store.checkpoint()


def test_a_snapshot_sees_one_committed_state(pg_store: PostgresStore) -> None:
    world = _world(pg_store)
    world.customer("first")
    with pg_store.snapshot_repositories() as snap:
        before = snap.customers.page(world.scope, PageRequest(limit=10), "created_at", _no_filter()).rows
        world.customer("second")  # committed meanwhile
        again = snap.customers.page(world.scope, PageRequest(limit=10), "created_at", _no_filter()).rows
    assert [c.external_id for c in before] == [c.external_id for c in again] == ["first"]
    assert len(customers.list_customers(pg_store, world.scope, PageRequest()).data) == 2


def _txns() -> Any:
    from rewards_lab.store.interfaces import TransactionFilter

    return TransactionFilter(None, None, None)


def _no_filter() -> Any:
    from rewards_lab.store.interfaces import CustomerFilter

    return CustomerFilter(None)


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


def test_event_intake_inserts_all_or_none_and_marks_outcomes(store: Store) -> None:
    world = _world(store)
    customer = world.customer("ev")
    now = utcnow().replace(microsecond=0)

    def event(external: str, occurred: datetime | None) -> tuple[Scope, NewEvent]:
        return world.scope, NewEvent(new_id("event"), external, "order.completed", customer.id, occurred, "{}", "h")

    first = [event("e-1", now - timedelta(days=1)), event("e-2", None)]
    with store.intake_events() as events:
        assert events.add(first, now) is True
        assert events.add([event("e-3", None), event("e-1", None)], now) is False  # e-1 is stored: neither
    with store.intake_unit_of_work() as uow:
        assert uow.events.add([event("e-4", now)], now) is True
    stored = store.reader_repositories().events.get_by_external_ids(world.scope, ["e-1", "e-2", "e-3", "e-4"])
    assert sorted(stored) == ["e-1", "e-2", "e-4"]
    assert stored["e-1"].occurred_at == now - timedelta(days=1) and stored["e-2"].occurred_at is None
    assert stored["e-1"].received_at == now and stored["e-1"].status == "received"
    with store.unit_of_work() as uow:
        uow.events.mark_many(
            world.scope,
            [
                EventOutcome(stored["e-1"].id, "processed", None, None, ["v1"]),
                EventOutcome(stored["e-2"].id, "failed", "bad", "no rule", None),
            ],  # fmt: skip
        )
    marked = store.reader_repositories().events.get_by_external_ids(world.scope, ["e-1", "e-2"])
    assert (marked["e-1"].status, marked["e-1"].attempts) == ("processed", 1)
    assert (marked["e-2"].status, marked["e-2"].error_code, marked["e-2"].attempts) == ("failed", "bad", 1)
    with store.unit_of_work() as uow:  # a retry: the versions of the first attempt stay, the count goes on
        retry = [
            EventOutcome(stored["e-1"].id, "processed", None, None, ["v2"]),
            EventOutcome(stored["e-2"].id, "processed", None, None, ["v3"]),
        ]
        uow.events.mark_many(world.scope, retry)
        con: Any = uow.con  # type: ignore[attr-defined]
        rows = con.execute(
            "SELECT external_event_id, status, error_code, attempts, evaluated_versions FROM events "
            "WHERE external_event_id IN ('e-1', 'e-2') ORDER BY external_event_id"
        ).fetchall()
    assert rows == [("e-1", "processed", None, 2, '["v1"]'), ("e-2", "processed", None, 2, '["v3"]')]


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


def test_a_refused_write_names_the_same_invariant_on_both_stores(store: Store) -> None:
    """The store's CHECK refuses a balance below its floor; the DuckDB exception the ledger reads carries the
    column on both (PostgreSQL's error is translated with the constraint's definition)."""
    world = _world(store)
    wallet = world.wallet()
    with pytest.raises(duckdb.ConstraintException) as refused, store.unit_of_work() as uow:
        con: Any = uow.con  # type: ignore[attr-defined]  # both stores' Repositories hold their connection
        con.execute(
            "INSERT INTO balances VALUES (?, ?, ?, 'ast_x', -1, 0, ?)",
            [world.scope.organization_id, world.scope.environment, wallet.id, utcnow()],
        )
    assert "floor_minor" in str(refused.value)


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


@pytest.mark.parametrize(
    ("amount", "same_accounts", "delta", "invariant"),
    [
        (0, False, 0, "amount_not_positive"),
        (5, True, 0, "same_account"),
        (5, False, -5, "balance_below_floor"),  # a wallet's first row below its floor of zero
    ],
)
def test_the_ledgers_batch_write_is_refused_by_the_same_invariant_on_both_stores(
    store: Store, amount: int, same_accounts: bool, delta: int, invariant: str
) -> None:
    """`write_postings`'s statements (DuckDB's; PostgreSQL's COPY and typed arrays) under the store's CHECKs: the
    same invariant named on both, nothing written."""
    world = _world(store)
    wallet = world.wallet()
    txn = pa.Table.from_pylist(
        [
            {
                "id": new_id("transaction"),
                "kind": "issue",
                "asset_id": "ast_x",
                "amount_minor": amount,
                "source_account_id": wallet.id if same_accounts else "acc_issuance",
                "destination_account_id": wallet.id,
                "memo": None,
                "execution_id": None,
                "id_time_ms": 1,
            }
        ],  # fmt: skip
        schema=ledger_store._TXN_SCHEMA,
    )
    deltas = pa.Table.from_pylist(
        [{"account_id": wallet.id, "asset_id": "ast_x", "delta": delta, "floor_delta": 0}],
        schema=ledger_store._DELTA_SCHEMA,
    )
    with pytest.raises(ServiceError) as refused, store.unit_of_work() as uow:
        uow.ledger._write_tables(world.scope, txn, deltas)  # type: ignore[attr-defined]
    assert refused.value.details["invariant"] == invariant
    listed = store.reader_repositories().ledger.list_transactions(world.scope, PageRequest(), "created_at", _txns())
    assert listed.rows == []


def test_lots_are_made_taken_from_and_expired_alike_on_both_stores(store: Store) -> None:
    """`lots.write` (DuckDB: Arrow tables by a replacement scan; PostgreSQL: typed arrays): lots made with amounts
    past 2^64, a lot taken from twice in one write (one row, the sum), an expiry marking its lot."""
    world = _world(store)
    wallet = world.wallet()
    t0 = datetime(2026, 1, 1, 12, 0, 0)
    big = 2**70
    made = [
        NewLot("lot_a", wallet.id, "ast_x", t0, t0 + timedelta(days=30), big, "txn_a"),
        NewLot("lot_b", wallet.id, "ast_x", t0 + timedelta(hours=1), None, 500, "txn_b"),
    ]
    with store.unit_of_work() as uow:
        uow.lots.write(world.scope, made, [])
    with store.unit_of_work() as uow:
        uow.lots.write(
            world.scope, [], [LotTaken("lot_a", 100), LotTaken("lot_a", 50), LotTaken("lot_b", 500, "txn_x")]
        )
    reader = store.reader_repositories()
    lots = reader.lots.open_lots(world.scope, [(wallet.id, "ast_x")])[(wallet.id, "ast_x")]
    assert [(lot.id, lot.remaining, type(lot.remaining)) for lot in lots] == [("lot_a", big - 150, int)]
    assert reader.lots.next_expiry(world.scope, wallet.id) == {"ast_x": (t0 + timedelta(days=30), big - 150)}
    rows = reader.lots.page(world.scope, wallet.id, PageRequest(), LotFilter(status="expired")).rows
    assert [(row.id, row.expired_minor, row.remaining_minor) for row in rows] == [("lot_b", 500, 0)]
    assert [lot.id for lot in reader.lots.due(t0 + timedelta(days=31), 10)] == ["lot_a"]


def test_webhook_deliveries_with_an_all_null_column_are_added_and_listed_alike(store: Store) -> None:
    """`add_deliveries` registers an Arrow table inferred by `pa.table`: test deliveries (no outbox message) give
    an `outbox_id` column of Arrow type null."""
    world = _world(store)
    scope = world.scope
    t0 = datetime(2026, 3, 1, 12, 0, 0)
    with store.unit_of_work() as uow:
        endpoint = "whe_1"
        con: Any = uow.con  # type: ignore[attr-defined]
        con.execute(
            "INSERT INTO webhook_endpoints (id, organization_id, environment, url, events, signing_secret, "
            "secret_prefix, status, created_at) VALUES (?, ?, ?, 'https://example.com/hook', '[]', 'secret', 'whsec', "
            "'enabled', ?)",
            [endpoint, *scope.params, t0],
        )
        uow.webhooks.add_deliveries(
            [
                NewDelivery(
                    f"whd_{i}",
                    scope.organization_id,
                    scope.environment,
                    endpoint,
                    None,
                    "webhook.test",
                    f'{{"n": {i}}}',
                )
                for i in (2, 1)
            ],
            t0,
        )
    due = store.reader_repositories().webhooks.due(t0 + timedelta(seconds=1), 10, [], 10, 10, [])
    assert [(d.id, d.body, d.next_attempt_at) for d in due] == [("whd_1", '{"n": 1}', t0), ("whd_2", '{"n": 2}', t0)]
    with store.snapshot_repositories() as uow:
        con = uow.con  # type: ignore[attr-defined]
        stored = con.execute("SELECT id, outbox_id, status FROM webhook_deliveries ORDER BY id").fetchall()
    assert stored == [("whd_1", None, "pending"), ("whd_2", None, "pending")]


def test_a_batch_whose_net_change_is_wider_than_int64_is_written_exactly_on_both_stores(store: Store) -> None:
    """Ten postings of 10^18 - 1 to one wallet: the batch's net change of the wallet and of the issuance account
    travel as DECIMAL(38, 0) (`ledger._WIDE_DELTA_SCHEMA`), exact on both stores, and the ledger still verifies."""
    world = _world(store)
    wallet, asset = world.wallet(), world.asset()
    amount, count = 10**18 - 1, 10
    with store.snapshot_repositories() as uow:
        con: Any = uow.con  # type: ignore[attr-defined]
        (issuance,) = con.execute(
            "SELECT account_id FROM balances WHERE asset_id = ? AND NOT starts_with(account_id, 'wal_') "
            "ORDER BY account_id LIMIT 1",
            [asset.id],
        ).fetchone()
    txn = pa.Table.from_pylist(
        [
            {
                "id": new_id("transaction"),
                "kind": "issue",
                "asset_id": asset.id,
                "amount_minor": amount,
                "source_account_id": issuance,
                "destination_account_id": wallet.id,
                "memo": None,
                "execution_id": None,
                "id_time_ms": i,
            }
            for i in range(count)
        ],  # fmt: skip
        schema=ledger_store._TXN_SCHEMA,
    )
    total = Decimal(amount * count)
    deltas = pa.Table.from_pylist(
        [
            {"account_id": wallet.id, "asset_id": asset.id, "delta": total, "floor_delta": Decimal(0)},
            {"account_id": issuance, "asset_id": asset.id, "delta": -total, "floor_delta": Decimal(0)},
        ],  # fmt: skip
        schema=ledger_store._WIDE_DELTA_SCHEMA,
    )
    with store.unit_of_work() as uow:
        uow.ledger._write_tables(world.scope, txn, deltas)  # type: ignore[attr-defined]
    balances = store.reader_repositories().ledger.wallet_balances(world.scope, wallet.id)
    assert [(row.balance_minor, type(row.balance_minor)) for row in balances] == [(amount * count, int)]
    report = store.verify_ledger()
    assert report.ok, report.problems


def test_a_negative_clawback_lowers_the_wallets_floor_alike_on_both_stores(store: Store) -> None:
    """`ledger._lower_floors` (a zipped list of wallets and assets): the floor goes to its lowest value,
    -(10^38 - 1), which NUMERIC(38, 0) holds exactly as HUGEINT does (read inside a unit that is rolled back)."""
    world = _world(store)
    wallet, asset = world.wallet(), world.asset()
    ledger.issue(store, world.scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="x"))
    with pytest.raises(RuntimeError, match="undo"), store.unit_of_work() as uow:
        uow.ledger._lower_floors(world.scope, {(wallet.id, asset.id), ("wal_absent", asset.id)})  # type: ignore[attr-defined]
        con: Any = uow.con  # type: ignore[attr-defined]
        rows = con.execute("SELECT balance_minor, floor_minor FROM balances WHERE account_id = ?", [wallet.id])
        assert rows.fetchall() == [(100, -(10**38 - 1))]
        raise RuntimeError("undo")
    with store.snapshot_repositories() as uow:
        con = uow.con  # type: ignore[attr-defined]
        rows = con.execute("SELECT floor_minor FROM balances WHERE account_id = ?", [wallet.id])
        assert rows.fetchall() == [(0,)]
