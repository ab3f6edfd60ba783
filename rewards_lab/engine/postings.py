"""The one posting path of the ledger: every issue, redemption, transfer, reward, reversal and expiry is decided
in order by the domain's posting policy and written set-based here, with its lots."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_decision import PostingDecision, decide_batch
from rewards_lab.domain.posting_policy import LedgerState, PostingRequest
from rewards_lab.engine.lot_book import LotTerms, record_lots
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import AssetRow, Repositories


def load_state(uow: Repositories, scope: Scope, requests: Sequence[PostingRequest]) -> LedgerState:
    """Everything the policy needs about the wallets, assets and balances these requests touch.

    The single writer keeps what it has seen committed (`store.ledger_cache`), so in steady state a batch reads
    nothing; what it has not seen it reads in at most three queries.
    """
    if not requests:
        return uow.ledger.ledger_state(scope, set(), {})
    _, _, asset_column, _, wallet_column, to_wallet_column, _, _ = zip(*requests, strict=True)
    wallet_ids = set(wallet_column)
    wallet_ids.update(to_wallet_column)
    wallet_ids.discard(None)
    accounts: dict[str, set[str]]
    if len(set(asset_column)) == 1:  # the common batch: every wallet's balance of the one asset
        accounts = {asset_column[0]: wallet_ids}
    else:
        accounts = defaultdict(set)
        for asset_id, wallet_id, to_wallet_id in zip(asset_column, wallet_column, to_wallet_column, strict=True):
            accounts[asset_id].add(wallet_id)
            if to_wallet_id is not None:
                accounts[asset_id].add(to_wallet_id)
    return uow.ledger.ledger_state(scope, wallet_ids, accounts)


def apply_postings(
    uow: Repositories,
    scope: Scope,
    requests: Sequence[PostingRequest],
    state: LedgerState | None = None,
    lot_terms: Mapping[str, LotTerms] | Callable[[], Mapping[str, LotTerms]] | None = None,
) -> PostingDecision:
    """The one posting path (a single posting is a batch of one): decide every request in order
    (`decide_batch`), then write the accepted ones set-based, with their lots where the asset tracks them
    (`lot_terms`: what only the caller knows of them, or a function making it, called only then). Runs inside
    the caller's unit of work; the store's constraints assert the invariants again as it writes."""
    state = state or load_state(uow, scope, requests)
    decision = decide_batch(state, requests)
    uow.ledger.write_postings(scope, decision, state)
    if any(asset.breakage_account_id is not None for asset in state.assets.values()):
        terms = lot_terms() if callable(lot_terms) else lot_terms
        record_lots(uow, scope, decision.accepted, state, terms or {}, utcnow())
    return decision


def asset_row(uow: Repositories, scope: Scope, asset_id: str) -> AssetRow:
    row = uow.assets.get(scope, asset_id)
    if row is None:
        raise ServiceError("asset_not_found", asset_id=asset_id)
    return row
