"""After a push, prove it: simulate each rule on the live side (POST /reward-rules/{id}/simulate) against sample
events and compare with the lab's own evaluation of the file (`domain.rules`, the live engine's semantics).

Sample events are derived from the rules: each condition at, just below and just above its threshold, the
per-rate fields at values that exercise rounding, a missing field, a numeric-looking string, another event type.

A reverse action is probed with a refund naming an original that exists on neither side (the lab holds no events;
the name is the file's own, unknown to any client): both sides must refuse it `original_not_found`, and refuse a
missing or non-text original field `original_missing`, and a missing, negative or non-number fraction field
`fraction_invalid`. What a reversal takes back of a real original is not compared (the lab has none), and caps
are not read (the simulations name no customer): the rule's caps are compared by its fingerprint.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from rewards_lab.client import RewardsClient
from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.limit_requests import ReverseAction
from rewards_lab.contract.operators import OPERATORS
from rewards_lab.contract.programme_file import FileRule, ProgrammeDefinition
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.domain.actions import ABSENT_ORIGINAL as ABSENT_ORIGINAL
from rewards_lab.domain.actions import MISSING, Probe, action_kind
from rewards_lab.domain.conditions import ConditionSpec, EventFacts, leaves, source_of
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.reversals import ORIGINAL_NOT_FOUND
from rewards_lab.domain.rule_evaluation import ActionVerdict, RuleVerdict, evaluate
from rewards_lab.domain.rules import compile_rule, condition_node
from rewards_lab.domain.schedule import epoch_us, too_old, within_window
from rewards_lab.lab.push import PushError, live_fingerprint, make_plan

OTHER_EVENT_TYPE = "push.verify.unmatched"
SAMPLE_TIME = datetime(2026, 6, 6, 12, 0, tzinfo=UTC)  # a Saturday: weekday and hour rules are exercised too


@dataclass(frozen=True)
class Difference:
    rule_index: int
    rule_id: str | None
    event: dict[str, Any]
    lab: str
    live: str

    def text(self) -> str:
        event = jsonutil.dumps(self.event)
        return f"rules[{self.rule_index}] ({self.rule_id}) on {event}: lab {self.lab}, live {self.live}"


@dataclass
class Verification:
    program_id: str | None
    version: int | None
    checks: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "program_id": self.program_id,
            "version": self.version,
            "checks": self.checks,
            "ok": self.ok,
            "differences": [
                {"rule_index": d.rule_index, "rule_id": d.rule_id, "event": d.event, "lab": d.lab, "live": d.live}
                for d in self.differences
            ],
        }

    def text(self) -> str:
        head = f"Verified version {self.version} of {self.program_id}: {self.checks} simulation(s) compared"
        if self.ok:
            return f"{head}, no difference between the lab and the live side."
        return "\n".join(
            [f"{head}, {len(self.differences)} difference(s):"] + [f"  {d.text()}" for d in self.differences]
        )


def _passing(condition: ConditionSpec) -> Any:
    """A value the condition holds for (None when no data value can make it hold): its operator's entry says."""
    return OPERATORS[condition.operator].passing(condition.value)


def _probes(condition: ConditionSpec) -> list[Any]:
    """Values around the condition's edges (its operator's entry says which)."""
    return OPERATORS[condition.operator].probes(condition.value)


def _data_leaves(rule: FileRule) -> list[ConditionSpec]:
    """The rule's conditions on event data (a simulation event carries no time or customer)."""
    nodes = [condition_node(condition_payload(c)) for c in rule.conditions]
    return [leaf for leaf in leaves(nodes) if source_of(leaf.field) == "data"]


def _action_probes(rule: FileRule) -> list[Probe]:
    """The fields each action reads, with the values to try (its type's entry says which)."""
    stored = [action.model_dump(mode="python") for action in rule.actions]
    return [probe for action in stored for probe in action_kind(action).probes(action)]


def _without(event: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in event.items() if key != name}


def sample_events(rule: FileRule) -> list[dict[str, Any]]:
    """Flat simulation events (the seed's shape: `type` beside the data fields) probing the rule's edges."""
    conditions = _data_leaves(rule)
    probes = _action_probes(rule)
    base: dict[str, Any] = {"type": rule.event_type}
    for condition in conditions:
        passing = _passing(condition)
        if passing is not None:
            base.setdefault(condition.field, passing)
    base.update({probe.field: probe.base for probe in probes if probe.base is not MISSING})
    events = [dict(base)]
    for condition in conditions:
        events += [{**base, condition.field: value} for value in _probes(condition)]
        events.append(_without(base, condition.field))
    for probe in probes:
        for value in probe.values:
            if value is MISSING:
                events.append(_without(base, probe.field))
            elif not (probe.within_conditions and _conflicts(conditions, probe.field, value)):
                events.append({**base, probe.field: value})
    events += [{**base, "type": OTHER_EVENT_TYPE}, {**base, "unrelated_field": "x"}]
    unique: dict[str, dict[str, Any]] = {}
    for event in events:
        unique.setdefault(jsonutil.canonical_hash(event), event)
    return list(unique.values())


def _conflicts(conditions: list[ConditionSpec], name: str, value: Any) -> bool:
    """Per-rate samples stay within the rule's conditions on the same field, so that they exercise the amount."""
    return any(c.field == name and c.operator == "eq" and c.value != value for c in conditions)


def sample_time(definition: ProgrammeDefinition, now: datetime | None = None) -> datetime:
    """The time both sides simulate at: inside the programme's window (its start, else a day before its end), so
    that the live side's window does not hide a difference in the rules; a fixed time when it has none. A time
    older than the programme's `max_event_age_days` would hide the amounts behind `event_too_old` (a simulated
    event is received now): then an hour ago, if the window holds it (else both sides must say `event_too_old`)."""
    info = definition.programme
    if info.starts_at is not None:
        chosen = info.starts_at
    elif info.ends_at is not None:
        chosen = info.ends_at - timedelta(days=1)
    else:
        chosen = SAMPLE_TIME
    now = now or datetime.now(UTC)
    recent = now - timedelta(hours=1)
    if _stale(definition, chosen, now) and within_window(
        epoch_us(recent),
        None if info.starts_at is None else epoch_us(info.starts_at),
        None if info.ends_at is None else epoch_us(info.ends_at),
    ):
        return recent
    return chosen


def _stale(definition: ProgrammeDefinition, at: datetime, now: datetime) -> bool:
    """Whether an event of this time, received now, is older than the programme takes (`event_too_old`)."""
    return too_old(epoch_us(at), epoch_us(now), definition.programme.max_event_age_days)


def _lab_action(action: ActionVerdict, reverse: bool, stale: bool) -> str:
    """An issue action's amount (nothing, `event_too_old`, for an event older than the programme takes); a
    reverse action's refusal (the lab holds no event: every original it names is unknown, so one that names an
    original fails `original_not_found`, as it would live)."""
    if not reverse:
        too_old_now = stale and action.issues and action.error_code is None
        return f"refused {EVENT_TOO_OLD}" if too_old_now else format_amount(action.amount_minor, action.decimals)
    return f"refused {action.error_code or ORIGINAL_NOT_FOUND}"


def _lab_outcome(verdict: RuleVerdict, rule: FileRule, stale: bool) -> str:
    if not verdict.matched:
        return "no match"
    kinds = [isinstance(action, ReverseAction) for action in rule.actions]
    actions = zip(verdict.actions, kinds, strict=True)
    return "issues " + ", ".join(_lab_action(a, reverse, stale) for a, reverse in actions)


def _live_action(action: r.ActionOutcome, reverse: bool) -> str:
    if not reverse:
        return f"refused {EVENT_TOO_OLD}" if action.error_code == EVENT_TOO_OLD else action.amount
    return f"refused {action.error_code}" if action.error_code else f"takes back {action.amount}"


def _live_outcome(simulation: r.Simulation, rule: FileRule) -> str:
    outcome = simulation.rules[0] if simulation.rules else None
    if outcome is None or not outcome.matched:
        return "no match"
    kinds = [isinstance(action, ReverseAction) for action in rule.actions]
    return "issues " + ", ".join(_live_action(a, reverse) for a, reverse in zip(outcome.actions, kinds, strict=True))


def _normalised(outcome: str) -> str:
    """Amounts compared by value ("2.10" == "2.1"); words as they are."""
    words = []
    for word in outcome.replace(",", " ").split():
        try:
            words.append(str(Decimal(word).normalize()))
        except ArithmeticError:
            words.append(word)
    return " ".join(words)


def verify(definition: ProgrammeDefinition, client: RewardsClient) -> Verification:
    """Compare the lab's and the live side's outcomes of every rule of the file on its sample events."""
    plan = make_plan(definition, client)
    if plan.programme is None or plan.published is None or plan.asset is None:
        raise PushError("nothing to verify: the programme is not published on the live side (push it first)")
    published = plan.published
    result = Verification(plan.programme.id, published.number)
    live_by_fingerprint: dict[str, list[str]] = defaultdict(list)
    for live_rule in published.rules:
        live_by_fingerprint[live_fingerprint(live_rule, plan.asset.id)].append(live_rule.id)
    used: Counter[str] = Counter()
    decimals = definition.asset.decimals
    now = datetime.now(UTC)
    at = sample_time(definition, now)
    stale = _stale(definition, at, now)
    for index, rule in enumerate(definition.rules):
        fingerprint = rule.fingerprint()
        candidates = live_by_fingerprint.get(fingerprint, [])
        rule_id = candidates[used[fingerprint]] if used[fingerprint] < len(candidates) else None
        used[fingerprint] += 1
        payload = rule.payload()
        spec = compile_rule(
            f"rules[{index}]",
            rule.event_type,
            payload["conditions"],
            payload["actions"],
            "asset",
            lambda _asset: decimals,
            timezone=definition.programme.zone,
        )
        for event in sample_events(rule):
            data = {key: value for key, value in event.items() if key != "type"}
            facts = [EventFacts(at)]
            verdict = evaluate([spec], [(str(event["type"]), data)], facts=facts, explain=True)[0][0]
            lab = _lab_outcome(verdict, rule, stale)
            live = (
                "rule missing"
                if rule_id is None
                else _live_outcome(client.simulate_rule(rule_id, event, occurred_at=at.isoformat()), rule)
            )
            result.checks += 1
            if _normalised(lab) != _normalised(live):
                result.differences.append(Difference(index, rule_id, event, lab, live))
    return result
