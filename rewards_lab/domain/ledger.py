"""Double-entry postings. Every transaction has at least two entries that net to zero per asset.

The invariant is asserted here, before anything is written, and again by the store on the rows it inserts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal, NamedTuple

from rewards_lab.contract.errors import ServiceError

TransactionKind = Literal["issue", "redemption", "transfer", "reward", "reversal", "expire"]


@dataclass(frozen=True, slots=True)
class Entry:
    account_id: str
    asset_id: str
    amount_minor: int  # signed: negative leaves the account, positive enters it


class Posting(NamedTuple):
    """One ledger transaction: the move of `amount_minor` of one asset from `source` to `destination`.

    Issues go from the asset's issuance account to a wallet, redemptions from a wallet to the redemption account,
    transfers from wallet to wallet, reversals (a reward taken back) from a wallet to the issuance account,
    expiries (an expired lot) from a wallet to the asset's breakage account.
    `wallet_id`, `from_wallet_id` and `to_wallet_id` describe it for readers.

    A NamedTuple: immutable, and cheap to make a thousand of per batch.
    """

    transaction_id: str
    kind: TransactionKind
    asset_id: str
    amount_minor: int
    source_account_id: str
    destination_account_id: str
    memo: str | None = None
    execution_id: str | None = None

    def entries(self) -> tuple[Entry, Entry]:
        return (
            Entry(self.source_account_id, self.asset_id, -self.amount_minor),
            Entry(self.destination_account_id, self.asset_id, self.amount_minor),
        )


def check_balanced(transaction_id: str, entries: tuple[Entry, ...] | list[Entry]) -> None:
    """Raise `ledger_unbalanced` unless there are two or more entries netting to zero per asset."""
    if len(entries) < 2:
        raise ServiceError("ledger_unbalanced", "a transaction needs at least two entries", transaction=transaction_id)
    totals: dict[str, int] = defaultdict(int)
    for entry in entries:
        totals[entry.asset_id] += entry.amount_minor
    unbalanced = {asset: total for asset, total in totals.items() if total != 0}
    if unbalanced:
        raise ServiceError(
            "ledger_unbalanced",
            "the entries do not net to zero per asset",
            transaction=transaction_id,
            imbalance={asset: str(total) for asset, total in unbalanced.items()},
        )


def check_posting(posting: Posting) -> None:
    """A posting's two legs (-amount, +amount) net to zero by construction; what remains to check is that the
    amount is positive and the two accounts differ (the store's CHECK constraints hold the same)."""
    if posting.amount_minor <= 0:
        raise ServiceError("amount_not_positive", field="amount")
    if posting.source_account_id == posting.destination_account_id:
        raise ServiceError("transfer_same_wallet", field="to_wallet_id")
