"""Simulation with tiers (issue 33, T5; reports/i33-tiers-plan.md section 4.6), on a real DuckDB file: a rule that
multiplies by tier is simulated (no longer refused) at the base, at a level the request names and at the tier the
worker gave a customer; conditions read that tier; the `tier` block says what the event adds and whether it would
upgrade; a version without tiers answers as before (no `tier` field)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing, simulation
from rewards_lab.service import event_intake, programmes
from tests.conftest import World

LEVELS = [
    {"code": "member", "name": "Member"},
    {"code": "silver", "name": "Silver", "entry": "100", "multiplier": "1.5"},
    {"code": "gold", "name": "Gold", "entry": "300", "retain": "250", "multiplier": "2"},
]
POINTS = {"metric": {"type": "points"}, "window": {"type": "rolling", "days": 365}, "levels": LEVELS}
MULTIPLIED = {"type": "issue", "amount": {"per": "amount", "rate": "1"}, "multiply": "tier"}
GOLD_BONUS = {
    "conditions": [{"field": "customer.tier", "operator": "eq", "value": "gold"}],
    "actions": [{"type": "issue", "amount": {"fixed": "5"}}],
}


def _programme(world: World, tiers: dict[str, Any] | None, rules: list[dict[str, Any]]) -> Any:
    asset = world.asset(decimals=0)
    body: dict[str, Any] = {"name": "Tiered", "asset_id": asset.id, "max_event_age_days": None}
    if tiers is not None:
        body["tiers"] = tiers
    programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    for rule in rules:
        create = {"program_id": programme.id, "event_type": "order.completed", **rule}
        programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, create))
    programmes.publish(world.db, world.scope, programme.id)
    return programme


def _simulate(world: World, program_id: str, amount: str, **fields: Any) -> r.Simulation:
    body = {"event": {"type": "order.completed", "amount": Decimal(amount)}, **fields}
    return simulation.simulate_programme(world.db, world.scope, program_id, validate(rq.SimulationRequest, body))


def _issued(result: r.Simulation) -> list[str]:
    return [a.amount for rule in result.rules if rule.matched for a in rule.actions if a.issues]


def test_the_base_and_a_named_level(world: World) -> None:
    programme = _programme(world, POINTS, [{"actions": [MULTIPLIED]}, GOLD_BONUS])
    base = _simulate(world, programme.id, "120")
    assert _issued(base) == ["120"] and [a.error_code for a in base.rules[0].actions] == [None]
    assert base.tier == r.SimulationTier(
        code="member",
        rank=1,
        progress="0",
        multiplier="1",
        contributes="120",
        after=r.SimulationTierAfter(progress="120", tier="silver"),
    )
    gold = _simulate(world, programme.id, "10.7", tier="gold")
    assert _issued(gold) == ["21", "5"]  # 10.7 x 1 x 2 = 21.4, one rounding; the gold bonus reads the tier
    assert "x tier 2" in gold.rules[0].actions[0].reason
    assert gold.tier is not None
    assert (gold.tier.code, gold.tier.rank, gold.tier.progress, gold.tier.multiplier) == ("gold", 3, "300", "2")
    assert (gold.tier.contributes, gold.tier.after.progress, gold.tier.after.tier) == ("26", "326", "gold")
    with pytest.raises(ServiceError) as refused:
        _simulate(world, programme.id, "1", tier="platinum")
    assert refused.value.code == "field_invalid" and refused.value.details["field"] == "tier"


def test_a_customer_at_the_tier_the_worker_gave_it(world: World) -> None:
    programme = _programme(world, POINTS, [{"actions": [MULTIPLIED]}])
    customer = world.customer("sam")
    world.wallet(customer)
    for number, amount in enumerate(["60", "60"]):
        body = {
            "type": "order.completed",
            "external_event_id": f"sam-{number}",
            "customer_id": "sam",
            "occurred_at": f"2026-03-0{number + 1}T10:00:00Z",
            "data": {"amount": Decimal(amount)},
        }
        event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body))
    event_processing.process_all(world.db)
    at = {"occurred_at": "2026-03-05T10:00:00Z"}
    silver = _simulate(world, programme.id, "10", customer_id="sam", **at)
    assert _issued(silver) == ["15"]
    assert silver.tier is not None
    assert (silver.tier.code, silver.tier.progress, silver.tier.multiplier) == ("silver", "120", "1.5")
    assert (silver.tier.contributes, silver.tier.after.progress, silver.tier.after.tier) == ("15", "135", "silver")
    crossing = _simulate(world, programme.id, "120", customer_id=customer.id, **at)
    assert crossing.tier is not None and crossing.tier.after.tier == "gold"  # 120 + 180: an upgrade after it
    assert _issued(crossing) == ["180"]  # paid at the tier it found
    # The rule alone, simulated against the version it belongs to, reads the same tier.
    rule_id = silver.rules[0].rule_id
    alone = simulation.simulate_rule(
        world.db,
        world.scope,
        rule_id,
        validate(
            rq.SimulationRequest,
            {"event": {"type": "order.completed", "amount": Decimal("10")}, "customer_id": "sam", **at},
        ),
    )
    assert _issued(alone) == ["15"] and alone.tier is not None and alone.tier.code == "silver"


def test_a_count_metric_counts_the_event(world: World) -> None:
    tiers = {
        "metric": {"type": "count", "event_type": "order.completed"},
        "window": {"type": "lifetime"},
        "levels": [{"code": "new", "name": "New"}, {"code": "regular", "name": "Regular", "entry": "1"}],
    }
    programme = _programme(world, tiers, [{"actions": [{"type": "issue", "amount": {"fixed": "3"}}]}])
    result = _simulate(world, programme.id, "5")
    assert result.tier is not None
    assert (result.tier.contributes, result.tier.after.progress, result.tier.after.tier) == ("1", "1", "regular")


def test_without_tiers_the_answer_has_no_tier_field(world: World) -> None:
    programme = _programme(world, None, [{"actions": [{"type": "issue", "amount": {"fixed": "3"}}]}])
    result = _simulate(world, programme.id, "5")
    assert result.tier is None and "tier" not in result.model_dump(mode="json")
    with pytest.raises(ServiceError) as refused:
        _simulate(world, programme.id, "5", tier="gold")
    assert refused.value.code == "field_invalid" and refused.value.details["field"] == "tier"
