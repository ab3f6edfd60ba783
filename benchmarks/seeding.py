"""Set-based seeding for benchmarks: many customers and their wallets in one statement each.

A benchmark needs thousands of wallets before its clock starts; one service call per wallet would make the set-up
the slowest part of the run. These INSERTs write the same rows `service.customers.create_customer` and
`create_wallet` would (no email, no country; active wallets), which tests/store/test_bulk_seeding.py checks.
"""

from __future__ import annotations

import duckdb

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow


def add_customers(
    con: duckdb.DuckDBPyConnection, scope: Scope, customer_ids: list[str], external_ids: list[str]
) -> None:
    """Many customers (no email, no country, no attributes) in one statement."""
    con.execute(
        "INSERT INTO customers SELECT unnest(?), ?, ?, unnest(?), NULL, NULL, ?, '{}'",
        [customer_ids, *scope.params, external_ids, utcnow()],
    )


def add_wallets(
    con: duckdb.DuckDBPyConnection,
    scope: Scope,
    wallet_ids: list[str],
    customer_ids: list[str],
    wallet_type: str,
    transfer_policy: str,
) -> None:
    """Many active wallets of one type and policy in one statement (`wallet_ids[i]` held by `customer_ids[i]`)."""
    con.execute(
        "INSERT INTO wallets SELECT unnest(?), ?, ?, unnest(?), ?, 'active', ?, ?",
        [wallet_ids, *scope.params, customer_ids, wallet_type, transfer_policy, utcnow()],
    )
