"""Lots in DuckDB: one row per credit of an asset that tracks lots (rewards_lab.domain.lots), written set-based
beside the ledger's postings in the same unit of work, so that a lot and its transaction commit together."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.lots import Lot
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueLot, LotFilter, LotRow, LotTaken, NewLot
from rewards_lab.store.queries import RowPage, paginate

TENANT = "organization_id = ? AND environment = ?"
_LOT_COLUMNS = (
    "id, wallet_id, asset_id, issued_at, expires_at, amount_minor, remaining_minor, expired_minor, "
    "source_transaction_id, expired_transaction_id"
)
_NEW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("wallet_id", pa.string()),
        ("asset_id", pa.string()),
        ("issued_at", pa.timestamp("us")),
        ("expires_at", pa.timestamp("us")),
        ("amount_minor", pa.decimal128(38, 0)),
        ("source_transaction_id", pa.string()),
    ]
)
_TAKEN_SCHEMA = pa.schema([("id", pa.string()), ("taken", pa.decimal128(38, 0)), ("expired_by", pa.string())])


class LotRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def open_lots(self, scope: Scope, keys: Collection[tuple[str, str]]) -> dict[tuple[str, str], list[Lot]]:
        """The open lots (something remains) of these (wallet, asset) pairs."""
        found: dict[tuple[str, str], list[Lot]] = {key: [] for key in keys}
        if not keys:
            return found
        wallets = sorted({wallet for wallet, _ in keys})
        assets = sorted({asset for _, asset in keys})
        rows = self.con.execute(
            "SELECT wallet_id, asset_id, id, issued_at, remaining_minor, expires_at, source_transaction_id "
            f"FROM lots WHERE {TENANT} AND remaining_minor > 0 AND wallet_id IN (SELECT unnest(?)) "
            "AND asset_id IN (SELECT unnest(?))",
            [*scope.params, wallets, assets],
        ).fetchall()
        for wallet, asset, lot_id, issued_at, remaining, expires_at, source in rows:
            if (wallet, asset) in found:
                found[(wallet, asset)].append(Lot(lot_id, issued_at, int(remaining), expires_at, source))
        return found

    def write(self, scope: Scope, made: Sequence[NewLot], taken: Sequence[LotTaken]) -> None:
        """Insert the lots credits made, then lower the lots debits took from (an expiry also marks its lot): a
        debit may take from a lot its own batch made (an order and a refund processed together), which must exist
        by then."""
        now = utcnow()
        if made:
            columns = list(zip(*made, strict=True))
            lots_made = pa.Table.from_arrays(  # noqa: F841 - read by the INSERT below (a replacement scan)
                [pa.array(column, field.type) for column, field in zip(columns, _NEW_SCHEMA, strict=True)],
                schema=_NEW_SCHEMA,
            )
            self.con.execute(
                "INSERT INTO lots SELECT id, ?, ?, wallet_id, asset_id, issued_at, expires_at, "
                "CAST(amount_minor AS HUGEINT), CAST(amount_minor AS HUGEINT), 0, source_transaction_id, NULL, ?, ? "
                "FROM lots_made",
                [*scope.params, now, now],
            )
        if taken:
            amounts: dict[str, int] = {}
            expired: dict[str, str] = {}
            for lot_id, part, expired_by in taken:  # a lot a batch takes from twice: one row, the sum
                amounts[lot_id] = amounts.get(lot_id, 0) + part
                if expired_by is not None:
                    expired[lot_id] = expired_by
            lots_taken = pa.Table.from_arrays(  # noqa: F841 - read by the UPDATE below (a replacement scan)
                [
                    pa.array(list(amounts), pa.string()),
                    pa.array(list(amounts.values()), pa.decimal128(38, 0)),
                    pa.array([expired.get(lot_id) for lot_id in amounts], pa.string()),
                ],
                schema=_TAKEN_SCHEMA,
            )
            self.con.execute(
                "UPDATE lots SET remaining_minor = remaining_minor - CAST(t.taken AS HUGEINT), "
                "expired_minor = expired_minor + CASE WHEN t.expired_by IS NULL THEN 0 "
                "ELSE CAST(t.taken AS HUGEINT) END, "
                "expired_transaction_id = coalesce(t.expired_by, expired_transaction_id), updated_at = ? "
                f"FROM lots_taken t WHERE lots.id = t.id AND lots.{TENANT}",
                [now, *scope.params],
            )

    def page(self, scope: Scope, wallet_id: str, page: PageRequest, filters: LotFilter) -> RowPage[LotRow]:
        sql = f"SELECT {_LOT_COLUMNS} FROM lots WHERE {TENANT} AND wallet_id = ?"
        params: list[Any] = [*scope.params, wallet_id]
        if filters.asset_id:
            sql += " AND asset_id = ?"
            params.append(filters.asset_id)
        status = filters.status
        if status == "open":
            sql += " AND remaining_minor > 0"
        elif status == "expired":
            sql += " AND expired_minor > 0"
        elif status == "spent":
            sql += " AND remaining_minor = 0 AND expired_minor = 0"
        listed = paginate(self.con, list_name="lots", select_sql=sql, params=params, page=page, sort="issued_at")
        return listed.typed(LotRow)

    def next_expiry(self, scope: Scope, wallet_id: str) -> dict[str, tuple[datetime, int]]:
        """Per asset: the earliest expiry among the wallet's open lots, and what all lots expiring then hold."""
        rows = self.con.execute(
            "SELECT asset_id, expires_at, amount FROM (SELECT asset_id, expires_at, sum(remaining_minor) AS amount, "
            "row_number() OVER (PARTITION BY asset_id ORDER BY expires_at) AS expiry_rank FROM lots "
            f"WHERE {TENANT} AND wallet_id = ? AND remaining_minor > 0 AND expires_at IS NOT NULL "
            "GROUP BY asset_id, expires_at) ranked WHERE expiry_rank = 1",
            [*scope.params, wallet_id],
        ).fetchall()
        return {asset: (at, int(amount)) for asset, at, amount in rows}

    def due(self, as_of: datetime, limit: int) -> list[DueLot]:
        """Open lots of every tenant whose expiry has come (expires_at <= as_of), oldest expiry first."""
        rows = self.con.execute(
            "SELECT organization_id, environment, id, wallet_id, asset_id, remaining_minor, expires_at FROM lots "
            "WHERE remaining_minor > 0 AND expires_at <= ? ORDER BY expires_at, issued_at, id LIMIT ?",
            [as_of, limit],
        ).fetchall()
        return [DueLot(o, e, i, w, a, int(m), t) for o, e, i, w, a, m, t in rows]

    def due_among(self, scope: Scope, lot_ids: Sequence[str], as_of: datetime) -> list[DueLot]:
        """Of these lots, those of the tenant still open and due by `as_of`, with what they hold now, oldest expiry
        first (read again inside the unit of work that expires them: a debit may have taken from them since)."""
        if not lot_ids:
            return []
        rows = self.con.execute(
            "SELECT organization_id, environment, id, wallet_id, asset_id, remaining_minor, expires_at FROM lots "
            f"WHERE {TENANT} AND id IN (SELECT unnest(?)) AND remaining_minor > 0 AND expires_at <= ? "
            "ORDER BY expires_at, issued_at, id",
            [*scope.params, list(lot_ids), as_of],
        ).fetchall()
        return [DueLot(o, e, i, w, a, int(m), t) for o, e, i, w, a, m, t in rows]
