"""Benchmark: the batch posting path, durable in a DuckDB file, every invariant still checked.

Each batch is one unit of work: `apply_postings` decides every posting with the policy (in order, against the
running state) and writes the accepted ones set-based through the store, whose CHECK constraints assert the
invariants again; then it commits. Prints ledger transactions per second (each transaction is two entries),
including every commit, and the per-batch latency.

`--floor` also measures the database half alone: every batch is decided before the clock starts, and the timed
loop only runs the store's write (`write_postings`: its Arrow tables, INSERT, balance UPDATE) and the COMMIT of
each batch, checkpoints included. No decision can make a batch quicker than that.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from machine import speed_probe  # benchmarks/machine.py, beside this script
from seeding import add_customers, add_wallets  # benchmarks/seeding.py

from rewards_lab.contract import requests as rq
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.posting_decision import PostingDecision, decide_batch
from rewards_lab.domain.posting_policy import LedgerState, PostingRequest
from rewards_lab.engine.postings import apply_postings, load_state
from rewards_lab.service import assets, organizations
from rewards_lab.store.database import Database
from rewards_lab.store.interfaces import Repositories
from rewards_lab.store.uow import unit_of_work
from rewards_lab.store.verification import verify_ledger


def prepare(database: Database, wallets: int) -> tuple[Scope, str, list[str]]:
    """A tenant, an active asset with a (large) ceiling, and `wallets` funded wallets."""
    org = organizations.create_organization(database, "bench")
    scope = Scope(org.id, "sandbox")
    body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "supply_ceiling": "1000000000000000.00"}
    asset = assets.create_asset(database, scope, validate(rq.AssetCreate, body))
    assets.activate_asset(database, scope, asset.id)
    customer_ids, wallet_ids = new_ids("customer", wallets), new_ids("wallet", wallets)
    with unit_of_work(database) as uow:  # seeded set-based: one service call per wallet took minutes
        add_customers(uow.con, scope, customer_ids, [f"c{index}" for index in range(wallets)])
        add_wallets(uow.con, scope, wallet_ids, customer_ids, "customer", "open")
    with unit_of_work(database) as uow:  # warm up: every wallet holds the asset (steady state below)
        ids = new_ids("transaction", len(wallet_ids))
        funding = [PostingRequest(t, "issue", asset.id, 10**9, w) for t, w in zip(ids, wallet_ids, strict=True)]
        apply_postings(uow, scope, funding)
    return scope, asset.id, wallet_ids


def batches_of(
    kind: str, asset_id: str, wallet_ids: list[str], size: int, count: int
) -> Iterator[list[PostingRequest]]:
    rng = random.Random(7)
    for _ in range(count):
        ids = new_ids("transaction", size)
        if kind == "issue":
            yield [PostingRequest(t, "reward", asset_id, rng.randint(1, 5000), rng.choice(wallet_ids)) for t in ids]
        else:
            pairs = [rng.sample(wallet_ids, 2) for _ in ids]
            yield [
                PostingRequest(t, "transfer", asset_id, rng.randint(1, 500), a, to_wallet_id=b)
                for t, (a, b) in zip(ids, pairs, strict=True)
            ]


def _summary(label: str, size: int, count: int, elapsed: float, cpu_ms: float, per_batch_ms: list[float]) -> str:
    per_batch_ms.sort()
    p99 = per_batch_ms[max(0, int(len(per_batch_ms) * 0.99) - 1)]
    rate = size * count / elapsed
    return (
        f"{label:8s} batch={size:5d} x {count:4d}: {rate:9,.0f} transactions/s ({2 * rate:9,.0f} entries/s)"
        f"  batch p50 {statistics.median(per_batch_ms):5.1f} ms  p99 {p99:5.1f} ms  CPU {cpu_ms:5.1f} ms/batch"
    )


Step = Callable[[Repositories, Any], None]


def _whole_path(
    _database: Database, scope: Scope, kind: str, asset_id: str, wallet_ids: list[str], size: int, count: int
) -> tuple[list[Any], Step]:
    """The batches as requests; each step decides and writes one through `apply_postings`."""

    def step(uow: Repositories, requests: list[PostingRequest]) -> None:
        outcome = apply_postings(uow, scope, requests)
        assert not outcome.rejected, outcome.rejected[:1]

    return list(batches_of(kind, asset_id, wallet_ids, size, count)), step


def _database_half(
    database: Database, scope: Scope, kind: str, asset_id: str, wallet_ids: list[str], size: int, count: int
) -> tuple[list[Any], Step]:
    """The batches decided up front; each step only writes one (`write_postings`: its Arrow tables, the
    statements and the cache's bookkeeping)."""
    decided = []
    with unit_of_work(database) as uow:  # decides against the starting state and writes nothing
        for requests in batches_of(kind, asset_id, wallet_ids, size, count):
            state = load_state(uow, scope, requests)
            decision = decide_batch(state, requests)
            assert not decision.rejected, "every benchmark batch is accepted"
            decided.append((decision, state))  # balance rows are deltas: valid in any order

    def step(uow: Repositories, batch: tuple[PostingDecision, LedgerState]) -> None:
        uow.ledger.write_postings(scope, *batch)

    return decided, step


def run(kind: str, size: int, count: int, wallets: int, *, database_half_alone: bool = False) -> None:
    """Time `count` batches of `size`, each its own unit of work (committed), then verify the ledger."""
    build = _database_half if database_half_alone else _whole_path
    with tempfile.TemporaryDirectory() as folder:
        database = Database(Path(folder) / "bench.duckdb")
        scope, asset_id, wallet_ids = prepare(database, wallets)
        work, step = build(database, scope, kind, asset_id, wallet_ids, size, count)
        # The pre-built work stays alive through the run, which a service never holds; frozen, the garbage
        # collector's full passes no longer walk it inside the timed batches.
        gc.collect()
        gc.freeze()
        per_batch_ms: list[float] = []
        cpu_started = time.process_time()
        started = time.perf_counter()
        for item in work:
            batch_started = time.perf_counter()
            with unit_of_work(database) as uow:
                step(uow, item)
            per_batch_ms.append((time.perf_counter() - batch_started) * 1000)
        elapsed = time.perf_counter() - started
        cpu_ms = (time.process_time() - cpu_started) * 1000 / count
        report = verify_ledger(database.reader())
        assert report.ok, report.problems
        assert report.transactions == wallets + size * count
        database.close()
        gc.unfreeze()
    label = f"{kind} (database half alone)" if database_half_alone else kind
    print(_summary(label, size, count, elapsed, cpu_ms, per_batch_ms), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--wallets", type=int, default=10_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="batch sizes to measure")
    parser.add_argument("--kinds", nargs="+", choices=("issue", "transfer"), default=["issue", "transfer"])
    parser.add_argument("--floor", action="store_true", help="also time the database half alone (see above)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.python_version()}, wallets={args.wallets}")
    print(f"speed probe: {speed_probe()} ms (fixed pure-Python work; lower is quicker)")
    for size in args.sizes:
        for kind in args.kinds:
            run(kind, size, args.batches, args.wallets)
            if args.floor:
                run(kind, size, args.batches, args.wallets, database_half_alone=True)
    print(f"speed probe: {speed_probe()} ms")


if __name__ == "__main__":
    main()
