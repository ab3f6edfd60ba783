"""Assets: create (configured), activate, pause and resume.

Activation preconditions (the seed leaves them to us): the asset is `configured`, and no other active or paused
asset of the same organization and environment uses its symbol (`asset_symbol_taken`), so that a symbol names
one live asset. Issuing is possible only while the asset is active.
"""

from __future__ import annotations

from decimal import Decimal

from rewards_lab import presenters
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import parse_ceiling
from rewards_lab.domain.states import asset_transition
from rewards_lab.engine.notifications import emit
from rewards_lab.engine.postings import asset_row
from rewards_lab.service.settings_requests import expiry_of
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store, reader
from rewards_lab.store.interfaces import AssetFilter, NewAsset, Repositories

ASSET_SORTS = ("created_at", "symbol", "name")


def create_asset(database: Store, scope: Scope, body: rq.AssetCreate, *, idempotency_key: str | None = None) -> r.Asset:
    def write(uow: Repositories) -> r.Asset:
        ceiling = parse_ceiling(body.supply_ceiling, body.decimals)
        value = None if body.value_per_unit is None else value_per_unit(body.value_per_unit)
        asset = NewAsset(  # with an expiry, the asset tracks lots from its creation
            body.name, body.symbol, body.type, body.decimals, ceiling, expiry_of(body.expiry), value
        )
        accounts = (new_id("account"), new_id("account"))
        return presenters.asset(uow.assets.add(scope, new_id("asset"), asset, accounts))

    # The expiry and value fields count for the Idempotency-Key only when sent, so a key stored before they existed
    # still stands for the same request.
    unsent = {name for name in ("expiry", "value_per_unit") if name not in body.model_fields_set}
    return run_write(
        database,
        scope,
        "assets.create",
        body.model_dump(mode="json", exclude=unsent),
        write,
        r.Asset,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def value_per_unit(text: str) -> str:
    """A money value per unit, above zero (as every decimal string of the contract), kept as written."""
    if Decimal(text) <= 0:
        raise ServiceError("amount_not_positive", "value_per_unit must be above zero", field="value_per_unit")
    return text


def get_asset(database: Store, scope: Scope, asset_id: str) -> r.Asset:
    return presenters.asset(asset_row(reader(database), scope, asset_id))


def list_assets(database: Store, scope: Scope, page: PageRequest, *, status: str | None = None) -> r.Page[r.Asset]:
    sort = check_page_request(page, ASSET_SORTS)
    rows = reader(database).assets.page(scope, page, sort, AssetFilter(status))
    return presenters.page(r.Page[r.Asset], rows, presenters.asset)


def _transition(database: Store, scope: Scope, asset_id: str, action: str, idempotency_key: str | None) -> r.Asset:
    def write(uow: Repositories) -> r.Asset:
        row = asset_row(uow, scope, asset_id)
        target = asset_transition(action, row.status)
        if action == "activate" and uow.assets.symbol_in_use(scope, row.symbol, asset_id):
            raise ServiceError("asset_symbol_taken", field="symbol", symbol=row.symbol)
        uow.assets.set_status(scope, asset_id, target, activated=action == "activate")
        asset = presenters.asset(asset_row(uow, scope, asset_id))
        if action == "pause":
            emit(uow, scope, "asset.paused", asset_id, asset)
        return asset

    return run_write(
        database, scope, f"assets.{action}:{asset_id}", {}, write, r.Asset, idempotency_key=idempotency_key
    )


def activate_asset(database: Store, scope: Scope, asset_id: str, *, idempotency_key: str | None = None) -> r.Asset:
    return _transition(database, scope, asset_id, "activate", idempotency_key)


def pause_asset(database: Store, scope: Scope, asset_id: str, *, idempotency_key: str | None = None) -> r.Asset:
    """A paused asset refuses issue, redemption and transfer (`asset_paused`); emits `asset.paused`."""
    return _transition(database, scope, asset_id, "pause", idempotency_key)


def resume_asset(database: Store, scope: Scope, asset_id: str, *, idempotency_key: str | None = None) -> r.Asset:
    return _transition(database, scope, asset_id, "resume", idempotency_key)
