"""Reading lots: a wallet's lots (`GET /wallets/{id}/lots`) and what expires next of its balances."""

from __future__ import annotations

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.store.api import Store, reader
from rewards_lab.store.interfaces import LotFilter, LotRow, Repositories

LOT_SORTS = ("issued_at",)
LOT_STATUSES = ("open", "spent", "expired")
OPENING = "opening"  # the source of a lot made from the balance held when its asset began tracking lots


def list_lots(
    database: Store,
    scope: Scope,
    wallet_id: str,
    page: PageRequest,
    *,
    asset_id: str | None = None,
    status: str | None = None,
) -> r.Page[r.Lot]:
    """The wallet's lots, oldest first (the order debits take from them), of every asset that tracks lots."""
    uow = reader(database)
    if uow.wallets.get(scope, wallet_id) is None:
        raise ServiceError("wallet_not_found", wallet_id=wallet_id)
    if status is not None and status not in LOT_STATUSES:
        raise ServiceError("field_invalid", f"status must be one of {', '.join(LOT_STATUSES)}", field="status")
    check_page_request(page, LOT_SORTS)
    rows = uow.lots.page(scope, wallet_id, page, LotFilter(asset_id, status))
    decimals = _decimals(uow, scope, {row.asset_id for row in rows.rows})
    return presenters.page(r.Page[r.Lot], rows, lambda row: lot(row, decimals[row.asset_id]))


def next_expiries(uow: Repositories, scope: Scope, wallet_id: str, decimals: dict[str, int]) -> dict[str, r.NextExpiry]:
    """Per asset of the wallet: the next instant some of it expires and how much (`decimals` per asset)."""
    return {
        asset_id: r.NextExpiry(at=presenters.utc(at), amount=format_amount(amount, decimals[asset_id]))
        for asset_id, (at, amount) in uow.lots.next_expiry(scope, wallet_id).items()
        if asset_id in decimals
    }


def _decimals(uow: Repositories, scope: Scope, asset_ids: set[str]) -> dict[str, int]:
    assets = uow.assets.get_many(scope, sorted(asset_ids))
    return {asset_id: int(asset.decimals) for asset_id, asset in assets.items()}


def lot(row: LotRow, decimals: int) -> r.Lot:
    remaining, expired = int(row.remaining_minor), int(row.expired_minor)
    status = "open" if remaining > 0 else "expired" if expired > 0 else "spent"
    return r.Lot(
        id=row.id,
        wallet_id=row.wallet_id,
        asset_id=row.asset_id,
        amount=format_amount(int(row.amount_minor), decimals),
        remaining=format_amount(remaining, decimals),
        expired=format_amount(expired, decimals),
        status=status,
        issued_at=presenters.utc(row.issued_at),
        expires_at=presenters.utc(row.expires_at),
        source_transaction_id=None if row.source_transaction_id == OPENING else row.source_transaction_id,
        expired_transaction_id=row.expired_transaction_id,
    )
