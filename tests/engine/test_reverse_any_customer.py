"""`any_customer` on a reverse action (issue 27, item 5): additive and optional in /v1 (absent means false and is
left out), a strict boolean checked by the contract models, carried by programme files, the Lab, the rule
builder, push's fingerprint and the compiled rules the live engine and replay read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limit_requests import ReverseAction
from rewards_lab.contract.programme_file import load_programme, parse_programme
from rewards_lab.contract.validation import validate
from rewards_lab.domain.rules import reverse_spec
from rewards_lab.lab.push import live_fingerprint
from rewards_lab.lab.widgets import RuleBuilder
from rewards_lab.lab.workbench import Lab, describe_rule
from rewards_lab.replay.compiler import rule_specs


def _rule(**extra: Any) -> dict[str, Any]:
    action = {"type": "reverse", "original": {"field": "order_id"}, **extra}
    return {"program_id": "prg_x", "event_type": "shop.refund", "actions": [action]}


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, None, [True]])
def test_any_customer_is_a_strict_boolean(value: Any) -> None:
    with pytest.raises(ServiceError) as refused:
        validate(rq.RuleCreate, _rule(any_customer=value))
    assert (refused.value.code, refused.value.details["field"]) == ("field_invalid", "actions[0].any_customer")


def test_absent_means_false_and_is_left_out_so_todays_rules_read_as_before() -> None:
    plain = validate(rq.RuleCreate, _rule())
    assert plain.model_dump(mode="json")["actions"] == [{"type": "reverse", "original": {"field": "order_id"}}]
    off = validate(rq.RuleCreate, _rule(any_customer=False))
    assert off.model_dump(mode="json") == plain.model_dump(mode="json")
    on = validate(rq.RuleCreate, _rule(any_customer=True))
    stored = on.model_dump(mode="json")["actions"][0]
    assert stored["any_customer"] is True
    assert (
        reverse_spec(stored, "ast", 0).any_customer
        and not reverse_spec({**stored, "any_customer": False}, "a", 0).any_customer
    )
    with pytest.raises(ServiceError) as issue:  # an issue action has no such field
        validate(
            rq.RuleCreate, {**_rule(), "actions": [{"type": "issue", "amount": {"fixed": "1"}, "any_customer": True}]}
        )
    assert issue.value.code == "field_unknown"


FILE: dict[str, Any] = {
    "programme": {"name": "Market"},
    "asset": {"name": "Points", "symbol": "MKT", "type": "points", "decimals": 0},
    "rules": [
        {"event_type": "order", "actions": [{"type": "issue", "amount": {"fixed": "5"}}]},
        {
            "event_type": "seller.refund",
            "actions": [{"type": "reverse", "original": {"field": "order_id"}, "any_customer": True}],
        },
        {"event_type": "refund", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]},
    ],
}


def test_programme_files_the_lab_push_and_replay_carry_it(tmp_path: Path) -> None:
    definition = parse_programme(FILE)
    shop = Lab().load(definition)
    assert load_programme(shop.export(tmp_path / "market.json")) == definition
    rules = shop.rules()
    assert "any customer" in describe_rule(rules[1]) and "any customer" not in describe_rule(rules[2])
    asset = shop.info().asset_id
    same_but_opted_out = rules[2].model_copy(update={"event_type": "seller.refund"})
    assert live_fingerprint(rules[1], asset) != live_fingerprint(same_but_opted_out, asset)  # a change replaces it
    added = shop.add_rule("market.refund", reverse="order_id", any_customer=True)
    (action,) = added.actions
    assert isinstance(action, ReverseAction) and action.any_customer
    with pytest.raises(ServiceError) as refused:
        shop.add_rule("order.more", amount={"fixed": "1"}, any_customer=True)
    assert refused.value.details["field"] == "any_customer"
    specs = rule_specs(definition)  # what the live engine's evaluation and replay's compiler read
    assert [a.any_customer for spec in specs for a in spec.actions if a.reverse_of] == [True, False]


def test_the_rule_builder_edits_it() -> None:
    shop = Lab().load(parse_programme(FILE))
    builder = RuleBuilder(shop)
    builder.rule.value = 1
    assert builder.kind.value == "reverse" and builder.any_customer.value is True
    builder.rule.value = 2
    assert builder.any_customer.value is False
    builder.any_customer.value = True
    assert builder._reverse_action()["any_customer"] is True
