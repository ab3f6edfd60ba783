"""The benchmarks' set-based seeding (benchmarks/seeding.py): the rows read back as those of the service calls."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.service import customers
from rewards_lab.store.database import Database
from rewards_lab.store.uow import unit_of_work

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from seeding import add_customers, add_wallets  # noqa: E402


def test_add_many_creates_customers_and_their_open_active_wallets(db: Database, scope: Scope) -> None:
    customer_ids, wallet_ids = new_ids("customer", 3), new_ids("wallet", 3)
    with unit_of_work(db) as uow:
        add_customers(uow.con, scope, customer_ids, ["x0", "x1", "x2"])
        add_wallets(uow.con, scope, wallet_ids, customer_ids, "customer", "open")
    for customer_id, wallet_id, external_id in zip(customer_ids, wallet_ids, ["x0", "x1", "x2"], strict=True):
        assert customers.get_customer(db, scope, external_id).id == customer_id
        wallet = customers.get_wallet(db, scope, wallet_id)
        assert (wallet.customer_id, wallet.status, wallet.transfer_policy) == (customer_id, "active", "open")


def test_add_many_refuses_a_duplicate_external_id_and_writes_nothing(db: Database, scope: Scope) -> None:
    with pytest.raises(duckdb.ConstraintException), unit_of_work(db) as uow:
        add_customers(uow.con, scope, new_ids("customer", 2), ["same", "same"])
    count = db.reader().execute("SELECT count(*) FROM customers").fetchone()
    assert count == (0,)
