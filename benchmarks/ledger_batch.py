"""Benchmark: the batch posting path (issue and transfer postings, batches of 1,000, durable in a DuckDB file).

Prints postings per second per batch size. Every invariant is still checked: the policy decides each posting
against the running state, and the store re-asserts balance, non-negativity and ceiling after each batch.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from rewards_lab.contract import requests as rq
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.service import assets, customers, organizations
from rewards_lab.service.ledger import apply_postings
from rewards_lab.store.database import Database
from rewards_lab.store.uow import unit_of_work
from rewards_lab.store.verification import verify_ledger


def prepare(database: Database, wallets: int) -> tuple[Scope, str, list[str]]:
    org = organizations.create_organization(database, "bench")
    scope = Scope(org["id"], "sandbox")
    asset = assets.create_asset(
        database,
        scope,
        validate(
            rq.AssetCreate,
            {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "supply_ceiling": "100000000000.00"},
        ),
    )
    assets.activate_asset(database, scope, asset.id)
    wallet_ids = []
    for index in range(wallets):
        customer = customers.create_customer(database, scope, validate(rq.CustomerCreate, {"external_id": f"c{index}"}))
        wallet_ids.append(
            customers.create_wallet(database, scope, validate(rq.WalletCreate, {"customer_id": customer.id})).id
        )
    return scope, asset.id, wallet_ids


def run(batch_size: int, batches: int, wallets: int, kind: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        database = Database(Path(folder) / "bench.duckdb")
        scope, asset_id, wallet_ids = prepare(database, wallets)
        rng = random.Random(7)
        # Warm up: every wallet holds the asset, so the batches below measure the steady state.
        with unit_of_work(database) as uow:
            ids = new_ids("transaction", len(wallet_ids))
            apply_postings(
                uow,
                scope,
                [PostingRequest(t, "issue", asset_id, 10**9, w) for t, w in zip(ids, wallet_ids, strict=True)],
            )
        durations = []
        for _ in range(batches):
            ids = new_ids("transaction", batch_size)
            if kind == "issue":
                requests = [
                    PostingRequest(t, "reward", asset_id, rng.randint(1, 5000), rng.choice(wallet_ids)) for t in ids
                ]
            else:
                requests = []
                for t in ids:
                    a, b = rng.sample(wallet_ids, 2)
                    requests.append(PostingRequest(t, "transfer", asset_id, rng.randint(1, 500), a, to_wallet_id=b))
            started = time.perf_counter()
            with unit_of_work(database) as uow:
                outcome = apply_postings(uow, scope, requests)
            durations.append(time.perf_counter() - started)
            assert not outcome.rejected, outcome.rejected[:1]
        report = verify_ledger(database.reader())
        assert report.ok, report.problems
        database.close()
    total = batch_size * batches
    elapsed = sum(durations)
    per_batch_ms = sorted(d * 1000 for d in durations)
    p99 = per_batch_ms[int(len(per_batch_ms) * 0.99) - 1]
    print(
        f"{kind:8s} batch={batch_size:5d} batches={batches:4d}: {total / elapsed:10,.0f} postings/s  "
        f"batch p50 {statistics.median(per_batch_ms):6.1f} ms  p99 {p99:6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--wallets", type=int, default=2000)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    for batch_size in (100, 1000):
        for kind in ("issue", "transfer"):
            run(batch_size, args.batches, args.wallets, kind)


if __name__ == "__main__":
    main()
