"""Rule evaluation for the live engine: one API, `evaluate`, with the reasons optional.

Without `explain` (the event worker) it returns, per event, only the rules that matched, with the values they read
(the provenance) and each action's amount or refusal, computed column by column over the batch: the events are
grouped by type, each field a rule reads is read once per group, each condition filters the rows still matching,
and each valued action computes its amount once per distinct number. With `explain` (simulation, the lab, push
verification) it returns every rule's verdict for every event, with the reason of each condition, group, action
and priority stop, so a designer can ask "why (not)".

Both forms apply the rules in the order of `rules.in_order` (priority, then creation) and are built only on the
primitives of `rules` and `conditions` (`read`, `ConditionSpec.holds`, `ActionSpec.outcome`), so they cannot
disagree on what a rule means; `tests/domain/test_rule_evaluation.py` holds them equal on random rules and events.
Numbers stay exact Decimals: event data may hold any number of digits and any exponent, which floats or decimal128
cannot hold exactly, and the rules' boundaries must stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, overload

from rewards_lab.domain.conditions import (
    NO_FACTS,
    ConditionNode,
    ConditionSpec,
    EventFacts,
    GroupSpec,
    leaf_reason,
    recorded,
    tester,
)
from rewards_lab.domain.rules import (
    ActionOutcome,
    ActionSpec,
    ReversalCall,
    RuleSpec,
    in_order,
    number_of,
    read,
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
    """A condition's or a group's verdict. Groups have no field; their `operator` is `all`, `any` or `not`
    and `parts` holds their conditions' verdicts."""

    field: str | None
    operator: str
    threshold: Any  # the condition's value (None for exists / not_exists and for groups)
    value_read: Any
    verdict: bool
    reason: str
    path: str = ""  # `conditions[2].any[0]`
    parts: tuple[ConditionVerdict, ...] = ()

    def leaves(self) -> list[ConditionVerdict]:
        if self.field is not None:
            return [self]
        return [leaf for part in self.parts for leaf in part.leaves()]


@dataclass(frozen=True, slots=True)
class ActionVerdict:
    action_index: int
    asset_id: str
    decimals: int
    amount_minor: int  # 0 when the action issues nothing
    reason: str
    inputs: dict[str, Any]
    error_code: str | None = None  # set when the action calls for an amount the ledger must refuse
    beneficiary: str | None = None  # the customer reference rewarded instead of the event's customer
    reversal: ReversalCall | None = None  # a reverse action's call: which original, which share

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
    priority: int = 0
    stops: bool = False  # matched with stop_processing: the programme's later rules do not apply
    stopped_by: str | None = None  # the rule whose stop_processing kept this one from applying

    def inputs(self) -> dict[str, Any]:
        """Every value the rule read (its provenance): field -> value as read."""
        values: dict[str, Any] = {}
        for condition in self.conditions:
            values.update({leaf.field: leaf.value_read for leaf in condition.leaves() if leaf.field is not None})
        for action in self.actions:
            values.update(action.inputs)
        return values


@overload
def evaluate(
    rules: Sequence[RuleSpec], events: Sequence[Event], *, facts: Sequence[EventFacts] | None = None
) -> list[list[RuleMatch]]: ...
@overload
def evaluate(
    rules: Sequence[RuleSpec],
    events: Sequence[Event],
    *,
    facts: Sequence[EventFacts] | None = None,
    explain: Literal[False],
) -> list[list[RuleMatch]]: ...
@overload
def evaluate(
    rules: Sequence[RuleSpec],
    events: Sequence[Event],
    *,
    facts: Sequence[EventFacts] | None = None,
    explain: Literal[True],
) -> list[list[RuleVerdict]]: ...
def evaluate(
    rules: Sequence[RuleSpec],
    events: Sequence[Event],
    *,
    facts: Sequence[EventFacts] | None = None,
    explain: bool = False,
) -> list[list[RuleMatch]] | list[list[RuleVerdict]]:
    """Per event (type, data), in the order the rules apply: the rules that match it (`RuleMatch`), or with
    `explain` every rule's verdict with its reasons (`RuleVerdict`; the matched ones carry the same values and
    amounts). `facts` (one per event) hold what rules may read beyond the data: time and customer."""
    ordered = in_order(rules) if rules else []
    known = facts if facts is not None else [NO_FACTS] * len(events)
    if explain:
        return [
            _explain_event(ordered, event_type, data, event_facts)
            for (event_type, data), event_facts in zip(events, known, strict=True)
        ]
    return _match(ordered, events, known)


# the worker's form: matched rules only, column by column --------------------------------------------------
class _Columns:
    """The values of each field read by the rules, per event type, each read once."""

    def __init__(self, events: Sequence[Event], facts: Sequence[EventFacts], groups: dict[str, list[int]]) -> None:
        self.events, self.facts, self.groups = events, facts, groups
        self.cache: dict[tuple[str, str, str], list[Any]] = {}

    def __call__(self, event_type: str, name: str, timezone: str) -> list[Any]:
        key = (event_type, name, timezone)
        found = self.cache.get(key)
        if found is None:
            events, facts = self.events, self.facts
            found = self.cache[key] = [read(events[i][1], name, facts[i], timezone) for i in self.groups[event_type]]
        return found


def _match(rules: Sequence[RuleSpec], events: Sequence[Event], facts: Sequence[EventFacts]) -> list[list[RuleMatch]]:
    matches: list[list[RuleMatch]] = [[] for _ in events]
    groups: dict[str, list[int]] = {}
    for index, (event_type, _) in enumerate(events):
        groups.setdefault(event_type, []).append(index)
    column = _Columns(events, facts, groups)
    stopped: dict[str, set[int]] = {}  # per type: positions a stop_processing rule has already claimed

    for rule in rules:
        if rule.event_type not in groups:
            continue
        event_type, timezone = rule.event_type, rule.timezone
        done = stopped.get(event_type)
        rows: Sequence[int] = range(len(groups[event_type]))  # positions in the type's group
        if done:
            rows = [p for p in rows if p not in done]
        for node in rule.conditions:
            if isinstance(node, ConditionSpec):
                cells, holds = column(event_type, node.field, timezone), tester(node)
                rows = [p for p in rows if holds(cells[p])]
            else:
                rows = [p for p in rows if _group_holds(node, p, event_type, timezone, column)]
            if not rows:
                break
        if not rows:
            continue
        if rule.stop_processing:
            stopped.setdefault(event_type, set()).update(rows)
        names = rule.fields()
        read_columns = [(name, column(event_type, name, timezone)) for name in names]
        actions = rule.actions
        valued = [(i, a, column(event_type, str(a.per), timezone)) for i, a in enumerate(actions) if a.per]
        to = {i: column(event_type, a.reference_field, timezone) for i, a in enumerate(actions) if a.reference_field}
        fixed = {
            i: a.outcome(i, None)
            for i, a in enumerate(actions)
            if a.fixed_minor is not None and not a.beneficiary and not a.multiply
        }
        known: list[dict[Decimal, ActionOutcome]] = [{} for _ in actions]
        group = groups[event_type]
        for p in rows:
            outcomes = dict(fixed)
            for i, action, cells in valued:
                reference = to[i][p] if i in to else None
                if action.multiply:  # the recipient's multiplier differs from event to event
                    times = facts[group[p]].multiplier(reference)
                    outcomes[i] = action.outcome(i, number_of(cells[p]), reference, times)
                else:
                    outcomes[i] = _once_per_number(i, action, number_of(cells[p]), known[i], reference)
            for i, action in enumerate(actions):
                if i not in outcomes:  # a fixed amount with a beneficiary, or multiplied
                    reference = to[i][p] if i in to else None
                    times = facts[group[p]].multiplier(reference) if action.multiply else None
                    outcomes[i] = action.outcome(i, None, reference, times)
            inputs = {name: recorded(cells[p]) for name, cells in read_columns}
            found = tuple(outcomes[i] for i in range(len(actions)))
            matches[group[p]].append(RuleMatch(rule.rule_id, inputs, found))
    return matches


def _group_holds(group: GroupSpec, p: int, event_type: str, timezone: str, column: _Columns) -> bool:
    def holds(node: ConditionNode) -> bool:
        if isinstance(node, ConditionSpec):
            return tester(node)(column(event_type, node.field, timezone)[p])
        if node.kind == "all":
            return all(holds(part) for part in node.parts)
        if node.kind == "any":
            return any(holds(part) for part in node.parts)
        return not holds(node.parts[0])

    return holds(group)


def _once_per_number(
    index: int, action: ActionSpec, number: Decimal | None, known: dict[Decimal, ActionOutcome], beneficiary: Any
) -> ActionOutcome:
    """`action.outcome`, computed once per distinct number of the batch (equal numbers, such as 42.5 and 42.50,
    have equal amounts; a refusal names the number as written, so it is never shared; a beneficiary differs
    from event to event, so such an action is computed for each)."""
    if number is None or action.reference_field is not None:
        return action.outcome(index, number, beneficiary)
    outcome = known.get(number)
    if outcome is None:
        outcome = action.outcome(index, number)
        if outcome.error_code is None:
            known[number] = outcome
    return outcome


# the explained form: every rule, with reasons -------------------------------------------------------------
def _explain_event(
    rules: Sequence[RuleSpec], event_type: str, data: Mapping[str, Any], facts: EventFacts
) -> list[RuleVerdict]:
    verdicts = []
    stopper: RuleSpec | None = None
    for rule in rules:
        if stopper is not None and rule.event_type == event_type:
            reason = f"not applied: {stopper.title} (priority {stopper.priority}) matched first and stops processing"
            verdicts.append(
                RuleVerdict(
                    rule.rule_id, rule.event_type, False, reason, (), priority=rule.priority, stopped_by=stopper.rule_id
                )
            )
            continue
        verdict = _explain_rule(rule, event_type, data, facts)
        if verdict.stops:
            stopper = rule
        verdicts.append(verdict)
    return verdicts


def _explain_rule(rule: RuleSpec, event_type: str, data: Mapping[str, Any], facts: EventFacts) -> RuleVerdict:
    if rule.event_type != event_type:
        reason = f"event type '{event_type}' is not the rule's '{rule.event_type}'"
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, (), priority=rule.priority)
    conditions = tuple(
        _explain_node(node, f"conditions[{i}]", data, facts, rule.timezone) for i, node in enumerate(rule.conditions)
    )
    failed = [c for c in conditions if not c.verdict]
    if failed:
        reason = "condition failed: " + "; ".join(c.reason for c in failed)
        return RuleVerdict(rule.rule_id, rule.event_type, False, reason, conditions, priority=rule.priority)
    actions = tuple(_explain_action(i, a, data, facts, rule.timezone) for i, a in enumerate(rule.actions))
    reason = "all conditions hold" if conditions else "the rule has no conditions"
    if rule.stop_processing:
        reason += "; it stops processing: the programme's later rules do not apply to this event"
    return RuleVerdict(
        rule.rule_id, rule.event_type, True, reason, conditions, actions, rule.priority, rule.stop_processing
    )


def _explain_node(
    node: ConditionNode, path: str, data: Mapping[str, Any], facts: EventFacts, timezone: str
) -> ConditionVerdict:
    if isinstance(node, ConditionSpec):
        value = read(data, node.field, facts, timezone)
        verdict = node.holds(value)
        reason = leaf_reason(node, value, verdict)
        return ConditionVerdict(node.field, node.operator, node.value, recorded(value), verdict, reason, path)
    if node.kind == "not":
        inner = _explain_node(node.parts[0], f"{path}.not", data, facts, timezone)
        verdict = not inner.verdict
        relation = "fails" if inner.verdict else "holds"
        reason = f"not ({inner.reason}): {relation}"
        return ConditionVerdict(None, "not", None, None, verdict, reason, path, (inner,))
    parts = tuple(
        _explain_node(part, f"{path}.{node.kind}[{i}]", data, facts, timezone) for i, part in enumerate(node.parts)
    )
    if node.kind == "all":
        verdict = all(part.verdict for part in parts)
        failing = [part for part in parts if not part.verdict]
        reason = f"all of {len(parts)} hold" if verdict else "all: " + "; ".join(p.reason for p in failing)
    else:
        verdict = any(part.verdict for part in parts)
        holding = [part for part in parts if part.verdict]
        reason = (
            f"any: {holding[0].reason}"
            if verdict
            else f"any of {len(parts)}: none holds (" + "; ".join(p.reason for p in parts) + ")"
        )
    return ConditionVerdict(None, node.kind, None, None, verdict, reason, path, parts)


def _explain_action(
    index: int, action: ActionSpec, data: Mapping[str, Any], facts: EventFacts, timezone: str
) -> ActionVerdict:
    """The action's outcome for the event and its reason (its type's entry says it), with the values it read: its
    `per` field first, then its reference field (beneficiary or original)."""
    inputs: dict[str, Any] = {}
    reference = None
    if action.reference_field is not None:
        reference = read(data, action.reference_field, facts, timezone)
        inputs[action.reference_field] = recorded(reference)
    value = None
    if action.per is not None:
        value = read(data, action.per, facts, timezone)
        inputs = {action.per: recorded(value), **inputs}
    times = facts.multiplier(reference if action.beneficiary else None) if action.multiply else None
    outcome = action.outcome(index, number_of(value), reference, times)
    reason = action.entry.reason(action, outcome, value, reference)
    return _action_verdict(index, action, outcome, reason, inputs)


def _action_verdict(
    index: int, action: ActionSpec, outcome: ActionOutcome, reason: str, inputs: dict[str, Any]
) -> ActionVerdict:
    return ActionVerdict(
        index,
        action.asset_id,
        action.decimals,
        outcome.amount_minor,
        reason,
        inputs,
        outcome.error_code,
        outcome.beneficiary,
        outcome.reversal,
    )
