"""The pipelined posting path for bulk work (backfills, mass issuance): decide the next batch in Python while
DuckDB writes and commits the previous one (DuckDB releases the GIL while it works, and the machine has two
cores).

Decisions rest on a `LedgerState` carried from batch to batch: exactly the state the earlier batches lead to once
committed. State the pipeline has not touched yet is read from committed data. If another writer changes an
account the pipeline holds in its carried state, the storage engine's constraints still refuse anything that
would break an invariant; the pipeline then stops, and `submit` and `close` raise.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType

import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.posting_policy import AssetState, LedgerState, PostingRequest
from rewards_lab.service.ledger import BatchOutcome
from rewards_lab.store.database import Database
from rewards_lab.store.ledger import deltas_table, postings_table
from rewards_lab.store.uow import Repositories, unit_of_work

_Job = tuple[pa.Table, pa.Table, dict[str, AssetState], dict[tuple[str, str], int]]
# While a pipeline runs, hand the GIL over sooner than Python's default 5 ms, so that the writer thread gets it
# back as soon as DuckDB returns instead of waiting out the deciding thread's time slice.
_SWITCH_INTERVAL_S = 0.0005


class PostingPipeline:
    """`with PostingPipeline(db, scope) as pipeline: pipeline.submit(batch)` - durable when the block ends."""

    def __init__(self, database: Database, scope: Scope, depth: int = 2) -> None:
        self._database = database
        self._scope = scope
        self._jobs: queue.Queue[_Job | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._state: LedgerState | None = None
        self._reads = Repositories(database.reader())
        self._writer = threading.Thread(target=self._write_loop, name="posting-pipeline", daemon=True)
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_INTERVAL_S)
        self._writer.start()

    def submit(self, requests: Sequence[PostingRequest]) -> BatchOutcome:
        """Decide a batch now; it is written behind the scenes (durable once `close` returns)."""
        self._raise_if_failed()
        state = self._state_for(requests)
        accepted: list[Posting] = []
        rejected: list[tuple[PostingRequest, ServiceError]] = []
        for request in requests:
            try:
                accepted.append(state.decide(request))
            except ServiceError as error:
                rejected.append((request, error))
        touched = {(p.source_account_id, p.asset_id) for p in accepted}
        touched |= {(p.destination_account_id, p.asset_id) for p in accepted}
        balances = {key: state.balances[key] for key in touched}
        assets = {a: replace(s, outstanding_minor=state.outstanding[a]) for a, s in state.assets.items()}
        if accepted:
            txn_batch = postings_table(accepted)
            deltas = deltas_table(accepted, state.issuance_accounts())
            self._put((txn_batch, deltas, assets, balances))
        return BatchOutcome(accepted, rejected)

    def close(self) -> None:
        """Wait until every submitted batch is committed; raise what stopped the pipeline, if anything did."""
        if self._writer.is_alive():
            self._put(None)
            self._writer.join()
        sys.setswitchinterval(self._switch_interval)
        self._raise_if_failed()

    def __enter__(self) -> PostingPipeline:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _put(self, job: _Job | None) -> None:
        while self._writer.is_alive():
            try:
                self._jobs.put(job, timeout=0.1)
                return
            except queue.Full:
                continue
        self._raise_if_failed()

    def _state_for(self, requests: Sequence[PostingRequest]) -> LedgerState:
        """The carried state, extended with whatever these requests touch for the first time."""
        carried = self._state
        wallet_ids = {w for q in requests for w in (q.wallet_id, q.to_wallet_id) if w is not None}
        asset_ids = {q.asset_id for q in requests}
        keys = {(q.wallet_id, q.asset_id) for q in requests}
        keys |= {(q.to_wallet_id, q.asset_id) for q in requests if q.to_wallet_id is not None}
        if carried is not None:
            wallet_ids -= carried.seen_wallets
            asset_ids -= carried.assets.keys()
            keys -= carried.balances.keys()
        if carried is not None and not (wallet_ids or asset_ids or keys):
            return carried
        fresh = self._reads.ledger.ledger_state(self._scope, sorted(wallet_ids), sorted(asset_ids), keys)
        fresh.seen_wallets |= wallet_ids
        if carried is None:
            self._state = fresh
            return fresh
        carried.seen_wallets |= wallet_ids
        carried.known_wallets |= fresh.known_wallets
        carried.wallets.update(fresh.wallets)
        for asset_id, asset in fresh.assets.items():
            carried.assets[asset_id] = asset
            carried.outstanding[asset_id] = asset.outstanding_minor
        for key, value in fresh.balances.items():
            carried.balances.setdefault(key, value)
        return carried

    def _write_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            txn_batch, deltas, assets, balances = job
            try:
                with unit_of_work(self._database) as uow:
                    uow.ledger.write_tables(self._scope, txn_batch, deltas)
                    self._database.ledger_cache.remember(self._scope, {}, assets, balances)
            except BaseException as error:  # noqa: BLE001 - handed to the submitting thread
                self._error = error
                self._database.ledger_cache.clear()
                return

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error
