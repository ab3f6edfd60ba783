"""Programme versions: rules attach to the draft, publish freezes a numbered version, history stays as published."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.validation import validate
from rewards_lab.service import programmes
from tests.conftest import World


def test_publish_freezes_a_version_and_starts_a_new_draft(world: World) -> None:
    db, scope = world.db, world.scope
    programme = world.programme(world.asset())
    rule = world.rule(programme, amount={"fixed": "5.00"})
    assert rule.version is None  # it belongs to the draft

    first = programmes.publish(db, scope, programme.id)
    assert first.version.number == 1 and [r.id for r in first.version.rules] == [rule.id]
    assert programmes.get_programme(db, scope, programme.id).current_version == 1

    # The new draft starts from version 1: same rule id, editable without touching version 1.
    edited = programmes.update_rule(
        db, scope, rule.id, rq.RuleUpdate(actions=[rq.Action(type="issue", amount=rq.FixedAmount(fixed="7.50"))])
    )
    assert edited.version is None and edited.actions[0].amount == rq.FixedAmount(fixed="7.50")
    extra = world.rule(programme, "signup.completed", amount={"fixed": "1.00"})
    second = programmes.publish(db, scope, programme.id)
    assert second.version.number == 2 and second.version.based_on == 1

    history = programmes.all_versions(db, scope, programme.id)
    assert [(v.number, v.status) for v in history] == [(1, "published"), (2, "published"), (None, "draft")]
    v1, v2 = history[0], history[1]
    assert [a.amount for r in v1.rules for a in r.actions] == [rq.FixedAmount(fixed="5.00")]  # as published
    assert {r.id for r in v2.rules} == {rule.id, extra.id}
    assert programmes.get_version(db, scope, programme.id, "live").number == 2
    assert programmes.get_version(db, scope, programme.id, 1).rules[0].actions[0].amount == rq.FixedAmount(fixed="5.00")


def test_deleting_from_the_draft_keeps_published_versions(world: World) -> None:
    db, scope = world.db, world.scope
    programme = world.programme(world.asset())
    rule = world.rule(programme)
    programmes.publish(db, scope, programme.id)
    programmes.delete_rule(db, scope, rule.id)
    assert programmes.get_version(db, scope, programme.id, "draft").rules == []
    assert [r.id for r in programmes.get_version(db, scope, programme.id, 1).rules] == [rule.id]
    with pytest.raises(ServiceError) as caught:
        programmes.publish(db, scope, programme.id)
    assert caught.value.code == "programme_draft_empty"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"event_type": "order.completed", "actions": []}, "field_invalid", "actions"),
        (
            {"event_type": "Order Completed!", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]},
            "field_invalid",
            "event_type",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "burn", "amount": {"fixed": "1"}}]},
            "field_invalid",
            "actions[0].type",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "1.001"}}]},
            "amount_too_many_decimals",
            "actions[0].amount.fixed",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "-1"}}]},
            "amount_not_positive",
            "actions[0].amount.fixed",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": 5}}]},
            "amount_invalid",
            "actions[0].amount.fixed",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0}}]},
            "field_invalid",
            "actions[0].amount.rate",
        ),
        (
            {
                "event_type": "order.completed",
                "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "abc"}}],
            },
            "field_invalid",
            "actions[0].amount.rate",
        ),
        (
            {
                "event_type": "order.completed",
                "actions": [{"type": "issue", "amount": {"per": "amount", "rate": Decimal("0.00000000001")}}],
            },
            "field_invalid",
            "actions[0].amount.rate",
        ),
        (
            {
                "event_type": "order.completed",
                "conditions": [{"field": "amount", "operator": "like", "value": 1}],
                "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
            },
            "field_invalid",
            "conditions[0].operator",
        ),
        (
            {
                "event_type": "order.completed",
                "conditions": [{"field": "amount", "operator": "gte", "value": "x"}],
                "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
            },
            "field_invalid",
            "conditions[0].value",
        ),
        (
            {
                "event_type": "order.completed",
                "conditions": [{"field": "amount", "operator": "gte"}],
                "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
            },
            "field_required",
            "conditions[0].value",
        ),
        (
            {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"fixed": "1"}, "memo": "x"}]},
            "field_unknown",
            "actions[0].memo",
        ),
    ],
)
def test_invalid_rules_are_refused_naming_the_field(
    world: World, body: dict[str, object], code: str, field: str
) -> None:
    programme = world.programme(world.asset())
    with pytest.raises(ServiceError) as caught:
        programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, {"program_id": programme.id, **body}))
    assert (caught.value.code, caught.value.details["field"]) == (code, field)
    assert programmes.get_version(world.db, world.scope, programme.id).rules == []


def test_rule_on_a_missing_programme_names_the_field(world: World) -> None:
    body = validate(
        rq.RuleCreate,
        {"program_id": "prg_nope", "event_type": "a.b", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]},
    )
    with pytest.raises(ServiceError) as caught:
        programmes.create_rule(world.db, world.scope, body)
    assert caught.value.code == "programme_not_found" and caught.value.details["field"] == "program_id"


def test_rates_travel_exactly(world: World) -> None:
    programme = world.programme(world.asset())
    rule = world.rule(
        programme,
        amount={"per": "amount", "rate": Decimal("0.0123456789")},
        conditions=[{"field": "amount", "operator": "gte", "value": Decimal("19.99")}],
    )
    stored = programmes.get_rule(world.db, world.scope, rule.id)
    assert stored.actions[0].amount == rq.PerRateAmount(per="amount", rate=Decimal("0.0123456789"))
    assert stored.conditions[0].value == Decimal("19.99")
    dumped = stored.model_dump(mode="json")
    assert dumped["actions"][0]["amount"]["rate"] == 0.0123456789  # a JSON number whose text is exact
