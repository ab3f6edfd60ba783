"""Rule evaluation for a whole batch of events at once, column by column: the event worker's form of
`rules.evaluate_rules`.

The worker needs, per event, only the rules that matched, the values each of them read (the provenance) and
each action's amount or refusal; not the reasons that explain every verdict (simulation's "why (not)"), which
cost more than the evaluation itself. Here the events are grouped by type; each field a rule reads is read once
per group (a column of (number, value as recorded) pairs, `rules.read_value`'s rule); each condition filters the
rows still matching with one comparison per row; each valued action computes an amount once per distinct value
of its column. Numbers stay exact Decimals rather than numpy or Arrow columns: event data may hold any number of
digits and any exponent (19.999999999999999999 against a threshold of 20, 1E+999999999), which floats or
decimal128 cannot hold exactly, and the rules' boundaries must stay exact.

`tests/test_rules_batch.py` holds the result equal to `evaluate_rules` on random rules and events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rewards_lab.domain.money import MAX_AMOUNT_MINOR, as_number, reward_minor
from rewards_lab.domain.rules import COMPARATORS, ActionSpec, RuleSpec, evaluate_action

_Cell = tuple[Decimal | None, Any]  # (the number, the value as recorded in the provenance)
_MISSING: _Cell = (None, None)


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What one action of a matched rule calls for (`rules.ActionVerdict` without its reason and inputs)."""

    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    error_code: str | None = None  # set when the ledger must refuse the amount (`amount_too_large`)
    reason: str = ""  # the verdict's reason, kept only for a refusal (it becomes the error's message)

    @property
    def issues(self) -> bool:
        return self.amount_minor > 0


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """A rule that matched an event: the values it read (`RuleVerdict.inputs()`) and its actions' outcomes."""

    rule_id: str
    inputs: dict[str, Any]
    actions: tuple[ActionOutcome, ...]


def _cell(data: Mapping[str, Any], name: str) -> _Cell:
    """`rules.read_value` without the reason."""
    if name not in data:
        return _MISSING
    raw = data[name]
    number = as_number(raw)
    return (None, raw) if number is None else (number, str(number))


def _valued(index: int, action: ActionSpec, cell: _Cell, known: dict[Decimal, ActionOutcome]) -> ActionOutcome:
    """`evaluate_action` on a valued action, its amount computed once per distinct number of the batch."""
    number = cell[0]
    if number is None:
        return ActionOutcome(index, action.asset_id, action.decimals, 0)
    outcome = known.get(number)
    if outcome is None:
        assert action.rate is not None
        minor = reward_minor(number, action.rate, action.decimals)
        if minor > MAX_AMOUNT_MINOR:  # the reason names the number as written: never shared between rows
            verdict = evaluate_action(index, action, {str(action.per): number})
            return ActionOutcome(index, action.asset_id, action.decimals, 0, verdict.error_code, verdict.reason)
        outcome = ActionOutcome(index, action.asset_id, action.decimals, max(minor, 0))
        known[number] = outcome  # equal numbers (42.5, 42.50) have equal amounts
    return outcome


def match_rules(rules: Sequence[RuleSpec], events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[RuleMatch]]:
    """Per event (type, data), the rules that match it, in the order of `rules`: for each event,
    `[verdict for verdict in evaluate_rules(rules, type, data) if verdict.matched]`, as RuleMatch."""
    matches: list[list[RuleMatch]] = [[] for _ in events]
    groups: dict[str, list[int]] = {}
    for index, (event_type, _) in enumerate(events):
        groups.setdefault(event_type, []).append(index)
    columns: dict[tuple[str, str], list[_Cell]] = {}

    def column(event_type: str, name: str) -> list[_Cell]:
        found = columns.get((event_type, name))
        if found is None:
            found = columns[(event_type, name)] = [_cell(events[i][1], name) for i in groups[event_type]]
        return found

    for rule in rules:
        if rule.event_type not in groups:
            continue
        rows: Sequence[int] = range(len(groups[rule.event_type]))  # positions in the type's group
        for condition in rule.conditions:
            cells = column(rule.event_type, condition.field)
            compare, threshold = COMPARATORS[condition.operator], condition.value
            rows = [p for p in rows if (n := cells[p][0]) is not None and compare(n, threshold)]
            if not rows:
                break
        if not rows:
            continue
        read = [(c.field, column(rule.event_type, c.field)) for c in rule.conditions]
        read += [(str(a.per), column(rule.event_type, str(a.per))) for a in rule.actions if a.fixed_minor is None]
        fixed = {
            i: ActionOutcome(i, a.asset_id, a.decimals, a.fixed_minor)
            for i, a in enumerate(rule.actions)
            if a.fixed_minor is not None
        }
        known: list[dict[Decimal, ActionOutcome]] = [{} for _ in rule.actions]
        valued = [(i, a, column(rule.event_type, str(a.per))) for i, a in enumerate(rule.actions) if i not in fixed]
        group = groups[rule.event_type]
        for p in rows:
            outcomes = dict(fixed)
            for i, action, cells in valued:
                outcomes[i] = _valued(i, action, cells[p], known[i])
            inputs = {name: cells[p][1] for name, cells in read}
            actions = tuple(outcomes[i] for i in range(len(rule.actions)))
            matches[group[p]].append(RuleMatch(rule.rule_id, inputs, actions))
    return matches
