"""The lab's widgets driven headless: set values, click, check the draft and the outputs."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from rewards_lab.contract.requests import PerRateAmount
from rewards_lab.lab.widgets import NEW_RULE, RuleBuilder, Simulator
from rewards_lab.lab.workbench import Lab, LabProgramme

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


@pytest.fixture
def spring() -> LabProgramme:
    return Lab().load(SPRING)


def test_the_rule_builder_adds_a_per_rate_rule_to_the_draft(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    assert builder.rule.value == NEW_RULE and "(3 rules)" in builder.draft.value
    assert "application/vnd.jupyter.widget-view+json" in builder._repr_mimebundle_()
    builder.event_type.value = "booking.completed"
    builder.add_condition.click()
    row = builder.condition_rows[0]
    row.field.value, row.operator.value, row.value.value = "nights", "gte", "2"
    builder.kind.value = "per"
    builder.per.value, builder.rate.value = "amount", "0.015"
    builder.save.click()
    assert "rule 4 added" in builder.message.value
    rule = spring.rules()[3]
    assert rule.event_type == "booking.completed"
    assert rule.conditions[0].field == "nights" and rule.conditions[0].value == Decimal(2)
    amount = rule.actions[0].amount
    assert isinstance(amount, PerRateAmount) and (amount.per, amount.rate) == ("amount", Decimal("0.015"))
    assert builder.rule.value == 3 and "(4 rules)" in builder.draft.value


def test_the_rule_builder_edits_and_removes_draft_rules(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.rule.value = 0  # loads the rule into the form
    assert builder.event_type.value == "order.completed" and builder.kind.value == "per"
    assert builder.rate.value == "0.05" and builder.condition_rows[0].value.value == "20"
    builder.condition_rows[0].value.value = "25"
    builder.rate.value = "0.1"
    builder.save.click()
    assert "rule 1 updated" in builder.message.value
    updated = spring.rules()[0]
    assert updated.conditions[0].value == Decimal(25)
    assert isinstance(updated.actions[0].amount, PerRateAmount) and updated.actions[0].amount.rate == Decimal("0.1")
    builder.condition_rows[0].remove.click()
    builder.save.click()
    assert spring.rules()[0].conditions == []
    builder.rule.value = 1
    builder.remove.click()
    assert "rule 2 removed" in builder.message.value
    assert [r.event_type for r in spring.rules()] == ["order.completed", "review.posted"]


def test_the_rule_builder_shows_the_contract_errors_with_their_field(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.event_type.value = "order.completed"
    builder.add_condition.click()
    builder.condition_rows[0].field.value = "amount"
    builder.condition_rows[0].value.value = "twenty"
    builder.fixed.value = "1.00"
    builder.save.click()
    assert "field_invalid" in builder.message.value and "conditions[0].value" in builder.message.value
    builder.condition_rows[0].value.value = "20"
    builder.fixed.value = "1.005"
    builder.save.click()
    assert "amount_too_many_decimals" in builder.message.value
    assert "actions[0].amount.fixed" in builder.message.value
    builder.event_type.value = "Not An Event"
    builder.fixed.value = "1"
    builder.save.click()
    assert "event_type" in builder.message.value
    assert len(spring.rules()) == 3  # nothing was written


def test_the_simulator_shows_the_outcome_and_the_reasons(spring: LabProgramme) -> None:
    simulator = Simulator(spring)
    simulator.event.value = '{"type": "order.completed", "amount": 42.50}'
    simulator.run.click()
    assert simulator.outcome is not None and simulator.outcome.totals[0].amount == "2.12"
    assert "issues 2.12" in simulator.result.value and "42.50 x rate 0.05" in simulator.result.value
    simulator.event.value = '{"type": "order.completed", "amount": 19}'
    simulator.run.click()
    assert "issues nothing" in simulator.result.value and "19 &gt;= 20 does not hold" in simulator.result.value
    simulator.event.value = '{"type": "order.completed", "amount": '
    simulator.run.click()
    assert simulator.outcome is None and "request_malformed" in simulator.result.value
    simulator.event.value = '{"amount": 3}'
    simulator.run.click()
    assert "field_required" in simulator.result.value and "event.type" in simulator.result.value


def test_the_simulator_uses_the_chosen_version(spring: LabProgramme) -> None:
    spring.publish()
    spring.update_rule(0, amount={"per": "amount", "rate": "0.1"})
    simulator = Simulator(spring)
    assert [label for label, _ in simulator.version.options] == ["version 1", "draft"]
    simulator.event.value = '{"type": "order.completed", "amount": 100}'
    simulator.run.click()
    assert "issues 10.00" in simulator.result.value
    simulator.version.value = 1
    simulator.run.click()
    assert "issues 5.00" in simulator.result.value


def test_the_rule_builder_keeps_the_further_actions_of_a_rule(spring: LabProgramme) -> None:
    two = [
        {"type": "issue", "amount": {"fixed": "1.00"}},
        {"type": "issue", "amount": {"per": "amount", "rate": "0.5"}},
    ]
    spring.add_rule("referral.converted", actions=two)
    builder = RuleBuilder(spring)
    builder.rule.value = 3
    assert builder.fixed.value == "1.00"
    builder.fixed.value = "3.00"
    builder.save.click()
    actions = spring.rules()[3].actions
    assert [a.amount.model_dump(mode="json") for a in actions] == [{"fixed": "3.00"}, {"per": "amount", "rate": 0.5}]
