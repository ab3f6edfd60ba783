"""The one decision function for a batch of posting requests: `decide_batch` (a single request is a batch of one).

It decides every request in order against the running state, exactly as `LedgerState.decide` one request after
the other would, applying what it accepts to the state, and chooses its strategy itself:

- a homogeneous batch (one asset; all issues, or all transfers) that is accepted whole is decided in columns
  with numpy (`posting_whole`), and stays in columns up to the store;
- a batch in which no request can be refused (`_nothing_refused`) is accepted in one pass without the
  per-posting checks;
- anything else is decided one request at a time.

Callers never choose. `tests/domain/test_posting_policy_batch.py` holds every strategy equal to deciding one by one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import cast

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.ceiling import fits, room_under
from rewards_lab.domain.ledger import Posting, TransactionKind
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.posting_policy import KINDS, MAX_ISSUED_MINOR, LedgerState, PostingRequest, Refusal, covers
from rewards_lab.domain.posting_whole import AcceptedBatch, decide_whole


class PostingDecision:
    """What a batch decision accepted (already applied to the state) and rejected, in request order.

    `to_write` is what the store writes: the accepted postings, or a batch accepted whole still in columns; the
    `Posting` tuples of the latter are made only when `accepted` is asked for (the event worker never asks).
    """

    __slots__ = ("_accepted", "rejected", "to_write")

    def __init__(self, to_write: list[Posting] | AcceptedBatch, rejected: list[Refusal]) -> None:
        self.to_write = to_write
        self.rejected = rejected
        self._accepted: list[Posting] | None = to_write if isinstance(to_write, list) else None

    @property
    def accepted(self) -> list[Posting]:
        if self._accepted is None:
            assert isinstance(self.to_write, AcceptedBatch)
            self._accepted = self.to_write.postings()
        return self._accepted


def decide_batch(state: LedgerState, requests: Sequence[PostingRequest]) -> PostingDecision:
    """Every request decided in order, as `state.decide` one by one would; accepted ones applied to `state`."""
    whole = decide_whole(state, requests)
    if whole is not None:
        return PostingDecision(whole, [])
    if _nothing_refused(state, requests):
        return PostingDecision(_accept_all(state, requests), [])
    accepted: list[Posting] = []
    rejected: list[Refusal] = []
    for request in requests:
        try:
            accepted.append(state.decide(request))
        except ServiceError as error:
            rejected.append((request, error))
    return PostingDecision(accepted, rejected)


def _nothing_refused(state: LedgerState, requests: Sequence[PostingRequest]) -> bool:
    """True when no order of these requests could refuse any of them.

    Sufficient conditions, checked in bulk: every asset active; every wallet known, active and open; every
    amount positive; no transfer to its own wallet; per asset, outstanding supply plus everything the batch
    issues within the ceiling; and per giving wallet, its balance covers everything the batch takes from it.
    The last two ignore what the batch redeems or pays in, so they hold at every step of the sequential
    decision, whatever the order: the sequential path would accept every request.
    """
    if not requests:
        return True
    _, kinds, asset_ids, amounts, wallet_ids, to_wallet_ids, _, _ = zip(*requests, strict=True)
    assets = state.assets
    if any(a not in assets or assets[a].status != "active" for a in set(asset_ids)):
        return False
    involved = set(wallet_ids)
    involved.update(to_wallet_ids)
    involved.discard(None)
    if not involved <= state.known_wallets or not involved.isdisjoint(state.wallets):
        return False
    if min(amounts) <= 0 or max(amounts) > MAX_AMOUNT_MINOR or not set(kinds) <= KINDS:
        return False
    issued: dict[str, int] = defaultdict(int)
    taken: dict[tuple[str, str], int] = defaultdict(int)
    for kind, asset_id, amount, wallet_id, to_wallet_id in zip(
        kinds, asset_ids, amounts, wallet_ids, to_wallet_ids, strict=True
    ):
        if kind == "issue" or kind == "reward":
            issued[asset_id] += amount
        elif kind == "transfer" and (to_wallet_id is None or to_wallet_id == wallet_id):
            return False
        else:
            taken[(wallet_id, asset_id)] += amount
    for asset_id, amount in issued.items():
        if state.issued(asset_id) + amount > MAX_ISSUED_MINOR:
            return False
        if not fits(amount, room_under(assets[asset_id].supply_ceiling_minor, state.outstanding[asset_id])):
            return False
    balances = state.balances
    return all(covers(balances.get(key, 0), amount) for key, amount in taken.items())


def _accept_all(state: LedgerState, requests: Sequence[PostingRequest]) -> list[Posting]:
    """The postings of requests `_nothing_refused` cleared, applied to the running state in one pass."""
    assets, balances, outstanding = state.assets, state.balances, state.outstanding
    postings: list[Posting] = []
    append = postings.append
    for transaction_id, kind, asset_id, amount, wallet_id, to_wallet_id, memo, execution_id in requests:
        if kind == "transfer":
            assert to_wallet_id is not None
            source, destination = wallet_id, to_wallet_id
        elif kind == "redemption":
            source, destination = wallet_id, assets[asset_id].redemption_account_id
            outstanding[asset_id] -= amount
        else:
            source, destination = assets[asset_id].issuance_account_id, wallet_id
            outstanding[asset_id] += amount
        posted = cast(TransactionKind, kind)  # _nothing_refused admits only KINDS
        append(Posting(transaction_id, posted, asset_id, amount, source, destination, memo, execution_id))
        key = (source, asset_id)
        balances[key] = balances.get(key, 0) - amount
        key = (destination, asset_id)
        balances[key] = balances.get(key, 0) + amount
    return postings
