"""Rule evaluation for the live engine: one API, `evaluate`, with the reasons optional.

Without `explain` (the event worker) it returns, per event, only the rules that matched, with the values they read
(the provenance) and each action's amount or refusal, computed column by column over the batch: the events are
grouped by type, each field a rule reads is read once per group, each condition filters the rows still matching,
and each valued action computes its amount once per distinct number. With `explain` (simulation, the lab, push
verification) it returns every rule's verdict for every event, with the reason of each condition and action, so a
designer can ask "why (not)".

Both forms are built only on the primitives of `rules` (`read_field`, `ConditionSpec.holds`,
`ActionSpec.outcome`), so they cannot disagree on what a rule means; `tests/test_rule_evaluation.py` holds them
equal on random rules and events. Numbers stay exact Decimals: event data may hold any number of digits and any
exponent, which floats or decimal128 cannot hold exactly, and the rules' boundaries must stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, overload

from rewards_lab.domain.money import format_amount
from rewards_lab.domain.rules import (
    SYMBOLS,
    ActionOutcome,
    ActionSpec,
    Cell,
    ConditionSpec,
    RuleSpec,
    read_field,
    why_not_a_number,
)

Event = tuple[str, Mapping[str, Any]]  # (type, data)


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """A rule that matched an event: the values it read and its actions' outcomes."""

    rule_id: str
    inputs: dict[str, Any]
    actions: tuple[ActionOutcome, ...]


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


@overload
def evaluate(rules: Sequence[RuleSpec], events: Sequence[Event]) -> list[list[RuleMatch]]: ...
@overload
def evaluate(
    rules: Sequence[RuleSpec], events: Sequence[Event], *, explain: Literal[False]
) -> list[list[RuleMatch]]: ...
@overload
def evaluate(
    rules: Sequence[RuleSpec], events: Sequence[Event], *, explain: Literal[True]
) -> list[list[RuleVerdict]]: ...
def evaluate(
    rules: Sequence[RuleSpec], events: Sequence[Event], *, explain: bool = False
) -> list[list[RuleMatch]] | list[list[RuleVerdict]]:
    """Per event (type, data), in the order of `rules`: the rules that match it (`RuleMatch`), or with `explain`
    every rule's verdict with its reasons (`RuleVerdict`; the matched ones carry the same values and amounts)."""
    if explain:
        return [[_explain_rule(rule, event_type, data) for rule in rules] for event_type, data in events]
    return _match(rules, events)


# the worker's form: matched rules only, column by column --------------------------------------------------
def _match(rules: Sequence[RuleSpec], events: Sequence[Event]) -> list[list[RuleMatch]]:
    matches: list[list[RuleMatch]] = [[] for _ in events]
    groups: dict[str, list[int]] = {}
    for index, (event_type, _) in enumerate(events):
        groups.setdefault(event_type, []).append(index)
    columns: dict[tuple[str, str], list[Cell]] = {}

    def column(event_type: str, name: str) -> list[Cell]:
        found = columns.get((event_type, name))
        if found is None:
            found = columns[(event_type, name)] = [read_field(events[i][1], name) for i in groups[event_type]]
        return found

    for rule in rules:
        if rule.event_type not in groups:
            continue
        rows: Sequence[int] = range(len(groups[rule.event_type]))  # positions in the type's group
        for condition in rule.conditions:
            cells, holds = column(rule.event_type, condition.field), condition.holds
            rows = [p for p in rows if holds(cells[p][0])]
            if not rows:
                break
        if not rows:
            continue
        read = [(c.field, column(rule.event_type, c.field)) for c in rule.conditions]
        read += [(str(a.per), column(rule.event_type, str(a.per))) for a in rule.actions if a.fixed_minor is None]
        valued = [(i, a, column(rule.event_type, str(a.per))) for i, a in enumerate(rule.actions) if a.per]
        fixed = {i: a.outcome(i, None) for i, a in enumerate(rule.actions) if a.fixed_minor is not None}
        known: list[dict[Decimal, ActionOutcome]] = [{} for _ in rule.actions]
        group = groups[rule.event_type]
        for p in rows:
            outcomes = dict(fixed)
            for i, action, cells in valued:
                outcomes[i] = _once_per_number(i, action, cells[p][0], known[i])
            inputs = {name: cells[p][1] for name, cells in read}
            actions = tuple(outcomes[i] for i in range(len(rule.actions)))
            matches[group[p]].append(RuleMatch(rule.rule_id, inputs, actions))
    return matches


def _once_per_number(
    index: int, action: ActionSpec, number: Decimal | None, known: dict[Decimal, ActionOutcome]
) -> ActionOutcome:
    """`action.outcome`, computed once per distinct number of the batch (equal numbers, such as 42.5 and 42.50,
    have equal amounts; a refusal names the number as written, so it is never shared)."""
    if number is None:
        return action.outcome(index, None)
    outcome = known.get(number)
    if outcome is None:
        outcome = action.outcome(index, number)
        if outcome.error_code is None:
            known[number] = outcome
    return outcome


# the explained form: every rule, with reasons -------------------------------------------------------------
def _explain_rule(rule: RuleSpec, event_type: str, data: Mapping[str, Any]) -> RuleVerdict:
    if rule.event_type != event_type:
        reason = f"event type '{event_type}' is not the rule's '{rule.event_type}'"
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, ())
    conditions = tuple(_explain_condition(c, data) for c in rule.conditions)
    failed = [c for c in conditions if not c.verdict]
    if failed:
        reason = "condition failed: " + "; ".join(c.reason for c in failed)
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, conditions)
    actions = tuple(_explain_action(i, a, data) for i, a in enumerate(rule.actions))
    reason = "all conditions hold" if conditions else "the rule has no conditions"
    return RuleVerdict(rule.rule_id, rule.event_type, True, reason, conditions, actions)


def _explain_condition(condition: ConditionSpec, data: Mapping[str, Any]) -> ConditionVerdict:
    number, recorded = read_field(data, condition.field)
    verdict = condition.holds(number)
    if number is None:
        reason = why_not_a_number(data, condition.field)
    else:
        relation = "holds" if verdict else "does not hold"
        reason = f"{condition.field} = {number} {SYMBOLS[condition.operator]} {condition.value} {relation}"
    return ConditionVerdict(condition.field, condition.operator, condition.value, recorded, verdict, reason)


def _explain_action(index: int, action: ActionSpec, data: Mapping[str, Any]) -> ActionVerdict:
    if action.fixed_minor is not None:
        reason = f"fixed {format_amount(action.fixed_minor, action.decimals)}"
        return ActionVerdict(index, action.asset_id, action.decimals, action.fixed_minor, reason, {})
    per = str(action.per)
    number, recorded = read_field(data, per)
    outcome = action.outcome(index, number)
    if number is None:
        reason = f"issues nothing: {why_not_a_number(data, per)}"
    elif outcome.error_code is not None:
        reason = outcome.reason
    elif not outcome.issues:
        reason = f"issues nothing: {action.product(number)} rounds down to less than one minor unit"
    else:
        reason = (
            f"{action.product(number)} = {format_amount(outcome.amount_minor, action.decimals)} (rounded toward zero)"
        )
    inputs = {per: recorded}
    return ActionVerdict(
        index, action.asset_id, action.decimals, outcome.amount_minor, reason, inputs, outcome.error_code
    )
