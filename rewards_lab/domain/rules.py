"""Rules ready to evaluate, and the primitives that give them their meaning: reading a field (`read`), testing a
condition (`ConditionSpec.holds`, in `conditions`: its operator's entry in `contract/operators.py`), computing what
an action calls for (`ActionSpec.outcome`: its type's entry in `domain/actions.py`). `rule_evaluation.evaluate` is
built on these alone; the replay compiler (`replay/compiler.py`) writes the same entries' SQL forms, held equal by
the differential tests.

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
from typing import Any

from rewards_lab.contract.rule_requests import condition_value
from rewards_lab.domain.actions import BENEFICIARY_MISSING as BENEFICIARY_MISSING
from rewards_lab.domain.actions import FRACTION_INVALID as FRACTION_INVALID
from rewards_lab.domain.actions import ORIGINAL_MISSING as ORIGINAL_MISSING
from rewards_lab.domain.actions import ActionOutcome as ActionOutcome
from rewards_lab.domain.actions import ActionSpec as ActionSpec
from rewards_lab.domain.actions import ReversalCall as ReversalCall
from rewards_lab.domain.actions import action_kind
from rewards_lab.domain.actions import number_of as number_of
from rewards_lab.domain.actions import reverse_spec as reverse_spec
from rewards_lab.domain.actions import why_not_a_number as why_not_a_number
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
        action_specs.append(action_kind(action).build(action, asset_id, decimals_of(asset_id), f"actions[{index}]"))
    caps = limit_caps(limits, "rule", decimals_of(default_asset_id)) if limits else ()
    return RuleSpec(
        rule_id, event_type, nodes, tuple(action_specs), priority, stop_processing, timezone, caps, name, position
    )
