"""Cursor pagination (no offsets, stable under equal sort keys) and Idempotency-Key semantics."""

from __future__ import annotations

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import MAX_LIMIT, PageRequest
from rewards_lab.service import customers, ledger
from tests.conftest import World


def test_walking_every_page_returns_every_row_once(world: World) -> None:
    made = [world.customer(f"c-{index:03d}").id for index in range(57)]
    for direction in ("asc", "desc"):
        seen: list[str] = []
        cursor = None
        while True:
            page = customers.list_customers(
                world.db, world.scope, PageRequest(limit=10, cursor=cursor, direction=direction)
            )
            seen += [c.id for c in page.data]
            assert page.has_more == (page.next_cursor is not None)
            if not page.has_more:
                break
            cursor = page.next_cursor
        assert seen == (made if direction == "asc" else made[::-1])
    by_external = customers.list_customers(
        world.db, world.scope, PageRequest(limit=5, sort="external_id", direction="desc")
    )
    assert [c.external_id for c in by_external.data] == [f"c-{i:03d}" for i in range(56, 51, -1)]


def test_default_and_maximum_page_sizes(world: World) -> None:
    for index in range(30):
        world.customer(f"c-{index}")
    assert len(customers.list_customers(world.db, world.scope, PageRequest()).data) == 25
    for bad in (0, MAX_LIMIT + 1):
        with pytest.raises(ServiceError) as caught:
            customers.list_customers(world.db, world.scope, PageRequest(limit=bad))
        assert caught.value.details["field"] == "limit"


def test_a_cursor_belongs_to_its_list_and_sort(world: World) -> None:
    for index in range(3):
        world.customer(f"c-{index}")
    page = customers.list_customers(world.db, world.scope, PageRequest(limit=1))
    assert page.next_cursor
    with pytest.raises(ServiceError) as caught:
        customers.list_customers(world.db, world.scope, PageRequest(limit=1, cursor=page.next_cursor, direction="desc"))
    assert caught.value.code == "cursor_invalid"
    with pytest.raises(ServiceError) as caught:
        customers.list_wallets(world.db, world.scope, PageRequest(limit=1, cursor=page.next_cursor))
    assert caught.value.code == "cursor_invalid"


def test_financial_write_with_the_same_key_runs_once(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="5.00", reason="goodwill")
    first = ledger.issue(world.db, world.scope, asset.id, body, idempotency_key="grant-1")
    again = ledger.issue(world.db, world.scope, asset.id, body, idempotency_key="grant-1")
    assert again == first
    assert ledger.wallet_balances(world.db, world.scope, wallet.id).balances[0].balance == "5.00"
    with pytest.raises(ServiceError) as caught:  # same key, other body
        ledger.issue(
            world.db,
            world.scope,
            asset.id,
            rq.IssueRequest(wallet_id=wallet.id, amount="6.00", reason="goodwill"),
            idempotency_key="grant-1",
        )
    assert caught.value.code == "idempotency_key_reused"
    with pytest.raises(ServiceError):  # same key, same body, other asset: another request
        ledger.issue(world.db, world.scope, world.asset(symbol="GEM").id, body, idempotency_key="grant-1")


def test_a_failed_write_does_not_consume_its_key(world: World) -> None:
    asset, wallet = world.asset(), world.wallet()
    body = rq.RedemptionRequest(wallet_id=wallet.id, amount="1.00", reference="r")
    with pytest.raises(ServiceError) as caught:
        ledger.redeem(world.db, world.scope, asset.id, body, idempotency_key="redeem-1")
    assert caught.value.code == "insufficient_balance"
    ledger.issue(world.db, world.scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="x"))
    done = ledger.redeem(world.db, world.scope, asset.id, body, idempotency_key="redeem-1")
    assert done.kind == "redemption"
