"""The seed's six-step standard integration loop, end to end, in-process over a real DuckDB file."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from rewards_lab.cli.demo import run_standard_loop
from rewards_lab.contract import requests as rq
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import event_intake, event_queries, ledger, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World


def test_six_steps(world: World) -> None:
    db, scope = world.db, world.scope
    customer = world.customer("user-42", email="ada@example.com", country="GB")  # 1
    wallet = world.wallet(customer)  # 2
    asset = world.asset(supply_ceiling="1000.00")  # 3: created and activated
    assert asset.status == "active"
    programme = world.programme(asset)  # 4
    world.rule(
        programme,
        conditions=[{"field": "amount", "operator": "gte", "value": 20}],
        amount={"per": "amount", "rate": Decimal("0.05")},
    )
    published = programmes.publish(db, scope, programme.id)
    assert published.version.number == 1 and published.version.status == "published"

    for external_id, amount in (("o-1", "42.50"), ("o-2", "19.99"), ("o-3", "120")):  # 5
        event = event_intake.submit_event(
            db,
            scope,
            validate(
                rq.EventCreate,
                {
                    "type": "order.completed",
                    "external_event_id": external_id,
                    "customer_id": "user-42",
                    "data": {"amount": Decimal(amount)},
                },
            ),
        )
        assert event.status == "received"
    # Asynchronous: nothing is issued before the worker runs.
    assert ledger.wallet_balances(db, scope, wallet.id).balances == []
    report = event_processing.process_all(db)
    assert (report.processed, report.failed, report.issued) == (3, 0, 2)

    balances = ledger.wallet_balances(db, scope, wallet.id)  # 6
    assert [(b.asset_id, b.balance) for b in balances.balances] == [(asset.id, "8.12")]  # 2.12 + 6.00

    executions = event_queries.list_executions(db, scope, PageRequest(), customer_id="user-42")
    assert sorted(e.amount for e in executions.data) == ["2.12", "6.00"]
    first = next(e for e in executions.data if e.external_event_id == "o-1")
    assert first.inputs == {"amount": "42.50"} and first.program_version == 1 and first.status == "issued"
    assert verify_ledger(db.reader()).ok


def test_demo_runs_the_loop_on_a_file(tmp_path: Path) -> None:
    with Database(tmp_path / "demo.duckdb") as database:
        result = run_standard_loop(database, say=lambda _: None)
    assert result["balance"] == "8.12"
    with Database(tmp_path / "demo.duckdb") as reopened:  # durable: the file holds it after closing
        assert verify_ledger(reopened.reader()).transactions == 2
