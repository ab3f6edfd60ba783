"""Benchmark: the event worker's batches, in process, durable in a DuckDB file.

Submits `--events` order events (amounts spread over 5..204, customers round-robin) for a programme of three
per-rate rules, then times `event_processing.process_all` until the queue is empty: evaluation, the posting
path, execution records, outbox messages and event statuses, one committed transaction per batch. Prints events
per second and the CPU time, then checks every event was processed and the ledger verifies. `--expiry`: the asset
expires its points (`{"after_days": 365}`), so every reward is also a lot (issue 19).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from machine import speed_probe  # benchmarks/machine.py, beside this script

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import assets, customers, event_intake, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger

LOTS = " (lots)"
RULES = ((10, "0.05"), (50, "0.1"), (100, "0.02"))  # (threshold, rate): an event matches 0 to 3 rules


def prepare(database: Database, customer_count: int, expiry: bool = False) -> tuple[Scope, list[str]]:
    """A tenant with an active asset, customers with wallets, and one published programme of three rules."""
    scope = Scope(organizations.create_organization(database, "bench").id, "sandbox")
    body: dict[str, object] = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}
    if expiry:
        body["expiry"] = {"after_days": 365}
    asset = assets.create_asset(database, scope, validate(rq.AssetCreate, body))
    assets.activate_asset(database, scope, asset.id)
    references = []
    for index in range(customer_count):
        customer = customers.create_customer(database, scope, rq.CustomerCreate(external_id=f"c{index}"))
        customers.create_wallet(database, scope, rq.WalletCreate(customer_id=customer.id))
        references.append(customer.external_id)
    programme = programmes.create_programme(database, scope, rq.ProgrammeCreate(name="P", asset_id=asset.id))
    for threshold, rate in RULES:
        rule = {
            "program_id": programme.id,
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": threshold}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": Decimal(rate)}}],
        }
        programmes.create_rule(database, scope, rq.RuleCreate.model_validate(rule))
    programmes.publish(database, scope, programme.id)
    return scope, references


def submit(database: Database, scope: Scope, references: list[str], count: int) -> None:
    bodies = [
        rq.EventCreate(
            type="order.completed",
            external_event_id=f"e{index}",
            customer_id=references[index % len(references)],
            data={"amount": Decimal(5 + (index * 37) % 200)},
        )
        for index in range(count)
    ]
    for start in range(0, count, 2000):
        event_intake.submit_events(database, scope, bodies[start : start + 2000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--customers", type=int, default=200)
    parser.add_argument("--expiry", action="store_true", help="the asset's points expire: every reward is a lot")
    args = parser.parse_args()
    print(f"speed probe: {speed_probe():.1f} ms (fixed pure-Python work; lower is quicker)")
    with tempfile.TemporaryDirectory() as folder, Database(Path(folder) / "worker.duckdb") as database:
        scope, references = prepare(database, args.customers, args.expiry)
        submit(database, scope, references, args.events)
        started, cpu = time.perf_counter(), time.process_time()
        report = event_processing.process_all(database)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert report.processed == args.events and report.failed == 0, report
        assert verify_ledger(database.reader()).ok, "the ledger does not verify"
        print(
            f"event worker{LOTS if args.expiry else ''}: {args.events:,} events in {wall:.2f} s "
            f"({args.events / wall:,.0f} events/s), "
            f"CPU {cpu:.2f} s, {report.issued:,} rewards issued"
        )
    print(f"speed probe: {speed_probe():.1f} ms")


if __name__ == "__main__":
    main()
