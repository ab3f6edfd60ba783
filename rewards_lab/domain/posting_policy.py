"""Which postings the ledger accepts: the rules for one request (`LedgerState.decide`), against a running view of
the ledger (no I/O).

The batch path loads the state of every wallet and asset a batch touches once, then decides each posting in
turn against it, applying accepted ones to the running state, so that a batch of a thousand postings needs no SQL
per posting and a later posting sees the effect of the earlier ones (balances, supply). `posting_decision`
decides a batch; its faster strategies are held equal to `decide` one request after the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple, cast

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.ceiling import fits, room_under
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.ledger import Posting, TransactionKind, check_posting
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.reversals import clawback_take

Kind = Literal[
    "issue", "reward", "redemption", "transfer", "expire", "reversal_available", "reversal_negative", "reversal_none"
]
KINDS = frozenset(("issue", "reward", "redemption", "transfer"))  # what the no-refusal shortcut decides
# A reversal takes back a reward (wallet -> issuance account): its kind names the programme's clawback policy,
# which decides how much a wallet holding less than the amount gives (`domain.reversals.clawback_take`); the
# posting it makes is of kind "reversal".
REVERSAL_KINDS: dict[Kind, str] = {
    "reversal_available": "available",
    "reversal_negative": "negative",
    "reversal_none": "none",
}
REVERSAL_KIND_OF: dict[str, Kind] = {policy: kind for kind, policy in REVERSAL_KINDS.items()}  # clawback -> kind
# The most one asset may ever have issued in total (minor units). No balance's magnitude can exceed it (a wallet
# holds at most what was issued; the issuance account holds minus the total issued), so every balance fits the
# store's HUGEINT and the batch's DECIMAL(38, 0) deltas. An issue past it is refused as `amount_too_large`.
MAX_ISSUED_MINOR = 10**38 - 1


class PostingRequest(NamedTuple):
    """A request to move value. For issue/reward `wallet_id` receives; for redemption it gives."""

    transaction_id: str
    kind: Kind
    asset_id: str
    amount_minor: int
    wallet_id: str
    to_wallet_id: str | None = None  # transfers only
    memo: str | None = None
    execution_id: str | None = None


def covers(balance_minor: int, amount_minor: int) -> bool:
    """Whether a wallet holding `balance_minor` can give `amount_minor` (a redemption, a transfer, an expiry): the
    ledger never takes a wallet below zero, except a `negative` clawback (`domain.reversals.clawback_take`)."""
    return balance_minor >= amount_minor


@dataclass(frozen=True, slots=True)
class AssetState:
    status: str
    decimals: int
    supply_ceiling_minor: int | None
    issuance_account_id: str
    redemption_account_id: str
    outstanding_minor: int
    # Where expired points go; set once the asset tracks lots (rewards_lab.domain.lots), None before.
    breakage_account_id: str | None = None
    expiry: ExpiryPolicy | None = None  # the asset's own expiry (a programme's may override it for its rewards)


@dataclass(frozen=True, slots=True)
class WalletState:
    status: str
    transfer_policy: str


ORDINARY_WALLET = WalletState("active", "open")
Refusal = tuple[PostingRequest, ServiceError]


@dataclass(slots=True)
class LedgerState:
    """A running view of the assets, wallets and balances a batch touches.

    `wallets` holds only the wallets that are not ordinary (frozen, or with a transfer policy other than open);
    every other id in `known_wallets` is an active, open wallet. `balances` needs only the accounts that give
    value (redemption and transfer sources): a balance only ever has to be read before it goes down.
    """

    assets: dict[str, AssetState]
    known_wallets: set[str]
    wallets: dict[str, WalletState]
    balances: dict[tuple[str, str], int]
    outstanding: dict[str, int] = field(default_factory=dict)
    # (wallet, asset) that a "negative" clawback took below zero in this batch: the store lowers their floor
    below_zero: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        for asset_id, asset in self.assets.items():
            self.outstanding.setdefault(asset_id, asset.outstanding_minor)

    def issued(self, asset_id: str) -> int:
        """Everything the asset has issued so far: minus its issuance account's balance."""
        return -self.balances.get((self.assets[asset_id].issuance_account_id, asset_id), 0)

    def issuance_accounts(self) -> dict[str, str]:
        return {asset_id: asset.issuance_account_id for asset_id, asset in self.assets.items()}

    def decide(self, request: PostingRequest) -> Posting:
        """The posting for `request`, applied to the running state; or raise the ServiceError refusing it."""
        if request.kind in REVERSAL_KINDS:
            return self._reverse(request)
        if request.kind == "expire":
            return self._expire(request)
        asset = self._active_asset(request.asset_id)
        if request.amount_minor > MAX_AMOUNT_MINOR:
            raise ServiceError("amount_too_large", field="amount")
        if request.kind in ("issue", "reward"):
            self._usable_wallet(request.wallet_id)
            if self.issued(request.asset_id) + request.amount_minor > MAX_ISSUED_MINOR:
                raise ServiceError(
                    "amount_too_large", "the asset's total issuance would pass the ledger's limit", field="amount"
                )
            room = room_under(asset.supply_ceiling_minor, self.outstanding[request.asset_id])
            if not fits(request.amount_minor, room):
                raise ServiceError(
                    "asset_supply_exhausted",
                    "issuing this amount would exceed the asset's supply ceiling",
                    asset_id=request.asset_id,
                    available_minor=str(room),
                )
            posting = self._posting(request, asset.issuance_account_id, request.wallet_id)
        elif request.kind == "redemption":
            self._usable_wallet(request.wallet_id)
            self._require_balance(request.wallet_id, request.asset_id, request.amount_minor)
            posting = self._posting(request, request.wallet_id, asset.redemption_account_id)
        else:
            posting = self._transfer(request)
        check_posting(posting)
        self._apply(posting, request.kind)
        return posting

    def _reverse(self, request: PostingRequest) -> Posting:
        """Take back (part of) a reward: whatever the asset's status or the wallet's (a frozen wallet gives back
        too), as much as the clawback policy lets the wallet give; nothing at all is refused as
        `insufficient_balance` (the caller records the whole amount as a shortfall)."""
        asset = self.assets.get(request.asset_id)
        if asset is None:
            raise ServiceError("asset_not_found", asset_id=request.asset_id)
        if request.wallet_id not in self.known_wallets:
            raise ServiceError("wallet_not_found", wallet_id=request.wallet_id)
        key = (request.wallet_id, request.asset_id)
        held = self.balances.get(key, 0)
        taken = clawback_take(request.amount_minor, held, REVERSAL_KINDS[request.kind])
        if taken <= 0:
            raise ServiceError(
                "insufficient_balance",
                "the wallet holds too little of the asset to give back",
                wallet_id=request.wallet_id,
                asset_id=request.asset_id,
                balance_minor=str(held),
            )
        posting = Posting(
            request.transaction_id,
            "reversal",
            request.asset_id,
            taken,
            request.wallet_id,
            asset.issuance_account_id,
            request.memo,
            request.execution_id,
        )
        check_posting(posting)
        if held - taken < 0:
            self.below_zero.add(key)
        self._apply(posting, request.kind)
        return posting

    def _expire(self, request: PostingRequest) -> Posting:
        """Take an expired lot's remainder to the breakage account: whatever the asset's status or the wallet's
        (a lot expires on its date, frozen or not); never more than the wallet holds."""
        asset = self.assets.get(request.asset_id)
        if asset is None or asset.breakage_account_id is None:
            raise ServiceError("asset_not_found", asset_id=request.asset_id)
        if request.wallet_id not in self.known_wallets:
            raise ServiceError("wallet_not_found", wallet_id=request.wallet_id)
        self._require_balance(request.wallet_id, request.asset_id, request.amount_minor)
        posting = self._posting(request, request.wallet_id, asset.breakage_account_id)
        check_posting(posting)
        self._apply(posting, request.kind)
        return posting

    def _transfer(self, request: PostingRequest) -> Posting:
        assert request.to_wallet_id is not None
        if request.wallet_id == request.to_wallet_id:
            raise ServiceError("transfer_same_wallet", field="to_wallet_id")
        sender = self._usable_wallet(request.wallet_id, field_name="from_wallet_id")
        receiver = self._usable_wallet(request.to_wallet_id, field_name="to_wallet_id")
        if sender.transfer_policy != "open":
            raise ServiceError(
                "wallet_policy_violation",
                f"wallet {request.wallet_id} has transfer policy '{sender.transfer_policy}' and cannot send",
                wallet_id=request.wallet_id,
                policy=sender.transfer_policy,
            )
        if receiver.transfer_policy == "closed":
            raise ServiceError(
                "wallet_policy_violation",
                f"wallet {request.to_wallet_id} has transfer policy 'closed' and cannot receive transfers",
                wallet_id=request.to_wallet_id,
                policy="closed",
            )
        self._require_balance(request.wallet_id, request.asset_id, request.amount_minor)
        return self._posting(request, request.wallet_id, request.to_wallet_id)

    def _active_asset(self, asset_id: str) -> AssetState:
        asset = self.assets.get(asset_id)
        if asset is None:
            raise ServiceError("asset_not_found", asset_id=asset_id)
        if asset.status != "active":
            if asset.status == "paused":
                raise ServiceError("asset_paused", asset_id=asset_id)
            raise ServiceError("asset_not_active", asset_id=asset_id, status=asset.status)
        return asset

    def _usable_wallet(self, wallet_id: str, field_name: str = "wallet_id") -> WalletState:
        if wallet_id not in self.known_wallets:
            raise ServiceError("wallet_not_found", field=field_name, wallet_id=wallet_id)
        wallet = self.wallets.get(wallet_id, ORDINARY_WALLET)
        if wallet.status == "frozen":
            raise ServiceError("wallet_frozen", wallet_id=wallet_id)
        return wallet

    def _require_balance(self, wallet_id: str, asset_id: str, amount_minor: int) -> None:
        held = self.balances.get((wallet_id, asset_id), 0)
        if not covers(held, amount_minor):
            raise ServiceError(
                "insufficient_balance",
                "the wallet holds too little of the asset",
                wallet_id=wallet_id,
                asset_id=asset_id,
                balance_minor=str(held),
            )

    @staticmethod
    def _posting(request: PostingRequest, source: str, destination: str) -> Posting:
        return Posting(
            request.transaction_id,
            cast(TransactionKind, request.kind),  # reversals make their own posting (`_reverse`)
            request.asset_id,
            request.amount_minor,
            source,
            destination,
            request.memo,
            request.execution_id,
        )

    def _apply(self, posting: Posting, kind: Kind) -> None:
        balances, amount = self.balances, posting.amount_minor
        source = (posting.source_account_id, posting.asset_id)
        destination = (posting.destination_account_id, posting.asset_id)
        balances[source] = balances.get(source, 0) - amount
        balances[destination] = balances.get(destination, 0) + amount
        if kind in ("issue", "reward"):
            self.outstanding[posting.asset_id] += posting.amount_minor
        elif kind in ("redemption", "expire") or kind in REVERSAL_KINDS:
            self.outstanding[posting.asset_id] -= posting.amount_minor
