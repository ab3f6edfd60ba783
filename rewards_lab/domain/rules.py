"""Rules ready to evaluate, and the primitives that give them their meaning: reading a field (`read`), testing a
condition (`ConditionSpec.holds`, in `conditions`), computing an action's amount (`ActionSpec.outcome`).
`rule_evaluation.evaluate` is built on these alone, so a new operator, field form or amount is written here once for
the live engine; the replay compiler (`replay/compiler.py`) is the only other implementation of these semantics,
held equal by the differential tests.

A rule matches when the event's type is the rule's `event_type` and every condition holds (`conditions`). Rules
apply in order of `priority` (lower first), ties in their order of creation; a matching rule with `stop_processing`
keeps the programme's later rules from applying to that event. Each action then issues `fixed`, or
`data[per] * rate` rounded toward zero to the asset's decimals; an amount below one minor unit issues nothing and is
not an error; an amount no ledger amount can hold is refused (`amount_too_large`). An action with a `beneficiary`
issues to the customer named by that field of the event (a string) instead of the event's customer; when the field
holds no string the action is refused (`beneficiary_missing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rewards_lab.contract.rule_requests import condition_value
from rewards_lab.domain.conditions import (
    NO_FACTS,
    ConditionNode,
    ConditionSpec,
    EventFacts,
    GroupSpec,
    leaves,
    read_value,
    source_of,
)
from rewards_lab.domain.limits import Cap, Limit, limit_caps
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, parse_amount, reward_minor

BENEFICIARY_MISSING = "beneficiary_missing"
ORIGINAL_MISSING = "original_missing"
FRACTION_INVALID = "fraction_invalid"


@dataclass(frozen=True, slots=True)
class ActionSpec:
    asset_id: str
    decimals: int
    fixed_minor: int | None = None
    per: str | None = None
    rate: Decimal | None = None
    beneficiary: str | None = None  # the field naming the customer to reward (None: the event's customer)
    # A reverse action (issue 18): the field naming the original event, and its fraction: a constant, or `per`
    # (this event's field) over `fraction_of` (the original's field); neither: the whole of what remains.
    reverse_of: str | None = None
    fraction: Decimal | None = None
    fraction_of: str | None = None
    any_customer: bool = False  # a refund by another customer than the original's takes back too

    @property
    def reference_field(self) -> str | None:
        """The field whose value the action needs per event: its beneficiary, or a reversal's original."""
        return self.beneficiary or self.reverse_of

    def outcome(self, index: int, number: Decimal | None, beneficiary: Any = None) -> ActionOutcome:
        """What the action calls for, given the number of its `per` field (ignored for a fixed amount) and the
        value of its reference field (the beneficiary's or, for a reversal, the original's; ignored without)."""
        if self.reverse_of is not None:
            return self._reversal(index, number, beneficiary)
        if self.fixed_minor is not None:
            found = ActionOutcome(index, self.asset_id, self.decimals, self.fixed_minor)
        elif number is None:
            found = ActionOutcome(index, self.asset_id, self.decimals, 0)
        else:
            assert self.rate is not None
            minor = reward_minor(number, self.rate, self.decimals)
            if minor > MAX_AMOUNT_MINOR:  # the reason names the number as written (42.5 and 42.50 differ here)
                reason = f"refused: {self.product(number)} is more than the ledger can hold in one amount"
                return ActionOutcome(index, self.asset_id, self.decimals, 0, "amount_too_large", reason)
            found = ActionOutcome(index, self.asset_id, self.decimals, max(minor, 0))
        if self.beneficiary is None or not found.issues:
            return found
        if not isinstance(beneficiary, str) or not beneficiary:
            reason = f"refused: the beneficiary field '{self.beneficiary}' {_no_customer(beneficiary)}"
            return ActionOutcome(index, self.asset_id, self.decimals, 0, BENEFICIARY_MISSING, reason)
        return ActionOutcome(index, self.asset_id, self.decimals, found.amount_minor, beneficiary=beneficiary)

    def product(self, number: Decimal) -> str:
        return f"{self.per} = {number} x rate {self.rate}"

    def _reversal(self, index: int, number: Decimal | None, original: Any) -> ActionOutcome:
        if not isinstance(original, str) or not original:
            reason = f"refused: the original field '{self.reverse_of}' {_no_event(original)}"
            return ActionOutcome(index, self.asset_id, self.decimals, 0, ORIGINAL_MISSING, reason)
        if self.fraction_of is not None and (number is None or number < 0):
            reason = f"refused: the fraction's field '{self.per}' {_not_a_share(number)}"
            return ActionOutcome(index, self.asset_id, self.decimals, 0, FRACTION_INVALID, reason)
        numerator = number if self.fraction_of else None
        call = ReversalCall(original, self.fraction, numerator, self.fraction_of, self.any_customer)
        return ActionOutcome(index, self.asset_id, self.decimals, 0, reversal=call)


def _no_event(value: Any) -> str:
    if value is None:
        return "is missing"
    return f"holds no event reference ({type(value).__name__})"


def _not_a_share(number: Decimal | None) -> str:
    return "is missing or not a number" if number is None else f"is negative ({number})"


@dataclass(frozen=True, slots=True)
class ReversalCall:
    """What a matched reverse action asks for: take back from the event whose external_event_id is `original`,
    a constant `fraction` of each reward, or `numerator` over the original's `of` field, or (neither) all that
    remains."""

    original: str
    fraction: Decimal | None = None
    numerator: Decimal | None = None
    of: str | None = None
    any_customer: bool = False  # take back even when the refund's customer is not the original's


def _no_customer(value: Any) -> str:
    if value is None:
        return "is missing"
    return f"holds no customer reference ({type(value).__name__})"


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What one action of a matched rule calls for."""

    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    error_code: str | None = None  # set when the action must be refused (`amount_too_large`, `beneficiary_missing`)
    reason: str = ""  # kept only for a refusal (it becomes the error's message)
    beneficiary: str | None = None  # the customer reference to reward instead of the event's customer
    reversal: ReversalCall | None = None  # a reverse action's call (it issues nothing itself)

    @property
    def issues(self) -> bool:
        return self.amount_minor > 0


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule ready to evaluate: assets resolved, fixed amounts already in minor units."""

    rule_id: str
    event_type: str
    conditions: tuple[ConditionNode, ...]
    actions: tuple[ActionSpec, ...]
    priority: int = 0
    stop_processing: bool = False
    timezone: str = "UTC"  # the programme's: time fields are read in it
    limits: tuple[Cap, ...] = ()  # caps on what the rule gives one customer per period (domain.limits)
    name: str | None = None  # the rule's short human name, if it has one
    position: int | None = None  # its place in its version's list of rules (from 0), when known

    @property
    def title(self) -> str:
        """How a reason names the rule: its name, else its place (numbered from 1) and event type
        (`rule 1 (order.completed)`), its id only when neither is known."""
        return rule_title(self.name, self.position, self.event_type, self.rule_id)

    def fields(self) -> list[str]:
        """Every field path the rule reads, in order: conditions, amounts, beneficiaries."""
        names = [leaf.field for leaf in leaves(self.conditions)]
        names += [a.per for a in self.actions if a.per is not None]
        names += [a.reference_field for a in self.actions if a.reference_field is not None]
        return list(dict.fromkeys(names))

    def reads(self, source: str) -> bool:
        """Whether the rule reads fields of a source ("time", "customer", "data")."""
        return any(source_of(name) == source for name in self.fields())


def rule_title(name: str | None, position: int | None, event_type: str, rule_id: str = "") -> str:
    """A rule as a person reads it: `rule "Double points"`, else `rule 1 (order.completed)` for the rule at
    position 0 (numbered from 1, as the lab shows rules), else the id."""
    if name:
        return f'rule "{name}"'
    if position is not None:
        return f"rule {position + 1} ({event_type})"
    return f"rule {rule_id}"


def in_order(rules: Sequence[RuleSpec]) -> list[RuleSpec]:
    """Rules in the order they apply: by priority (lower first), ties in the given (creation) order."""
    if all(rule.priority == rules[0].priority for rule in rules):
        return list(rules)
    return sorted(rules, key=lambda rule: rule.priority)


def read(data: Mapping[str, Any], name: str, facts: EventFacts = NO_FACTS, timezone: str = "UTC") -> Any:
    """A field as rules read it (normalised: numbers are exact Decimals; None when absent)."""
    return read_value(data, facts, name, timezone)


def number_of(value: Any) -> Decimal | None:
    """The number a value read holds, or None (an amount's `per` field must be a number)."""
    return value if isinstance(value, Decimal) and not isinstance(value, bool) else None


def why_not_a_number(name: str, value: Any) -> str:
    """Why a field read holds no number (for an explanation)."""
    if value is None:
        return f"field '{name}' is missing"
    return f"field '{name}' is not a number ({type(value).__name__})"


def condition_node(item: Mapping[str, Any]) -> ConditionNode:
    """A stored condition (its JSON form) as a node."""
    for kind in ("any", "all"):
        if kind in item and "field" not in item:
            return GroupSpec(kind, tuple(condition_node(part) for part in item[kind]))
    if "not" in item and "field" not in item:
        return GroupSpec("not", (condition_node(item["not"]),))
    operator = str(item["operator"])
    return ConditionSpec(str(item["field"]), operator, condition_value(operator, item.get("value")))


def compile_rule(
    rule_id: str,
    event_type: str,
    conditions: Sequence[Mapping[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    default_asset_id: str,
    decimals_of: Callable[[str], int],
    *,
    priority: int = 0,
    stop_processing: bool = False,
    timezone: str = "UTC",
    limits: Sequence[Limit] = (),
    name: str | None = None,
    position: int | None = None,
) -> RuleSpec:
    """A stored rule (its JSON form) as a RuleSpec. Raises ServiceError for amounts the asset cannot hold."""
    nodes = tuple(condition_node(c) for c in conditions)
    action_specs = []
    for index, action in enumerate(actions):
        asset_id = action.get("asset_id") or default_asset_id
        decimals = decimals_of(asset_id)
        if action.get("type") == "reverse":
            action_specs.append(reverse_spec(action, asset_id, decimals))
            continue
        amount = action["amount"]
        beneficiary = (action.get("beneficiary") or {}).get("field")
        if "fixed" in amount:
            minor = parse_amount(amount["fixed"], decimals, f"actions[{index}].amount.fixed")
            action_specs.append(ActionSpec(asset_id, decimals, fixed_minor=minor, beneficiary=beneficiary))
        else:
            rate = Decimal(str(amount["rate"]))
            action_specs.append(
                ActionSpec(asset_id, decimals, per=str(amount["per"]), rate=rate, beneficiary=beneficiary)
            )
    caps = limit_caps(limits, "rule", decimals_of(default_asset_id)) if limits else ()
    return RuleSpec(
        rule_id, event_type, nodes, tuple(action_specs), priority, stop_processing, timezone, caps, name, position
    )


def reverse_spec(action: Mapping[str, Any], asset_id: str, decimals: int) -> ActionSpec:
    """A stored reverse action as an ActionSpec: its fraction's field is read as `per`."""
    fraction = action.get("fraction")
    original = str(action["original"]["field"])
    anyone = bool(action.get("any_customer", False))
    if isinstance(fraction, Mapping):
        of = str(fraction["of"])
        return ActionSpec(
            asset_id, decimals, per=str(fraction["field"]), reverse_of=original, fraction_of=of, any_customer=anyone
        )
    constant = None if fraction is None else Decimal(str(fraction))
    return ActionSpec(asset_id, decimals, reverse_of=original, fraction=constant, any_customer=anyone)
