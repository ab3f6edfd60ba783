"""The ledger's storage: transactions (two-legged postings) and the balance snapshot, written in batches.

`write_postings` is the one way postings reach the database. A whole batch takes three statements inside the
caller's database transaction: one INSERT of the transactions (from Arrow), one set-based UPDATE of the balance
snapshot by per-account deltas, and one query that asserts the invariants again on what was written (no
wallet balance negative, no asset's outstanding supply above its ceiling). The table's CHECK constraints hold
amount > 0 and source != destination. A failed assertion raises and the caller's transaction rolls back, so
nothing partial is ever committed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.posting_policy import AssetState, WalletState
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
_DELTA_SCHEMA = pa.schema([("account_id", pa.string()), ("asset_id", pa.string()), ("delta", pa.int64())])

# The invariants over the accounts and assets the batch touched (the second place they are asserted).
_CHECK_SQL = """
SELECT 'negative_balance' AS problem, b.account_id AS subject
FROM balances b JOIN balance_deltas d ON b.account_id = d.account_id AND b.asset_id = d.asset_id
WHERE b.balance_minor < 0 AND starts_with(b.account_id, 'wal_')
UNION ALL
SELECT 'ceiling_exceeded', a.id FROM assets a
JOIN balances bi ON bi.account_id = a.issuance_account_id AND bi.asset_id = a.id
LEFT JOIN balances br ON br.account_id = a.redemption_account_id AND br.asset_id = a.id
WHERE a.id IN (SELECT DISTINCT asset_id FROM balance_deltas) AND a.supply_ceiling_minor IS NOT NULL
  AND -bi.balance_minor - coalesce(br.balance_minor, 0) > a.supply_ceiling_minor
LIMIT 1
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


def _deltas_table(postings: Sequence[Posting]) -> pa.Table:
    """The net change of every (account, asset) the batch touches: what the balance UPDATE applies."""
    deltas: dict[tuple[str, str], int] = defaultdict(int)
    for p in postings:
        deltas[(p.source_account_id, p.asset_id)] -= p.amount_minor
        deltas[(p.destination_account_id, p.asset_id)] += p.amount_minor
    keys = list(deltas)
    return pa.table(
        [[k[0] for k in keys], [k[1] for k in keys], [deltas[k] for k in keys]],
        schema=_DELTA_SCHEMA,
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
        deltas = _deltas_table(postings)
        con.register("txn_batch", _postings_table(postings))
        con.register("balance_deltas", deltas)
        try:
            con.execute(
                "INSERT INTO transactions SELECT id, ?, ?, kind, asset_id, amount_minor, source_account_id, "
                "destination_account_id, memo, execution_id, ? FROM txn_batch",
                [*scope.params, now],
            )
            self._fault("after_entries")
            updated = con.execute(
                "UPDATE balances SET balance_minor = balance_minor + d.delta, updated_at = ? FROM balance_deltas d "
                "WHERE balances.account_id = d.account_id AND balances.asset_id = d.asset_id",
                [now],
            ).fetchone()
            if updated is None or int(updated[0]) < deltas.num_rows:
                con.execute(  # first movement of an (account, asset): its snapshot row starts here
                    "INSERT INTO balances SELECT ?, ?, d.account_id, d.asset_id, d.delta, ? FROM balance_deltas d "
                    "ANTI JOIN balances b ON b.account_id = d.account_id AND b.asset_id = d.asset_id",
                    [*scope.params, now],
                )
            self._fault("after_balances")
            problems = con.execute(_CHECK_SQL).fetchall()
        finally:
            con.unregister("txn_batch")
            con.unregister("balance_deltas")
        if problems:
            problem, subject = problems[0]
            raise ServiceError(
                "internal_error", f"ledger invariant failed: {problem} ({subject})", invariant=problem, subject=subject
            )

    # the state the posting policy decides against ---------------------------------------------------------
    def wallet_states(self, scope: Scope, wallet_ids: list[str]) -> tuple[set[str], dict[str, WalletState]]:
        """(ids that exist, states of the ones that are not ordinary): a batch of ordinary wallets returns no row."""
        rows = self.con.execute(
            "SELECT r.id, w.status, w.transfer_policy FROM (SELECT unnest(?) AS id) r "
            "LEFT JOIN wallets w ON w.id = r.id AND w.organization_id = ? AND w.environment = ? "
            "WHERE w.id IS NULL OR w.status <> 'active' OR w.transfer_policy <> 'open'",
            [wallet_ids, *scope.params],
        ).fetchall()
        missing = {wallet_id for wallet_id, status, _ in rows if status is None}
        unusual = {wallet_id: WalletState(status, policy) for wallet_id, status, policy in rows if status is not None}
        return set(wallet_ids) - missing, unusual

    def asset_states(self, scope: Scope, asset_ids: list[str]) -> dict[str, AssetState]:
        rows = self.con.execute(
            "SELECT a.id, a.status, a.decimals, a.supply_ceiling_minor, a.issuance_account_id, "
            "a.redemption_account_id, "
            "-coalesce((SELECT balance_minor FROM balances b WHERE b.account_id = a.issuance_account_id), 0) "
            "- coalesce((SELECT balance_minor FROM balances b WHERE b.account_id = a.redemption_account_id), 0) "
            "FROM assets a WHERE a.organization_id = ? AND a.environment = ? AND a.id IN (SELECT unnest(?))",
            [*scope.params, asset_ids],
        ).fetchall()
        return {
            row[0]: AssetState(
                row[1], int(row[2]), None if row[3] is None else int(row[3]), row[4], row[5], int(row[6])
            )
            for row in rows
        }

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
