"""The ledger state the posting policy needs, kept in memory by the single writer.

Only one process can open a DuckDB file, and every write goes through its one writer, so that process can keep
the committed state of the wallets, assets and balances it has touched and skip reading them again: in steady
state a batch of postings reads nothing before it writes. Coherence rules:

- what a unit of work learns or changes goes into a pending overlay, merged into the cache on COMMIT and dropped
  on ROLLBACK, so the cache only ever holds committed state;
- a change of a wallet's or asset's status forgets that entry at once (the next read goes to the database);
- the cache is bounded: past `max_entries` it is cleared and fills again from the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_policy import AssetState, WalletState

BalanceKey = tuple[str, str]  # (account id, asset id)
DEFAULT_MAX_ENTRIES = 2_000_000


@dataclass(slots=True)
class _Layer:
    wallets: dict[str, tuple[Scope, WalletState]] = field(default_factory=dict)
    assets: dict[str, tuple[Scope, AssetState]] = field(default_factory=dict)
    balances: dict[BalanceKey, tuple[Scope, int]] = field(default_factory=dict)
    forgotten: set[str] = field(default_factory=set)

    def size(self) -> int:
        return len(self.wallets) + len(self.assets) + len(self.balances)


class LedgerCache:
    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._committed = _Layer()
        self._pending: _Layer | None = None

    # transaction boundaries (called by Database.transaction) ------------------------------------------------
    def begin(self) -> None:
        self._pending = _Layer()

    def commit(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        committed = self._committed
        for name in pending.forgotten:
            committed.wallets.pop(name, None)
            committed.assets.pop(name, None)
        committed.wallets.update(pending.wallets)
        committed.assets.update(pending.assets)
        committed.balances.update(pending.balances)
        if committed.size() > self.max_entries:
            self._committed = _Layer()

    def rollback(self) -> None:
        self._pending = None

    # reads: pending first, then committed; an entry of another tenant is never returned ---------------------
    def _layers(self) -> list[_Layer]:
        return [self._pending, self._committed] if self._pending is not None else [self._committed]

    def wallet(self, scope: Scope, wallet_id: str) -> tuple[bool, WalletState | None]:
        """(known, state). Ids are unique across tenants, so a wallet known in another scope is known not to
        exist in this one: (True, None)."""
        for layer in self._layers():
            if wallet_id in layer.forgotten:
                return False, None
            entry = layer.wallets.get(wallet_id)
            if entry is not None:
                return True, entry[1] if entry[0] == scope else None
        return False, None

    def asset(self, scope: Scope, asset_id: str) -> AssetState | None:
        for layer in self._layers():
            if asset_id in layer.forgotten:
                return None
            entry = layer.assets.get(asset_id)
            if entry is not None:
                return entry[1] if entry[0] == scope else None
        return None

    def wallets(self, scope: Scope, wallet_ids: list[str]) -> tuple[dict[str, WalletState], list[str]]:
        """(states of the wallets known in this scope, ids the cache cannot answer for). Bulk form of `wallet`."""
        if self._pending is not None and (self._pending.wallets or self._pending.forgotten):
            found: dict[str, WalletState] = {}
            unknown: list[str] = []
            for wallet_id in wallet_ids:
                hit, state = self.wallet(scope, wallet_id)
                if not hit:
                    unknown.append(wallet_id)
                elif state is not None:
                    found[wallet_id] = state
            return found, unknown
        committed = self._committed.wallets
        found, unknown = {}, []
        for wallet_id in wallet_ids:
            entry = committed.get(wallet_id)
            if entry is None:
                unknown.append(wallet_id)
            elif entry[0] == scope:
                found[wallet_id] = entry[1]
        return found, unknown

    def balances(self, scope: Scope, keys: set[BalanceKey]) -> tuple[dict[BalanceKey, int], list[BalanceKey]]:
        """(known balances, keys the cache cannot answer for). Bulk form of `balance`."""
        if self._pending is not None and self._pending.balances:
            known: dict[BalanceKey, int] = {}
            unknown: list[BalanceKey] = []
            for key in keys:
                value = self.balance(scope, key)
                if value is None:
                    unknown.append(key)
                else:
                    known[key] = value
            return known, unknown
        committed = self._committed.balances
        known, unknown = {}, []
        for key in keys:
            entry = committed.get(key)
            if entry is not None and entry[0] == scope:
                known[key] = entry[1]
            else:
                unknown.append(key)
        return known, unknown

    def balance(self, scope: Scope, key: BalanceKey) -> int | None:
        for layer in self._layers():
            entry = layer.balances.get(key)
            if entry is not None:
                return entry[1] if entry[0] == scope else None
        return None

    # writes: into the pending layer of the current unit of work --------------------------------------------
    def _layer(self) -> _Layer | None:
        return self._pending

    def remember(
        self,
        scope: Scope,
        wallets: dict[str, WalletState],
        assets: dict[str, AssetState],
        balances: dict[BalanceKey, int],
    ) -> None:
        layer = self._layer()
        if layer is None:  # outside a unit of work nothing is remembered
            return
        for wallet_id, state in wallets.items():
            if wallet_id not in layer.forgotten:
                layer.wallets[wallet_id] = (scope, state)
        for asset_id, asset in assets.items():
            if asset_id not in layer.forgotten:
                layer.assets[asset_id] = (scope, asset)
        for key, value in balances.items():
            layer.balances[key] = (scope, value)

    def forget(self, resource_id: str) -> None:
        """A wallet's or asset's status changed: read it from the database from now on."""
        self._committed.wallets.pop(resource_id, None)
        self._committed.assets.pop(resource_id, None)
        layer = self._layer()
        if layer is not None:
            layer.wallets.pop(resource_id, None)
            layer.assets.pop(resource_id, None)
            layer.forgotten.add(resource_id)

    def clear(self) -> None:
        self._committed = _Layer()
        if self._pending is not None:
            self._pending = _Layer()
