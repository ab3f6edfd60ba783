"""Expiry (issue 19) through the service layer on a real DuckDB file: lots per credit, FIFO debits, transfers that
keep their lots' dates, the expiry run (idempotent, to the breakage account, `points.expired`), a programme whose
expiry overrides the asset's, and the ledger's verification of lots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.expiry import ExpiryPolicy, expires_at
from rewards_lab.engine.event_processing import process_all
from rewards_lab.engine.expiry import expire_due
from rewards_lab.lab.workbench import Lab
from rewards_lab.service import ledger, lots, programme_lifecycle, programmes
from rewards_lab.service.event_intake import submit_event, submit_events
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World
from tests.engine.test_reversals import ORDER, REFUND, Shop


def _issue(world: World, asset_id: str, wallet_id: str, amount: str) -> None:
    body = validate(rq.IssueRequest, {"wallet_id": wallet_id, "amount": amount, "reason": "grant"})
    ledger.issue(world.db, world.scope, asset_id, body)


def _redeem(world: World, asset_id: str, wallet_id: str, amount: str) -> None:
    body = validate(rq.RedemptionRequest, {"wallet_id": wallet_id, "amount": amount, "reference": "shop"})
    ledger.redeem(world.db, world.scope, asset_id, body)


def _lots(world: World, wallet_id: str, **filters: Any) -> list[tuple[str, str, str]]:
    page = lots.list_lots(world.db, world.scope, wallet_id, PageRequest(limit=100), **filters)
    return [(lot.amount, lot.remaining, lot.status) for lot in page.data]


def _set_expiry(db: Database, lot_expires_at: datetime) -> None:
    """Move every open lot's expiry (the test's clock: lots are made now, and expire in a year)."""
    with db.transaction() as con:
        con.execute("UPDATE lots SET expires_at = ? WHERE remaining_minor > 0", [lot_expires_at])


def _verified(db: Database) -> None:
    report = verify_ledger(db.reader())
    assert report.ok, report.problems


def test_redemptions_take_the_oldest_lots_first_and_expiry_takes_what_remains(world: World) -> None:
    asset = world.asset(expiry={"after_days": 365})
    wallet = world.wallet()
    for amount in ("10.00", "5.00", "7.00"):
        _issue(world, asset.id, wallet.id, amount)
    _redeem(world, asset.id, wallet.id, "12.00")  # all of the first lot, 2 of the second
    assert _lots(world, wallet.id) == [("10.00", "0.00", "spent"), ("5.00", "3.00", "open"), ("7.00", "7.00", "open")]
    balances = ledger.wallet_balances(world.db, world.scope, wallet.id).balances
    assert balances[0].balance == "10.00" and balances[0].next_expiry is not None
    assert balances[0].next_expiry.amount == "3.00"  # the second lot expires first (the first is spent)
    assert abs(balances[0].next_expiry.at - (datetime.now(UTC) + timedelta(days=365))) < timedelta(minutes=5)
    _verified(world.db)

    assert expire_due(world.db).lots == 0  # nothing is due yet
    report = expire_due(world.db, as_of=utcnow() + timedelta(days=366))
    assert (report.lots, report.transactions) == (2, 2)
    assert _lots(world, wallet.id, status="expired") == [("5.00", "0.00", "expired"), ("7.00", "0.00", "expired")]
    after = ledger.wallet_balances(world.db, world.scope, wallet.id).balances[0]
    assert after.balance == "0.00" and after.next_expiry is None
    shown = world_asset(world, asset.id)
    assert (shown.expired, shown.redeemed, shown.outstanding_supply) == ("10.00", "12.00", "0.00")
    assert expire_due(world.db, as_of=utcnow() + timedelta(days=400)).lots == 0  # idempotent: nothing twice
    expired = ledger.list_transactions(world.db, world.scope, PageRequest(limit=10), kind="expire").data
    assert sorted(t.amount for t in expired) == ["3.00", "7.00"] and all(t.wallet_id == wallet.id for t in expired)
    _verified(world.db)


def world_asset(world: World, asset_id: str) -> Any:
    from rewards_lab.service.assets import get_asset

    return get_asset(world.db, world.scope, asset_id)


def test_a_transfer_moves_lots_with_their_dates(world: World) -> None:
    asset = world.asset(expiry={"at_end_of": "month"})
    alice, bob = world.wallet(), world.wallet()
    _issue(world, asset.id, alice.id, "4.00")
    _issue(world, asset.id, alice.id, "6.00")
    sent = validate(rq.TransferRequest, {"from_wallet_id": alice.id, "to_wallet_id": bob.id, "amount": "5.00"})
    ledger.transfer(world.db, world.scope, asset.id, sent)
    page = lots.list_lots(world.db, world.scope, bob.id, PageRequest(limit=10)).data
    originals = lots.list_lots(world.db, world.scope, alice.id, PageRequest(limit=10)).data
    assert [(lot.amount, lot.expires_at) for lot in page] == [
        ("4.00", originals[0].expires_at),
        ("1.00", originals[1].expires_at),
    ]
    assert [lot.issued_at for lot in page] == [lot.issued_at for lot in originals]
    assert _lots(world, alice.id) == [("4.00", "0.00", "spent"), ("6.00", "5.00", "open")]
    _verified(world.db)


def test_an_asset_without_expiry_tracks_no_lots_until_a_programme_with_expiry_is_published(world: World) -> None:
    asset = world.asset()
    wallet = world.wallet(world.customer("carol"))
    _issue(world, asset.id, wallet.id, "8.00")
    assert _lots(world, wallet.id) == []
    programme = world.programme(asset)
    world.rule(programme, amount={"fixed": "2.00"})
    # the event is of January 2026, long before it is received: a backfill (no bound on an event's age)
    update = validate(rq.ProgrammeUpdate, {"expiry": {"after_days": 30}, "max_event_age_days": None})
    shown = programme_lifecycle.update_programme(world.db, world.scope, programme.id, update)
    assert shown.expiry is not None and shown.expiry.model_dump() == {"after_days": 30}
    programmes.publish(world.db, world.scope, programme.id)
    # the balance held so far is one opening lot that never expires
    assert _lots(world, wallet.id) == [("8.00", "8.00", "open")]
    occurred = datetime(2026, 1, 10, 12, tzinfo=UTC)
    event = {"type": "order.completed", "external_event_id": "o-1", "customer_id": "carol", "occurred_at": occurred}
    submit_event(world.db, world.scope, validate(rq.EventCreate, {**event, "data": {}}))
    process_all(world.db)
    page = lots.list_lots(world.db, world.scope, wallet.id, PageRequest(limit=10)).data
    assert [(lot.amount, lot.issued_at, lot.expires_at) for lot in page] == [
        ("2.00", occurred, occurred + timedelta(days=30)),  # issued at the event's time: the oldest lot
        ("8.00", page[1].issued_at, None),
    ]
    report = expire_due(world.db)  # the reward's lot is long past its 30 days
    assert report.lots == 1
    assert ledger.wallet_balances(world.db, world.scope, wallet.id).balances[0].balance == "8.00"
    _verified(world.db)


def test_bad_expiry_is_refused_naming_the_field(world: World) -> None:
    with pytest.raises(ServiceError) as refused:
        world.asset(expiry={"after_days": 0})
    assert refused.value.code == "field_invalid" and "expiry" in str(refused.value.details.get("field"))
    with pytest.raises(ServiceError) as shape:
        world.asset(expiry={"at_end_of": "week"})
    assert shape.value.code == "field_invalid" and "at_end_of" in str(shape.value.details.get("field"))


def test_tenants_see_only_their_own_lots(db: Database, world: World) -> None:
    asset = world.asset(expiry={"after_days": 1})
    wallet = world.wallet()
    _issue(world, asset.id, wallet.id, "1.00")
    other = Scope("org_other", "sandbox")
    with pytest.raises(ServiceError) as hidden:
        lots.list_lots(db, other, wallet.id, PageRequest(limit=10))
    assert hidden.value.code == "wallet_not_found"


def _shop_lots(shop: Shop, wallet_id: str) -> list[tuple[str, str]]:
    page = lots.list_lots(shop.world.db, shop.world.scope, wallet_id, PageRequest(limit=100)).data
    return [(lot.amount, lot.remaining) for lot in page]


def test_a_reversal_takes_from_its_original_rewards_lot_first(world: World) -> None:
    shop = Shop(world, expiry={"after_days": 30})
    wallet = shop.customer("dee")
    shop.send(ORDER, "dee", external_id="o-1", amount=10)
    shop.order("dee", "o-2", 20)
    assert _shop_lots(shop, wallet.id) == [("10", "10"), ("20", "20")]
    shop.reversal(shop.refund("dee", "o-2"))
    assert _shop_lots(shop, wallet.id) == [("10", "10"), ("20", "0")]  # not the oldest: its own
    _verified(world.db)


def test_a_refund_after_its_lot_expired_takes_what_the_wallet_holds(world: World) -> None:
    shop = Shop(world, expiry={"after_days": 30}, clawback="available")
    wallet = shop.customer("eve")
    shop.order("eve", "o-1", 10)
    _set_expiry(world.db, utcnow() - timedelta(seconds=1))  # its 30 days are over
    assert expire_due(world.db).lots == 1
    shop.order("eve", "o-2", 25)
    taken = shop.reversal(shop.refund("eve", "o-1"))
    assert (taken.amount, taken.reversal.shortfall if taken.reversal else None) == ("10", "0")
    assert _shop_lots(shop, wallet.id) == [("10", "0"), ("25", "15")]  # the expired one gave nothing more
    assert shop.balance(wallet) == 15
    _verified(world.db)


def test_a_reversal_in_the_batch_that_made_the_lot_it_takes_from(world: World) -> None:
    """A lot made and taken from in one batch (the worker processes an order and a refund together) is written
    with what the reversal left of it: a refund of an expired reward takes from the new order's lot (FIFO after
    its own, which holds nothing), and a refund in its own order's batch takes that order's lot."""
    shop = Shop(world, expiry={"after_days": 30}, clawback="available")
    wallet = shop.customer("gus")
    shop.order("gus", "o-1", 10)
    _set_expiry(world.db, utcnow() - timedelta(seconds=1))
    assert expire_due(world.db).lots == 1
    shop.send(ORDER, "gus", process=False, external_id="o-2", amount=25)
    refund = shop.send(REFUND, "gus", process=False, order_id="o-1")
    process_all(world.db)
    assert shop.reversal(refund).amount == "10"
    assert _shop_lots(shop, wallet.id) == [("10", "0"), ("25", "15")]
    _verified(world.db)
    shop.send(ORDER, "gus", process=False, external_id="o-3", amount=7)
    refund = shop.send(REFUND, "gus", process=False, order_id="o-3")
    process_all(world.db)
    assert shop.reversal(refund).amount == "7"
    assert _shop_lots(shop, wallet.id) == [("10", "0"), ("25", "15"), ("7", "0")]
    assert shop.balance(wallet) == 15
    _verified(world.db)


def test_a_wallet_below_zero_pays_its_debt_before_a_new_lot(world: World) -> None:
    shop = Shop(world, expiry={"after_days": 30}, clawback="negative")
    wallet = shop.customer("fay")
    shop.order("fay", "o-1", 50)
    shop.redeem(wallet, "40")
    shop.reversal(shop.refund("fay", "o-1"))  # takes 50 of 10: the wallet owes 40
    assert shop.balance(wallet) == -40 and _shop_lots(shop, wallet.id) == [("50", "0")]
    shop.order("fay", "o-2", 30)  # pays 30 of the debt: no lot
    shop.order("fay", "o-3", 25)  # 10 more of the debt, a lot of 15
    assert shop.balance(wallet) == 15
    assert _shop_lots(shop, wallet.id) == [("50", "0"), ("15", "15")]
    _verified(world.db)


def test_the_lab_sets_keeps_and_clears_a_programmes_expiry() -> None:
    with Lab() as lab:
        shop = lab.new_programme("Shop", {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0})
        first = shop.set_spending(expiry={"at_end_of": "month", "after": 2})
        assert first.expiry is not None and first.expiry.model_dump() == {"at_end_of": "month", "after": 2}
        kept = shop.set_spending(clawback="none")
        assert kept.expiry == first.expiry and kept.clawback == "none"
        assert shop.set_spending(expiry=None).expiry is None
        with pytest.raises(ServiceError) as refused:
            shop.set_spending(expiry={"after_days": -1})
        assert refused.value.code == "field_invalid"


@pytest.mark.parametrize(
    ("policy", "issued_at", "timezone", "expected"),
    [
        ({"after_days": 365}, datetime(2026, 3, 15, 1, 2, 3, 4), "UTC", datetime(2027, 3, 15, 1, 2, 3, 4)),
        ({"at_end_of": "month"}, datetime(2026, 3, 15), "UTC", datetime(2026, 4, 1)),
        ({"at_end_of": "month", "after": 11}, datetime(2026, 2, 28), "UTC", datetime(2027, 2, 1)),
        ({"at_end_of": "quarter", "after": 1}, datetime(2026, 3, 15), "UTC", datetime(2026, 7, 1)),
        # 23:30 UTC on 31 March is already 1 April in Kolkata: the second quarter, then the one after it
        (
            {"at_end_of": "quarter", "after": 1},
            datetime(2026, 3, 31, 23, 30),
            "Asia/Kolkata",
            datetime(2026, 9, 30, 18, 30),
        ),
        # local midnight of 1 January in London is UTC midnight (no summer time then); of 1 April it is 23:00 UTC
        ({"at_end_of": "year"}, datetime(2026, 6, 1), "Europe/London", datetime(2027, 1, 1)),
        ({"at_end_of": "month"}, datetime(2026, 3, 10), "Europe/London", datetime(2026, 3, 31, 23)),
        # past the calendar's end: its last instant
        ({"after_days": 36600}, datetime(9999, 1, 1), "UTC", datetime.max),
        ({"at_end_of": "year", "after": 100}, datetime(9950, 1, 1), "Pacific/Kiritimati", datetime.max),
    ],
)
def test_expiry_instants(policy: dict[str, Any], issued_at: datetime, timezone: str, expected: datetime) -> None:
    parsed = ExpiryPolicy.of(policy)
    assert parsed is not None and expires_at(parsed, issued_at, timezone) == expected


def test_a_reward_dated_at_the_end_of_the_calendar_expires_at_its_last_instant(world: World) -> None:
    shop = Shop(world, expiry={"at_end_of": "year", "after": 5})
    wallet = shop.customer("zed")
    body = {"type": ORDER, "external_event_id": "o-late", "customer_id": "zed", "data": {"amount": 3}}
    body["occurred_at"] = "9999-12-31T23:59:59Z"
    # received when it occurred (in process: a date in the future is refused at intake)
    (stored,) = submit_events(
        world.db, world.scope, [validate(rq.EventCreate, body)], datetime(9999, 12, 31, 23, 59, 59)
    )
    assert not isinstance(stored, Exception), stored
    assert process_all(world.db).processed == 1
    (lot,) = lots.list_lots(world.db, world.scope, wallet.id, PageRequest(limit=10)).data
    assert lot.expires_at == datetime.max.replace(tzinfo=UTC)
    _verified(world.db)
