"""The ledger repository as the services see it: any store (DuckDB today) implements this.

A store writes a batch decision set-based and asserts the ledger's invariants itself (a broken one raises
`internal_error` and the unit of work rolls back); it may keep a cache of what its single writer committed,
which `ledger_state` reads before the database.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_decision import PostingDecision
from rewards_lab.domain.posting_policy import LedgerState
from rewards_lab.store.queries import RowPage


class TransactionRow(NamedTuple):
    """A ledger transaction: one two-legged posting (`amount_minor` leaves the source, enters the destination)."""

    id: str
    kind: str
    asset_id: str
    amount_minor: int
    source_account_id: str
    destination_account_id: str
    memo: str | None
    execution_id: str | None
    created_at: datetime


class WalletBalanceRow(NamedTuple):
    """A wallet's balance of one asset, from the snapshot."""

    asset_id: str
    symbol: str
    decimals: int
    balance_minor: int
    updated_at: datetime


class LedgerStore(Protocol):
    """What the services need of the ledger (DuckDB: store.ledger.LedgerRepository)."""

    @property
    def written_at(self) -> datetime | None:
        """`created_at` of the transactions written last."""
        ...

    def write_postings(self, scope: Scope, decision: PostingDecision, state: LedgerState) -> None: ...

    def ledger_state(
        self, scope: Scope, wallet_ids: set[str], accounts: Mapping[str, Collection[str]]
    ) -> LedgerState: ...

    def cached_decimals(self, scope: Scope, asset_id: str) -> int | None: ...

    def balances_of(
        self, scope: Scope, account_ids: list[str], asset_ids: list[str] | None = None
    ) -> dict[tuple[str, str], int]: ...

    def wallet_balances(self, scope: Scope, wallet_id: str) -> list[WalletBalanceRow]: ...

    def get_transaction(self, scope: Scope, transaction_id: str) -> TransactionRow | None: ...

    def list_transactions(
        self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]
    ) -> RowPage[TransactionRow]: ...
