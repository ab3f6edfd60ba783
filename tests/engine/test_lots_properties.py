"""Lots under random sequences (Hypothesis), driven through the service layer over a real DuckDB file: issues,
redemptions, transfers and expiry runs at random moments on three wallets of an asset with an expiry. A plain
Python model (lots as [issued_at, order, remaining, expires_at]; oldest first; expiry takes what remains) predicts
every lot; after each sequence the lots, balances and breakage equal the model's and `verify_ledger` is ok."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.contract import requests as rq
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine.expiry import expire_due
from rewards_lab.service import assets, customers, ledger, lots, organizations
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger

WALLETS = 3
DAYS = 10  # each lot expires this many days after it was issued


@dataclass
class ModelLot:
    issued_at: datetime
    order: int
    remaining: int
    expires_at: datetime
    amount: int


Operation = tuple[str, int, int, int]  # (kind, wallet, other wallet, amount) ; "expire" uses amount as days ahead


operations = st.lists(
    st.one_of(
        st.tuples(st.just("issue"), st.integers(0, WALLETS - 1), st.just(0), st.integers(1, 50)),
        st.tuples(st.just("redeem"), st.integers(0, WALLETS - 1), st.just(0), st.integers(1, 60)),
        st.tuples(st.just("transfer"), st.integers(0, WALLETS - 1), st.integers(0, WALLETS - 1), st.integers(1, 60)),
        st.tuples(st.just("expire"), st.just(0), st.just(0), st.integers(0, 2 * DAYS)),
    ),
    min_size=1,
    max_size=14,
)


def _take(model: list[ModelLot], amount: int) -> list[tuple[ModelLot, int]]:
    parts = []
    for lot in sorted(model, key=lambda lot: (lot.issued_at, lot.order)):
        part = min(lot.remaining, amount)
        if part > 0:
            lot.remaining -= part
            amount -= part
            parts.append((lot, part))
    return parts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=operations)
def test_lots_follow_the_fifo_model(steps: list[Operation]) -> None:
    with tempfile.TemporaryDirectory() as folder, Database(Path(folder) / "lots.duckdb") as db:
        scope = Scope(organizations.create_organization(db, "Lots").id, "sandbox")
        body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0, "expiry": {"after_days": DAYS}}
        asset = assets.create_asset(db, scope, validate(rq.AssetCreate, body))
        assets.activate_asset(db, scope, asset.id)
        wallets = []
        for index in range(WALLETS):
            owner = customers.create_customer(db, scope, validate(rq.CustomerCreate, {"external_id": f"c{index}"}))
            body = {"customer_id": owner.id, "type": "customer"}
            wallets.append(customers.create_wallet(db, scope, validate(rq.WalletCreate, body)).id)
        model: list[list[ModelLot]] = [[] for _ in range(WALLETS)]
        order, expired = 0, 0
        clock: datetime | None = None
        for kind, wallet, other, amount in steps:
            held = sum(lot.remaining for lot in model[wallet])
            if kind == "issue":
                body = {"wallet_id": wallets[wallet], "amount": str(amount), "reason": "grant"}
                ledger.issue(db, scope, asset.id, validate(rq.IssueRequest, body))
                issued_at = _newest_issued_at(db, scope, wallets[wallet])
                clock = clock or issued_at
                order += 1
                model[wallet].append(ModelLot(issued_at, order, amount, issued_at + timedelta(days=DAYS), amount))
            elif kind == "redeem" and amount <= held:
                body = {"wallet_id": wallets[wallet], "amount": str(amount), "reference": "shop"}
                ledger.redeem(db, scope, asset.id, validate(rq.RedemptionRequest, body))
                _take(model[wallet], amount)
            elif kind == "transfer" and amount <= held and wallet != other:
                body = {"from_wallet_id": wallets[wallet], "to_wallet_id": wallets[other], "amount": str(amount)}
                ledger.transfer(db, scope, asset.id, validate(rq.TransferRequest, body))
                for lot, part in _take(model[wallet], amount):
                    order += 1
                    model[other].append(ModelLot(lot.issued_at, order, part, lot.expires_at, part))
            elif kind == "expire" and clock is not None:
                moment = clock + timedelta(days=amount)
                expire_due(db, as_of=moment)
                for lot in (lot for held_lots in model for lot in held_lots):
                    if lot.expires_at <= moment and lot.remaining > 0:
                        expired += lot.remaining
                        lot.remaining = 0
        for index, wallet_id in enumerate(wallets):
            page = lots.list_lots(db, scope, wallet_id, PageRequest(limit=100)).data
            expected = sorted(model[index], key=lambda lot: (lot.issued_at, lot.order))
            assert [(int(lot.amount), int(lot.remaining)) for lot in page] == [
                (lot.amount, lot.remaining) for lot in expected
            ]
            balances = ledger.wallet_balances(db, scope, wallet_id).balances
            assert sum(int(b.balance) for b in balances) == sum(lot.remaining for lot in expected)
        assert int(assets.get_asset(db, scope, asset.id).expired) == expired
        report = verify_ledger(db.reader())
        assert report.ok, report.problems


def _newest_issued_at(db: Database, scope: Scope, wallet_id: str) -> datetime:
    page = lots.list_lots(db, scope, wallet_id, PageRequest(limit=100, direction="desc")).data
    return page[0].issued_at.replace(tzinfo=None)
