"""Ledger use cases: direct issue, redemption, transfer and balances, all through the one posting path
(`engine/postings.py`)."""

from __future__ import annotations

from rewards_lab import presenters
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount, parse_amount
from rewards_lab.domain.posting_policy import Kind, PostingRequest
from rewards_lab.engine.postings import apply_postings
from rewards_lab.service.lots import next_expiries
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store, reader
from rewards_lab.store.interfaces import Repositories, TransactionFilter, TransactionRow

TRANSACTION_SORTS = ("created_at", "amount_minor")


def _decimals(uow: Repositories, scope: Scope, asset_id: str) -> int:
    """From the writer's cache when it holds the asset (decimals never change), else a primary-key lookup."""
    decimals = uow.ledger.cached_decimals(scope, asset_id)
    if decimals is None:
        decimals = uow.assets.decimals(scope, asset_id)
    if decimals is None:
        raise ServiceError("asset_not_found", asset_id=asset_id)
    return decimals


def _transaction(uow: Repositories, scope: Scope, transaction_id: str) -> r.LedgerTransaction:
    row = uow.ledger.get_transaction(scope, transaction_id)
    if row is None:
        raise ServiceError("transaction_not_found", transaction_id=transaction_id)
    return presenters.transaction(row, _decimals(uow, scope, row.asset_id))


def issue(
    database: Store,
    scope: Scope,
    asset_id: str,
    body: rq.IssueRequest,
    *,
    idempotency_key: str | None = None,
) -> r.LedgerTransaction:
    """Direct issuance for one-off grants no rule covers: issuance account -> wallet."""
    return _post(database, scope, asset_id, "issue", body, body.wallet_id, None, body.reason, idempotency_key)


def redeem(
    database: Store,
    scope: Scope,
    asset_id: str,
    body: rq.RedemptionRequest,
    *,
    idempotency_key: str | None = None,
) -> r.LedgerTransaction:
    """Wallet -> redemption account; `insufficient_balance`, `asset_paused`, `wallet_frozen` refuse it."""
    return _post(database, scope, asset_id, "redemption", body, body.wallet_id, None, body.reference, idempotency_key)


def transfer(
    database: Store,
    scope: Scope,
    asset_id: str,
    body: rq.TransferRequest,
    *,
    idempotency_key: str | None = None,
) -> r.LedgerTransaction:
    """Wallet -> wallet, subject to both wallets' transfer policies."""
    wallets = (body.from_wallet_id, body.to_wallet_id)
    return _post(database, scope, asset_id, "transfer", body, *wallets, body.reference, idempotency_key)


# The operation name each kind's idempotency record is filed under (`assets.<name>:<asset id>`).
_OPERATIONS: dict[Kind, str] = {"issue": "issue", "redemption": "redeem", "transfer": "transfer"}


def _post(
    database: Store,
    scope: Scope,
    asset_id: str,
    kind: Kind,
    body: rq.IssueRequest | rq.RedemptionRequest | rq.TransferRequest,
    wallet_id: str,
    to_wallet_id: str | None,
    memo: str | None,
    idempotency_key: str | None,
) -> r.LedgerTransaction:
    """One posting of `body.amount`, through the posting path, under the request's idempotency key."""

    def write(uow: Repositories) -> r.LedgerTransaction:
        decimals = _decimals(uow, scope, asset_id)
        amount = parse_amount(body.amount, decimals)
        request = PostingRequest(new_id("transaction"), kind, asset_id, amount, wallet_id, to_wallet_id, memo)
        decision = apply_postings(uow, scope, [request])
        if decision.rejected:
            raise decision.rejected[0][1]
        # Rendered from what was just written (the row is exactly this posting at the write's timestamp), rather
        # than read back: one statement less per call.
        posting = decision.accepted[0]
        written_at = uow.ledger.written_at
        assert written_at is not None
        row = TransactionRow(*posting, written_at)  # `Posting`'s fields are the row's, in order, with its id first
        return presenters.transaction(row, decimals)

    return run_write(
        database,
        scope,
        f"assets.{_OPERATIONS[kind]}:{asset_id}",
        body,
        write,
        r.LedgerTransaction,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def get_transaction(database: Store, scope: Scope, transaction_id: str) -> r.LedgerTransaction:
    return _transaction(reader(database), scope, transaction_id)


def list_transactions(
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    wallet_id: str | None = None,
    asset_id: str | None = None,
    kind: str | None = None,
) -> r.Page[r.LedgerTransaction]:
    uow = reader(database)
    sort = check_page_request(page, TRANSACTION_SORTS)
    rows = uow.ledger.list_transactions(scope, page, sort, TransactionFilter(wallet_id, asset_id, kind))
    assets = uow.assets.get_many(scope, sorted({row.asset_id for row in rows.rows}))
    decimals = {asset_id: int(asset.decimals) for asset_id, asset in assets.items()}
    return presenters.page(
        r.Page[r.LedgerTransaction], rows, lambda row: presenters.transaction(row, decimals[row.asset_id])
    )


def wallet_balances(database: Store, scope: Scope, wallet_id: str) -> r.WalletBalances:
    """The wallet's balances per asset, read from the snapshot (every asset it ever held, zero included)."""
    uow = reader(database)
    wallet = uow.wallets.get(scope, wallet_id)
    if wallet is None:
        raise ServiceError("wallet_not_found", wallet_id=wallet_id)
    rows = uow.ledger.wallet_balances(scope, wallet_id)
    expiring = next_expiries(uow, scope, wallet_id, {row.asset_id: int(row.decimals) for row in rows})
    balances = [
        r.Balance(
            asset_id=row.asset_id,
            symbol=row.symbol,
            decimals=int(row.decimals),
            balance=format_amount(int(row.balance_minor), int(row.decimals)),
            updated_at=presenters.utc(row.updated_at),
            next_expiry=expiring.get(row.asset_id),
        )
        for row in rows
    ]
    return r.WalletBalances(
        wallet_id=wallet_id, customer_id=wallet.customer_id, status=wallet.status, balances=balances
    )
