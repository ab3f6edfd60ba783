"""The assets repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import Row, RowPage


class AssetStore(Protocol):
    """What the services need of the asset rows (DuckDB: store.assets.AssetRepository)."""

    def add(self, scope: Scope, asset_id: str, fields: dict[str, Any], accounts: tuple[str, str]) -> Row: ...

    def get(self, scope: Scope, asset_id: str) -> Row | None: ...

    def decimals(self, scope: Scope, asset_id: str) -> int | None: ...

    def get_many(self, scope: Scope, asset_ids: list[str]) -> dict[str, Row]: ...

    def set_status(self, scope: Scope, asset_id: str, status: str, *, activated: bool = False) -> None: ...

    def symbol_in_use(self, scope: Scope, symbol: str, except_asset_id: str) -> bool: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[Row]: ...
