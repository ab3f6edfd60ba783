"""The assets repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class AssetRow:
    """An asset with its supply so far: issued = what left its issuance account, redeemed = what entered its
    redemption account, expired = what entered its breakage account (minor units)."""

    id: str
    organization_id: str
    environment: str
    name: str
    symbol: str
    type: str
    decimals: int
    supply_ceiling_minor: int | None
    status: str
    issuance_account_id: str
    redemption_account_id: str
    created_at: datetime
    activated_at: datetime | None
    expiry: str | None  # JSON of its expiry policy (None: its points never expire)
    value_per_unit: str | None  # money per unit, a decimal string (None: not valued)
    breakage_account_id: str | None  # where expired points go, once the asset tracks lots
    issued_minor: int
    redeemed_minor: int
    expired_minor: int


class AssetStore(Protocol):
    """What the services need of the asset rows (DuckDB: store.assets.AssetRepository)."""

    def add(self, scope: Scope, asset_id: str, fields: dict[str, Any], accounts: tuple[str, str]) -> AssetRow: ...

    def get(self, scope: Scope, asset_id: str) -> AssetRow | None: ...

    def decimals(self, scope: Scope, asset_id: str) -> int | None: ...

    def get_many(self, scope: Scope, asset_ids: list[str]) -> dict[str, AssetRow]: ...

    def start_lots(self, scope: Scope, asset_id: str) -> str: ...

    def set_status(self, scope: Scope, asset_id: str, status: str, *, activated: bool = False) -> None: ...

    def symbol_in_use(self, scope: Scope, symbol: str, except_asset_id: str) -> bool: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[AssetRow]: ...
