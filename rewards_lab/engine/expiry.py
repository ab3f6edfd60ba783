"""Expiry: lots whose time has come go to their asset's breakage account (`expire` transactions), with a
`points.expired` webhook per wallet and asset.

`expire_due` is idempotent and crash-safe like the event worker: each tenant's share of a round is one unit of
work in which the expire postings, the lots they empty and the webhooks commit together or not at all; a lot
that is empty is never found due again. `as_of` (default now) lets a replay-equal run expire exactly what was due
at a moment (the differential tests), and the worker (rewards_lab.worker.expiry) calls it every few seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine.lot_book import LotTerms
from rewards_lab.engine.notifications import outbox_messages
from rewards_lab.engine.postings import apply_postings
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import DueLot

ROUND = 1000  # lots per round


@dataclass
class ExpiryReport:
    lots: int = 0
    transactions: int = 0
    refused: int = 0  # lots whose expiry the ledger refused (the wallet gone, say): left open, reported


def expire_due(database: Store, as_of: datetime | None = None, round_size: int = ROUND) -> ExpiryReport:
    """Expire every open lot whose expires_at <= `as_of` (naive UTC; default now), round after round."""
    moment = as_of or utcnow()
    report = ExpiryReport()
    skipped: set[str] = set()
    while True:
        due = [lot for lot in reader(database).lots.due(moment, round_size + len(skipped)) if lot.id not in skipped]
        if not due:
            return report
        tenants: dict[tuple[str, str], list[str]] = defaultdict(list)
        for lot in due[:round_size]:
            tenants[(lot.organization_id, lot.environment)].append(lot.id)
        for (organization_id, environment), lot_ids in tenants.items():
            scope = Scope(organization_id, cast(EnvironmentName, environment))
            expired, refused = _expire(database, scope, lot_ids, moment)
            skipped.update(set(lot_ids) - expired)  # refused, or spent since the read: not again this call
            report.lots += len(expired)
            report.transactions += len(expired)
            report.refused += len(refused)


def _expire(database: Store, scope: Scope, lot_ids: list[str], moment: datetime) -> tuple[set[str], set[str]]:
    """One tenant's due lots in one unit of work; returns the ids of the lots expired and of those the ledger
    refused to expire.

    The lots were found due outside the write lock: they are read again inside it, and each expires what it holds
    now (a redemption committed in between took from it; posting what was read would take the difference from the
    wallet's other lots, including lots that never expire)."""
    with unit_of_work(database) as uow:
        lots = uow.lots.due_among(scope, lot_ids, moment)
        if not lots:
            return set(), set()
        ids = new_ids("transaction", len(lots))
        requests = [
            PostingRequest(
                txn, "expire", lot.asset_id, lot.remaining_minor, lot.wallet_id, memo=f"lot {lot.id} expired"
            )
            for txn, lot in zip(ids, lots, strict=True)
        ]
        terms = {txn: LotTerms(lot_id=lot.id) for txn, lot in zip(ids, lots, strict=True)}
        decision = apply_postings(uow, scope, requests, lot_terms=terms)
        database.fault("after_lots")  # crash tests park here: postings and lots written, webhooks not yet
        refused = {lots[ids.index(request.transaction_id)].id for request, _ in decision.rejected}
        expired: dict[tuple[str, str], list[tuple[DueLot, str]]] = defaultdict(list)
        for txn, lot in zip(ids, lots, strict=True):
            if lot.id not in refused:
                expired[(lot.wallet_id, lot.asset_id)].append((lot, txn))
        if expired:
            decimals = {a: uow.assets.decimals(scope, a) or 0 for a in {asset for _, asset in expired}}
            wallets = uow.wallets.get_many(scope, sorted({wallet for wallet, _ in expired}))
            customers = {wallet_id: row.customer_id for wallet_id, row in wallets.items()}
            payloads = [
                (wallet_id, _payload(wallet_id, customers.get(wallet_id), asset_id, items, decimals[asset_id]))
                for (wallet_id, asset_id), items in expired.items()
            ]
            uow.outbox.add_many(scope, outbox_messages("points.expired", payloads))
    return {lot.id for lot in lots} - refused, refused


def _payload(
    wallet_id: str, customer_id: str | None, asset_id: str, items: list[tuple[DueLot, str]], decimals: int
) -> dict[str, Any]:
    """The `points.expired` webhook's body: the wallet, the asset, the total and each lot with its transaction."""
    return {
        "wallet_id": wallet_id,
        "customer_id": customer_id,
        "asset_id": asset_id,
        "amount": format_amount(sum(lot.remaining_minor for lot, _ in items), decimals),
        "lots": [
            {
                "lot_id": lot.id,
                "amount": format_amount(lot.remaining_minor, decimals),
                "expires_at": lot.expires_at.isoformat() + "Z",
                "transaction_id": txn,
            }
            for lot, txn in items
        ],
    }
