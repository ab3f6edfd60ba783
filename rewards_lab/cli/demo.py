"""The seed's six-step standard integration loop, run in-process over a DuckDB file (the engine's demo)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing, simulation
from rewards_lab.service import assets, customers, event_intake, ledger, organizations, programmes
from rewards_lab.store.api import Store, duckdb_path, open_store


def run_standard_loop(database: Store, say: Callable[[str], None] = print) -> dict[str, str]:
    """Run the six steps and return the ids and the final balance."""
    org = organizations.create_organization(database, "Demo organization")
    scope = Scope(org.id, "sandbox")
    say(f"organization {org.id} (sandbox)")

    customer = customers.create_customer(
        database,
        scope,
        validate(rq.CustomerCreate, {"external_id": "user-42", "email": "ada@example.com", "country": "GB"}),
    )
    say(f"1. customer {customer.id} keyed by external id {customer.external_id}")
    wallet = customers.create_wallet(
        database, scope, validate(rq.WalletCreate, {"customer_id": customer.id, "type": "customer"})
    )
    say(f"2. wallet {wallet.id}")
    asset = assets.create_asset(
        database,
        scope,
        validate(
            rq.AssetCreate,
            {
                "name": "Stars",
                "symbol": "STAR",
                "type": "points",
                "decimals": 2,
                "supply_ceiling": "1000000.00",
            },
        ),
    )
    asset = assets.activate_asset(database, scope, asset.id)
    say(f"3. asset {asset.symbol} {asset.id} is {asset.status}")

    programme = programmes.create_programme(
        database, scope, validate(rq.ProgrammeCreate, {"name": "Spring launch", "asset_id": asset.id})
    )
    rule = programmes.create_rule(
        database,
        scope,
        validate(
            rq.RuleCreate,
            {
                "program_id": programme.id,
                "event_type": "order.completed",
                "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
                "actions": [{"type": "issue", "amount": {"per": "amount", "rate": Decimal("0.05")}}],
            },
        ),
    )
    preview = simulation.simulate_rule(
        database,
        scope,
        rule.id,
        validate(rq.SimulationRequest, {"event": {"type": "order.completed", "amount": Decimal("42.50")}}),
    )
    say(f"   simulate 42.50: {preview.rules[0].reason}; would issue {preview.totals[0].amount}")
    published = programmes.publish(database, scope, programme.id)
    say(f"4. programme {programme.id}: version {published.version.number} published with 1 rule")

    for number, amount in enumerate(("42.50", "19.99", "120.00"), start=1):
        event_intake.submit_event(
            database,
            scope,
            validate(
                rq.EventCreate,
                {
                    "type": "order.completed",
                    "external_event_id": f"order-{number}",
                    "customer_id": "user-42",
                    "data": {"amount": Decimal(amount)},
                },
            ),
        )
    say("5. three order.completed events accepted (received)")
    report = event_processing.process_all(database)
    say(f"   worker: {report.processed} processed, {report.failed} failed, {report.issued} rewards issued")

    balances = ledger.wallet_balances(database, scope, wallet.id)
    balance = balances.balances[0].balance if balances.balances else "0"
    say(f"6. wallet balance: {balance} {asset.symbol}")
    check = database.verify_ledger()
    say(f"ledger verified: {check.ok} ({check.transactions} transactions, {check.entries} entries)")
    return {"organization_id": org.id, "wallet_id": wallet.id, "balance": balance}


def main(db_path: str) -> None:
    path = Path(duckdb_path(db_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_store(path) as database:
        run_standard_loop(database)
