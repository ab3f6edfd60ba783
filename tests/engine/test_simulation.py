"""Simulation answers 'why did or didn't this rule fire', per rule and per condition, and writes nothing."""

from __future__ import annotations

from decimal import Decimal

from rewards_lab.contract import requests as rq
from rewards_lab.engine import simulation
from rewards_lab.service import programmes
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World


def _simulate_rule(world: World, rule_id: str, event: dict[str, object]):  # type: ignore[no-untyped-def]
    return simulation.simulate_rule(world.db, world.scope, rule_id, rq.SimulationRequest(event=event))


def test_why_a_rule_fires_and_why_not(world: World) -> None:
    programme = world.programme(world.asset())
    rule = world.rule(
        programme,
        conditions=[
            {"field": "amount", "operator": "gte", "value": 20},
            {"field": "country", "operator": "eq", "value": 1},
        ],
        amount={"per": "amount", "rate": Decimal("0.05")},
    )
    hit = _simulate_rule(world, rule.id, {"type": "order.completed", "amount": Decimal("42.50"), "country": 1})
    assert hit.matched and hit.totals[0].amount == "2.12"
    outcome = hit.rules[0]
    assert [(c.field, c.operator, c.threshold, c.value_read, c.verdict) for c in outcome.conditions] == [
        ("amount", "gte", "20", "42.50", True),
        ("country", "eq", "1", "1", True),
    ]
    assert outcome.actions[0].inputs == {"amount": "42.50"} and "rounded toward zero" in outcome.actions[0].reason

    miss = _simulate_rule(world, rule.id, {"type": "order.completed", "amount": Decimal("19.99"), "country": "GB"})
    assert not miss.matched and miss.totals == []
    first, second = miss.rules[0].conditions
    assert (first.verdict, first.value_read) == (False, "19.99") and "does not hold" in first.reason
    assert (second.verdict, second.value_read) == (False, "GB") and "not a number" in second.reason
    assert "condition failed" in miss.rules[0].reason

    missing = _simulate_rule(world, rule.id, {"type": "order.completed"})
    assert [c.reason for c in missing.rules[0].conditions] == [
        "field 'amount' is missing",
        "field 'country' is missing",
    ]

    wrong_type = _simulate_rule(world, rule.id, {"type": "signup.completed", "amount": 100, "country": 1})
    assert not wrong_type.matched and "is not the rule's" in wrong_type.rules[0].reason


def test_amounts_that_round_to_nothing_issue_nothing(world: World) -> None:
    programme = world.programme(world.asset(decimals=0))
    rule = world.rule(programme, amount={"per": "amount", "rate": Decimal("0.01")})
    result = _simulate_rule(world, rule.id, {"type": "order.completed", "amount": Decimal("99.99")})
    assert result.matched and result.rules[0].actions[0].issues is False and result.totals == []
    assert "less than one minor unit" in result.rules[0].actions[0].reason
    negative = _simulate_rule(world, rule.id, {"type": "order.completed", "amount": Decimal("-500")})
    assert negative.totals == []


def test_simulating_a_version_writes_nothing(world: World) -> None:
    db, scope = world.db, world.scope
    programme = world.programme(world.asset())
    world.rule(programme, amount={"fixed": "3.00"})
    world.rule(programme, "signup.completed", amount={"fixed": "10.00"})
    before = verify_ledger(db.reader())
    draft = simulation.simulate_programme(
        db, scope, programme.id, rq.SimulationRequest(event={"type": "order.completed"})
    )
    assert draft.program_version is None and [r.matched for r in draft.rules] == [True, False]
    programmes.publish(db, scope, programme.id)
    world.rule(programme, amount={"fixed": "4.00"})
    live = simulation.simulate_programme(
        db, scope, programme.id, rq.SimulationRequest(event={"type": "order.completed"}), version="live"
    )
    new_draft = simulation.simulate_programme(
        db, scope, programme.id, rq.SimulationRequest(event={"type": "order.completed"})
    )
    assert live.totals[0].amount == "3.00" and new_draft.totals[0].amount == "7.00"
    after = verify_ledger(db.reader())
    assert (after.transactions, after.balances) == (before.transactions, before.balances)
    assert after.transactions == 0
