"""How the ledger is stored: transactions without an id index, found by id through their creation millisecond."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id, new_ids, time_ms_column, time_ms_of
from rewards_lab.service import ledger
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.schema import MIGRATIONS
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World


def test_time_ms_of_reads_the_creation_millisecond_and_refuses_foreign_ids() -> None:
    before = utcnow().timestamp() * 1000
    made = time_ms_of(new_id("transaction"))
    assert made is not None and abs(made - before) < 5_000
    assert time_ms_of("txn_not-hex-not-hex-not-hex-not-hex!") is None
    assert time_ms_of("txn_short") is None
    assert time_ms_of("") is None


def test_time_ms_column_reads_every_id_as_time_ms_of_and_refuses_foreign_ids() -> None:
    ids = [*new_ids("transaction", 300), "txn_0123456789ABcdef0123456789abcdef", new_id("wallet")]
    assert time_ms_column(ids).tolist() == [time_ms_of(i) for i in ids]
    assert time_ms_column([f"txn_{'f' * 12}{'0' * 20}"]).tolist() == [2**48 - 1]
    for foreign in ("txn_short", "txn_zz23456789abcdef0123456789abcdef", "txné123456789abcdef0123456789abcdef"):
        with pytest.raises(ValueError):
            time_ms_column([new_id("transaction"), foreign])


def test_a_transaction_is_found_by_id_among_many_and_foreign_ids_are_not_found(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="r")
    issued = [ledger.issue(world.db, world.scope, asset.id, body) for _ in range(5)]
    for transaction in issued:
        assert ledger.get_transaction(world.db, world.scope, transaction.id).id == transaction.id
    for unknown in (new_id("transaction"), "txn_zzzz", issued[0].id[:-1] + "x"):
        with pytest.raises(ServiceError) as caught:
            ledger.get_transaction(world.db, world.scope, unknown)
        assert caught.value.code == "transaction_not_found"
    columns = [c[0] for c in world.db.reader().execute("SELECT * FROM transactions LIMIT 0").description]
    assert "id_time_ms" in columns


def test_migration_6_keeps_every_existing_transaction_and_its_lookup_key(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
        "applied_at TIMESTAMP NOT NULL)"
    )
    for version, description, statements, *_ in MIGRATIONS:
        if version <= 4:
            for statement in statements:
                con.execute(statement)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, utcnow()])
    ids = [new_id("transaction") for _ in range(3)]
    for number, transaction_id in enumerate(ids, start=1):
        con.execute(
            "INSERT INTO transactions VALUES (?, 'org_1', 'sandbox', 'issue', 'ast_1', ?, 'acc_1', 'wal_1', "
            "NULL, NULL, ?)",
            [transaction_id, number, utcnow()],
        )
    con.close()

    database = Database(path)
    rows = database.reader().execute("SELECT id, amount_minor, id_time_ms FROM transactions ORDER BY id").fetchall()
    assert [(row[0], row[1]) for row in rows] == [(i, n) for n, i in enumerate(ids, start=1)]
    assert [row[2] for row in rows] == [time_ms_of(i) for i in ids]
    assert database.reader().execute("SELECT count(*) FROM entries").fetchone() == (6,)
    database.close()


def test_verify_ledger_reports_a_duplicate_transaction_id(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="r")
    transaction = ledger.issue(world.db, world.scope, asset.id, body)
    assert verify_ledger(world.db.reader()).ok
    issuance = world.db.reader().execute("SELECT issuance_account_id FROM assets WHERE id = ?", [asset.id]).fetchone()
    assert issuance is not None

    def shift_balances(tx: duckdb.DuckDBPyConnection, minor: int) -> None:
        tx.execute("UPDATE balances SET balance_minor = balance_minor + ? WHERE account_id = ?", [minor, wallet.id])
        tx.execute("UPDATE balances SET balance_minor = balance_minor - ? WHERE account_id = ?", [minor, issuance[0]])

    with world.db.transaction() as tx:  # a second row with the same id, balances moved to match it
        tx.execute("CREATE TEMP TABLE original AS SELECT * FROM transactions WHERE id = ?", [transaction.id])
        tx.execute("INSERT INTO transactions SELECT * FROM original")
        shift_balances(tx, 100)
    report = verify_ledger(world.db.reader())
    assert report.problems == {"duplicate_transaction_id": [transaction.id]}
    with world.db.transaction() as tx:  # put the ledger back as it was (the fixture verifies it at teardown)
        tx.execute("DELETE FROM transactions WHERE id = ?", [transaction.id])
        tx.execute("INSERT INTO transactions SELECT * FROM original")
        shift_balances(tx, -100)
    assert verify_ledger(world.db.reader()).ok


def test_a_single_call_answers_exactly_what_a_later_read_returns(world: World) -> None:
    asset, giver, taker = world.asset(), world.wallet(), world.wallet()
    answers = [
        ledger.issue(world.db, world.scope, asset.id, rq.IssueRequest(wallet_id=giver.id, amount="5.25", reason="r")),
        ledger.redeem(
            world.db, world.scope, asset.id, rq.RedemptionRequest(wallet_id=giver.id, amount="1.00", reference="x")
        ),
        ledger.transfer(
            world.db,
            world.scope,
            asset.id,
            rq.TransferRequest(from_wallet_id=giver.id, to_wallet_id=taker.id, amount="2.50"),
        ),
    ]
    world.db.ledger_cache.clear()  # and with decimals read from the database rather than the cache
    answers.append(
        ledger.issue(world.db, world.scope, asset.id, rq.IssueRequest(wallet_id=taker.id, amount="0.01", reason="s"))
    )
    for answer in answers:
        assert ledger.get_transaction(world.db, world.scope, answer.id) == answer
