"""The locks a unit of work takes on PostgreSQL before it decides a cap, a budget or a posting (issue 32, plan
section 5.2), so that several processes writing one database stay exact.

One global order, the same for every writer (the event worker's batches, the API's issue/redeem/transfer, the
reversals), so that two units of work never wait for each other in a cycle:
1. the caps' and budgets' usage counters, by key;
2. the wallets' balances, by (account, asset);
3. the asset's system accounts (issuance, redemption, breakage), by (account, asset), only when the asset has a
   supply ceiling (the decision then depends on the outstanding supply); without one they are only incremented,
   by the write itself, last.
Counters and balances are locked by transaction advisory locks on their keys (a key whose row does not exist yet
is locked too: two first rewards of one wallet, or two first uses of a counter, wait for each other instead of
colliding on the primary key or writing a stale total), and the existing balance rows also `FOR UPDATE` in the
same order (so a writer that locks rows, not keys, waits too). The locks last until the unit of work ends.

A unit of work that touches more after it wrote (a batch's later segment, another tenant in one batch) takes
those locks then, out of the global order: a cycle is possible there, PostgreSQL detects it (`deadlock_timeout`),
cancels one unit (`WriteConflict`), and its caller runs it once more.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from rewards_lab.contract.scope import Scope
from rewards_lab.store.interfaces import UsageKey
from rewards_lab.store.postgres.connection import PgConnection

# In the order of the array (WITH ORDINALITY: the function scan yields it so; the aggregate runs row by row).
_KEY_LOCKS = (
    "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
    "FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS t(k, n)"
)
# PostgreSQL locks the rows above the sort: in (account, asset) order.
_WALLET_ROWS = (
    "SELECT 1 FROM balances b WHERE b.organization_id = %(org)s AND b.environment = %(env)s "
    "AND (b.account_id, b.asset_id) IN (SELECT * FROM unnest(%(account)s::text[], %(asset)s::text[])) "
    "ORDER BY b.account_id, b.asset_id FOR UPDATE OF b"
)
_SYSTEM_ROWS = (
    "SELECT 1 FROM balances b JOIN assets a ON b.asset_id = a.id "
    "AND b.account_id IN (a.issuance_account_id, a.redemption_account_id, a.breakage_account_id) "
    "WHERE a.organization_id = %(org)s AND a.environment = %(env)s AND a.id = ANY(%(assets)s::text[]) "
    "AND a.supply_ceiling_minor IS NOT NULL ORDER BY b.account_id, b.asset_id FOR UPDATE OF b"
)


def counter_lock_key(scope: Scope, key: UsageKey) -> str:
    return "/".join(("limit", *scope.params, key.program_id, key.counter, key.customer_id, key.period_start))


def balance_lock_key(scope: Scope, account_id: str, asset_id: str) -> str:
    return "/".join(("balance", *scope.params, account_id, asset_id))


def lock_counters(con: PgConnection, scope: Scope, keys: Sequence[UsageKey]) -> None:
    """Step 1: these usage counters, by key."""
    con.execute_native(_KEY_LOCKS, {"keys": [counter_lock_key(scope, key) for key in sorted(set(keys))]})


def lock_balances(con: PgConnection, scope: Scope, accounts: Mapping[str, Collection[str]]) -> None:
    """Steps 2 and 3: the balances of `accounts` (asset id -> account ids), then the system accounts of those
    assets that have a supply ceiling."""
    pairs = sorted({(account, asset) for asset, account_ids in accounts.items() for account in account_ids})
    tenant = {"org": scope.organization_id, "env": scope.environment}
    if pairs:
        con.execute_native(_KEY_LOCKS, {"keys": [balance_lock_key(scope, *pair) for pair in pairs]})
        account_ids, asset_ids = zip(*pairs, strict=True)
        con.execute_native(_WALLET_ROWS, {**tenant, "account": list(account_ids), "asset": list(asset_ids)})
    con.execute_native(_SYSTEM_ROWS, {**tenant, "assets": sorted(accounts)})
