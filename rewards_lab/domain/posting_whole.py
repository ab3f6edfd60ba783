"""A homogeneous batch decided whole, with numpy: a private strategy of `posting_decision.decide_batch` for the
batch path's common case, without per-posting Python.

`decide_whole` takes a batch in which every request is an issue/reward of one asset, or every request is a
transfer of one asset, and decides whether the sequential policy (`LedgerState.decide`, one request after the
other) would accept every one of them. If so it applies the whole batch to the state and returns it in columns,
ready for the store; if not (or the batch is of another shape) it returns None and `decide_batch` decides it
another way, so refusals, their order and their errors never come from here.

The test is exact, not merely sufficient: issues are accepted whole iff outstanding supply plus the batch's total
stays within the ceiling (amounts are positive, so the running supply only rises); transfers iff each account's
running balance, taken in request order, never goes below zero. Amounts are summed in int64 only when no sum can
overflow it (checked first); anything larger goes to the sequential path with Python's integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

import numpy as np

from rewards_lab.domain.ceiling import fits, room_under
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.posting_policy import MAX_ISSUED_MINOR, LedgerState, PostingRequest, WalletState

MIN_WHOLE = 8  # below this, one by one is as cheap as setting up the arrays
_INT64_SAFE = 2**62
_ISSUING = frozenset(("issue", "reward"))


class _Columns(NamedTuple):
    """A batch of `PostingRequest`s as columns (their fields, in their order)."""

    ids: list[str]
    kinds: list[str]
    asset_ids: list[str]
    amounts: list[int]
    wallet_ids: list[str]
    to_wallet_ids: list[str | None]
    memos: list[str | None]
    execution_ids: list[str | None]


@dataclass(frozen=True, slots=True)
class AcceptedBatch:
    """Every request of a batch, accepted, in columns (request order); and the net change of each account."""

    asset_id: str
    transaction_ids: list[str]
    kinds: list[str]
    amounts: np.ndarray  # int64
    sources: list[str]
    destinations: list[str]
    memos: list[str | None]
    execution_ids: list[str | None]
    accounts: list[str]  # every account whose balance the batch moves
    deltas: np.ndarray  # int64, the net change of `accounts[i]`
    balances: list[int]  # the balance of `accounts[i]` after the batch

    def postings(self) -> list[Posting]:
        return list(
            map(
                Posting,
                self.transaction_ids,
                self.kinds,
                repeat(self.asset_id),
                self.amounts.tolist(),
                self.sources,
                self.destinations,
                self.memos,
                self.execution_ids,
            )
        )


def decide_whole(state: LedgerState, requests: Sequence[PostingRequest]) -> AcceptedBatch | None:
    """The batch accepted whole and applied to `state`, or None (nothing applied) for `decide_batch` to decide."""
    if len(requests) < MIN_WHOLE:
        return None
    batch = _Columns(*map(list, zip(*requests, strict=True)))
    asset_id = batch.asset_ids[0]
    if batch.asset_ids.count(asset_id) != len(batch.asset_ids):
        return None
    asset = state.assets.get(asset_id)
    if asset is None or asset.status != "active":
        return None
    amount = _amounts(batch.amounts)
    if amount is None:
        return None
    kind_set = set(batch.kinds)
    if kind_set <= _ISSUING:
        return _issue_whole(state, batch, asset_id, amount)
    if kind_set == {"transfer"}:
        return _transfer_whole(state, batch, asset_id, amount)
    return None


def _amounts(amounts: list[int]) -> np.ndarray | None:
    """The amounts as int64 when all are positive and no sum of them can overflow; else None."""
    largest = max(amounts)
    if min(amounts) <= 0 or largest > MAX_AMOUNT_MINOR or largest * len(amounts) >= _INT64_SAFE:
        return None
    return np.array(amounts, dtype=np.int64)


def _index(*columns: list[str]) -> dict[str, int]:
    """Each distinct wallet of these columns -> its position, in order of first appearance."""
    unique = dict.fromkeys(columns[0])
    for column in columns[1:]:
        unique.update(dict.fromkeys(column))
    return {wallet_id: position for position, wallet_id in enumerate(unique)}


def _codes(wallet_ids: list[str], index: dict[str, int]) -> list[int]:
    return list(map(index.__getitem__, wallet_ids))


def _issue_whole(state: LedgerState, batch: _Columns, asset_id: str, amount: np.ndarray) -> AcceptedBatch | None:
    wallet_ids = batch.wallet_ids
    wallets = set(wallet_ids)
    if not wallets <= state.known_wallets:
        return None
    if any(state.wallets[w].status == "frozen" for w in wallets.intersection(state.wallets)):
        return None  # receiving needs only an unfrozen wallet; its transfer policy does not matter
    asset = state.assets[asset_id]
    total = int(amount.sum())
    if not fits(total, room_under(asset.supply_ceiling_minor, state.outstanding[asset_id])):
        return None
    if state.issued(asset_id) + total > MAX_ISSUED_MINOR:
        return None
    index = _index(wallet_ids)
    received = np.zeros(len(index), dtype=np.int64)
    np.add.at(received, _codes(wallet_ids, index), amount)
    accounts = [*index, asset.issuance_account_id]
    deltas = np.append(received, -total)
    balances = _apply(state, asset_id, accounts, deltas)
    state.outstanding[asset_id] += total
    sources = [asset.issuance_account_id] * len(batch.ids)
    return AcceptedBatch(
        asset_id,
        batch.ids,
        batch.kinds,
        amount,
        sources,
        wallet_ids,
        batch.memos,
        batch.execution_ids,
        accounts,
        deltas,
        balances,
    )


def _transfer_whole(state: LedgerState, batch: _Columns, asset_id: str, amount: np.ndarray) -> AcceptedBatch | None:
    wallet_ids, to_wallet_ids = batch.wallet_ids, batch.to_wallet_ids
    if any(a == b for a, b in zip(wallet_ids, to_wallet_ids, strict=True)) or None in to_wallet_ids:
        return None
    destinations: list[str] = to_wallet_ids  # type: ignore[assignment]  # no None, checked above
    senders, receivers = set(wallet_ids), set(destinations)
    if not senders <= state.known_wallets or not receivers <= state.known_wallets:
        return None
    unusual = state.wallets  # the known wallets that are not active and open
    if any(not _can_send(unusual[w]) for w in senders.intersection(unusual)):
        return None
    if any(not _can_receive(unusual[w]) for w in receivers.intersection(unusual)):
        return None
    index = _index(wallet_ids, destinations)
    codes = np.array(_codes(wallet_ids, index) + _codes(destinations, index), dtype=np.int64)
    held = _held(state, asset_id, list(index))
    if max(held) >= _INT64_SAFE or min(held) < 0:
        return None
    # Every leg in request order (a transfer's two legs touch two different accounts), grouped by account.
    size = len(batch.ids)
    legs = np.concatenate([-amount, amount])
    order = np.lexsort((np.tile(np.arange(size), 2), codes))
    sorted_codes, sorted_legs = codes[order], legs[order]
    running = np.cumsum(sorted_legs)
    starts = np.flatnonzero(np.concatenate([[True], sorted_codes[1:] != sorted_codes[:-1]]))
    before = running[starts] - sorted_legs[starts]  # the cumulative sum before each account's first leg
    lengths = np.diff(np.append(starts, len(sorted_codes)))
    initial = np.array(held, dtype=np.int64)
    if (running - np.repeat(before, lengths) + np.repeat(initial, lengths)).min() < 0:
        return None  # some account would go below zero at some point: decided one by one
    deltas = running[starts + lengths - 1] - before
    accounts = list(index)
    balances = _apply(state, asset_id, accounts, deltas)
    return AcceptedBatch(
        asset_id,
        batch.ids,
        batch.kinds,
        amount,
        wallet_ids,
        destinations,
        batch.memos,
        batch.execution_ids,
        accounts,
        deltas,
        balances,
    )


def _can_send(wallet: WalletState) -> bool:
    return wallet.status != "frozen" and wallet.transfer_policy == "open"


def _can_receive(wallet: WalletState) -> bool:
    return wallet.status != "frozen" and wallet.transfer_policy != "closed"


def _held(state: LedgerState, asset_id: str, accounts: list[str]) -> list[int]:
    keys = [(account, asset_id) for account in accounts]
    return list(map(state.balances.get, keys, repeat(0, len(keys))))


def _apply(state: LedgerState, asset_id: str, accounts: list[str], deltas: np.ndarray) -> list[int]:
    """Move the accounts' balances in the state by their deltas (Python integers: no overflow); the new ones."""
    keys = [(account, asset_id) for account in accounts]
    held = map(state.balances.get, keys, repeat(0, len(keys)))
    balances = [h + d for h, d in zip(held, deltas.tolist(), strict=True)]
    state.balances.update(zip(keys, balances, strict=True))
    return balances
