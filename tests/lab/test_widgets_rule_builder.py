"""The rule builder and the Lab edit the whole rule language: groups, every operator, priority, stop_processing
and beneficiaries, driven headless (set values, click) against the engine's own draft."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import load_programme
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.lab.widgets import NEW_RULE, ConditionRow, GroupRow, RuleBuilder, parse_value, value_text
from rewards_lab.lab.workbench import RULES_TABLE_COLUMNS, Lab, LabProgramme

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"

# What the builder test below writes through the form, as the contract returns it.
INTENDED = [
    {"field": "amount", "operator": "between", "value": [10, 500]},
    {
        "any": [
            {"field": "channel", "operator": "in", "value": ["web", "app"]},
            {"field": "tier", "operator": "eq", "value": "gold"},
            {"not": {"field": "coupon", "operator": "exists"}},
        ]
    },
    {"field": "tags", "operator": "contains", "value": "20"},
]


@pytest.fixture
def spring() -> LabProgramme:
    return Lab().load(SPRING)


def conditions(rule: r.Rule) -> list[dict[str, Any]]:
    return [condition_payload(item) for item in rule.conditions]


def leaf(row: ConditionRow | GroupRow) -> ConditionRow:
    assert isinstance(row, ConditionRow)
    return row


def group(row: ConditionRow | GroupRow) -> GroupRow:
    assert isinstance(row, GroupRow)
    return row


def fill(row: ConditionRow, field: str, operator: str, value: str = "") -> None:
    row.field.value, row.operator.value, row.value.value = field, operator, value


def test_the_builder_writes_groups_strings_lists_between_exists_priority_and_stop_processing(
    spring: LabProgramme,
) -> None:
    builder = RuleBuilder(spring)
    builder.event_type.value = "order.completed"
    builder.add_condition.click()
    fill(leaf(builder.condition_rows[0]), "amount", "between", "[10, 500]")
    builder.add_group.click()
    anyof = group(builder.condition_rows[1])
    anyof.kind.value = "any"
    anyof.add_condition.click()
    fill(leaf(anyof.parts.rows[0]), "channel", "in", '["web", "app"]')
    anyof.add_condition.click()
    fill(leaf(anyof.parts.rows[1]), "tier", "eq", "gold")  # not JSON: the text is the string
    anyof.add_group.click()
    negation = group(anyof.parts.rows[2])
    negation.kind.value = "not"
    assert not negation.add_condition.disabled
    negation.add_condition.click()
    assert negation.add_condition.disabled and negation.add_group.disabled  # `not` holds exactly one part
    fill(leaf(negation.parts.rows[0]), "coupon", "exists")
    assert leaf(negation.parts.rows[0]).value.disabled
    builder.add_condition.click()
    fill(leaf(builder.condition_rows[2]), "tags", "contains", '"20"')  # quoted: the string "20"
    builder.priority.value, builder.stop_processing.value = 5, True
    builder.fixed.value = "2.50"
    builder.save.click()
    assert "rule 4 added" in builder.message.value
    rule = spring.rules()[3]
    assert conditions(rule) == INTENDED
    assert (rule.priority, rule.stop_processing) == (5, True)
    assert [a.model_dump(mode="json", exclude_none=True) for a in rule.actions] == [
        {"type": "issue", "asset_id": spring.info().asset_id, "amount": {"fixed": "2.50"}}
    ]
    assert builder.rule.value == 3 and "[priority 5, stops]" in builder.rule.label
    event = {"type": "order.completed", "amount": 100, "channel": "web", "tags": ["20", "x"]}
    assert spring.simulate(event, rule=3).totals[0].amount == "2.50"
    assert spring.simulate({**event, "tags": [20]}, rule=3).totals == []  # the number 20 is not the string


def test_loading_a_rule_and_saving_it_unchanged_gives_the_same_rule(spring: LabProgramme) -> None:
    every_operator: list[Any] = [
        ("amount", "gte", 20),
        ("amount", "lt", "99.95"),
        {
            "all": [
                ("nights", "gt", 1),
                ("nights", "lte", 14),
                ("code", "neq", "20"),  # eq and neq read a decimal string as its number (the seed's reading)
                ("newsletter", "eq", True),
                {
                    "any": [
                        ("segment", "not_in", ["20", "true"]),
                        ("code", "eq", " spaced "),
                        ("coupon", "starts_with", "20"),  # a string, shown quoted: typed bare it reads as 20
                        ("email", "ends_with", "@shop.fr"),
                    ]
                },
            ]
        },
        ("occurred_at.date", "between", ["2024-03-01", "2024-05-31"]),
        {"not": ("customer.attributes.banned", "exists")},
        ("referrer_id", "not_exists"),
        ("customer.segments", "contains", "gold"),
        ("customer.country", "in", ["FR", "DE"]),
    ]
    actions = [
        {"type": "issue", "amount": {"per": "amount", "rate": "0.015"}, "beneficiary": {"field": "referrer_id"}},
        {"type": "issue", "amount": {"fixed": "1.00"}},
    ]
    spring.add_rule("booking.completed", conditions=every_operator, actions=actions, priority=-3)
    before = spring.rules()[3]
    builder = RuleBuilder(spring)
    builder.rule.value = 3
    assert [type(row).__name__ for row in builder.condition_rows] == [
        "ConditionRow",
        "ConditionRow",
        "GroupRow",
        "ConditionRow",
        "GroupRow",
        "ConditionRow",
        "ConditionRow",
        "ConditionRow",
    ]
    allof = group(builder.condition_rows[2])
    assert allof.kind.value == "all" and len(allof.parts.rows) == 5
    assert [leaf(row).value.value for row in allof.parts.rows[:4]] == ["1", "14", "20", "true"]
    nested = group(allof.parts.rows[4])
    assert [leaf(row).value.value for row in nested.parts.rows] == ['["20", "true"]', '" spaced "', '"20"', "@shop.fr"]
    assert leaf(builder.condition_rows[3]).value.value == '["2024-03-01", "2024-05-31"]'
    assert group(builder.condition_rows[4]).kind.value == "not"
    assert (builder.priority.value, builder.stop_processing.value) == (-3, False)
    assert (builder.kind.value, builder.rate.value, builder.beneficiary.value) == ("per", "0.015", "referrer_id")
    builder.save.click()
    assert "rule 4 updated" in builder.message.value
    assert spring.rules()[3] == before
    builder.rule.value = NEW_RULE  # the form empties for a new rule
    assert builder.condition_rows == [] and builder.beneficiary.value == "" and builder.priority.value == 0


def test_a_bad_value_in_a_group_shows_the_error_with_its_path(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.event_type.value = "order.completed"
    builder.fixed.value = "1.00"
    builder.add_condition.click()
    fill(leaf(builder.condition_rows[0]), "amount", "gte", "20")
    builder.add_group.click()
    anyof = group(builder.condition_rows[1])
    anyof.add_condition.click()
    fill(leaf(anyof.parts.rows[0]), "amount", "gte", "twenty")  # ordering operators compare numbers only
    builder.save.click()
    assert "field_invalid" in builder.message.value and "conditions[1].any[0].value" in builder.message.value
    fill(leaf(anyof.parts.rows[0]), "channel", "in", "")  # no value
    builder.save.click()
    assert "field_required" in builder.message.value and "conditions[1].any[0].value" in builder.message.value
    fill(leaf(anyof.parts.rows[0]), "vip", "exists")
    anyof.add_condition.click()
    anyof.kind.value = "not"  # two parts under `not`: refused by the form, naming the group
    builder.save.click()
    assert "field_invalid" in builder.message.value and "conditions[1].not" in builder.message.value
    anyof.parts.rows[1].remove.click()
    builder.priority.value = 2_000_000
    builder.save.click()
    assert "field_invalid" in builder.message.value and "<b>priority</b>" in builder.message.value
    assert len(spring.rules()) == 3  # nothing was written
    builder.priority.value = 1
    builder.save.click()
    assert "rule 4 added" in builder.message.value
    assert conditions(spring.rules()[3])[1] == {"not": {"field": "vip", "operator": "exists"}}


def test_a_beneficiary_round_trips_through_the_builder(spring: LabProgramme) -> None:
    builder = RuleBuilder(spring)
    builder.event_type.value = "referral.converted"
    builder.fixed.value = "10.00"
    builder.beneficiary.value = "referrer_id"
    builder.save.click()
    rule = spring.rules()[3]
    assert rule.actions[0].beneficiary is not None and rule.actions[0].beneficiary.field == "referrer_id"
    assert "10.00 to referrer_id" in builder.draft.value
    builder.rule.value = NEW_RULE
    builder.rule.value = 3
    assert builder.beneficiary.value == "referrer_id"
    builder.beneficiary.value = ""  # back to the event's customer
    builder.save.click()
    assert spring.rules()[3].actions[0].beneficiary is None


def test_the_lab_adds_and_updates_rules_with_groups_tuples_priority_and_beneficiaries(
    spring: LabProgramme,
) -> None:
    as_tuples = [
        {"any": [("channel", "in", ["web", "app"]), {"not": ("vip", "exists")}]},
        ("amount", "between", (10, 20)),
    ]
    as_dicts = [
        {
            "any": [
                {"field": "channel", "operator": "in", "value": ["web", "app"]},
                {"not": {"field": "vip", "operator": "exists"}},
            ]
        },
        {"field": "amount", "operator": "between", "value": [10, 20]},
    ]
    added = spring.add_rule(
        "order.completed",
        conditions=as_tuples,
        amount={"fixed": "10"},
        beneficiary="referrer_id",
        priority=7,
        stop_processing=True,
    )
    again = spring.add_rule("order.completed", conditions=as_dicts, amount={"fixed": "10"})
    assert conditions(added) == conditions(again) == as_dicts
    assert (added.priority, added.stop_processing, again.priority, again.stop_processing) == (7, True, 0, False)
    assert added.actions[0].beneficiary is not None and added.actions[0].beneficiary.field == "referrer_id"
    changed = spring.update_rule(3, stop_processing=False)
    assert (changed.priority, changed.stop_processing, conditions(changed)) == (7, False, as_dicts)
    spring.update_rule(4, conditions=[{"all": [("tier", "eq", "gold")]}], priority=-1)
    assert conditions(spring.rules()[4]) == [{"all": [{"field": "tier", "operator": "eq", "value": "gold"}]}]
    assert spring.rules()[4].priority == -1
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", conditions=[{"any": [("a", "eq", 1), ("b",)]}], amount={"fixed": "1"})
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", "conditions[0].any[1]")
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", conditions=[{"not": ("a", "gte", "x")}], amount={"fixed": "1"})
    assert caught.value.details["field"] == "conditions[0].not.value"
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", conditions=[{"any": "amount"}], amount={"fixed": "1"})
    assert caught.value.details["field"].startswith("conditions[0].any")
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", actions=[{"type": "issue", "amount": {"fixed": "1"}}], beneficiary="x")
    assert caught.value.details["field"] == "beneficiary"
    assert len(spring.rules()) == 5  # the refusals wrote nothing


def test_loading_a_programme_file_keeps_priority_and_stop_processing() -> None:
    definition = load_programme(SPRING).model_copy(deep=True)
    definition.rules[1].priority, definition.rules[1].stop_processing = -2, True
    rules = Lab().load(definition).rules()
    assert [(rule.priority, rule.stop_processing) for rule in rules] == [(0, False), (-2, True), (0, False)]


def test_the_rules_table_shows_priority_stop_processing_conditions_and_beneficiaries(spring: LabProgramme) -> None:
    spring.add_rule(
        "referral.converted",
        conditions=[("amount", "gte", 20), {"any": [("channel", "eq", "web"), {"not": ("vip", "exists")}]}],
        actions=[
            {"type": "issue", "amount": {"fixed": "10"}, "beneficiary": {"field": "referrer_id"}},
            {"type": "issue", "amount": {"fixed": "5"}},
        ],
        priority=-1,
        stop_processing=True,
    )
    table = spring.rules_table()
    assert [table.index.name, *table.columns] == [RULES_TABLE_COLUMNS[0], "name", *RULES_TABLE_COLUMNS[1:]]
    assert list(table.columns) == ["name", "event_type", "priority", "stop_processing", "when", "issue"]
    assert table.loc[0].to_dict() == {
        "name": "Cashback on orders of 20 or more",
        "event_type": "order.completed",
        "priority": 0,
        "stop_processing": False,
        "when": "amount >= 20",
        "issue": "amount x 0.05",
    }
    assert table.loc[1, "when"] == "always"
    assert table.loc[3].to_dict() == {
        "name": "",  # added without a name
        "event_type": "referral.converted",
        "priority": -1,
        "stop_processing": True,
        "when": 'amount >= 20 and any(channel == "web", not(vip exists))',
        "issue": "10 to referrer_id, 5",
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("20", 20),
        ("0.50", Decimal("0.50")),
        ('"20"', "20"),
        ("web", "web"),
        ("2024-05-01", "2024-05-01"),
        ("true", True),
        ('["web", "app"]', ["web", "app"]),
        ("[10, 20]", [10, 20]),
        ("  ", None),
        ('"unclosed', '"unclosed'),
    ],
)
def test_a_value_is_json_when_it_parses_else_the_text(text: str, value: Any) -> None:
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)  # "20" is the number, '"20"' the string
    assert parse_value(value_text(parsed)) == parsed
