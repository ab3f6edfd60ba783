"""The writer's ledger cache never lets a decision rest on stale or uncommitted state."""

from __future__ import annotations

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine.postings import apply_postings
from rewards_lab.service import assets, customers, ledger, organizations
from rewards_lab.store.uow import unit_of_work
from tests.conftest import World


def _issue(world: World, asset_id: str, wallet_id: str, amount: str = "1.00") -> None:
    ledger.issue(world.db, world.scope, asset_id, rq.IssueRequest(wallet_id=wallet_id, amount=amount, reason="r"))


def test_status_changes_are_seen_after_the_state_was_cached(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    _issue(world, asset.id, wallet.id)  # both are now in the cache as usable
    customers.freeze_wallet(world.db, world.scope, wallet.id)
    with pytest.raises(ServiceError) as caught:
        _issue(world, asset.id, wallet.id)
    assert caught.value.code == "wallet_frozen"
    customers.unfreeze_wallet(world.db, world.scope, wallet.id)
    _issue(world, asset.id, wallet.id)
    assets.pause_asset(world.db, world.scope, asset.id)
    with pytest.raises(ServiceError) as caught:
        _issue(world, asset.id, wallet.id)
    assert caught.value.code == "asset_paused"


def test_a_rolled_back_batch_leaves_no_trace_in_the_cache(world: World) -> None:
    asset, wallet = world.asset(supply_ceiling="10.00"), world.wallet()
    _issue(world, asset.id, wallet.id, "4.00")
    with pytest.raises(RuntimeError), unit_of_work(world.db) as uow:
        ids = new_ids("transaction", 2)
        outcome = apply_postings(
            uow,
            world.scope,
            [
                PostingRequest(ids[0], "issue", asset.id, 500, wallet.id),
                PostingRequest(ids[1], "redemption", asset.id, 900, wallet.id),
            ],
        )
        assert not outcome.rejected
        raise RuntimeError("the unit of work fails after the postings were decided")
    # Had the cache kept the rolled-back state, it would believe 0.00 held and 9.00 outstanding.
    body = rq.RedemptionRequest(wallet_id=wallet.id, amount="4.00", reference="r")
    assert ledger.redeem(world.db, world.scope, asset.id, body).amount == "4.00"
    _issue(world, asset.id, wallet.id, "10.00")  # the whole ceiling is free again
    with pytest.raises(ServiceError) as caught:
        _issue(world, asset.id, wallet.id, "0.01")
    assert caught.value.code == "asset_supply_exhausted"


def test_a_cached_wallet_is_invisible_to_another_tenant(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    _issue(world, asset.id, wallet.id)  # cached for the first tenant
    other = Scope(organizations.create_organization(world.db, "Other").id, "sandbox")
    other_asset = World(world.db, other).asset()
    with pytest.raises(ServiceError) as caught:
        ledger.issue(
            world.db, other, other_asset.id, rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="cross-tenant")
        )
    assert caught.value.code == "wallet_not_found"


def test_a_cleared_cache_reads_the_same_state_back(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    _issue(world, asset.id, wallet.id, "3.00")
    world.db.ledger_cache.clear()
    body = rq.RedemptionRequest(wallet_id=wallet.id, amount="3.01", reference="r")
    with pytest.raises(ServiceError) as caught:
        ledger.redeem(world.db, world.scope, asset.id, body)
    assert caught.value.code == "insufficient_balance" and caught.value.details["balance_minor"] == "300"
