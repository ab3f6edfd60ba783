"""Two organizations and two environments in one DuckDB file never see each other's data."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import assets, customers, event_intake, event_queries, ledger, organizations, programmes
from rewards_lab.store.database import Database
from tests.conftest import World


def _tenant(db: Database, scope: Scope, amount: str) -> dict[str, str]:
    world = World(db, scope)
    customer = world.customer("same-external-id")  # the same external id in every tenant is allowed
    wallet = world.wallet(customer)
    asset = world.asset(symbol="STAR")  # so is the same symbol
    world.per_rate_programme(asset, rate="0.10", threshold=0)
    ledger.issue(db, scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount=amount, reason="grant"))
    event_intake.submit_event(
        db,
        scope,
        validate(
            rq.EventCreate,
            {
                "type": "order.completed",
                "external_event_id": "same-event-id",
                "customer_id": "same-external-id",
                "data": {"amount": Decimal("100")},
            },
        ),
    )
    return {"customer": customer.id, "wallet": wallet.id, "asset": asset.id}


def test_tenants_and_environments_are_isolated(db: Database) -> None:
    org_a = organizations.create_organization(db, "A").id
    org_b = organizations.create_organization(db, "B").id
    scopes = [Scope(org_a, "sandbox"), Scope(org_a, "production"), Scope(org_b, "sandbox"), Scope(org_b, "production")]
    made = {scope: _tenant(db, scope, f"{index + 1}.00") for index, scope in enumerate(scopes)}
    report = event_processing.process_all(db)
    assert report.processed == 4 and report.issued == 4  # the same external_event_id in four tenants: four events

    for index, scope in enumerate(scopes):
        own = made[scope]
        balance = ledger.wallet_balances(db, scope, own["wallet"]).balances[0].balance
        assert balance == f"{index + 11}.00"  # its own grant plus its own 10.00 reward, nothing of the others'
        for other_scope, other in made.items():
            if other_scope == scope:
                continue
            with pytest.raises(ServiceError) as caught:
                ledger.wallet_balances(db, scope, other["wallet"])
            assert caught.value.code == "wallet_not_found"
            with pytest.raises(ServiceError):
                customers.get_customer(db, scope, other["customer"])
            with pytest.raises(ServiceError) as caught:
                ledger.issue(
                    db, scope, other["asset"], rq.IssueRequest(wallet_id=own["wallet"], amount="1.00", reason="cross")
                )
            assert caught.value.code == "asset_not_found"
            with pytest.raises(ServiceError) as caught:  # another tenant's wallet is invisible, even as a target
                ledger.issue(
                    db, scope, own["asset"], rq.IssueRequest(wallet_id=other["wallet"], amount="1.00", reason="cross")
                )
            assert caught.value.code == "wallet_not_found"
        page = PageRequest(limit=100)
        assert [c.id for c in customers.list_customers(db, scope, page).data] == [own["customer"]]
        assert [a.id for a in assets.list_assets(db, scope, page).data] == [own["asset"]]
        assert len(event_queries.list_events(db, scope, page).data) == 1
        assert {e.wallet_id for e in event_queries.list_executions(db, scope, page).data} == {own["wallet"]}
        assert len(programmes.list_programmes(db, scope, page).data) == 1
        assert {t.wallet_id for t in ledger.list_transactions(db, scope, page).data} == {own["wallet"]}


def test_idempotency_keys_are_per_tenant(db: Database) -> None:
    org = organizations.create_organization(db, "A").id
    sandbox, production = Scope(org, "sandbox"), Scope(org, "production")
    first = customers.create_customer(db, sandbox, rq.CustomerCreate(external_id="x"), idempotency_key="key-1")
    second = customers.create_customer(db, production, rq.CustomerCreate(external_id="x"), idempotency_key="key-1")
    assert first.id != second.id


def test_scope_refuses_unknown_environments() -> None:
    with pytest.raises(ValueError):
        Scope("org_x", "staging")  # type: ignore[arg-type]
