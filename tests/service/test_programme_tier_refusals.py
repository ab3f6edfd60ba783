"""Until tiers are stored and the live engine keeps them (issue 33, T2/T3), /v1 refuses rules that use tiers:
`multiply: "tier"` and conditions on `customer.tier*` would otherwise be stored and run unmultiplied or never
matching. The request model takes `multiply` (programme files need it); the service refuses it, naming the
element, and the rule is not stored."""

from __future__ import annotations

from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.validation import validate
from rewards_lab.service import programmes
from tests.conftest import World

ISSUE = {"type": "issue", "amount": {"fixed": "1"}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"actions": [ISSUE, {**ISSUE, "multiply": "tier"}]}, "actions[1].multiply"),
        (
            {"conditions": [{"field": "customer.tier", "operator": "eq", "value": "gold"}], "actions": [ISSUE]},
            "conditions[0].field",
        ),
        (
            {
                "conditions": [{"all": [{"field": "customer.tier_rank", "operator": "gte", "value": 2}]}],
                "actions": [ISSUE],
            },
            "conditions[0].all[0].field",
        ),
    ],
)
def test_rules_that_use_tiers_are_refused_on_create_and_update(world: World, body: dict[str, Any], field: str) -> None:
    programme = world.programme(world.asset())
    create = validate(rq.RuleCreate, {"program_id": programme.id, "event_type": "order.completed", **body})
    with pytest.raises(ServiceError) as caught:
        programmes.create_rule(world.db, world.scope, create)
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", field)
    assert "defines no tiers" in caught.value.message
    assert programmes.get_version(world.db, world.scope, programme.id).rules == []

    rule = world.rule(programme)
    with pytest.raises(ServiceError) as caught:
        programmes.update_rule(world.db, world.scope, rule.id, validate(rq.RuleUpdate, body))
    assert caught.value.details["field"] == field
    assert programmes.get_rule(world.db, world.scope, rule.id).actions == rule.actions


def test_a_rule_without_tiers_reads_and_hashes_as_before(world: World) -> None:
    programme = world.programme(world.asset())
    rule = world.rule(programme)
    assert "multiply" not in rule.model_dump(mode="json")["actions"][0]
    assert (
        "multiply"
        not in validate(rq.RuleCreate, {"program_id": "p", "event_type": "a", "actions": [ISSUE]}).model_dump(
            mode="json"
        )["actions"][0]
    )
