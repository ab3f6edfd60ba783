"""The lots of a batch of postings (rewards_lab.domain.lots): what each accepted posting of an asset that tracks
lots makes or takes, written beside the postings in the same unit of work.

Callers say what only they know through `LotTerms` keyed by transaction id: a reward's lot is issued at its
event's time and expires under its programme's policy; a reversal takes first from the lots its original reward
made; an expiry takes its own lot. A credit without terms (a direct issue) is issued now under the asset's policy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.expiry import ExpiryPolicy, expires_at, reward_expiry
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.lots import Lot, credited, take
from rewards_lab.domain.posting_policy import LedgerState
from rewards_lab.store.interfaces import LotTaken, NewLot, Repositories

WALLET_PREFIX = "wal_"


class LotsOutOfBalance(RuntimeError):
    """A posting whose lot parts do not add up to its amount: raised inside the unit of work, which rolls back
    (the posting is never recorded beside lots that disagree with it)."""


@dataclass(frozen=True, slots=True)
class LotTerms:
    """What the caller decides of a posting's lots. A credit: `issued_at` and the `expiry` of its programme, read in
    `timezone` (None: the asset's, `domain.expiry.reward_expiry`). A reversal: the transactions whose lots it takes
    from `first`. An expiry: its `lot_id`."""

    issued_at: datetime | None = None
    expiry: ExpiryPolicy | None = None
    timezone: str = "UTC"
    first: tuple[str, ...] = ()
    lot_id: str | None = None


def record_lots(
    uow: Repositories,
    scope: Scope,
    postings: Sequence[Posting],
    state: LedgerState,
    terms: Mapping[str, LotTerms],
    now: datetime,
) -> None:
    """Make and take the lots of `postings` (accepted, in order, already applied to `state`)."""
    tracked = {asset_id for asset_id, asset in state.assets.items() if asset.breakage_account_id is not None}
    relevant = [p for p in postings if p.asset_id in tracked]
    if not relevant:
        return
    keys: set[tuple[str, str]] = set()
    for p in relevant:
        for account in (p.source_account_id, p.destination_account_id):
            if account.startswith(WALLET_PREFIX):
                keys.add((account, p.asset_id))
    net: dict[tuple[str, str], int] = defaultdict(int)
    for p in postings:
        net[(p.source_account_id, p.asset_id)] -= p.amount_minor
        net[(p.destination_account_id, p.asset_id)] += p.amount_minor
    balance = {key: state.balances.get(key, 0) - net[key] for key in keys}  # before the batch
    debited = {(p.source_account_id, p.asset_id) for p in relevant if p.source_account_id.startswith(WALLET_PREFIX)}
    lots: dict[tuple[str, str], list[Lot]] = {key: [] for key in keys}  # a credit needs only the balance
    lots.update(uow.lots.open_lots(scope, debited))  # a debit takes from what is open (none read for rewards)
    made: list[NewLot] = []
    taken: list[LotTaken] = []
    for p in relevant:
        term = terms.get(p.transaction_id, LotTerms())
        source, destination = (p.source_account_id, p.asset_id), (p.destination_account_id, p.asset_id)
        parts: list[tuple[Lot, int]] = []
        if source in keys:
            held = lots[source]
            if p.kind == "expire":
                held = [lot for lot in held if lot.id == term.lot_id]
            parts = take(held, p.amount_minor, term.first)
            _check_taken(p, parts, balance[source])
            expired_by = p.transaction_id if p.kind == "expire" else None
            taken.extend(LotTaken(lot.id, part, expired_by) for lot, part in parts)
            balance[source] -= p.amount_minor
        if destination not in keys:
            continue
        balance[destination] += p.amount_minor
        room = credited(p.amount_minor, balance[destination])
        if p.kind == "transfer":  # the sender's lots move, dates kept; a debt of the receiver is paid first
            debt = p.amount_minor - room
            pieces = []
            for lot, part in parts:
                paid = min(debt, part)
                debt -= paid
                if part - paid > 0:
                    pieces.append((lot.issued_at, lot.expires_at, part - paid))
        else:
            issued_at = term.issued_at or now
            asset = state.assets[p.asset_id]
            governing = reward_expiry(term.expiry, term.timezone, asset.expiry)
            expiry = None if governing is None else expires_at(governing[0], issued_at, governing[1])
            pieces = [(issued_at, expiry, room)] if room > 0 else []
        if sum(amount for _, _, amount in pieces) != room:
            raise LotsOutOfBalance(f"transaction {p.transaction_id}: lots made differ from the {room} it adds")
        for issued_at, expiry, amount in pieces:
            lot_id = new_id("lot")
            made.append(
                NewLot(lot_id, p.destination_account_id, p.asset_id, issued_at, expiry, amount, p.transaction_id)
            )
            lots[destination].append(Lot(lot_id, issued_at, amount, expiry, p.transaction_id))
    uow.lots.write(scope, made, taken)


def _check_taken(posting: Posting, parts: list[tuple[Lot, int]], before: int) -> None:
    """A debit takes from the lots exactly what it takes from the balance above zero: min(amount, max(balance
    before, 0)) (the open lots hold max(balance, 0)); an expiry takes all of its amount from its own lot."""
    taken = sum(part for _, part in parts)
    expected = posting.amount_minor if posting.kind == "expire" else min(posting.amount_minor, max(before, 0))
    if taken != expected:
        raise LotsOutOfBalance(
            f"{posting.kind} transaction {posting.transaction_id} of {posting.amount_minor} would take {taken} "
            f"from the lots of {posting.source_account_id} (expected {expected})"
        )
