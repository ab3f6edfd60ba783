"""The ledger's repository on both stores: postings and balances past 2^63 and 2^64 exact, transactions paged over
every row both ways, the batch write under the store's CHECKs, the floor lowering, and verification."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.service import ledger
from rewards_lab.store import ledger as ledger_store
from rewards_lab.store.api import Store
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import TransactionFilter
from tests.store.contract.support import NO_TXN_FILTER, world_of


@pytest.mark.parametrize("count", [10, 19])
def test_balances_past_int64_are_posted_read_and_verified_exactly(store: Store, count: int) -> None:
    """`count` postings of the largest amount (10^18 - 1 minor units): the wallet's balance passes 2^63 (10) and
    2^64 (19); every amount and the balance read back as exact `int`, and the ledger verifies."""
    world = world_of(store)
    wallet, asset = world.wallet(), world.asset(decimals=0)
    minor = MAX_AMOUNT_MINOR
    body = rq.IssueRequest(wallet_id=wallet.id, amount=str(minor), reason="wide")
    for _ in range(count):
        ledger.issue(store, world.scope, asset.id, body)
    assert minor * count > 2**63 and (count < 19 or minor * count > 2**64)
    reader = store.reader_repositories()
    listed = reader.ledger.list_transactions(world.scope, PageRequest(limit=100), "created_at", NO_TXN_FILTER).rows
    assert {(t.amount_minor, type(t.amount_minor)) for t in listed} == {(minor, int)} and len(listed) == count
    rows = reader.ledger.wallet_balances(world.scope, wallet.id)
    assert [(r.asset_id, r.balance_minor, type(r.balance_minor)) for r in rows] == [(asset.id, minor * count, int)]
    report = store.verify_ledger()
    assert report.ok, report.problems
    assert (report.transactions, report.entries) == (count, 2 * count)


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_transactions_are_paged_over_every_row_in_both_directions(store: Store, direction: str) -> None:
    world = world_of(store)
    wallet, asset = world.wallet(), world.asset()
    for n in range(1, 12):
        ledger.issue(store, world.scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount=f"{n}.00", reason="p"))
    reader = store.reader_repositories()
    every = reader.ledger.list_transactions(
        world.scope,
        PageRequest(limit=100, direction=direction),
        "created_at",
        NO_TXN_FILTER,  # type: ignore[arg-type]
    ).rows
    keys = [(t.created_at, t.id) for t in every]
    assert len(every) == 11 and keys == sorted(keys, reverse=direction == "desc")
    seen, cursor = [], None
    while True:
        page = reader.ledger.list_transactions(
            world.scope,
            PageRequest(limit=4, cursor=cursor, direction=direction),  # type: ignore[arg-type]
            "created_at",
            NO_TXN_FILTER,
        )
        assert len(page.rows) <= 4
        seen += [t.id for t in page.rows]
        if not page.has_more:
            assert page.next_cursor is None
            break
        cursor = page.next_cursor
    assert seen == [t.id for t in every]
    only = reader.ledger.list_transactions(
        world.scope, PageRequest(), "created_at", TransactionFilter(wallet.id, asset.id, "issue")
    ).rows
    assert len(only) == 11
    none = reader.ledger.list_transactions(
        world.scope, PageRequest(), "created_at", TransactionFilter(None, None, "redeem")
    ).rows
    assert none == []


def test_a_refused_write_names_the_same_invariant_on_both_stores(store: Store) -> None:
    """The store's CHECK refuses a balance below its floor; the DuckDB exception the ledger reads carries the
    column on both (PostgreSQL's error is translated with the constraint's definition)."""
    world = world_of(store)
    wallet = world.wallet()
    with pytest.raises(duckdb.ConstraintException) as refused, store.unit_of_work() as uow:
        con: Any = uow.con  # type: ignore[attr-defined]  # both stores' Repositories hold their connection
        con.execute(
            "INSERT INTO balances VALUES (?, ?, ?, 'ast_x', -1, 0, ?)",
            [world.scope.organization_id, world.scope.environment, wallet.id, utcnow()],
        )
    assert "floor_minor" in str(refused.value)


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
    world = world_of(store)
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
    reader = store.reader_repositories()
    listed = reader.ledger.list_transactions(world.scope, PageRequest(), "created_at", NO_TXN_FILTER)
    assert listed.rows == []


def test_a_batch_whose_net_change_is_wider_than_int64_is_written_exactly_on_both_stores(store: Store) -> None:
    """Ten postings of 10^18 - 1 to one wallet: the batch's net change of the wallet and of the issuance account
    travel as DECIMAL(38, 0) (`ledger._WIDE_DELTA_SCHEMA`), exact on both stores, and the ledger still verifies."""
    world = world_of(store)
    wallet, asset = world.wallet(), world.asset()
    amount, count = 10**18 - 1, 10
    row = store.reader_repositories().assets.get(world.scope, asset.id)
    assert row is not None
    issuance = row.issuance_account_id
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
    world = world_of(store)
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


def test_verification_finds_balances_that_the_entries_do_not_explain(store: Store) -> None:
    """A batch of balance changes without their transactions (the writer's own statements, misused): the report
    names both accounts under `snapshot_mismatch` on both stores, and nothing else; undone, the ledger verifies."""
    world = world_of(store)
    wallet, asset = world.wallet(), world.asset()
    ledger.issue(store, world.scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="x"))
    assert store.verify_ledger().ok
    issuance = store.reader_repositories().assets.get(world.scope, asset.id)
    assert issuance is not None
    txn = pa.Table.from_pylist([], schema=ledger_store._TXN_SCHEMA)
    deltas = pa.Table.from_pylist(
        [
            {"account_id": wallet.id, "asset_id": asset.id, "delta": 5, "floor_delta": 0},
            {"account_id": issuance.issuance_account_id, "asset_id": asset.id, "delta": -5, "floor_delta": 0},
        ],  # fmt: skip
        schema=ledger_store._DELTA_SCHEMA,
    )
    with store.unit_of_work() as uow:
        uow.ledger._write_tables(world.scope, txn, deltas)  # type: ignore[attr-defined]
    report = store.verify_ledger()
    assert (report.transactions, report.entries) == (1, 2)
    assert {name: sorted(subjects) for name, subjects in report.problems.items()} == {
        "snapshot_mismatch": sorted([f"{wallet.id}/{asset.id}", f"{issuance.issuance_account_id}/{asset.id}"])
    }
    undo = pa.Table.from_pylist(
        [{**row, "delta": -row["delta"]} for row in deltas.to_pylist()], schema=ledger_store._DELTA_SCHEMA
    )
    with store.unit_of_work() as uow:
        uow.ledger._write_tables(world.scope, txn, undo)  # type: ignore[attr-defined]
    assert store.verify_ledger().ok
