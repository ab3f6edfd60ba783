"""The wallets repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class WalletRow:
    """A wallet: the ledger account a customer holds assets in (its id is the account id)."""

    id: str
    organization_id: str
    environment: str
    customer_id: str
    type: str
    status: str
    transfer_policy: str
    created_at: datetime


class WalletStore(Protocol):
    """What the services need of the wallet rows (DuckDB: store.wallets.WalletRepository)."""

    def add(
        self, scope: Scope, wallet_id: str, customer_id: str, wallet_type: str, transfer_policy: str
    ) -> WalletRow: ...

    def get(self, scope: Scope, wallet_id: str) -> WalletRow | None: ...

    def get_many(self, scope: Scope, wallet_ids: list[str]) -> dict[str, WalletRow]: ...

    def set_status(self, scope: Scope, wallet_id: str, status: str) -> None: ...

    def reward_wallets(self, scope: Scope, customer_ids: list[str]) -> dict[str, WalletRow]: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[WalletRow]: ...
