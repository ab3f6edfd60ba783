"""Which postings the ledger accepts, decided in order against a running view of the ledger (no I/O).

The batch path loads the state of every wallet and asset a batch touches once, then decides each posting in
turn here, applying accepted ones to the running state, so that a batch of a thousand postings needs no SQL per
posting and a later posting sees the effect of the earlier ones (balances, supply).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.ledger import Posting, check_posting
from rewards_lab.domain.money import MAX_AMOUNT_MINOR

Kind = Literal["issue", "reward", "redemption", "transfer"]
_KINDS = frozenset(("issue", "reward", "redemption", "transfer"))
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


@dataclass(frozen=True, slots=True)
class AssetState:
    status: str
    decimals: int
    supply_ceiling_minor: int | None
    issuance_account_id: str
    redemption_account_id: str
    outstanding_minor: int


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
        asset = self._active_asset(request.asset_id)
        if request.amount_minor > MAX_AMOUNT_MINOR:
            raise ServiceError("amount_too_large", field="amount")
        if request.kind in ("issue", "reward"):
            self._usable_wallet(request.wallet_id)
            if self.issued(request.asset_id) + request.amount_minor > MAX_ISSUED_MINOR:
                raise ServiceError(
                    "amount_too_large", "the asset's total issuance would pass the ledger's limit", field="amount"
                )
            ceiling = asset.supply_ceiling_minor
            outstanding = self.outstanding[request.asset_id]
            if ceiling is not None and outstanding + request.amount_minor > ceiling:
                raise ServiceError(
                    "asset_supply_exhausted",
                    "issuing this amount would exceed the asset's supply ceiling",
                    asset_id=request.asset_id,
                    available_minor=str(ceiling - outstanding),
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

    def decide_all(self, requests: Sequence[PostingRequest]) -> tuple[list[Posting], list[Refusal]]:
        """Every request decided in order, exactly as `decide` one by one would, with a shortcut for the
        common batch in which nothing can be refused (see `_nothing_refused`): then the postings are made and
        applied in bulk, without the per-posting checks."""
        if self._nothing_refused(requests):
            return self._accept_all(requests), []
        accepted: list[Posting] = []
        refused: list[Refusal] = []
        for request in requests:
            try:
                accepted.append(self.decide(request))
            except ServiceError as error:
                refused.append((request, error))
        return accepted, refused

    def _nothing_refused(self, requests: Sequence[PostingRequest]) -> bool:
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
        assets = self.assets
        if any(a not in assets or assets[a].status != "active" for a in set(asset_ids)):
            return False
        involved = set(wallet_ids)
        involved.update(to_wallet_ids)
        involved.discard(None)
        if not involved <= self.known_wallets or not involved.isdisjoint(self.wallets):
            return False
        if min(amounts) <= 0 or max(amounts) > MAX_AMOUNT_MINOR or not set(kinds) <= _KINDS:
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
            if self.issued(asset_id) + amount > MAX_ISSUED_MINOR:
                return False
            ceiling = assets[asset_id].supply_ceiling_minor
            if ceiling is not None and self.outstanding[asset_id] + amount > ceiling:
                return False
        balances = self.balances
        return all(balances.get(key, 0) >= amount for key, amount in taken.items())

    def _accept_all(self, requests: Sequence[PostingRequest]) -> list[Posting]:
        """The postings of requests `_nothing_refused` cleared, applied to the running state in one pass."""
        assets, balances, outstanding = self.assets, self.balances, self.outstanding
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
            append(Posting(transaction_id, kind, asset_id, amount, source, destination, memo, execution_id))
            key = (source, asset_id)
            balances[key] = balances.get(key, 0) - amount
            key = (destination, asset_id)
            balances[key] = balances.get(key, 0) + amount
        return postings

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
        if held < amount_minor:
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
            request.kind,
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
        elif kind == "redemption":
            self.outstanding[posting.asset_id] -= posting.amount_minor
