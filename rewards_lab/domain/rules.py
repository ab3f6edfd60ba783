"""Rule evaluation, one event at a time: the live semantics the replay engine's SQL must reproduce.

A rule matches when the event's type is the rule's `event_type` and every condition holds. A condition reads one
field of the event data; a field that is missing or not a JSON number makes the condition false. Each action then
issues `fixed`, or `data[per] * rate` rounded toward zero to the asset's decimals; an amount below one minor unit
issues nothing and is not an error. Every verdict carries its reason, so simulation can answer "why (not)".
"""

from __future__ import annotations

import operator as op
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rewards_lab.domain.money import MAX_AMOUNT_MINOR, as_number, format_amount, parse_amount, reward_minor

COMPARATORS: dict[str, Callable[[Decimal, Decimal], bool]] = {
    "gte": op.ge,
    "gt": op.gt,
    "lte": op.le,
    "lt": op.lt,
    "eq": op.eq,
    "neq": op.ne,
}
SYMBOLS = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "==", "neq": "!="}


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    field: str
    operator: str
    value: Decimal


@dataclass(frozen=True, slots=True)
class ActionSpec:
    asset_id: str
    decimals: int
    fixed_minor: int | None = None
    per: str | None = None
    rate: Decimal | None = None


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule ready to evaluate: assets resolved, fixed amounts already in minor units."""

    rule_id: str
    event_type: str
    conditions: tuple[ConditionSpec, ...]
    actions: tuple[ActionSpec, ...]


@dataclass(frozen=True, slots=True)
class ConditionVerdict:
    field: str
    operator: str
    threshold: Decimal
    value_read: Any
    verdict: bool
    reason: str


@dataclass(frozen=True, slots=True)
class ActionVerdict:
    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    reason: str
    inputs: dict[str, Any]
    error_code: str | None = None  # set when the action calls for an amount the ledger must refuse

    @property
    def issues(self) -> bool:
        return self.amount_minor > 0


@dataclass(frozen=True, slots=True)
class RuleVerdict:
    rule_id: str
    event_type: str
    matched: bool
    reason: str
    conditions: tuple[ConditionVerdict, ...]
    actions: tuple[ActionVerdict, ...] = field(default=())

    def inputs(self) -> dict[str, Any]:
        """Every value the rule read (its provenance): field -> value as read."""
        values: dict[str, Any] = {c.field: c.value_read for c in self.conditions}
        for action in self.actions:
            values.update(action.inputs)
        return values


def read_value(data: Mapping[str, Any], name: str) -> tuple[Decimal | None, Any, str]:
    """(number, value as recorded, why not a number). Numbers are recorded as exact decimal strings."""
    if name not in data:
        return None, None, f"field '{name}' is missing"
    raw = data[name]
    number = as_number(raw)
    if number is None:
        return None, raw, f"field '{name}' is not a number ({type(raw).__name__})"
    return number, str(number), ""


def evaluate_condition(condition: ConditionSpec, data: Mapping[str, Any]) -> ConditionVerdict:
    number, recorded, why_not = read_value(data, condition.field)
    if number is None:
        return ConditionVerdict(condition.field, condition.operator, condition.value, recorded, False, why_not)
    verdict = COMPARATORS[condition.operator](number, condition.value)
    symbol = SYMBOLS[condition.operator]
    relation = "holds" if verdict else "does not hold"
    reason = f"{condition.field} = {number} {symbol} {condition.value} {relation}"
    return ConditionVerdict(condition.field, condition.operator, condition.value, recorded, verdict, reason)


def evaluate_action(index: int, action: ActionSpec, data: Mapping[str, Any]) -> ActionVerdict:
    if action.fixed_minor is not None:
        amount = format_amount(action.fixed_minor, action.decimals)
        return ActionVerdict(index, action.asset_id, action.decimals, action.fixed_minor, f"fixed {amount}", {})
    assert action.per is not None and action.rate is not None
    number, recorded, why_not = read_value(data, action.per)
    inputs = {action.per: recorded}
    if number is None:
        return ActionVerdict(index, action.asset_id, action.decimals, 0, f"issues nothing: {why_not}", inputs)
    minor = reward_minor(number, action.rate, action.decimals)
    product = f"{action.per} = {number} x rate {action.rate}"
    if minor > MAX_AMOUNT_MINOR:
        reason = f"refused: {product} is more than the ledger can hold in one amount"
        return ActionVerdict(index, action.asset_id, action.decimals, 0, reason, inputs, "amount_too_large")
    if minor <= 0:
        reason = f"issues nothing: {product} rounds down to less than one minor unit"
        return ActionVerdict(index, action.asset_id, action.decimals, 0, reason, inputs)
    reason = f"{product} = {format_amount(minor, action.decimals)} (rounded toward zero)"
    return ActionVerdict(index, action.asset_id, action.decimals, minor, reason, inputs)


def evaluate_rule(rule: RuleSpec, event_type: str, data: Mapping[str, Any]) -> RuleVerdict:
    if rule.event_type != event_type:
        reason = f"event type '{event_type}' is not the rule's '{rule.event_type}'"
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, ())
    conditions = tuple(evaluate_condition(c, data) for c in rule.conditions)
    failed = [c for c in conditions if not c.verdict]
    if failed:
        reason = "condition failed: " + "; ".join(c.reason for c in failed)
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, conditions)
    actions = tuple(evaluate_action(i, a, data) for i, a in enumerate(rule.actions))
    reason = "all conditions hold" if conditions else "the rule has no conditions"
    return RuleVerdict(rule.rule_id, rule.event_type, True, reason, conditions, actions)


def evaluate_rules(rules: Sequence[RuleSpec], event_type: str, data: Mapping[str, Any]) -> list[RuleVerdict]:
    return [evaluate_rule(rule, event_type, data) for rule in rules]


def compile_rule(
    rule_id: str,
    event_type: str,
    conditions: Sequence[Mapping[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    default_asset_id: str,
    decimals_of: Callable[[str], int],
) -> RuleSpec:
    """A stored rule (its JSON form) as a RuleSpec. Raises ServiceError for amounts the asset cannot hold."""
    condition_specs = tuple(
        ConditionSpec(str(c["field"]), str(c["operator"]), Decimal(str(c["value"]))) for c in conditions
    )
    action_specs = []
    for index, action in enumerate(actions):
        asset_id = action.get("asset_id") or default_asset_id
        decimals = decimals_of(asset_id)
        amount = action["amount"]
        if "fixed" in amount:
            minor = parse_amount(amount["fixed"], decimals, f"actions[{index}].amount.fixed")
            action_specs.append(ActionSpec(asset_id, decimals, fixed_minor=minor))
        else:
            rate = Decimal(str(amount["rate"]))
            action_specs.append(ActionSpec(asset_id, decimals, per=str(amount["per"]), rate=rate))
    return RuleSpec(rule_id, event_type, condition_specs, tuple(action_specs))
