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

The live engine sees lots as `Lot` objects (`take`); the replay's sequential pass keeps millions of open lots in
typed arrays and calls the same rules on lot indices: `fifo_place` (where a new lot goes in FIFO order),
`debit_order` (which lots a debit takes from, in turn) and `take_in_turn` (what it takes of each).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Any


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


def fifo_place(order: Sequence[int], issued_at: Sequence[Any], at: Any) -> int:
    """Where a new lot issued at `at` goes among open lots in FIFO order (`order`: their indices, in that order;
    `issued_at[i]`: when lot i was issued): after every lot issued at or before it, since it was made last (FIFO
    is issued_at, then creation). Searched from the end, where a lot made in processing order goes."""
    place = len(order)
    while place and issued_at[order[place - 1]] > at:
        place -= 1
    return place


def debit_order(order: Sequence[int], preferred: Sequence[int] = ()) -> Iterator[int]:
    """The lots a debit takes from, in turn (`order`: the open lots in FIFO order): the `preferred` ones first (a
    reversal's: the lots its original reward made, in FIFO order too), then the others; lazily, as a debit
    usually takes from a few of many."""
    if not preferred:
        return iter(order)
    skip = set(preferred)
    return chain(preferred, (lot for lot in order if lot not in skip))


def take_in_turn(remaining: MutableSequence[int], turn: Iterable[int], amount: int) -> list[tuple[int, int]]:
    """What a debit of `amount` takes, lot by lot (`remaining[i]`: what lot i holds; `turn`: the lots in the order
    it takes from them, `debit_order`): what is left of the amount or all the lot holds, until the amount is taken
    or the lots run out. Lowers `remaining` in place; returns (lot, part) of every lot it took from."""
    taken: list[tuple[int, int]] = []
    for lot in turn:
        if amount <= 0:
            break
        part = min(remaining[lot], amount)
        if part <= 0:
            continue
        remaining[lot] -= part
        amount -= part
        taken.append((lot, part))
    return taken


def take(lots: Sequence[Lot], amount: int, first: Iterable[str] = ()) -> list[tuple[Lot, int]]:
    """What a debit of `amount` takes from `lots` (open lots of one wallet and asset), lot by lot, in the order
    it takes them: the lots whose source is in `first` (oldest first), then the others oldest first; at most what
    they hold. The lots' `remaining` are lowered in place."""
    ordered = sorted(lots, key=lambda lot: (lot.issued_at, lot.id))
    sources = set(first)
    preferred = [index for index, lot in enumerate(ordered) if lot.source in sources]
    remaining = [lot.remaining for lot in ordered]
    taken = take_in_turn(remaining, debit_order(range(len(ordered)), preferred), amount)
    for index, _ in taken:
        ordered[index].remaining = remaining[index]
    return [(ordered[index], part) for index, part in taken]


def credited(amount: int, balance_after: int) -> int:
    """What a credit of `amount` that leaves the wallet at `balance_after` adds to its lots: what lies above zero."""
    return max(0, min(amount, balance_after))


def due(lots: Iterable[Lot], as_of: datetime) -> list[Lot]:
    """The open lots that have expired by `as_of` (expires_at <= as_of), oldest expiry first."""
    found = [lot for lot in lots if lot.remaining > 0 and lot.expires_at is not None and lot.expires_at <= as_of]
    return sorted(found, key=lambda lot: (lot.expires_at or as_of, lot.issued_at, lot.id))
