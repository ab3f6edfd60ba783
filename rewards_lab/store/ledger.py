"""The ledger's storage: transactions, entries and the balance snapshot, written set-based in batches.

`write_postings` is the one way postings reach the database. It inserts a whole batch with a few statements
(transactions, entries, one balance upsert) inside the caller's database transaction, then asserts the
invariants again on what it wrote: every transaction nets to zero per asset with at least two entries, no wallet
balance is negative, and no asset's outstanding supply exceeds its ceiling. A failed assertion raises and the
caller's transaction rolls back, so nothing partial is ever committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.ledger import Posting
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.queries import Row, RowPage, fetch_all, fetch_one, paginate

TENANT = "organization_id = ? AND environment = ?"
WALLET_PREFIX = "wal_"

_TXN_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("kind", pa.string()),
        ("asset_id", pa.string()),
        ("amount_minor", pa.int64()),
        ("source_account_id", pa.string()),
        ("destination_account_id", pa.string()),
        ("memo", pa.string()),
        ("execution_id", pa.string()),
    ]
)

# The invariants, checked over the batch just written (the second place they are asserted).
_CHECK_SQL = """
WITH unbalanced AS (
    SELECT 'ledger_unbalanced' AS problem, transaction_id AS subject FROM entry_batch
    GROUP BY transaction_id, asset_id HAVING sum(amount_minor) <> 0 OR count(*) < 2
    LIMIT 1
), negative AS (
    SELECT 'negative_balance' AS problem, b.account_id AS subject FROM balances b
    JOIN (SELECT DISTINCT account_id, asset_id FROM entry_batch WHERE starts_with(account_id, 'wal_')) t
      ON b.account_id = t.account_id AND b.asset_id = t.asset_id
    WHERE b.balance_minor < 0
    LIMIT 1
), over_ceiling AS (
    SELECT 'ceiling_exceeded' AS problem, a.id AS subject FROM assets a
    JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
    LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
    WHERE a.id IN (SELECT DISTINCT asset_id FROM entry_batch) AND a.supply_ceiling_minor IS NOT NULL
      AND -bi.balance_minor - coalesce(br.balance_minor, 0) > a.supply_ceiling_minor
    LIMIT 1
)
SELECT * FROM unbalanced UNION ALL SELECT * FROM negative UNION ALL SELECT * FROM over_ceiling
"""


def _postings_table(postings: Sequence[Posting]) -> pa.Table:
    return pa.table(
        [
            [p.transaction_id for p in postings],
            [p.kind for p in postings],
            [p.asset_id for p in postings],
            [p.amount_minor for p in postings],
            [p.source_account_id for p in postings],
            [p.destination_account_id for p in postings],
            [p.memo for p in postings],
            [p.execution_id for p in postings],
        ],
        schema=_TXN_SCHEMA,
    )


class LedgerRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection, database: Database | None = None) -> None:
        self.con = con
        self.database = database

    def _fault(self, point: str) -> None:
        if self.database is not None:
            self.database.fault(point)

    def write_postings(self, scope: Scope, postings: Sequence[Posting]) -> None:
        """Write a batch of postings set-based; raise (and so roll back) if any invariant fails afterwards."""
        if not postings:
            return
        con = self.con
        now = utcnow()
        con.register("txn_batch", _postings_table(postings))
        try:
            con.execute(
                "INSERT INTO transactions SELECT id, ?, ?, kind, asset_id, amount_minor, source_account_id, "
                "destination_account_id, memo, execution_id, ? FROM txn_batch",
                [*scope.params, now],
            )
            # Two entries per posting: the source gives, the destination receives.
            con.execute(
                "CREATE OR REPLACE TEMP TABLE entry_batch AS "
                "SELECT id AS transaction_id, source_account_id AS account_id, asset_id, -amount_minor AS amount_minor "
                "FROM txn_batch UNION ALL "
                "SELECT id, destination_account_id, asset_id, amount_minor FROM txn_batch"
            )
            con.execute(
                "INSERT INTO entries SELECT transaction_id, ?, ?, account_id, asset_id, amount_minor, ? "
                "FROM entry_batch",
                [*scope.params, now],
            )
            self._fault("after_entries")
            con.execute(
                "INSERT INTO balances SELECT ?, ?, account_id, asset_id, sum(amount_minor), ? FROM entry_batch "
                "GROUP BY account_id, asset_id "
                "ON CONFLICT (account_id, asset_id) DO UPDATE SET "
                "balance_minor = balance_minor + excluded.balance_minor, updated_at = excluded.updated_at",
                [*scope.params, now],
            )
            self._fault("after_balances")
            problems = con.execute(_CHECK_SQL).fetchall()
        finally:
            con.unregister("txn_batch")
        if problems:
            problem, subject = problems[0]
            raise ServiceError(
                "internal_error",
                f"ledger invariant failed: {problem} ({subject})",
                invariant=problem,
                subject=subject,
            )

    # reads ----------------------------------------------------------------------------------------------
    def balances_of(
        self, scope: Scope, account_ids: list[str], asset_ids: list[str] | None = None
    ) -> dict[tuple[str, str], int]:
        sql = (
            f"SELECT account_id, asset_id, balance_minor FROM balances WHERE {TENANT} "
            "AND account_id IN (SELECT unnest(?))"
        )
        params: list[Any] = [*scope.params, account_ids]
        if asset_ids is not None:
            sql += " AND asset_id IN (SELECT unnest(?))"
            params.append(asset_ids)
        return {(a, s): int(b) for a, s, b in self.con.execute(sql, params).fetchall()}

    def wallet_balances(self, scope: Scope, wallet_id: str) -> list[Row]:
        return fetch_all(
            self.con,
            "SELECT b.asset_id, a.symbol, a.decimals, b.balance_minor, b.updated_at FROM balances b "
            "JOIN assets a ON a.id = b.asset_id "
            "WHERE b.organization_id = ? AND b.environment = ? AND b.account_id = ? ORDER BY b.asset_id",
            [*scope.params, wallet_id],
        )

    def get_transaction(self, scope: Scope, transaction_id: str) -> Row | None:
        return fetch_one(
            self.con, f"SELECT * FROM transactions WHERE {TENANT} AND id = ?", [*scope.params, transaction_id]
        )

    def entries_of(self, scope: Scope, transaction_ids: list[str]) -> list[Row]:
        return fetch_all(
            self.con,
            f"SELECT transaction_id, account_id, asset_id, amount_minor FROM entries WHERE {TENANT} "
            "AND transaction_id IN (SELECT unnest(?)) ORDER BY transaction_id, amount_minor",
            [*scope.params, transaction_ids],
        )

    def list_transactions(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage:
        sql = f"SELECT * FROM transactions WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if filters.get("wallet_id"):
            sql += " AND (source_account_id = ? OR destination_account_id = ?)"
            params += [filters["wallet_id"], filters["wallet_id"]]
        for name in ("asset_id", "kind"):
            if filters.get(name):
                sql += f" AND {name} = ?"
                params.append(filters[name])
        return paginate(self.con, list_name="transactions", select_sql=sql, params=params, page=page, sort=sort)

    def reward_totals(self, scope: Scope, wallet_ids: list[str], since: Any) -> list[Row]:
        return fetch_all(
            self.con,
            f"SELECT destination_account_id AS wallet_id, asset_id, sum(amount_minor) AS issued_minor "
            f"FROM transactions WHERE {TENANT} AND kind IN ('reward', 'issue') "
            "AND destination_account_id IN (SELECT unnest(?)) AND created_at >= ? GROUP BY ALL",
            [*scope.params, wallet_ids, since],
        )
