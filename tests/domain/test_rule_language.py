"""The rule language of issue 17 in the live engine: operators on strings, lists and presence, nested paths,
groups, priority and stop_processing, beneficiaries; validation naming the offending element."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.rule_requests import MAX_CONDITION_DEPTH, MAX_CONDITION_LIST, MAX_CONDITION_NODES
from rewards_lab.contract.validation import validate
from rewards_lab.domain.conditions import CustomerFacts, EventFacts
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.domain.rules import compile_rule

D = Decimal


def _rule(conditions: list[Any], *, rule_id: str = "r", priority: int = 0, stop: bool = False, tz: str = "UTC") -> Any:
    body = validate(
        rq.RuleCreate,
        {
            "program_id": "p",
            "event_type": "order",
            "conditions": conditions,
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
            "priority": priority,
            "stop_processing": stop,
        },
    )
    payload = body.model_dump(mode="json")
    return compile_rule(
        rule_id,
        "order",
        payload["conditions"],
        payload["actions"],
        "a",
        lambda _a: 2,
        priority=priority,
        stop_processing=stop,
        timezone=tz,
    )


def _holds(conditions: list[Any], data: dict[str, Any], facts: EventFacts | None = None, tz: str = "UTC") -> bool:
    rule = _rule(conditions, tz=tz)
    facts_list = None if facts is None else [facts]
    matched = evaluate([rule], [("order", data)], facts=facts_list)[0]
    explained = evaluate([rule], [("order", data)], facts=facts_list, explain=True)[0][0]
    assert bool(matched) == explained.matched  # the two forms agree
    return bool(matched)


@pytest.mark.parametrize(
    ("condition", "data", "expected"),
    [
        ({"field": "channel", "operator": "eq", "value": "web"}, {"channel": "web"}, True),
        ({"field": "channel", "operator": "eq", "value": "web"}, {"channel": "Web"}, False),  # exact
        ({"field": "channel", "operator": "neq", "value": "web"}, {"channel": "app"}, True),
        ({"field": "channel", "operator": "neq", "value": "web"}, {}, False),  # missing: false
        ({"field": "channel", "operator": "neq", "value": "web"}, {"channel": 5}, False),  # other kind: false
        ({"field": "amount", "operator": "eq", "value": "20"}, {"amount": 20}, True),  # decimal text: a number
        ({"field": "amount", "operator": "eq", "value": "20"}, {"amount": "20"}, False),
        ({"field": "vip", "operator": "eq", "value": True}, {"vip": True}, True),
        ({"field": "vip", "operator": "eq", "value": True}, {"vip": 1}, False),
        ({"field": "channel", "operator": "in", "value": ["web", "app"]}, {"channel": "app"}, True),
        ({"field": "channel", "operator": "in", "value": ["web", "app"]}, {"channel": "store"}, False),
        ({"field": "code", "operator": "in", "value": ["20"]}, {"code": "20"}, True),  # lists are literal
        ({"field": "code", "operator": "in", "value": ["20"]}, {"code": 20}, False),
        ({"field": "tier", "operator": "in", "value": [1, 2.5]}, {"tier": D("2.50")}, True),
        ({"field": "channel", "operator": "not_in", "value": ["web"]}, {"channel": "app"}, True),
        ({"field": "channel", "operator": "not_in", "value": ["web"]}, {}, False),
        ({"field": "amount", "operator": "between", "value": [10, 20]}, {"amount": 10}, True),
        ({"field": "amount", "operator": "between", "value": [10, 20]}, {"amount": 20}, True),
        ({"field": "amount", "operator": "between", "value": [10, 20]}, {"amount": D("20.01")}, False),
        ({"field": "day", "operator": "between", "value": ["2026-12-01", "2026-12-31"]}, {"day": "2026-12-24"}, True),
        ({"field": "day", "operator": "between", "value": ["2026-12-01", "2026-12-31"]}, {"day": "2027-01-01"}, False),
        ({"field": "coupon", "operator": "exists"}, {"coupon": "X"}, True),
        ({"field": "coupon", "operator": "exists"}, {"coupon": None}, False),  # JSON null counts as absent
        ({"field": "coupon", "operator": "not_exists"}, {}, True),
        ({"field": "tags", "operator": "contains", "value": "promo"}, {"tags": ["a", "promo"]}, True),
        ({"field": "tags", "operator": "contains", "value": "promo"}, {"tags": "promo"}, True),  # a string: part of it
        ({"field": "tags", "operator": "contains", "value": "promo"}, {"tags": 5}, False),  # neither list nor string
        ({"field": "tags", "operator": "contains", "value": 5}, {"tags": "5"}, False),  # a number: lists only
        ({"field": "coupon", "operator": "contains", "value": "promo"}, {"coupon": "spring-promo-20"}, True),
        ({"field": "coupon", "operator": "contains", "value": "promo"}, {"coupon": "Spring-Promo"}, False),  # case
        ({"field": "email", "operator": "starts_with", "value": "ann"}, {"email": "ann@example.com"}, True),
        ({"field": "email", "operator": "starts_with", "value": "ann"}, {"email": "joann@example.com"}, False),
        ({"field": "email", "operator": "starts_with", "value": "ann"}, {"email": ["ann"]}, False),  # not a string
        ({"field": "email", "operator": "ends_with", "value": "@example.com"}, {"email": "ann@example.com"}, True),
        ({"field": "email", "operator": "ends_with", "value": "@example.com"}, {"email": "a@example.com.fr"}, False),
        ({"field": "email", "operator": "ends_with", "value": ""}, {"email": "ann"}, True),  # "" ends every string
        ({"field": "email", "operator": "ends_with", "value": ""}, {}, False),
        ({"field": "order.channel", "operator": "eq", "value": "web"}, {"order": {"channel": "web"}}, True),
        ({"field": "order.items.count", "operator": "gte", "value": 3}, {"order": {"items": {"count": 3}}}, True),
        ({"field": "order.channel", "operator": "eq", "value": "web"}, {"order.channel": "web"}, True),  # key first
        ({"field": "order.channel", "operator": "eq", "value": "web"}, {"order": "web"}, False),
    ],
)
def test_each_operator_and_path(condition: dict[str, Any], data: dict[str, Any], expected: bool) -> None:
    assert _holds([condition], data) is expected


def test_groups_nest_and_the_top_level_list_is_all_of() -> None:
    conditions = [
        {"field": "amount", "operator": "gte", "value": 20},
        {"any": [{"field": "channel", "operator": "eq", "value": "web"}, {"field": "coupon", "operator": "exists"}]},
        {
            "not": {
                "all": [
                    {"field": "status", "operator": "eq", "value": "test"},
                    {"field": "internal", "operator": "exists"},
                ]
            }
        },
    ]
    assert _holds(conditions, {"amount": 25, "channel": "web"})
    assert _holds(conditions, {"amount": 25, "channel": "app", "coupon": "C"})
    assert not _holds(conditions, {"amount": 25, "channel": "app"})
    assert not _holds(conditions, {"amount": 19, "channel": "web"})
    assert not _holds(conditions, {"amount": 25, "channel": "web", "status": "test", "internal": True})
    assert _holds(conditions, {"amount": 25, "channel": "web", "status": "test"})


def test_time_fields_are_read_in_the_programme_timezone() -> None:
    # Friday 2026-12-04 23:30 UTC is Saturday 2026-12-05 00:30 in Paris.
    facts = EventFacts(occurred_at=datetime(2026, 12, 4, 23, 30, tzinfo=UTC))
    weekend = [{"field": "occurred_at.weekday", "operator": "gte", "value": 6}]
    assert not _holds(weekend, {}, facts)
    assert _holds(weekend, {}, facts, tz="Europe/Paris")
    assert _holds([{"field": "occurred_at.hour", "operator": "eq", "value": 0}], {}, facts, tz="Europe/Paris")
    december = [{"field": "occurred_at.date", "operator": "between", "value": ["2026-12-05", "2026-12-31"]}]
    assert _holds(december, {}, facts, tz="Europe/Paris") and not _holds(december, {}, facts)
    assert not _holds(weekend, {}, EventFacts())  # no time: the field is missing


def test_customer_fields() -> None:
    gold = EventFacts(customer=CustomerFacts({"tier": "gold", "age": 31, "vip": True}, "FR", ("active",)))
    assert _holds([{"field": "customer.attributes.tier", "operator": "eq", "value": "gold"}], {}, gold)
    assert _holds([{"field": "customer.attributes.age", "operator": "gt", "value": 30}], {}, gold)
    assert _holds([{"field": "customer.attributes.vip", "operator": "eq", "value": True}], {}, gold)
    assert _holds([{"field": "customer.country", "operator": "in", "value": ["FR", "DE"]}], {}, gold)
    assert _holds([{"field": "customer.segments", "operator": "contains", "value": "active"}], {}, gold)
    assert not _holds([{"field": "customer.segments", "operator": "contains", "value": "dormant"}], {}, gold)
    assert not _holds([{"field": "customer.attributes.tier", "operator": "exists"}], {}, EventFacts())
    # the event's own data never stands in for the customer
    assert not _holds([{"field": "customer.country", "operator": "eq", "value": "FR"}], {"customer.country": "FR"})


def test_priority_orders_rules_and_stop_processing_keeps_later_ones_off() -> None:
    always: list[Any] = []
    vip = [{"field": "vip", "operator": "eq", "value": True}]
    rules = [
        _rule(always, rule_id="base", priority=10),
        _rule(vip, rule_id="vip", priority=1, stop=True),
        _rule(always, rule_id="same-priority-later", priority=10),
    ]
    plain = evaluate(rules, [("order", {})])[0]
    assert [m.rule_id for m in plain] == ["base", "same-priority-later"]
    stopped = evaluate(rules, [("order", {"vip": True})])[0]
    assert [m.rule_id for m in stopped] == ["vip"]
    explained = evaluate(rules, [("order", {"vip": True})], explain=True)[0]
    assert [(v.rule_id, v.matched, v.stopped_by) for v in explained] == [
        ("vip", True, None),
        ("base", False, "vip"),
        ("same-priority-later", False, "vip"),
    ]
    assert "stops processing" in explained[0].reason and "rule vip" in explained[1].reason


def test_beneficiary_reads_the_customer_reference_from_the_event() -> None:
    body = validate(
        rq.RuleCreate,
        {
            "program_id": "p",
            "event_type": "signup",
            "actions": [
                {"type": "issue", "amount": {"fixed": "10"}, "beneficiary": {"field": "referrer_id"}},
                {"type": "issue", "amount": {"fixed": "5"}},
            ],
        },
    )
    payload = body.model_dump(mode="json")
    rule = compile_rule("r", "signup", [], payload["actions"], "a", lambda _a: 0)
    (found,) = evaluate([rule], [("signup", {"referrer_id": "cus_1"})])[0]
    assert [(a.amount_minor, a.beneficiary, a.error_code) for a in found.actions] == [
        (10, "cus_1", None),
        (5, None, None),
    ]
    assert found.inputs == {"referrer_id": "cus_1"}
    (missing,) = evaluate([rule], [("signup", {})])[0]
    assert [(a.amount_minor, a.error_code) for a in missing.actions] == [(0, "beneficiary_missing"), (5, None)]
    (wrong,) = evaluate([rule], [("signup", {"referrer_id": 7})], explain=True)[0]
    assert wrong.actions[0].error_code == "beneficiary_missing" and "referrer_id" in wrong.actions[0].reason


def _refused(conditions: list[Any] | None = None, actions: list[Any] | None = None) -> tuple[str, str]:
    body = {
        "program_id": "p",
        "event_type": "order",
        "conditions": conditions or [],
        "actions": actions or [{"type": "issue", "amount": {"fixed": "1"}}],
    }
    with pytest.raises(ServiceError) as caught:
        validate(rq.RuleCreate, body)
    return caught.value.code, str(caught.value.details["field"])


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"field": "a", "operator": "exists"}
    for _ in range(depth - 1):
        node = {"any": [node]}
    return node


def test_bad_rules_name_the_offending_element() -> None:
    ok = {"field": "a", "operator": "exists"}
    assert _refused([ok, ok, {"any": [{"field": "a", "operator": "like", "value": 1}]}]) == (
        "field_invalid",
        "conditions[2].any[0].operator",
    )
    assert _refused([ok, ok, {"any": [{"field": "a", "operator": "in", "value": {"x": 1}}]}]) == (
        "field_invalid",
        "conditions[2].any[0].value",
    )
    assert _refused([{"not": {"field": "a", "operator": "in", "value": ["x", 2]}}]) == (
        "field_invalid",
        "conditions[0].not.value[1]",
    )
    assert _refused([{"field": "a", "operator": "gte", "value": "web"}]) == ("field_invalid", "conditions[0].value")
    assert _refused([{"field": "a", "operator": "between", "value": [5, 1]}]) == (
        "field_invalid",
        "conditions[0].value[1]",
    )
    assert _refused([{"field": "a", "operator": "exists", "value": 1}]) == ("field_invalid", "conditions[0].value")
    for operator in ("starts_with", "ends_with"):  # a string only, named by its element
        assert _refused([{"any": [{"field": "a", "operator": operator, "value": 5}]}]) == (
            "field_invalid",
            "conditions[0].any[0].value",
        )
        assert _refused([{"field": "a", "operator": operator}]) == ("field_required", "conditions[0].value")
        assert _refused([{"field": "a", "operator": operator, "value": "x" * 201}])[1] == "conditions[0].value"
    assert _refused([{"field": "a", "operator": "eq"}]) == ("field_required", "conditions[0].value")
    assert _refused([{"any": []}]) == ("field_invalid", "conditions[0].any")
    long_list = list(range(MAX_CONDITION_LIST + 1))
    assert _refused([{"field": "a", "operator": "in", "value": long_list}]) == ("field_invalid", "conditions[0].value")
    assert _refused([{"field": "a", "operator": "eq", "value": "x" * 201}]) == ("field_invalid", "conditions[0].value")
    validate(
        rq.RuleCreate,
        {
            "program_id": "p",
            "event_type": "o",
            "conditions": [_nested(MAX_CONDITION_DEPTH)],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        },
    )
    code, field = _refused([ok, _nested(MAX_CONDITION_DEPTH + 1)])
    assert code == "field_invalid" and field == "conditions[1]" + ".any[0]" * MAX_CONDITION_DEPTH
    wide = [{"all": [ok] * 20}, {"all": [ok] * 20}, {"all": [ok] * 20}]
    code, field = _refused(wide)
    assert code == "field_invalid" and field == f"conditions[2].all[{MAX_CONDITION_NODES - 43}]"
    beneficiary = {"type": "issue", "amount": {"fixed": "1"}, "beneficiary": {"field": "r", "customer": "x"}}
    assert _refused(actions=[beneficiary]) == ("field_unknown", "actions[0].beneficiary.customer")
    beneficiary = {"type": "issue", "amount": {"fixed": "1"}, "beneficiary": "referrer_id"}
    assert _refused(actions=[beneficiary])[1] == "actions[0].beneficiary"
    beneficiary = {"type": "issue", "amount": {"fixed": "1"}, "beneficiary": {"field": "no spaces"}}
    assert _refused(actions=[beneficiary]) == ("field_invalid", "actions[0].beneficiary.field")
