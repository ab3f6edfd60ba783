"""The rule builder edits caps (period + max amount or max count) and reverse actions (the original's field, and
the share taken back: all that remains, a constant, or a refund field over an original field), driven headless
(set values, click) against the engine's own draft; loading a rule and saving it unchanged gives the same rule.
The simulator reads the caps of the customer it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.lab.widgets import NEW_RULE, RuleBuilder, Simulator
from rewards_lab.lab.workbench import Lab, LabProgramme
from rewards_lab.service import customers

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


@pytest.fixture
def spring() -> LabProgramme:
    return Lab().load(SPRING)


def actions(rule: r.Rule) -> list[dict[str, Any]]:
    return [action.model_dump(mode="json", exclude_none=True) for action in rule.actions]


def limits(rule: r.Rule) -> list[dict[str, Any]]:
    return [limit.model_dump(mode="json") for limit in rule.limits]


def test_the_builder_writes_caps_and_a_reverse_action_read_from_both_events(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    assert builder.reverse_box.layout.display == "none" and builder.issue_box.layout.display is None
    builder.event_type.value = "order.refunded"
    builder.kind.value = "reverse"
    assert builder.issue_box.layout.display == "none" and builder.reverse_box.layout.display is None
    builder.original.value = "order_id"
    builder.fraction_kind.value = "of"
    assert builder.fraction.layout.display == "none" and builder.fraction_of.layout.display is None
    builder.fraction_field.value, builder.fraction_of.value = "refund_amount", "amount"
    builder.add_cap.click()
    builder.cap_rows[0].period.value, builder.cap_rows[0].value.value = "month", "500"
    builder.add_cap.click()
    row = builder.cap_rows[1]
    row.period.value, row.measure.value, row.value.value = "day", "max_count", "3"
    builder.save.click()
    assert "rule 4 added" in builder.message.value
    rule = spring.rules()[3]
    assert actions(rule) == [
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund_amount", "of": "amount"}}
    ]
    assert limits(rule) == [
        {"per": "customer", "period": "month", "max_amount": "500"},
        {"per": "customer", "period": "day", "max_count": 3},
    ]
    assert "take back refund_amount/amount of what order_id issued" in builder.rule.label
    assert "caps 500 a month, 3 rewards a day" in builder.rule.label
    refund = {"type": "order.refunded", "order_id": "o-1", "refund_amount": 5}
    (action,) = spring.simulate(refund, rule=3).rules[0].actions
    assert "refund_amount = 5 over the original's amount" in action.reason


@pytest.mark.parametrize(
    "action",
    [
        {"type": "reverse", "original": {"field": "order_id"}},
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.25"},
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "total"}},
    ],
    ids=["whole", "constant", "field_of"],
)
def test_loading_a_reverse_rule_with_caps_and_saving_it_unchanged_gives_the_same_rule(
    spring: LabProgramme, action: dict[str, Any]
) -> None:
    caps = [{"period": "lifetime", "max_amount": "12.50"}, {"period": "week", "max_count": 1}]
    spring.add_rule("order.refunded", actions=[action, {"type": "issue", "amount": {"fixed": "1"}}], limits=caps)
    before = spring.rules()[3]
    builder = RuleBuilder(spring)
    builder.rule.value = 3
    assert (builder.kind.value, builder.original.value) == ("reverse", "order_id")
    assert [(c.period.value, c.measure.value, c.value.value) for c in builder.cap_rows] == [
        ("lifetime", "max_amount", "12.50"),
        ("week", "max_count", "1"),
    ]
    builder.save.click()
    assert "rule 4 updated" in builder.message.value
    assert spring.rules()[3] == before
    builder.rule.value = NEW_RULE  # the form empties for a new rule
    assert builder.cap_rows == [] and builder.kind.value == "fixed" and builder.original.value == ""


def test_caps_and_reversals_refused_by_the_contract_show_the_offending_field(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.event_type.value = "order.refunded"
    builder.kind.value = "reverse"
    builder.save.click()  # no original field
    assert "actions[0].original.field" in builder.message.value
    builder.original.value = "order_id"
    builder.fraction_kind.value = "constant"
    builder.fraction.value = "1.5"
    builder.save.click()
    assert "field_invalid" in builder.message.value and "actions[0].fraction" in builder.message.value
    builder.fraction.value = "0.5"
    builder.add_cap.click()
    builder.cap_rows[0].measure.value, builder.cap_rows[0].value.value = "max_count", "three"
    builder.save.click()
    assert "limits[0].max_count" in builder.message.value
    builder.cap_rows[0].measure.value, builder.cap_rows[0].value.value = "max_amount", "1.005"
    builder.save.click()
    assert "amount_too_many_decimals" in builder.message.value and "limits[0].max_amount" in builder.message.value
    assert len(spring.rules()) == 3  # nothing was written
    builder.cap_rows[0].remove.click()
    builder.save.click()
    assert "rule 4 added" in builder.message.value
    assert limits(spring.rules()[3]) == []


def test_switching_a_rule_between_issue_and_reverse_keeps_nothing_of_the_other(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.rule.value = 0
    builder.kind.value = "reverse"
    builder.original.value = "order_id"
    builder.save.click()
    assert actions(spring.rules()[0]) == [{"type": "reverse", "original": {"field": "order_id"}}]
    builder.kind.value = "fixed"
    builder.fixed.value = "2.00"
    builder.save.click()
    asset_id = spring.info().asset_id
    assert actions(spring.rules()[0]) == [{"type": "issue", "asset_id": asset_id, "amount": {"fixed": "2.00"}}]


def test_the_simulator_reads_the_caps_of_the_customer_it_is_given(spring: LabProgramme) -> None:
    spring.set_spending(limits=[{"period": "lifetime", "max_amount": "1"}])
    lab = spring.lab
    customers.create_customer(lab.database, lab.scope, rq.CustomerCreate(external_id="cap-1"))
    simulator = Simulator(spring)
    simulator.event.value = '{"type": "order.completed", "amount": 42.50}'
    simulator.run.click()
    assert "issues 2.12" in simulator.result.value and "caps and budget not read" in simulator.result.value
    simulator.customer.value = "cap-1"
    simulator.run.click()
    assert "issues 1.00" in simulator.result.value
    assert "cut from 2.12 to 1.00 by the programme&#x27;s lifetime cap" in simulator.result.value
    simulator.customer.value = "nobody"
    simulator.run.click()
    assert "no customer &#x27;nobody&#x27;" in simulator.result.value
