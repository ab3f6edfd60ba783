"""Assets, with their two system accounts (issuance source, redemption sink) and supply figures."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces.assets import AssetRow
from rewards_lab.store.queries import RowPage, fetch_all_as, fetch_one_as, paginate, scalar

TENANT = "a.organization_id = ? AND a.environment = ?"
# issued = what left the issuance account; redeemed = what entered the redemption account.
_TABLE_COLUMNS = [f.name for f in fields(AssetRow)][:-2]
ASSET_SELECT = f"""
    SELECT {", ".join("a." + name for name in _TABLE_COLUMNS)},
           CAST(-coalesce(bi.balance_minor, 0) AS HUGEINT) AS issued_minor,
           CAST(coalesce(br.balance_minor, 0) AS HUGEINT) AS redeemed_minor
    FROM assets a
    LEFT JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
    LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
"""


class AssetRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection, database: Database | None = None) -> None:
        self.con = con
        self.database = database

    def _forget(self, resource_id: str) -> None:
        """A status change: the writer's ledger cache must read this resource again."""
        if self.database is not None:
            self.database.ledger_cache.forget(resource_id)

    def add(self, scope: Scope, asset_id: str, fields: dict[str, Any], accounts: tuple[str, str]) -> AssetRow:
        issuance_id, redemption_id = accounts
        self.con.execute(
            "INSERT INTO assets VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'configured', ?, ?, ?, NULL)",
            [
                asset_id,
                *scope.params,
                fields["name"],
                fields["symbol"],
                fields["type"],
                fields["decimals"],
                fields["supply_ceiling_minor"],
                issuance_id,
                redemption_id,
                utcnow(),
            ],
        )
        self.con.executemany(
            "INSERT INTO system_accounts VALUES (?, ?, ?, ?, ?)",
            [
                [issuance_id, *scope.params, asset_id, "issuance"],
                [redemption_id, *scope.params, asset_id, "redemption"],
            ],
        )
        ceiling = fields["supply_ceiling_minor"]
        self.con.executemany(  # the system accounts' snapshot rows, with the ceiling as the issuance floor
            "INSERT INTO balances VALUES (?, ?, ?, ?, 0, ?, ?)",
            [
                [*scope.params, issuance_id, asset_id, None if ceiling is None else -ceiling, utcnow()],
                [*scope.params, redemption_id, asset_id, None, utcnow()],
            ],
        )
        row = self.get(scope, asset_id)
        assert row is not None
        return row

    def get(self, scope: Scope, asset_id: str) -> AssetRow | None:
        return fetch_one_as(
            self.con, AssetRow, f"{ASSET_SELECT} WHERE {TENANT} AND a.id = ?", [*scope.params, asset_id]
        )

    def decimals(self, scope: Scope, asset_id: str) -> int | None:
        """The asset's decimals (a primary-key lookup, for the hot path of single ledger calls)."""
        row = self.con.execute(
            "SELECT decimals FROM assets WHERE id = ? AND organization_id = ? AND environment = ?",
            [asset_id, *scope.params],
        ).fetchone()
        return None if row is None else int(row[0])

    def get_many(self, scope: Scope, asset_ids: list[str]) -> dict[str, AssetRow]:
        rows = fetch_all_as(
            self.con,
            AssetRow,
            f"{ASSET_SELECT} WHERE {TENANT} AND a.id IN (SELECT unnest(?))",
            [*scope.params, asset_ids],
        )
        return {row.id: row for row in rows}

    def set_status(self, scope: Scope, asset_id: str, status: str, *, activated: bool = False) -> None:
        self._forget(asset_id)
        extra = ", activated_at = coalesce(activated_at, ?)" if activated else ""
        params: list[Any] = [status] + ([utcnow()] if activated else [])
        self.con.execute(
            f"UPDATE assets SET status = ?{extra} WHERE organization_id = ? AND environment = ? AND id = ?",
            [*params, *scope.params, asset_id],
        )

    def symbol_in_use(self, scope: Scope, symbol: str, except_asset_id: str) -> bool:
        count = scalar(
            self.con,
            "SELECT count(*) FROM assets WHERE organization_id = ? AND environment = ? AND symbol = ? "
            "AND status IN ('active', 'paused') AND id <> ?",
            [*scope.params, symbol, except_asset_id],
        )
        return bool(count)

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[AssetRow]:
        sql = f"{ASSET_SELECT} WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if filters.get("status"):
            sql += " AND a.status = ?"
            params.append(filters["status"])
        listed = paginate(self.con, list_name="assets", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(AssetRow)
