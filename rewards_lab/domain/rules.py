"""Rules ready to evaluate, and the three primitives that give them their meaning: reading a field, testing a
condition, computing an action's amount. `rule_evaluation.evaluate` is built on these alone, so a new operator,
field form or amount is written here once for the live engine; the replay compiler (`replay/compiler.py`) is the only
other implementation of these semantics, held equal by the differential tests.

A rule matches when the event's type is the rule's `event_type` and every condition holds. A condition reads one
field of the event data; a field that is missing or not a JSON number makes the condition false. Each action then
issues `fixed`, or `data[per] * rate` rounded toward zero to the asset's decimals; an amount below one minor unit
issues nothing and is not an error; an amount no ledger amount can hold is refused (`amount_too_large`).
"""

from __future__ import annotations

import operator as op
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rewards_lab.contract.amounts import as_number
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, parse_amount, reward_minor

Cell = tuple[Decimal | None, Any]  # a field as read: (its number or None, the value as recorded in the provenance)
MISSING: Cell = (None, None)

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

    def holds(self, number: Decimal | None) -> bool:
        """Whether the condition holds for the field's number (None: missing or not a number, never holds)."""
        return number is not None and COMPARATORS[self.operator](number, self.value)


@dataclass(frozen=True, slots=True)
class ActionSpec:
    asset_id: str
    decimals: int
    fixed_minor: int | None = None
    per: str | None = None
    rate: Decimal | None = None

    def outcome(self, index: int, number: Decimal | None) -> ActionOutcome:
        """What the action calls for, given the number of its `per` field (ignored for a fixed amount)."""
        if self.fixed_minor is not None:
            return ActionOutcome(index, self.asset_id, self.decimals, self.fixed_minor)
        if number is None:
            return ActionOutcome(index, self.asset_id, self.decimals, 0)
        assert self.rate is not None
        minor = reward_minor(number, self.rate, self.decimals)
        if minor > MAX_AMOUNT_MINOR:  # the reason names the number as written (42.5 and 42.50 differ here)
            reason = f"refused: {self.product(number)} is more than the ledger can hold in one amount"
            return ActionOutcome(index, self.asset_id, self.decimals, 0, "amount_too_large", reason)
        return ActionOutcome(index, self.asset_id, self.decimals, max(minor, 0))

    def product(self, number: Decimal) -> str:
        return f"{self.per} = {number} x rate {self.rate}"


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What one action of a matched rule calls for."""

    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    error_code: str | None = None  # set when the ledger must refuse the amount (`amount_too_large`)
    reason: str = ""  # kept only for a refusal (it becomes the error's message)

    @property
    def issues(self) -> bool:
        return self.amount_minor > 0


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule ready to evaluate: assets resolved, fixed amounts already in minor units."""

    rule_id: str
    event_type: str
    conditions: tuple[ConditionSpec, ...]
    actions: tuple[ActionSpec, ...]


def read_field(data: Mapping[str, Any], name: str) -> Cell:
    """A field of the event data as rules read it. Numbers are recorded as exact decimal strings."""
    if name not in data:
        return MISSING
    raw = data[name]
    number = as_number(raw)
    return (None, raw) if number is None else (number, str(number))


def why_not_a_number(data: Mapping[str, Any], name: str) -> str:
    """Why `read_field` found no number in the field (for an explanation)."""
    if name not in data:
        return f"field '{name}' is missing"
    return f"field '{name}' is not a number ({type(data[name]).__name__})"


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
