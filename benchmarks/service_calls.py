"""Benchmark: single service calls (one issue, one redemption, one transfer), each its own durable transaction.

Prints p50 / p99 / max latency and calls per second for each, over a DuckDB file.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import assets, customers, ledger, organizations
from rewards_lab.store.database import Database


def _percentile(sorted_ms: list[float], fraction: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * fraction))]


def _measure(label: str, calls: int, call: Callable[[int], object]) -> None:
    for index in range(20):  # warm up
        call(-1 - index)
    durations = []
    cpu_started = time.process_time()
    for index in range(calls):
        started = time.perf_counter()
        call(index)
        durations.append((time.perf_counter() - started) * 1000)
    cpu_ms = (time.process_time() - cpu_started) * 1000 / calls
    durations.sort()
    print(
        f"{label:10s} n={calls}: p50 {statistics.median(durations):6.2f} ms  p99 {_percentile(durations, 0.99):6.2f} ms"
        f"  max {durations[-1]:6.2f} ms  {calls / (sum(durations) / 1000):7.0f} calls/s  CPU {cpu_ms:5.2f} ms/call",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as folder:
        database = Database(Path(folder) / "calls.duckdb")
        org = organizations.create_organization(database, "bench")
        scope = Scope(org.id, "sandbox")
        body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}
        asset = assets.create_asset(database, scope, validate(rq.AssetCreate, body))
        assets.activate_asset(database, scope, asset.id)
        wallets = [
            customers.create_wallet(
                database,
                scope,
                rq.WalletCreate(
                    customer_id=customers.create_customer(database, scope, rq.CustomerCreate(external_id=f"c{i}")).id
                ),
            ).id
            for i in range(2)
        ]

        def issue(index: int) -> object:
            body = rq.IssueRequest(wallet_id=wallets[0], amount="10.00", reason="bench")
            return ledger.issue(database, scope, asset.id, body, idempotency_key=f"issue-{index}")

        def redeem(index: int) -> object:
            body = rq.RedemptionRequest(wallet_id=wallets[0], amount="1.00", reference=f"r{index}")
            return ledger.redeem(database, scope, asset.id, body, idempotency_key=f"redeem-{index}")

        def transfer(index: int) -> object:
            body = rq.TransferRequest(from_wallet_id=wallets[0], to_wallet_id=wallets[1], amount="1.00")
            return ledger.transfer(database, scope, asset.id, body, idempotency_key=f"transfer-{index}")

        _measure("issue", args.calls, issue)
        _measure("redeem", args.calls, redeem)
        _measure("transfer", args.calls, transfer)
        database.close()


if __name__ == "__main__":
    main()
