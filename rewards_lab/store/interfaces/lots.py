"""The lots repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.lots import Lot
from rewards_lab.store.queries import RowPage


class NewLot(NamedTuple):
    """A lot a credit makes."""

    id: str
    wallet_id: str
    asset_id: str
    issued_at: datetime
    expires_at: datetime | None
    amount_minor: int
    source_transaction_id: str


class LotTaken(NamedTuple):
    """What a debit took from a lot; `expired_by` is the expire transaction when the debit is its expiry."""

    lot_id: str
    amount_minor: int
    expired_by: str | None = None


@dataclass(frozen=True, slots=True)
class LotRow:
    id: str
    wallet_id: str
    asset_id: str
    issued_at: datetime
    expires_at: datetime | None
    amount_minor: int
    remaining_minor: int
    expired_minor: int
    source_transaction_id: str
    expired_transaction_id: str | None


class DueLot(NamedTuple):
    """An open lot past its expiry, with its tenant."""

    organization_id: str
    environment: str
    id: str
    wallet_id: str
    asset_id: str
    remaining_minor: int
    expires_at: datetime


class LotStore(Protocol):
    """What the services need of lots (DuckDB: store.lots.LotRepository)."""

    def open_lots(self, scope: Scope, keys: Collection[tuple[str, str]]) -> dict[tuple[str, str], list[Lot]]: ...

    def write(self, scope: Scope, made: Sequence[NewLot], taken: Sequence[LotTaken]) -> None: ...

    def page(self, scope: Scope, wallet_id: str, page: PageRequest, filters: dict[str, Any]) -> RowPage[LotRow]: ...

    def next_expiry(self, scope: Scope, wallet_id: str) -> dict[str, tuple[datetime, int]]: ...

    def due(self, as_of: datetime, limit: int) -> list[DueLot]: ...

    def due_among(self, scope: Scope, lot_ids: Sequence[str], as_of: datetime) -> list[DueLot]: ...
