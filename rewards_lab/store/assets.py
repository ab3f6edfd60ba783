"""Assets, with their two system accounts (issuance source, redemption sink) and supply figures."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import duckdb

from rewards_lab.contract.ids import new_id, new_ids
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces import AssetFilter, AssetRow, NewAsset
from rewards_lab.store.queries import RowPage, decoding, fetch_all_as, fetch_one_as, paginate, scalar
from rewards_lab.store.settings_json import expiry_from, expiry_text

TENANT = "a.organization_id = ? AND a.environment = ?"
# issued = what left the issuance account; redeemed = what entered the redemption account.
_TABLE_COLUMNS = [f.name for f in fields(AssetRow)][:-3]
_ASSET_ROW = decoding(AssetRow, {"expiry": expiry_from})  # its expiry policy decoded as it is read
ASSET_SELECT = f"""
    SELECT {", ".join("a." + name for name in _TABLE_COLUMNS)},
           CAST(-coalesce(bi.balance_minor, 0) AS HUGEINT) AS issued_minor,
           CAST(coalesce(br.balance_minor, 0) AS HUGEINT) AS redeemed_minor,
           CAST(coalesce(bb.balance_minor, 0) AS HUGEINT) AS expired_minor
    FROM assets a
    LEFT JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
    LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
    LEFT JOIN balances bb ON bb.account_id = a.breakage_account_id AND bb.asset_id = a.id
"""


class AssetRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection, database: Database | None = None) -> None:
        self.con = con
        self.database = database

    def _forget(self, resource_id: str) -> None:
        """A status change: the writer's ledger cache must read this resource again."""
        if self.database is not None:
            self.database.ledger_cache.forget(resource_id)

    def add(self, scope: Scope, asset_id: str, asset: NewAsset, accounts: tuple[str, str]) -> AssetRow:
        issuance_id, redemption_id = accounts
        self.con.execute(
            "INSERT INTO assets (id, organization_id, environment, name, symbol, type, decimals, "
            "supply_ceiling_minor, status, issuance_account_id, redemption_account_id, created_at, activated_at, "
            "expiry, value_per_unit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'configured', ?, ?, ?, NULL, ?, ?)",
            [
                asset_id,
                *scope.params,
                asset.name,
                asset.symbol,
                asset.type,
                asset.decimals,
                asset.supply_ceiling_minor,
                issuance_id,
                redemption_id,
                utcnow(),
                expiry_text(asset.expiry),
                asset.value_per_unit,
            ],
        )
        self.con.executemany(
            "INSERT INTO system_accounts VALUES (?, ?, ?, ?, ?)",
            [
                [issuance_id, *scope.params, asset_id, "issuance"],
                [redemption_id, *scope.params, asset_id, "redemption"],
            ],
        )
        ceiling = asset.supply_ceiling_minor
        self.con.executemany(  # the system accounts' snapshot rows, with the ceiling as the issuance floor
            "INSERT INTO balances VALUES (?, ?, ?, ?, 0, ?, ?)",
            [
                [*scope.params, issuance_id, asset_id, None if ceiling is None else -ceiling, utcnow()],
                [*scope.params, redemption_id, asset_id, None, utcnow()],
            ],
        )
        if asset.expiry is not None:
            self.start_lots(scope, asset_id)
        row = self.get(scope, asset_id)
        assert row is not None
        return row

    def start_lots(self, scope: Scope, asset_id: str) -> str:
        """The asset tracks lots from now on (idempotent): its breakage account is made, and every wallet's
        positive balance becomes one opening lot that never expires (points issued under no expiry keep that
        promise). Returns the breakage account's id."""
        row = self.con.execute(
            "SELECT breakage_account_id FROM assets WHERE organization_id = ? AND environment = ? AND id = ?",
            [*scope.params, asset_id],
        ).fetchone()
        assert row is not None
        if row[0] is not None:
            return str(row[0])
        self._forget(asset_id)
        breakage_id, now = new_id("account"), utcnow()
        self.con.execute(
            "UPDATE assets SET breakage_account_id = ? WHERE organization_id = ? AND environment = ? AND id = ?",
            [breakage_id, *scope.params, asset_id],
        )
        self.con.execute(
            "INSERT INTO system_accounts VALUES (?, ?, ?, ?, 'breakage')", [breakage_id, *scope.params, asset_id]
        )
        self.con.execute(
            "INSERT INTO balances VALUES (?, ?, ?, ?, 0, NULL, ?)", [*scope.params, breakage_id, asset_id, now]
        )
        opening = self.con.execute(
            "SELECT account_id, balance_minor FROM balances WHERE organization_id = ? AND environment = ? "
            "AND asset_id = ? AND starts_with(account_id, 'wal_') AND balance_minor > 0 ORDER BY account_id",
            [*scope.params, asset_id],
        ).fetchall()
        if opening:
            ids = new_ids("lot", len(opening))
            self.con.executemany(
                "INSERT INTO lots VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, 0, 'opening', NULL, ?, ?)",
                [
                    [lot_id, *scope.params, wallet_id, asset_id, now, balance, balance, now, now]
                    for lot_id, (wallet_id, balance) in zip(ids, opening, strict=True)
                ],
            )
        return breakage_id

    def get(self, scope: Scope, asset_id: str) -> AssetRow | None:
        return fetch_one_as(
            self.con, _ASSET_ROW, f"{ASSET_SELECT} WHERE {TENANT} AND a.id = ?", [*scope.params, asset_id]
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
            _ASSET_ROW,
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

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: AssetFilter) -> RowPage[AssetRow]:
        sql = f"{ASSET_SELECT} WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if filters.status:
            sql += " AND a.status = ?"
            params.append(filters.status)
        listed = paginate(self.con, list_name="assets", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(_ASSET_ROW)
