"""After a push, prove it: simulate each rule on the live side (POST /reward-rules/{id}/simulate) against sample
events and compare with the lab's own evaluation of the file (`domain.rules`, the live engine's semantics).

Sample events are derived from the rules: each condition at, just below and just above its threshold, the
per-rate fields at values that exercise rounding, a missing field, a numeric-looking string, another event type.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rewards_lab.client import RewardsClient
from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.programme_file import FileRule, ProgrammeDefinition
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.rule_evaluation import RuleVerdict, evaluate
from rewards_lab.domain.rules import compile_rule
from rewards_lab.lab.push import PushError, live_fingerprint, make_plan

PER_FIELD_VALUES = (Decimal("42.50"), Decimal("0.07"), Decimal("1000"), Decimal("19.99"))
OTHER_EVENT_TYPE = "push.verify.unmatched"


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


def _passing(operator: str, threshold: Decimal) -> Decimal:
    return {"gt": threshold + 1, "lt": threshold - 1, "neq": threshold + 1}.get(operator, threshold)


def sample_events(rule: FileRule) -> list[dict[str, Any]]:
    """Flat simulation events (the seed's shape: `type` beside the data fields) probing the rule's edges."""
    base: dict[str, Any] = {"type": rule.event_type}
    for condition in rule.conditions:
        base.setdefault(condition.field, _passing(condition.operator.value, condition.value))
    per_fields = [a.amount.per for a in rule.actions if hasattr(a.amount, "per")]
    events = [dict(base)]
    for condition in rule.conditions:
        for delta in (Decimal(-1), Decimal("-0.01"), Decimal(0), Decimal("0.01"), Decimal(1)):
            events.append({**base, condition.field: condition.value + delta})
        events.append({key: value for key, value in base.items() if key != condition.field})
        events.append({**base, condition.field: str(condition.value)})
    for name in per_fields:
        events += [{**base, name: value} for value in PER_FIELD_VALUES if not _conflicts(rule, name, value)]
        events.append({key: value for key, value in base.items() if key != name})
    events.append({**base, "type": OTHER_EVENT_TYPE})
    unique: dict[str, dict[str, Any]] = {}
    for event in events:
        unique.setdefault(jsonutil.canonical_hash(event), event)
    return list(unique.values())


def _conflicts(rule: FileRule, name: str, value: Decimal) -> bool:
    """Per-rate samples stay within the rule's conditions on the same field, so that they exercise the amount."""
    return any(c.field == name and c.operator.value in ("eq",) and c.value != value for c in rule.conditions)


def _lab_outcome(verdict: RuleVerdict) -> str:
    if not verdict.matched:
        return "no match"
    return "issues " + ", ".join(format_amount(a.amount_minor, a.decimals) for a in verdict.actions)


def _live_outcome(simulation: r.Simulation) -> str:
    rule = simulation.rules[0] if simulation.rules else None
    if rule is None or not rule.matched:
        return "no match"
    return "issues " + ", ".join(action.amount for action in rule.actions)


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
        )
        for event in sample_events(rule):
            data = {key: value for key, value in event.items() if key != "type"}
            lab = _lab_outcome(evaluate([spec], [(str(event["type"]), data)], explain=True)[0][0])
            live = "rule missing" if rule_id is None else _live_outcome(client.simulate_rule(rule_id, event))
            result.checks += 1
            if _normalised(lab) != _normalised(live):
                result.differences.append(Difference(index, rule_id, event, lab, live))
    return result
