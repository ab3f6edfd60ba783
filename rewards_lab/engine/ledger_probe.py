"""What the ledger will accept of a batch, decided in order before the batch is written.

The event worker decides caps and budgets before it posts (`reward_limits`), yet a reward the ledger refuses (a
frozen wallet, a paused asset, the supply ceiling) must count in no counter, and a later reward of the same batch
must be decided against counters that do not hold it. The probe runs the ledger's own policy
(`LedgerState.decide`) over every posting of the batch in processing order, on a scratch copy of the state
`apply_postings` will load, so that it refuses exactly what the write will refuse. It writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine.postings import load_state
from rewards_lab.store.interfaces import Repositories


class LedgerProbe:
    """The running ledger state of a batch, loaded for `known` (the requests foreseen) and extended on demand."""

    def __init__(self, uow: Repositories, scope: Scope, known: Iterable[PostingRequest]) -> None:
        self.uow, self.scope = uow, scope
        self.state = load_state(uow, scope, list(known))

    def accepts(self, request: PostingRequest) -> bool:
        """Decide `request` after every one decided before it (applied to the running state when accepted)."""
        self._load(request)
        try:
            self.state.decide(request)
        except ServiceError:
            return False
        return True

    def _load(self, request: PostingRequest) -> None:
        """Read what the state lacks for `request` (a wallet or asset no foreseen request named). What the state
        has already is kept: its balances and supply are running values, ahead of the store."""
        state = self.state
        wallets = {w for w in (request.wallet_id, request.to_wallet_id) if w is not None}
        if wallets <= state.known_wallets and request.asset_id in state.assets:
            return
        extra = load_state(self.uow, self.scope, [request])
        state.known_wallets.update(extra.known_wallets)
        for wallet_id, wallet in extra.wallets.items():
            state.wallets.setdefault(wallet_id, wallet)
        for asset_id, asset in extra.assets.items():
            state.assets.setdefault(asset_id, asset)
            state.outstanding.setdefault(asset_id, extra.outstanding[asset_id])
        for key, balance in extra.balances.items():
            state.balances.setdefault(key, balance)
