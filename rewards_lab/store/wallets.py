"""Wallets: the accounts customers hold assets in. A wallet's id is its ledger account id."""

from __future__ import annotations

from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces import WalletFilter, WalletRow
from rewards_lab.store.queries import RowPage, columns, fetch_all_as, fetch_one_as, paginate

TENANT = "organization_id = ? AND environment = ?"
_COLUMNS = columns(WalletRow)


class WalletRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection, database: Database | None = None) -> None:
        self.con = con
        self.database = database

    def _forget(self, resource_id: str) -> None:
        """A status change: the writer's ledger cache must read this resource again."""
        if self.database is not None:
            self.database.ledger_cache.forget(resource_id)

    def add(self, scope: Scope, wallet_id: str, customer_id: str, wallet_type: str, transfer_policy: str) -> WalletRow:
        self.con.execute(
            "INSERT INTO wallets VALUES (?, ?, ?, ?, ?, 'active', ?, ?)",
            [wallet_id, *scope.params, customer_id, wallet_type, transfer_policy, utcnow()],
        )
        row = self.get(scope, wallet_id)
        assert row is not None
        return row

    def get(self, scope: Scope, wallet_id: str) -> WalletRow | None:
        return fetch_one_as(
            self.con, WalletRow, f"SELECT {_COLUMNS} FROM wallets WHERE {TENANT} AND id = ?", [*scope.params, wallet_id]
        )

    def get_many(self, scope: Scope, wallet_ids: list[str]) -> dict[str, WalletRow]:
        rows = fetch_all_as(
            self.con,
            WalletRow,
            f"SELECT {_COLUMNS} FROM wallets WHERE {TENANT} AND id IN (SELECT unnest(?))",
            [*scope.params, wallet_ids],
        )
        return {row.id: row for row in rows}

    def set_status(self, scope: Scope, wallet_id: str, status: str) -> None:
        self._forget(wallet_id)
        self.con.execute(f"UPDATE wallets SET status = ? WHERE {TENANT} AND id = ?", [status, *scope.params, wallet_id])

    def reward_wallets(self, scope: Scope, customer_ids: list[str]) -> dict[str, WalletRow]:
        """The wallet each customer's rewards go to: its first-created `customer` wallet (frozen or not)."""
        rows = fetch_all_as(
            self.con,
            WalletRow,
            f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS}, "
            "row_number() OVER (PARTITION BY customer_id ORDER BY id) AS customer_rank "
            f"FROM wallets WHERE {TENANT} AND type = 'customer' AND customer_id IN (SELECT unnest(?))) ranked "
            "WHERE customer_rank = 1",
            [*scope.params, customer_ids],
        )
        return {row.customer_id: row for row in rows}

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: WalletFilter) -> RowPage[WalletRow]:
        sql = f"SELECT {_COLUMNS} FROM wallets WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        for name in ("customer_id", "status"):
            if getattr(filters, name):
                sql += f" AND {name} = ?"
                params.append(getattr(filters, name))
        return paginate(self.con, list_name="wallets", select_sql=sql, params=params, page=page, sort=sort).typed(
            WalletRow
        )
