"""How the lab names a rule wherever it lists one (tables, plots, widgets): one function, so that a rule reads
the same everywhere.

A named rule is its number and its name, `1 · Cashback on orders of 20 or more`; an unnamed one its number,
event type and first condition, `2 · order.completed when amount >= 50 and 1 more`, so that rules of one event
type are told apart. Rules are numbered from 1 for people (the widgets' "rule 1", the plots, the service's
simulation reasons); code keeps positions from 0 (`rules[0]`, `update_rule(0)`).
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


def rule_number(position: int) -> str:
    """`rule 1` for the rule at position 0: how a sentence or a diff row refers to a rule."""
    return f"rule {position + 1}"


def rule_label(position: int, rule: Listed) -> str:
    """`1 · Double points on orders` for the rule at position 0 when it is named, else
    `1 · order.completed when amount >= 20`."""
    number = position + 1
    if rule.name:
        return f"{number}{SEPARATOR}{rule.name}"
    condition = first_condition(rule)
    return f"{number}{SEPARATOR}{rule.event_type}" + (f" {condition}" if condition else "")


def rule_labels(rules: Sequence[Listed]) -> dict[int, str]:
    """Every rule's label by its position."""
    return {position: rule_label(position, rule) for position, rule in enumerate(rules)}
