"""Lots (pure; no I/O): what a wallet holds of an asset that tracks lots, issuance by issuance, and which of them
a debit takes from.

Every credit of such an asset is a lot with the instant it was issued and the instant it expires (None: never).
The open lots of a (wallet, asset) always hold max(balance, 0) between them:

- a credit makes a lot of what it adds above zero (a wallet a "negative" clawback left below zero pays that debt
  first: its lot is `min(amount, balance after)`, nothing when the balance stays at or below zero);
- a debit (redemption, transfer, expiry, reversal) takes min(amount, what the open lots hold) from them: first
  from the lots it names (a reversal names the lots its original reward created), then the oldest first (by
  `issued_at`, then creation order: FIFO);
- a transfer's receiver gets, lot by lot, what was taken from the sender, with the same issued_at and expires_at.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(slots=True)
class Lot:
    """An open lot as a debit sees it. Lot ids grow with creation (rewards_lab.contract.ids), so the id orders
    lots issued at the same instant; `source` is the transaction that created it (a reward's, an issue's, a
    transfer's)."""

    id: str
    issued_at: datetime
    remaining: int
    expires_at: datetime | None
    source: str


def take(lots: Sequence[Lot], amount: int, first: Iterable[str] = ()) -> list[tuple[Lot, int]]:
    """What a debit of `amount` takes from `lots` (open lots of one wallet and asset), lot by lot, in the order
    it takes them: the lots whose source is in `first` (oldest first), then the others oldest first; at most what
    they hold. The lots' `remaining` are lowered in place."""
    preferred = set(first)
    ordered = sorted(lots, key=lambda lot: (lot.source not in preferred, lot.issued_at, lot.id))
    taken: list[tuple[Lot, int]] = []
    for lot in ordered:
        if amount <= 0:
            break
        part = min(lot.remaining, amount)
        if part <= 0:
            continue
        lot.remaining -= part
        amount -= part
        taken.append((lot, part))
    return taken


def credited(amount: int, balance_after: int) -> int:
    """What a credit of `amount` that leaves the wallet at `balance_after` adds to its lots: what lies above zero."""
    return max(0, min(amount, balance_after))


def due(lots: Iterable[Lot], as_of: datetime) -> list[Lot]:
    """The open lots that have expired by `as_of` (expires_at <= as_of), oldest expiry first."""
    found = [lot for lot in lots if lot.remaining > 0 and lot.expires_at is not None and lot.expires_at <= as_of]
    return sorted(found, key=lambda lot: (lot.expires_at or as_of, lot.issued_at, lot.id))
