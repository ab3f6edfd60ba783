"""The ledger's storage: transactions (two-legged postings) and the balance snapshot, written in batches.

`write_postings` is the one way postings reach the database: it takes a batch decision
(`domain.posting_decision`). A whole batch takes two statements inside the caller's database transaction: one
INSERT of the transactions and one set-based UPDATE of the balance snapshot by per-account deltas (plus, the
first time an account holds an asset, one INSERT of its snapshot row). Both read Arrow tables, so no SQL runs per
posting.

The invariants are asserted here a second time, by the storage engine itself: CHECK constraints refuse a
non-positive amount, a posting from an account to itself, and any balance below its floor (0 for a wallet; for an
asset's issuance account -(ceiling + redeemed), which is "outstanding supply <= ceiling"). A violation raises and
the caller's transaction rolls back, so nothing partial is ever committed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import time_ms_column, time_ms_of
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.posting_decision import PostingDecision
from rewards_lab.domain.posting_policy import ORDINARY_WALLET, AssetState, LedgerState, WalletState
from rewards_lab.domain.posting_whole import AcceptedBatch
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.interfaces import TransactionFilter, TransactionRow, WalletBalanceRow
from rewards_lab.store.ledger_cache import BalanceKey, LedgerCache
from rewards_lab.store.queries import RowPage, paginate
from rewards_lab.store.settings_json import expiry_from

TENANT = "organization_id = ? AND environment = ?"
# What a reader sees of a transaction (`id_time_ms` only serves lookups by id).
_TRANSACTION = ", ".join(TransactionRow._fields)
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
        ("id_time_ms", pa.int64()),
    ]
)
_DELTA_SCHEMA = pa.schema(
    [("account_id", pa.string()), ("asset_id", pa.string()), ("delta", pa.int64()), ("floor_delta", pa.int64())]
)
# A batch's net change of one account is a sum of many amounts, so it can exceed int64 (ten rewards of 10**18
# do). Such a batch's deltas travel as DECIMAL(38, 0) (exact; the store adds them to its HUGEINT balances).
_WIDE_DELTA_SCHEMA = pa.schema(
    [
        ("account_id", pa.string()),
        ("asset_id", pa.string()),
        ("delta", pa.decimal128(38, 0)),
        ("floor_delta", pa.decimal128(38, 0)),
    ]
)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
MAX_FLOOR_DEPTH = 10**38 - 1  # no balance goes below minus everything ever issued (posting_policy.MAX_ISSUED_MINOR)
_INSERT_TRANSACTIONS = (
    "INSERT INTO transactions SELECT id, ?, ?, kind, asset_id, amount_minor, source_account_id, "
    "destination_account_id, memo, execution_id, ?, id_time_ms FROM txn_batch"
)
# A wallet's floor is 0, or the balance a "negative" clawback left it at; credits raise it with the balance up to 0
# (`floor_minor < 0` holds only for such wallets: an issuance account's floor is -(ceiling + redeemed) <= 0, and
# is moved by floor_delta alone).
_UPDATE_BALANCES = (
    "UPDATE balances SET balance_minor = balance_minor + CAST(d.delta AS HUGEINT), "
    "floor_minor = CASE WHEN starts_with(balances.account_id, 'wal_') AND floor_minor < 0 "
    "THEN LEAST(0, balance_minor + CAST(d.delta AS HUGEINT)) "
    "ELSE floor_minor + CAST(d.floor_delta AS HUGEINT) END, "
    "updated_at = ? FROM balance_deltas d "
    "WHERE balances.account_id = d.account_id AND balances.asset_id = d.asset_id"
)
# The first movement of an (account, asset): its snapshot row starts here; a wallet's floor is zero.
_INSERT_BALANCES = (
    "INSERT INTO balances SELECT ?, ?, d.account_id, d.asset_id, CAST(d.delta AS HUGEINT), "
    "CASE WHEN starts_with(d.account_id, 'wal_') THEN 0 END, ? FROM balance_deltas d "
    "ANTI JOIN balances b ON b.account_id = d.account_id AND b.asset_id = d.asset_id"
)


def postings_table(postings: Sequence[Posting]) -> pa.Table:
    if not postings:
        return _TXN_SCHEMA.empty_table()
    columns: list[Any] = list(zip(*postings, strict=True))  # Posting's fields are in _TXN_SCHEMA's order
    columns.append(time_ms_column(columns[0]))
    return pa.Table.from_arrays(
        [pa.array(column, type=f.type) for column, f in zip(columns, _TXN_SCHEMA, strict=True)], schema=_TXN_SCHEMA
    )


def batch_tables(batch: AcceptedBatch) -> tuple[pa.Table, pa.Table]:
    """`postings_table` and `deltas_table` of a batch the policy accepted whole, straight from its columns."""
    size = len(batch.transaction_ids)
    transactions = pa.Table.from_arrays(
        [
            pa.array(batch.transaction_ids, pa.string()),
            pa.array(batch.kinds, pa.string()),
            pa.array([batch.asset_id] * size, pa.string()),
            pa.array(batch.amounts, pa.int64()),
            pa.array(batch.sources, pa.string()),
            pa.array(batch.destinations, pa.string()),
            pa.array(batch.memos, pa.string()),
            pa.array(batch.execution_ids, pa.string()),
            pa.array(time_ms_column(batch.transaction_ids), pa.int64()),
        ],
        schema=_TXN_SCHEMA,
    )
    accounts = len(batch.accounts)
    deltas = pa.Table.from_arrays(
        [
            pa.array(batch.accounts, pa.string()),
            pa.array([batch.asset_id] * accounts, pa.string()),
            pa.array(batch.deltas, pa.int64()),
            pa.array(np.zeros(accounts, dtype=np.int64), pa.int64()),  # no redemption: no floor moves
        ],
        schema=_DELTA_SCHEMA,
    )
    return transactions, deltas


def deltas_table(postings: Sequence[Posting], issuance_accounts: Mapping[str, str]) -> pa.Table:
    """The net change of every (account, asset) the batch touches, and of the issuance accounts' floors.

    A redemption (or an expiry) lowers the issuance account's floor by its amount: value that left circulation
    makes room under the ceiling.
    """
    deltas: dict[tuple[str, str], int] = {}
    floors: dict[tuple[str, str], int] = {}
    get = deltas.get
    for _, kind, asset_id, amount, source, destination, _, _ in postings:
        key = (source, asset_id)
        deltas[key] = get(key, 0) - amount
        key = (destination, asset_id)
        deltas[key] = get(key, 0) + amount
        if kind in ("redemption", "expire"):  # both leave circulation: room under the ceiling again
            key = (issuance_accounts[asset_id], asset_id)
            floors[key] = floors.get(key, 0) - amount
            deltas[key] = get(key, 0)
    keys = list(deltas)
    accounts, assets = zip(*keys, strict=True) if keys else ((), ())
    changes = list(deltas.values())
    floor_changes = [floors.get(k, 0) for k in keys]
    schema = _DELTA_SCHEMA if _fit_int64(changes) and _fit_int64(floor_changes) else _WIDE_DELTA_SCHEMA
    return pa.Table.from_arrays(
        [
            pa.array(accounts, pa.string()),
            pa.array(assets, pa.string()),
            pa.array(changes, schema.field("delta").type),
            pa.array(floor_changes, schema.field("floor_delta").type),
        ],
        schema=schema,
    )


def _fit_int64(values: list[int]) -> bool:
    return not values or (min(values) >= _INT64_MIN and max(values) <= _INT64_MAX)


class LedgerRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection, database: Database | None = None) -> None:
        self.con = con
        self.database = database
        self.written_at: datetime | None = None  # `created_at` of the transactions written last

    def _fault(self, point: str) -> None:
        if self.database is not None:
            self.database.fault(point)

    def write_postings(self, scope: Scope, decision: PostingDecision, state: LedgerState) -> None:
        """Write what a batch decision accepted (a single posting is a batch of one), set-based, and let the
        writer's cache remember the balances and supply it leads to (`state`, as the decision left it; kept
        only if the unit of work commits). The storage engine's constraints refuse any broken invariant.
        """
        batch = decision.to_write
        if isinstance(batch, AcceptedBatch):  # accepted whole: written and remembered from its columns
            self._write_tables(scope, *batch_tables(batch))
            self._remember(scope, state)
            self._cache().remember_balances(
                scope, batch.asset_id, dict(zip(batch.accounts, batch.balances, strict=True))
            )
            return
        if not batch:
            return
        deltas = deltas_table(batch, state.issuance_accounts())
        if state.below_zero:  # a "negative" clawback: the wallet's floor goes down with it
            self._lower_floors(scope, state.below_zero)
        self._write_tables(scope, postings_table(batch), deltas)
        changed = zip(deltas["account_id"].to_pylist(), deltas["asset_id"].to_pylist(), strict=True)
        self._remember(scope, state, changed)

    def _lower_floors(self, scope: Scope, wallets: set[tuple[str, str]]) -> None:
        """Before the batch's update: the floor of each wallet a "negative" clawback takes below zero becomes its
        lowest possible value, then the update itself sets it to the balance it leaves (LEAST(0, balance))."""
        accounts, assets = zip(*sorted(wallets), strict=True)
        self.con.execute(
            f"UPDATE balances SET floor_minor = -{MAX_FLOOR_DEPTH}::HUGEINT "
            "FROM (SELECT unnest(CAST(? AS VARCHAR[])) AS account_id, unnest(CAST(? AS VARCHAR[])) AS asset_id) w "
            "WHERE balances.account_id = w.account_id AND balances.asset_id = w.asset_id "
            "AND balances.organization_id = ? AND balances.environment = ? "
            "AND starts_with(balances.account_id, 'wal_')",
            [list(accounts), list(assets), *scope.params],
        )

    def _write_tables(self, scope: Scope, txn_batch: pa.Table, balance_deltas: pa.Table) -> None:
        """The statements of `write_postings`. DuckDB reads the Arrow tables `txn_batch` and `balance_deltas` that
        the SQL names from this method's own parameters (a replacement scan): registering them explicitly
        (`con.register`) makes a catalog change inside the transaction on every batch, which costs more than the
        statements themselves for a small batch (docs/decisions.md, "Ledger and money": "Arrow tables reach DuckDB
        by a replacement scan")."""
        con = self.con
        now = self.written_at = utcnow()
        try:
            con.execute(_INSERT_TRANSACTIONS, [*scope.params, now])
            self._fault("after_entries")
            updated = con.execute(_UPDATE_BALANCES, [now]).fetchone()
            if updated is None or int(updated[0]) < balance_deltas.num_rows:
                con.execute(_INSERT_BALANCES, [*scope.params, now])
            self._fault("after_balances")
        except duckdb.ConstraintException as error:
            raise ServiceError(
                "internal_error", "ledger invariant refused by the store", invariant=_invariant(str(error))
            ) from error
        except duckdb.OutOfRangeException as error:  # a HUGEINT balance overflowed: the policy's limit prevents it
            raise ServiceError(
                "internal_error", "ledger invariant refused by the store", invariant="balance_out_of_range"
            ) from error

    # the state the posting policy decides against ---------------------------------------------------------
    def ledger_state(self, scope: Scope, wallet_ids: set[str], accounts: Mapping[str, Collection[str]]) -> LedgerState:
        """The policy's view of these wallets, of these assets and of the balances of `accounts` (asset id ->
        account ids) in them: from the writer's cache where it has them, from the database (in at most three
        queries) where it does not; what is read is remembered at once (in the unit of work's pending layer, kept
        only if it commits)."""
        cache = self._cache()
        known, unusual, to_read = cache.wallets(scope, wallet_ids)
        if to_read:
            read = self._read_wallets(scope, to_read)
            cache.remember(scope, read, {}, {})
            known.update(read)
            unusual.update({w: state for w, state in read.items() if state != ORDINARY_WALLET})
        assets: dict[str, AssetState] = {}
        missing_assets = []
        for asset_id in accounts:
            cached = cache.asset(scope, asset_id)
            if cached is None:
                missing_assets.append(asset_id)
            else:
                assets[asset_id] = cached
        if missing_assets:
            read_assets = self._read_assets(scope, missing_assets)
            cache.remember(scope, {}, read_assets, {})
            assets.update(read_assets)
        balances: dict[BalanceKey, int] = {}
        unread: list[BalanceKey] = []
        for asset_id, account_ids in accounts.items():
            asset = assets.get(asset_id)
            if asset is not None:
                account_ids = [*account_ids, asset.issuance_account_id, asset.redemption_account_id]
            found, unknown = cache.balances(scope, asset_id, account_ids)
            balances.update({(account_id, asset_id): value for account_id, value in found.items()})
            unread.extend((account_id, asset_id) for account_id in unknown)
        if unread:
            read_balances = self._read_balances(scope, unread)
            cache.remember(scope, {}, {}, read_balances)
            balances.update(read_balances)
        return LedgerState(assets, known, unusual, balances)

    def _remember(self, scope: Scope, state: LedgerState, changed: Iterable[BalanceKey] = ()) -> None:
        """After a successful write: the balances it `changed` and the assets' outstanding supply, as the state
        now has them, are what the database holds (once committed). What was read is remembered already."""
        assets = {a: replace(s, outstanding_minor=state.outstanding[a]) for a, s in state.assets.items()}
        balances = state.balances
        self._cache().remember(scope, {}, assets, {key: balances[key] for key in changed})

    def cached_decimals(self, scope: Scope, asset_id: str) -> int | None:
        asset = self._cache().asset(scope, asset_id)
        return None if asset is None else asset.decimals

    def _cache(self) -> LedgerCache:
        # Without a database (a bare connection) a scratch cache outside any unit of work remembers nothing.
        return self.database.ledger_cache if self.database is not None else LedgerCache()

    def _read_wallets(self, scope: Scope, wallet_ids: list[str]) -> dict[str, WalletState]:
        rows = self.con.execute(
            f"SELECT id, status, transfer_policy FROM wallets WHERE {TENANT} AND id IN (SELECT unnest(?))",
            [*scope.params, wallet_ids],
        ).fetchall()
        ordinary = (ORDINARY_WALLET.status, ORDINARY_WALLET.transfer_policy)
        return {
            wallet_id: ORDINARY_WALLET if (status, policy) == ordinary else WalletState(status, policy)
            for wallet_id, status, policy in rows
        }

    def _read_assets(self, scope: Scope, asset_ids: list[str]) -> dict[str, AssetState]:
        rows = self.con.execute(
            "SELECT a.id, a.status, a.decimals, a.supply_ceiling_minor, a.issuance_account_id, "
            "a.redemption_account_id, "
            "-coalesce((SELECT balance_minor FROM balances b WHERE b.account_id = a.issuance_account_id), 0) "
            "- coalesce((SELECT balance_minor FROM balances b WHERE b.account_id = a.redemption_account_id), 0) "
            "- coalesce((SELECT balance_minor FROM balances b WHERE b.account_id = a.breakage_account_id), 0), "
            "a.breakage_account_id, a.expiry "
            "FROM assets a WHERE a.organization_id = ? AND a.environment = ? AND a.id IN (SELECT unnest(?))",
            [*scope.params, asset_ids],
        ).fetchall()
        return {
            row[0]: AssetState(
                row[1],
                int(row[2]),
                None if row[3] is None else int(row[3]),
                row[4],
                row[5],
                int(row[6]),
                row[7],
                expiry_from(row[8]),
            )
            for row in rows
        }

    def _read_balances(self, scope: Scope, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Balances of these (account, asset) pairs; a pair without a snapshot row holds 0."""
        accounts = sorted({account for account, _ in keys})
        asset_ids = sorted({asset for _, asset in keys})
        found = self.balances_of(scope, accounts, asset_ids)
        return {key: found.get(key, 0) for key in keys}

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

    def wallet_balances(self, scope: Scope, wallet_id: str) -> list[WalletBalanceRow]:
        rows = self.con.execute(
            "SELECT b.asset_id, a.symbol, a.decimals, b.balance_minor, b.updated_at FROM balances b "
            "JOIN assets a ON a.id = b.asset_id "
            "WHERE b.organization_id = ? AND b.environment = ? AND b.account_id = ? ORDER BY b.asset_id",
            [*scope.params, wallet_id],
        ).fetchall()
        return list(map(WalletBalanceRow._make, rows))

    def get_transaction(self, scope: Scope, transaction_id: str) -> TransactionRow | None:
        time_ms = time_ms_of(transaction_id)
        if time_ms is None:
            return None
        rows = self.con.execute(
            f"SELECT {_TRANSACTION} FROM transactions WHERE {TENANT} AND id_time_ms = ? AND id = ?",
            [*scope.params, time_ms, transaction_id],
        ).fetchall()
        return TransactionRow._make(rows[0]) if rows else None

    def list_transactions(
        self, scope: Scope, page: PageRequest, sort: str, filters: TransactionFilter
    ) -> RowPage[TransactionRow]:
        sql = f"SELECT {_TRANSACTION} FROM transactions WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if filters.wallet_id:
            sql += " AND (source_account_id = ? OR destination_account_id = ?)"
            params += [filters.wallet_id, filters.wallet_id]
        for name in ("asset_id", "kind"):
            if getattr(filters, name):
                sql += f" AND {name} = ?"
                params.append(getattr(filters, name))
        listed = paginate(self.con, list_name="transactions", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(TransactionRow)


def _invariant(message: str) -> str:
    if "floor_minor" in message:
        return "balance_below_floor"  # a wallet below zero, or an asset above its supply ceiling
    if "amount_minor" in message:
        return "amount_not_positive"
    if "source_account_id" in message:
        return "same_account"
    return "constraint"
