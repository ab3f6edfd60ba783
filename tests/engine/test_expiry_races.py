"""Expiry racing debits (issue 27, item 1): the expiry run finds due lots outside the write lock, so a redemption
may take from a lot between that read and the `expire` posting. The lot is read again inside the unit of work and
expires what it holds then; a posting whose lot parts do not add up to its amount rolls back. On a real DuckDB file
(the interleaving made deterministic) and against a real server with redemptions racing the expiry worker."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.validation import validate
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine.expiry import expire_due
from rewards_lab.engine.lot_book import LotsOutOfBalance, LotTerms
from rewards_lab.engine.postings import apply_postings
from rewards_lab.service import ledger
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.lots import LotRepository
from rewards_lab.store.uow import unit_of_work
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.webhook_receiver import ok

WALLETS = 24  # the reproduction's size
RACE_TIMEOUT_S = 30.0
REDEMPTIONS = 50  # of one point each, per wallet
EXPIRING_OFTEN = ("--expiry-interval-s", "0.02")


def _issue(world: World, asset_id: str, wallet_id: str, amount: str) -> None:
    body = validate(rq.IssueRequest, {"wallet_id": wallet_id, "amount": amount, "reason": "grant"})
    ledger.issue(world.db, world.scope, asset_id, body)


def _redeem(world: World, asset_id: str, wallet_id: str, amount: str) -> None:
    body = validate(rq.RedemptionRequest, {"wallet_id": wallet_id, "amount": amount, "reference": "shop"})
    ledger.redeem(world.db, world.scope, asset_id, body)


def _lots(db: Database, wallet_id: str) -> list[tuple[int, int, int, bool]]:
    """(amount, remaining, expired, never expires) of the wallet's lots, oldest first."""
    rows = (
        db.reader()
        .execute(
            "SELECT amount_minor, remaining_minor, expired_minor, expires_at IS NULL FROM lots WHERE wallet_id = ? "
            "ORDER BY issued_at, id",
            [wallet_id],
        )
        .fetchall()
    )
    return [(int(a), int(r), int(e), bool(n)) for a, r, e, n in rows]


def _balance(db: Database, wallet_id: str) -> int:
    row = db.reader().execute("SELECT balance_minor FROM balances WHERE account_id = ?", [wallet_id]).fetchone()
    assert row is not None
    return int(row[0])


def _due_and_everlasting(world: World, amount: str = "100") -> tuple[str, str]:
    """An asset that tracks lots and a wallet holding two lots of `amount`: the older is due (expired an hour
    ago), the newer never expires. A redemption takes from the due one first (FIFO)."""
    asset = world.asset(decimals=0, expiry={"after_days": 30})
    wallet = world.wallet()
    _issue(world, asset.id, wallet.id, amount)
    _issue(world, asset.id, wallet.id, amount)
    with world.db.transaction() as con:
        oldest, newest = (
            row[0] for row in con.execute("SELECT id FROM lots WHERE wallet_id = ? ORDER BY id", [wallet.id]).fetchall()
        )
        con.execute("UPDATE lots SET expires_at = ? WHERE id = ?", [utcnow() - timedelta(hours=1), oldest])
        con.execute("UPDATE lots SET expires_at = NULL WHERE id = ?", [newest])
    return asset.id, wallet.id


def test_a_redemption_between_the_read_and_the_posting_leaves_the_everlasting_lot_whole(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run reads the due lot (100), a redemption of 50 commits before its unit of work: it expires the 50 the
    lot still holds, not the 100 it read (which took 50 from the lot that never expires)."""
    asset_id, wallet_id = _due_and_everlasting(world)
    read_due = LotRepository.due
    interleaved: list[int] = []

    def due_then_redeem(self: LotRepository, as_of: datetime, limit: int) -> list[Any]:
        found = read_due(self, as_of, limit)
        if found and not interleaved:  # once: the first round's read, before its unit of work
            _redeem(world, asset_id, wallet_id, "50")
            interleaved.append(len(found))
        return found

    monkeypatch.setattr(LotRepository, "due", due_then_redeem)
    run = expire_due(world.db)
    assert interleaved == [1]
    assert (run.lots, run.transactions, run.refused) == (1, 1, 0)
    assert _balance(world.db, wallet_id) == 100  # 200 - 50 redeemed - 50 expired
    assert _lots(world.db, wallet_id) == [(100, 0, 50, False), (100, 100, 0, True)]
    expired = world.db.reader().execute("SELECT amount_minor FROM transactions WHERE kind = 'expire'").fetchall()
    assert [int(row[0]) for row in expired] == [50]
    report = verify_ledger(world.db.reader())
    assert report.ok, report.problems


def test_a_lot_spent_between_the_read_and_the_posting_is_not_expired(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redemption that empties the due lot after the read: nothing is left to expire, nothing is posted."""
    asset_id, wallet_id = _due_and_everlasting(world)
    read_due = LotRepository.due
    done: list[bool] = []

    def due_then_redeem(self: LotRepository, as_of: datetime, limit: int) -> list[Any]:
        found = read_due(self, as_of, limit)
        if found and not done:
            _redeem(world, asset_id, wallet_id, "130")  # the due lot's 100 and 30 of the other
            done.append(True)
        return found

    monkeypatch.setattr(LotRepository, "due", due_then_redeem)
    assert expire_due(world.db).lots == 0
    assert _balance(world.db, wallet_id) == 70
    assert _lots(world.db, wallet_id) == [(100, 0, 0, False), (100, 70, 0, True)]
    assert world.db.reader().execute("SELECT count(*) FROM transactions WHERE kind = 'expire'").fetchone() == (0,)
    report = verify_ledger(world.db.reader())
    assert report.ok, report.problems


def _ledger_counts(db: Database) -> tuple[int, int, int]:
    row = (
        db.reader()
        .execute("SELECT count(*), sum(amount_minor), (SELECT count(*) FROM lots) FROM transactions")
        .fetchone()
    )
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_an_expire_posting_larger_than_its_lot_rolls_back(world: World) -> None:
    """An `expire` transaction must take all of its amount from its own lot: asked to post more than the lot
    holds (what the racing run did), the unit of work raises and nothing of it is recorded."""
    asset_id, wallet_id = _due_and_everlasting(world)
    _redeem(world, asset_id, wallet_id, "50")  # the due lot now holds 50
    due_lot = _due_lot_id(world.db, wallet_id)
    before = (_balance(world.db, wallet_id), _lots(world.db, wallet_id), _ledger_counts(world.db))
    stale = new_id("transaction")
    request = PostingRequest(stale, "expire", asset_id, 100, wallet_id, memo="stale")
    with pytest.raises(LotsOutOfBalance, match="expected 100"), unit_of_work(world.db) as uow:
        apply_postings(uow, world.scope, [request], lot_terms={stale: LotTerms(lot_id=due_lot)})
    assert (_balance(world.db, wallet_id), _lots(world.db, wallet_id), _ledger_counts(world.db)) == before
    report = verify_ledger(world.db.reader())
    assert report.ok, report.problems
    assert expire_due(world.db).lots == 1  # the run itself still expires what the lot holds
    assert _lots(world.db, wallet_id) == [(100, 0, 50, False), (100, 100, 0, True)]


def _due_lot_id(db: Database, wallet_id: str) -> str:
    row = (
        db.reader()
        .execute("SELECT id FROM lots WHERE wallet_id = ? AND expires_at IS NOT NULL", [wallet_id])
        .fetchone()
    )
    assert row is not None
    return str(row[0])


def test_a_debit_whose_lots_hold_less_than_it_takes_rolls_back(world: World) -> None:
    """Lots that disagree with the balance (here made to, behind the ledger's back): a redemption that would take
    less from them than from the balance is refused by rolling back, rather than recorded beside them."""
    asset = world.asset(decimals=0, expiry={"after_days": 30})
    wallet = world.wallet()
    _issue(world, asset.id, wallet.id, "100")
    with world.db.transaction() as con:
        con.execute("UPDATE lots SET remaining_minor = 60 WHERE wallet_id = ?", [wallet.id])
    counts = _ledger_counts(world.db)
    with pytest.raises(LotsOutOfBalance, match="would take 60"):
        _redeem(world, asset.id, wallet.id, "100")
    assert _balance(world.db, wallet.id) == 100 and _ledger_counts(world.db) == counts
    assert _lots(world.db, wallet.id) == [(100, 60, 0, False)]
    with world.db.transaction() as con:  # mended, the same redemption goes through
        con.execute("UPDATE lots SET remaining_minor = 100 WHERE wallet_id = ?", [wallet.id])
    _redeem(world, asset.id, wallet.id, "100")
    assert _balance(world.db, wallet.id) == 0 and _lots(world.db, wallet.id) == [(100, 0, 0, False)]


# against a real server: redemptions racing the expiry worker ---------------------------------------------------
def _once() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


@pytest.fixture
def server(tmp_path: Any) -> Iterator[LiveServer]:
    path = tmp_path / "races.duckdb"  # 1,200 redemptions in a few seconds: past the business plan's rate
    live = start_server(path, "Acme", "--plan", "enterprise", "--rate-limit", "100000", serve_args=EXPIRING_OFTEN)
    yield live
    stop_and_verify(live)


def test_redemptions_racing_the_expiry_worker_never_take_points_that_do_not_expire(server: LiveServer) -> None:
    """24 wallets, each with a lot of 100 that never expires (a direct issue of an asset without expiry) and a
    reward of 100 whose lot is due as soon as it is made (its event is two days old, the programme's rewards
    expire after one). While the workers post and expire the rewards, every wallet redeems 5 ten times. However
    they interleave, no lot that never expires loses anything to expiry, each wallet's lots hold its balance,
    what expired is what the breakage account holds, and the server's ledger verifies when it stops."""
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
        body = {"name": "Miles", "symbol": "MIL", "type": "points", "decimals": 0}
        asset = ok(http.post("/assets", json=body), 201)
        ok(http.post(f"/assets/{asset['id']}/activate"))
        body = {"name": "Miles", "asset_id": asset["id"], "expiry": {"after_days": 1}}
        programme = ok(http.post("/reward-programs", json=body), 201)
        action = {"type": "issue", "amount": {"fixed": "100"}}
        rule = {"program_id": programme["id"], "event_type": "trip", "actions": [action]}
        ok(http.post("/reward-rules", json=rule), 201)
        ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
        wallets = []
        for index in range(WALLETS):
            customer = ok(http.post("/customers", json={"external_id": f"traveller-{index}"}), 201)
            wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
            grant = {"wallet_id": wallet["id"], "amount": "100", "reason": "welcome"}
            ok(http.post(f"/assets/{asset['id']}/issue", json=grant, headers=_once()), 201)
            wallets.append(wallet["id"])
    occurred = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    failures: list[str] = []
    start = threading.Barrier(WALLETS + 1)

    def traveller(index: int, wallet_id: str) -> None:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
            event = {"type": "trip", "external_event_id": f"trip-{index}", "customer_id": f"traveller-{index}"}
            start.wait(RACE_TIMEOUT_S)
            sent = http.post("/events", json={**event, "occurred_at": occurred, "data": {}})
            if sent.status_code != 202:
                failures.append(f"{wallet_id}: {sent.status_code} {sent.text}")
            for _ in range(REDEMPTIONS):  # one point at a time, before, while and after the reward is posted
                body = {"wallet_id": wallet_id, "amount": "1", "reference": "kiosk"}
                spent = http.post(f"/assets/{asset['id']}/redemptions", json=body, headers=_once())
                if spent.status_code != 201:
                    failures.append(f"{wallet_id}: {spent.status_code} {spent.text}")

    threads = [threading.Thread(target=traveller, args=(i, w)) for i, w in enumerate(wallets)]
    for thread in threads:
        thread.start()
    start.wait(RACE_TIMEOUT_S)
    for thread in threads:
        thread.join(RACE_TIMEOUT_S * 3)
    assert not any(thread.is_alive() for thread in threads)
    assert not failures, failures[:5]
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
        deadline = time.monotonic() + RACE_TIMEOUT_S
        while True:  # every reward's lot expired (what the redemptions left of it)
            shown = [ok(http.get(f"/wallets/{w}/lots", params={"status": "open", "limit": 10})) for w in wallets]
            if all(len(lots) == 1 and lots[0]["expires_at"] is None for lots in shown):
                break
            assert time.monotonic() < deadline, shown
            time.sleep(0.1)
        for wallet_id, (everlasting,) in zip(wallets, shown, strict=True):
            lots = ok(http.get(f"/wallets/{wallet_id}/lots", params={"limit": 10}))
            reward = next(lot for lot in lots if lot["expires_at"] is not None)
            (balance,) = ok(http.get(f"/wallets/{wallet_id}/balances"))["balances"]
            assert everlasting["expired"] == "0", lots
            # 200 - 50 redeemed - what expired, held by the lots: the reward's lot gave to expiry only what the
            # redemptions left of it
            assert reward["remaining"] == "0" and 0 <= int(reward["expired"]) <= 100, lots
            assert int(balance["balance"]) == 150 - int(reward["expired"]) == int(everlasting["remaining"]), lots
