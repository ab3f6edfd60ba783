"""The Lab with caps, budgets, clawback and reverse actions (issue 18): programme files round-trip through the
draft and published versions, rules take `limits=` and `reverse=`, the draft's spending is set like a PATCH,
the rules table shows caps and what reverse actions take back, and the Lab's own engine (the service's
functions over its in-memory DuckDB) cuts rewards and processes refunds against spent balances."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limit_requests import AmountLimit, Budget, CountLimit, FractionOf, ReverseAction
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.lab.workbench import CAPS_COLUMN, RULES_TABLE_COLUMNS, Lab, LabProgramme, describe_rule
from rewards_lab.service import customers, event_intake, event_queries, ledger

FILE: dict[str, Any] = {
    "programme": {
        "name": "Capped shop",
        "timezone": "Europe/Paris",
        "limits": [{"per": "customer", "period": "month", "max_amount": "25"}],
        "budget": {"period": "day", "max_amount": "1000"},
        "clawback": "negative",
    },
    "asset": {"name": "Shop points", "symbol": "SHP", "type": "points", "decimals": 2},
    "rules": [
        {
            "event_type": "shop.order",
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "0.1"}}],
            "limits": [{"per": "customer", "period": "day", "max_count": 2}],
        },
        {
            "event_type": "shop.refund",
            "actions": [
                {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}}
            ],
        },
        {"event_type": "shop.cancel", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]},
        {
            "event_type": "shop.partial",
            "actions": [{"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.5"}],
        },
    ],
}


@pytest.fixture
def definition() -> ProgrammeDefinition:
    return parse_programme(FILE)


def test_programme_spending_rule_caps_and_reverse_actions_round_trip_through_the_lab(
    definition: ProgrammeDefinition, tmp_path: Path
) -> None:
    shop = Lab().load(definition)
    assert shop.definition() == definition
    assert load_programme(shop.export(tmp_path / "shop.json")) == definition
    info = shop.info()
    assert (info.limits, info.budget, info.clawback) == (
        [AmountLimit(period="month", max_amount="25")],
        Budget(period="day", max_amount="1000"),
        "negative",
    )
    shop.publish()
    assert shop.definition("live") == definition  # frozen into the version
    shop.set_spending(budget=None)  # the draft changes, the version does not
    assert shop.diff().programme_changes == {"budget": ({"period": "day", "max_amount": "1000"}, None)}
    assert shop.definition("live").programme.budget == Budget(period="day", max_amount="1000")


def test_set_spending_changes_what_is_given_clears_none_and_is_validated(definition: ProgrammeDefinition) -> None:
    shop = Lab().load(definition)
    changed = shop.set_spending(limits=[CountLimit(period="week", max_count=4)], clawback="none")
    assert (changed.limits, changed.budget, changed.clawback) == (
        [CountLimit(period="week", max_count=4)],
        Budget(period="day", max_amount="1000"),  # not given: kept
        "none",
    )
    cleared = shop.set_spending(limits=None, clawback=None)
    assert (cleared.limits, cleared.clawback) == ([], "available")
    with pytest.raises(ServiceError) as refused:
        shop.set_spending(budget={"period": "month", "max_amount": "1.005"})
    assert (refused.value.code, refused.value.details["field"]) == ("amount_too_many_decimals", "budget.max_amount")
    with pytest.raises(ServiceError) as unknown:
        shop.set_spending(clawback="sometimes")
    assert unknown.value.details["field"] == "clawback"


def test_rules_take_limits_and_reverse_actions(definition: ProgrammeDefinition) -> None:
    shop = Lab().load(definition)
    added = shop.add_rule(
        "shop.return",
        reverse="order_id",
        fraction=("returned", "amount"),
        limits=[{"period": "year", "max_amount": "100"}],
    )
    (action,) = added.actions
    assert isinstance(action, ReverseAction) and action.fraction == FractionOf(field="returned", of="amount")
    assert added.limits == [AmountLimit(period="year", max_amount="100")]
    edited = shop.update_rule(4, reverse="order_id", fraction=0.25, limits=[])
    assert [a.model_dump(mode="json") for a in edited.actions] == [
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.25"}
    ]
    assert edited.limits == []
    kept = shop.update_rule(0, priority=3)
    assert kept.limits == [CountLimit(period="day", max_count=2)]  # not given: unchanged
    for wrong, field in (
        ({"amount": {"fixed": "1"}, "reverse": "order_id"}, "actions"),
        ({"amount": {"fixed": "1"}, "fraction": "0.5"}, "fraction"),
        ({"reverse": "order_id", "beneficiary": "referrer_id"}, "beneficiary"),
        ({"reverse": "order_id", "fraction": "1.5"}, "actions[0].fraction"),
        ({"amount": {"fixed": "1"}, "limits": [{"period": "hour", "max_count": 1}]}, "limits[0].period"),
    ):
        with pytest.raises(ServiceError) as refused:
            shop.add_rule("shop.order", **wrong)
        assert refused.value.details["field"] == field, wrong


def test_the_rules_table_shows_caps_only_when_a_rule_has_them_and_describes_reversals(
    definition: ProgrammeDefinition,
) -> None:
    shop = Lab().load(definition)
    table = shop.rules_table()
    assert list(table.columns) == [*RULES_TABLE_COLUMNS[1:], CAPS_COLUMN]
    assert list(table[CAPS_COLUMN]) == ["2 rewards a day", "", "", ""]
    assert list(table["issue"]) == [
        "amount x 0.1",
        "take back refund/amount of what order_id issued",
        "take back what order_id issued",
        "take back 0.5 of what order_id issued",
    ]
    rules = shop.rules()
    assert describe_rule(rules[0]) == "shop.order when always: issue amount x 0.1 [caps 2 rewards a day]"
    assert describe_rule(rules[2]) == "shop.cancel when always: take back what order_id issued"
    shop.update_rule(0, limits=[])
    assert list(shop.rules_table().columns) == RULES_TABLE_COLUMNS[1:]  # no caps: the table as before


def _customer(shop: LabProgramme, external_id: str) -> str:
    lab = shop.lab
    customer = customers.create_customer(lab.database, lab.scope, rq.CustomerCreate(external_id=external_id))
    return customers.create_wallet(lab.database, lab.scope, rq.WalletCreate(customer_id=customer.id)).id


def _send(shop: LabProgramme, event_type: str, external_id: str, customer: str, **data: Any) -> str:
    body = validate(
        rq.EventCreate,
        {
            "type": event_type,
            "external_event_id": external_id,
            "customer_id": customer,
            "occurred_at": "2026-03-10T12:00:00+01:00",
            "data": data,
        },
    )
    # received when it occurred (an event of March 2026 received today is older than the file's 30 days)
    (event,) = event_intake.submit_events(shop.lab.database, shop.lab.scope, [body], datetime(2026, 3, 10, 11))
    assert not isinstance(event, Exception), event
    event_processing.process_all(shop.lab.database)
    return event.id


def _balance(shop: LabProgramme, wallet_id: str) -> str:
    (balance,) = ledger.wallet_balances(shop.lab.database, shop.lab.scope, wallet_id).balances
    return balance.balance


def test_the_labs_engine_cuts_rewards_and_takes_them_back_from_spent_balances(definition: ProgrammeDefinition) -> None:
    shop = Lab().load(definition)
    shop.publish()
    lab = shop.lab
    wallet = _customer(shop, "ada")
    executions = {}
    for external_id, amount in (("o-1", 200), ("o-2", 100), ("o-3", 100)):
        event_id = _send(shop, "shop.order", external_id, "ada", amount=amount)
        page = event_queries.list_executions(lab.database, lab.scope, PageRequest(limit=10), event_id=event_id)
        (executions[external_id],) = page.data
    # 20.00, then 5.00 of the month's 25.00 cap, then the day's count cap of 2 skips the third
    assert [(e.status, e.amount, e.requested_amount) for e in executions.values()] == [
        ("issued", "20.00", None),
        ("issued", "5.00", "10.00"),
        ("limited", "0.00", "10.00"),
    ]
    limited = executions["o-3"].limited
    assert limited is not None and (limited.scope, limited.max_count) == ("rule", 2)
    asset_id = shop.info().asset_id
    body = rq.RedemptionRequest(wallet_id=wallet, amount="22.00", reference="spent")
    ledger.redeem(lab.database, lab.scope, asset_id, body)
    assert _balance(shop, wallet) == "3.00"
    # half of o-1 back (10.00) with 3.00 in the wallet: the clawback is negative, so the wallet goes below zero
    refund = _send(shop, "shop.refund", "r-1", "ada", order_id="o-1", refund=100)
    (reversal,) = event_queries.list_executions(lab.database, lab.scope, PageRequest(limit=10), event_id=refund).data
    assert reversal.status == "reversed" and reversal.reversal is not None
    assert (reversal.reversal.target, reversal.reversal.shortfall, reversal.amount) == ("10.00", "0.00", "10.00")
    assert _balance(shop, wallet) == "-7.00"
    # the cancellation takes back what remains of o-1 (10.00) and the cap's allowance comes back with it
    _send(shop, "shop.cancel", "c-1", "ada", order_id="o-1")
    assert _balance(shop, wallet) == "-17.00"
    after = event_queries.list_executions(lab.database, lab.scope, PageRequest(limit=10), event_id=_o1(shop)).data
    assert after[0].reversed_amount == "20.00"
    # o-1 reversed in full no longer counts: the same day, a third order issues again (5.00 of 25.00 - 5.00)
    o4 = _send(shop, "shop.order", "o-4", "ada", amount=50)
    (issued,) = event_queries.list_executions(lab.database, lab.scope, PageRequest(limit=10), event_id=o4).data
    assert (issued.status, issued.amount, issued.limited) == ("issued", "5.00", None)
    assert _balance(shop, wallet) == "-12.00"


def _o1(shop: LabProgramme) -> str:
    lab = shop.lab
    events = event_queries.list_events(lab.database, lab.scope, PageRequest(limit=100)).data
    return next(event.id for event in events if event.external_event_id == "o-1")


def test_the_labs_simulation_waits_for_an_unprocessed_original_and_reads_caps_for_a_customer(
    definition: ProgrammeDefinition,
) -> None:
    shop = Lab().load(definition)
    shop.set_spending(max_event_age_days=None)  # its events are of March 2026: a backfill
    shop.publish()
    lab = shop.lab
    _customer(shop, "bea")
    at = "2026-03-10T12:00:00+01:00"
    body = {"type": "shop.order", "external_event_id": "o-9", "customer_id": "bea", "data": {"amount": 300}}
    body["occurred_at"] = at
    event_intake.submit_event(lab.database, lab.scope, validate(rq.EventCreate, body))  # received, not processed
    refund = {"type": "shop.cancel", "order_id": "o-9"}
    (waiting,) = shop.simulate(refund, version="live").rules[2].actions
    assert (waiting.error_code, waiting.reversal) == (None, None)
    assert waiting.reason.endswith("; event 'o-9' has not been processed yet: the refund would follow it")
    event_processing.process_all(lab.database)
    (ready,) = shop.simulate(refund, version="live").rules[2].actions
    assert ready.reversal is not None and ready.reversal.target == "25.00"  # 30.00 called for, cut to the cap
    order = {"type": "shop.order", "amount": 10}
    (capped,) = shop.simulate(order, version="live", customer_id="bea", occurred_at=at).rules[0].actions
    assert (capped.amount, capped.requested_amount) == ("0.00", "1.00")
    assert capped.limit_reason is not None and capped.limit_reason.startswith(
        "cut to nothing by the programme's month cap of 25.00"
    )
