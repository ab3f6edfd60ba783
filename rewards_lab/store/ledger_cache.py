"""The ledger state the posting policy needs, kept in memory by the single writer.

Only one process can open a DuckDB file, and every write goes through its one writer, so that process can keep
the committed state of the wallets, assets and balances it has touched and skip reading them again: in steady
state a batch of postings reads nothing before it writes. Coherence rules:

- what a unit of work learns or changes goes into a pending overlay, merged into the cache on COMMIT and dropped
  on ROLLBACK, so the cache only ever holds committed state;
- a change of a wallet's or asset's status forgets that entry at once (the next read goes to the database);
- entries are kept per tenant (scope): another tenant's wallet is simply not there, and the database, read with
  the tenant's filter, answers that it does not exist;
- the cache is bounded: past `max_entries` it is cleared and fills again from the database.

Plain dicts per scope (no per-entry wrapper) because a batch of a thousand postings looks up and stores a few
thousand entries: any per-entry Python work here is paid that many times in every batch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_policy import ORDINARY_WALLET, AssetState, WalletState

BalanceKey = tuple[str, str]  # (account id, asset id)
DEFAULT_MAX_ENTRIES = 2_000_000


@dataclass(slots=True)
class _Layer:
    wallets: dict[str, WalletState] = field(default_factory=dict)
    unusual: dict[str, WalletState] = field(default_factory=dict)  # the wallets above that are not ordinary
    assets: dict[str, AssetState] = field(default_factory=dict)
    # asset id -> account id -> balance: str -> int dicts hold no object the garbage collector tracks, where
    # (account, asset) tuple keys would make every full collection walk the whole cache
    balances: dict[str, dict[str, int]] = field(default_factory=dict)

    def size(self) -> int:
        return len(self.wallets) + len(self.assets) + sum(map(len, self.balances.values()))

    def add_wallets(self, wallets: Mapping[str, WalletState]) -> None:
        self.wallets.update(wallets)
        for wallet_id, state in wallets.items():
            if state == ORDINARY_WALLET:
                self.unusual.pop(wallet_id, None)
            else:
                self.unusual[wallet_id] = state

    def drop(self, resource_id: str) -> None:
        self.wallets.pop(resource_id, None)
        self.unusual.pop(resource_id, None)
        self.assets.pop(resource_id, None)

    def add_balances(self, balances: Mapping[BalanceKey, int]) -> None:
        per_asset = self.balances
        for (account_id, asset_id), value in balances.items():
            held = per_asset.get(asset_id)
            if held is None:
                held = per_asset[asset_id] = {}
            held[account_id] = value


_EMPTY = _Layer()


class LedgerCache:
    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._committed: dict[Scope, _Layer] = {}
        self._pending: dict[Scope, _Layer] | None = None
        self._forgotten: set[str] = set()  # wallets/assets whose status changed in the pending unit of work

    # transaction boundaries (called by DuckDBStore.transaction) ------------------------------------------------
    def begin(self) -> None:
        self._pending = {}
        self._forgotten = set()

    def commit(self) -> None:
        pending, self._pending = self._pending, None
        forgotten, self._forgotten = self._forgotten, set()
        if pending is None:
            return
        for name in forgotten:
            self._drop(name)
        for scope, layer in pending.items():
            committed = self._committed.setdefault(scope, _Layer())
            committed.add_wallets(layer.wallets)
            committed.assets.update(layer.assets)
            for asset_id, held in layer.balances.items():
                committed.balances.setdefault(asset_id, {}).update(held)
        if sum(layer.size() for layer in self._committed.values()) > self.max_entries:
            self._committed = {}

    def rollback(self) -> None:
        self._pending = None
        self._forgotten = set()

    # reads: pending first, then committed (unless forgotten in the pending unit of work) ---------------------
    def _pending_layer(self, scope: Scope) -> _Layer:
        return self._pending.get(scope, _EMPTY) if self._pending is not None else _EMPTY

    def wallets(self, scope: Scope, wallet_ids: set[str]) -> tuple[set[str], dict[str, WalletState], list[str]]:
        """(the wallets known in this scope, the states of those among them that are not ordinary, the ids the
        cache cannot answer for)."""
        committed = self._committed.get(scope, _EMPTY)
        pending, forgotten = self._pending_layer(scope), self._forgotten
        if not pending.wallets and not forgotten:  # the common case: set operations on the committed layer
            known = committed.wallets.keys() & wallet_ids
            unusual = {w: committed.unusual[w] for w in committed.unusual.keys() & known}
            return known, unusual, list(wallet_ids - known)
        known, unusual, unknown = set(), {}, []
        for wallet_id in wallet_ids:
            state = pending.wallets.get(wallet_id)
            if state is None and wallet_id not in forgotten:
                state = committed.wallets.get(wallet_id)
            if state is None:
                unknown.append(wallet_id)
                continue
            known.add(wallet_id)
            if state != ORDINARY_WALLET:
                unusual[wallet_id] = state
        return known, unusual, unknown

    def asset(self, scope: Scope, asset_id: str) -> AssetState | None:
        found = self._pending_layer(scope).assets.get(asset_id)
        if found is None and asset_id not in self._forgotten:
            found = self._committed.get(scope, _EMPTY).assets.get(asset_id)
        return found

    def balances(self, scope: Scope, asset_id: str, account_ids: Collection[str]) -> tuple[dict[str, int], list[str]]:
        """(known balances of these accounts in this asset, accounts the cache cannot answer for)."""
        committed = self._committed.get(scope, _EMPTY).balances.get(asset_id, {})
        pending = self._pending_layer(scope).balances.get(asset_id)
        if pending:
            committed = {**committed, **pending}
        found = {a: committed[a] for a in account_ids if a in committed}
        return found, [a for a in account_ids if a not in found]

    # writes: into the pending layer of the current unit of work --------------------------------------------
    def remember(
        self,
        scope: Scope,
        wallets: Mapping[str, WalletState],
        assets: Mapping[str, AssetState],
        balances: Mapping[BalanceKey, int],
    ) -> None:
        """What the current unit of work read or wrote; kept only if it commits."""
        if self._pending is None:  # outside a unit of work nothing is remembered
            return
        layer = self._pending.get(scope)
        if layer is None:
            layer = self._pending[scope] = _Layer()
        forgotten = self._forgotten
        if forgotten:
            wallets = {k: v for k, v in wallets.items() if k not in forgotten}
            assets = {k: v for k, v in assets.items() if k not in forgotten}
        layer.add_wallets(wallets)
        layer.assets.update(assets)
        layer.add_balances(balances)

    def remember_balances(self, scope: Scope, asset_id: str, balances: Mapping[str, int]) -> None:
        """`remember` for the balances of many accounts in one asset (a batch accepted whole)."""
        if self._pending is None:
            return
        layer = self._pending.get(scope)
        if layer is None:
            layer = self._pending[scope] = _Layer()
        layer.balances.setdefault(asset_id, {}).update(balances)

    def forget(self, resource_id: str) -> None:
        """A wallet's or asset's status changed: read it from the database from now on."""
        self._drop(resource_id)
        if self._pending is not None:
            for layer in self._pending.values():
                layer.drop(resource_id)
            self._forgotten.add(resource_id)

    def _drop(self, resource_id: str) -> None:
        for layer in self._committed.values():
            layer.drop(resource_id)

    def clear(self) -> None:
        self._committed = {}
        if self._pending is not None:
            self._pending = {}
