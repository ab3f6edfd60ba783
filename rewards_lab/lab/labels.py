"""How the lab names a rule wherever it lists one (tables, plots, widgets): one function, so that a rule reads
the same everywhere.

A named rule is its position and its name, `0 · Cashback on orders of 20 or more`; an unnamed one its position,
event type and first condition, `1 · order.completed when amount >= 50 and 1 more`, so that rules of one event
type are told apart. The position is the rule's place in its version as the lab counts it (from 0: `rules[0]`,
`update_rule(0)`, the rules table's index), and the same in the service's simulation reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rewards_lab.contract.rule_requests import ConditionItem, condition_payload
from rewards_lab.domain.conditions import describe_node
from rewards_lab.domain.rules import condition_node

SEPARATOR = " · "


class Listed(Protocol):
    """What a label reads of a rule: a live rule (`contract.resources.Rule`) or a file's (`FileRule`)."""

    @property
    def name(self) -> str | None: ...

    @property
    def event_type(self) -> str: ...

    @property
    def conditions(self) -> Sequence[ConditionItem]: ...


def first_condition(rule: Listed) -> str:
    """`when amount >= 20`, `when amount >= 20 and 2 more`, or "" for a rule without conditions."""
    if not rule.conditions:
        return ""
    first = describe_node(condition_node(condition_payload(rule.conditions[0])))
    more = len(rule.conditions) - 1
    return f"when {first}" + (f" and {more} more" if more else "")


def rule_label(position: int, rule: Listed) -> str:
    """`0 · Double points on orders` when the rule is named, else `0 · order.completed when amount >= 20`."""
    if rule.name:
        return f"{position}{SEPARATOR}{rule.name}"
    condition = first_condition(rule)
    return f"{position}{SEPARATOR}{rule.event_type}" + (f" {condition}" if condition else "")


def rule_labels(rules: Sequence[Listed]) -> dict[int, str]:
    """Every rule's label by its position."""
    return {position: rule_label(position, rule) for position, rule in enumerate(rules)}
