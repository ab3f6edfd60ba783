"""Simulation: what a rule or a programme version would issue for one event, and why. Writes nothing.

One event per request (the seed's shape). The explanation echoes every condition's threshold and the value it
read, so a request's explanation is bounded as it is built (`SimulationBudget`): over
`MAX_SIMULATION_RESPONSE_BYTES` estimated, or `MAX_SIMULATION_SECONDS` since the request began, it is refused
with `simulation_too_large` (docs/decisions.md, "Rate limits and tenant fairness"). The lab's in-process
simulation has no such budget.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import EVENT_TOO_OLD
from rewards_lab.contract.programme_limits import check_simulation
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.conditions import CustomerFacts, EventFacts
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.rule_evaluation import ConditionVerdict, RuleVerdict, evaluate
from rewards_lab.domain.rules import RuleSpec, in_order
from rewards_lab.domain.schedule import epoch_us, too_old, within_window
from rewards_lab.engine.rule_book import compile_rows, programme_row, version_id_of
from rewards_lab.engine.rule_facts import customer_facts, reads_customer, reads_segments, segment_codes
from rewards_lab.engine.simulation_spending import Effect, Key, effects_of, spending_of
from rewards_lab.engine.simulation_tiers import SimulatedTier, multipliers_of, simulated_tier, tier_block
from rewards_lab.presenters import json_value
from rewards_lab.store.api import Store, reader
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import Schedule, VersionRow


def split_event(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The seed's flat simulation event: `type` plus the data fields side by side."""
    event_type = event.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise ServiceError("field_required", "event.type is required", field="event.type")
    data = {key: value for key, value in event.items() if key != "type"}
    return event_type, data


class SimulationBudget:
    """The size and time a request's explanation may take, counted as it is built (`check_simulation`)."""

    _PER_ITEM = 160  # the keys and punctuation of a condition's or an action's outcome

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.bytes = 0

    def spend(self, *texts: str, value: Any = None) -> None:
        self.bytes += self._PER_ITEM + sum(map(len, texts)) + _json_size(value)
        check_simulation(self.bytes, time.monotonic() - self.started)


def _json_size(value: Any) -> int:
    """About the length of a value read as JSON (exact for strings without escapes)."""
    if value is None or isinstance(value, bool):
        return 5
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, int | Decimal):
        return len(str(value))
    return len(jsonutil.dumps(json_value(value)))


def outcome(
    verdicts: list[RuleVerdict],
    event_type: str,
    program_id: str | None,
    version: int | None,
    window: tuple[bool, str] = (True, ""),
    effects: dict[tuple[str, int], Effect] | None = None,
    budget: SimulationBudget | None = None,
) -> r.Simulation:
    """The simulation resource; `effects` (per rule id and action index) are what caps, the budget and
    reversals make of the actions (`simulation_spending`); `budget` bounds the explanation (requests)."""
    rules = []
    totals: dict[tuple[str, int], int] = defaultdict(int)
    for verdict in verdicts:
        if budget is not None:
            budget.spend(verdict.rule_id, verdict.reason)
        conditions = [_condition(c, budget) for c in verdict.conditions]
        actions = []
        for a in verdict.actions:
            effect = (effects or {}).get((verdict.rule_id, a.action_index))
            amount_minor = a.amount_minor if effect is None else effect.amount_minor
            if amount_minor > 0:
                totals[(a.asset_id, a.decimals)] += amount_minor
            action = r.ActionOutcome(
                action_index=a.action_index,
                asset_id=a.asset_id,
                amount=format_amount(amount_minor, a.decimals),
                issues=amount_minor > 0,
                reason=a.reason,
                inputs={k: json_value(v) for k, v in a.inputs.items()},
                error_code=a.error_code,
                beneficiary=a.beneficiary,
            )
            actions.append(action if effect is None else _with_effect(action, effect, a.decimals))
            if budget is not None:
                budget.spend(action.reason, value=action.inputs)
        rules.append(
            r.RuleOutcome(
                rule_id=verdict.rule_id,
                event_type=verdict.event_type,
                matched=verdict.matched,
                reason=verdict.reason,
                conditions=conditions,
                actions=actions,
                priority=verdict.priority,
                stops_processing=verdict.stops,
                stopped_by=verdict.stopped_by,
            )
        )
    return r.Simulation(
        event_type=event_type,
        program_id=program_id,
        program_version=version,
        matched=any(v.matched for v in verdicts),
        rules=rules,
        totals=[
            r.AssetTotal(asset_id=asset, amount=format_amount(minor, decimals))
            for (asset, decimals), minor in sorted(totals.items())
        ],
        in_window=window[0],
        window_reason=window[1],
    )


def _with_effect(action: r.ActionOutcome, effect: Effect, decimals: int) -> r.ActionOutcome:
    requested = None if effect.requested_minor is None else format_amount(effect.requested_minor, decimals)
    return action.model_copy(
        update={
            "reason": action.reason + effect.reason_suffix,
            "error_code": effect.error_code or action.error_code,
            "requested_amount": requested,
            "limited": effect.cut,
            "limit_reason": effect.limit_reason,
            "reversal": effect.reversal,
        }
    )


def _condition(verdict: ConditionVerdict, budget: SimulationBudget | None = None) -> r.ConditionOutcome:
    threshold = None if verdict.field is None else threshold_text(verdict.threshold)
    if budget is not None:
        budget.spend(verdict.field or "", verdict.reason, verdict.path or "", threshold or "", value=verdict.value_read)
    return r.ConditionOutcome(
        field=verdict.field,
        operator=verdict.operator,
        threshold=threshold,
        value_read=json_value(verdict.value_read),
        verdict=verdict.verdict,
        reason=verdict.reason,
        path=verdict.path,
        conditions=[_condition(part, budget) for part in verdict.parts],
    )


def threshold_text(value: Any) -> str:
    """A condition's value as the simulation shows it: numbers as written (as before), strings as they are,
    lists as JSON, nothing for exists / not_exists."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return jsonutil.dumps([json_value(item) for item in value])
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _facts(
    database: Store, scope: Scope, body: rq.SimulationRequest, rules: list[RuleSpec], version: VersionRow, asset_id: str
) -> tuple[EventFacts, SimulatedTier | None]:
    """What the rules read beyond the event: its time (now when not given), the named customer as it is now, and
    with tiers the customer's tier and each recipient's multiplier (`simulation_tiers`)."""
    now = utcnow()
    occurred_at = body.occurred_at if body.occurred_at is not None else now.replace(tzinfo=UTC)
    tiered = version.tiers is not None
    if body.customer_id is None or not (reads_customer(rules) or tiered):
        row = None
        uow = None
    else:
        uow = reader(database)
        row = uow.customers.resolve_many(scope, [body.customer_id]).get(body.customer_id)
        if row is None:
            raise ServiceError("customer_not_found", field="customer_id", customer_id=body.customer_id)
    customer = None
    if row is not None and reads_customer(rules):
        assert uow is not None
        segments = segment_codes(uow.segments, scope, [row], now)[row.id] if reads_segments(rules) else ()
        customer = customer_facts(row, segments)
    if not tiered and body.tier is None:
        return EventFacts(occurred_at, customer), None
    uow = uow or reader(database)
    tier = simulated_tier(uow, scope, version, asset_id, body.tier, None if row is None else row.id, occurred_at)
    assert tier is not None
    customer = replace(customer or CustomerFacts(), tier=tier.facts)
    return EventFacts(occurred_at, customer, multipliers_of(uow, scope, version, tier, occurred_at)), tier


def _with_tier(
    simulation: r.Simulation, tier: SimulatedTier | None, body: rq.SimulationRequest, budget: SimulationBudget
) -> r.Simulation:
    """The simulation with its `tier` block when the version has tiers (absent otherwise)."""
    if tier is None:
        return simulation
    event_type, data = split_event(body.event)
    occurred_at = body.occurred_at if body.occurred_at is not None else utcnow().replace(tzinfo=UTC)
    block = tier_block(tier, simulation, event_type, data, occurred_at)
    budget.spend(block.code, block.progress, block.contributes, block.after.progress, block.after.tier)
    return simulation.model_copy(update={"tier": block})


def _run(
    specs: list[RuleSpec], body: rq.SimulationRequest, facts: EventFacts, schedule: Schedule
) -> tuple[str, list[RuleVerdict], tuple[bool, str]]:
    event_type, data = split_event(body.event)
    verdicts, window = explain_event(specs, event_type, data, facts, schedule)
    return event_type, verdicts, window


def explain_event(
    specs: list[RuleSpec], event_type: str, data: dict[str, Any], facts: EventFacts, schedule: Schedule
) -> tuple[list[RuleVerdict], tuple[bool, str]]:
    """The verdicts of the rules for the event, unless the version's window excludes its time: then none
    applies, as in the worker, and each rule says so. An event without a time is taken as inside."""
    window = (True, "") if facts.occurred_at is None else window_verdict(schedule, facts.occurred_at)
    if not window[0]:
        skipped = [
            RuleVerdict(spec.rule_id, spec.event_type, False, f"not applied: {window[1]}", (), priority=spec.priority)
            for spec in in_order(specs)
        ]
        return skipped, window
    (verdicts,) = evaluate(specs, [(event_type, data)], facts=[facts], explain=True)
    return verdicts, window


def window_verdict(schedule: Schedule, at: datetime) -> tuple[bool, str]:
    """Whether the window holds the time, and why ("" for a version without a window)."""
    if schedule.starts_at is None and schedule.ends_at is None:
        return True, ""
    holds = within_window(
        epoch_us(at),
        None if schedule.starts_at is None else epoch_us(schedule.starts_at),
        None if schedule.ends_at is None else epoch_us(schedule.ends_at),
    )
    start = "" if schedule.starts_at is None else f"from {schedule.starts_at.isoformat()}Z "
    end = "" if schedule.ends_at is None else f"until {schedule.ends_at.isoformat()}Z (exclusive)"
    relation = "inside" if holds else "outside"
    return holds, f"the event's time {at.astimezone(UTC).isoformat()} is {relation} the window {start}{end}".strip()


def simulate_rule(database: Store, scope: Scope, rule_id: str, body: rq.SimulationRequest) -> r.Simulation:
    """The rule as it stands in the draft (else as last published) against one event."""
    budget = SimulationBudget()
    uow = reader(database)
    revisions = uow.programmes.rule_revisions(scope, rule_id)
    if not revisions:
        raise ServiceError("rule_not_found", rule_id=rule_id)
    rule = revisions[0]
    programme = programme_row(uow, scope, rule.program_id)
    version = uow.programmes.get_version(scope, rule.version_id)
    schedule = _schedule(version)
    assert version is not None
    specs = compile_rows(uow, scope, [rule], programme.asset_id, schedule.timezone, whole_version=False)
    facts, tier = _facts(database, scope, body, specs, version, programme.asset_id)
    event_type, verdicts, window = _run(specs, body, facts, schedule)
    spending = spending_of(uow, scope, version, programme.asset_id, specs)
    found = effects_of(uow, scope, spending, verdicts, body.customer_id, facts.occurred_at or utcnow())
    found = _unless_too_old(version, verdicts, body.occurred_at, found)
    simulation = outcome(verdicts, event_type, programme.id, rule.version_number, window, found, budget)
    return _with_tier(simulation, tier, body, budget)


def _schedule(version: VersionRow | None) -> Schedule:
    assert version is not None
    return version.schedule


def version_rules(
    database: Store, scope: Scope, program_id: str, version: int | str | None
) -> tuple[list[RuleSpec], int | None, Schedule]:
    uow = reader(database)
    version_id = version_id_of(uow, scope, program_id, _version(version))
    programme = programme_row(uow, scope, program_id)
    rows = uow.programmes.rules_of(scope, [version_id])
    row = uow.programmes.get_version(scope, version_id)
    schedule = _schedule(row)
    assert row is not None
    return compile_rows(uow, scope, rows, programme.asset_id, schedule.timezone), row.number, schedule


def _version(version: int | str | None) -> int | str | None:
    """`draft`, `live`, a version number (as a number or its digits) or None (the draft)."""
    if version is None or isinstance(version, int) or version in ("draft", "live"):
        return version
    if version.isdigit() and 0 < len(version) < 10:
        return int(version)
    raise ServiceError("field_invalid", "version must be draft, live or a version number", field="version")


def simulate_programme(
    database: Store,
    scope: Scope,
    program_id: str,
    body: rq.SimulationRequest,
    version: int | str | None = None,
) -> r.Simulation:
    """Every rule of a version (the draft by default; a number or "live") against one event, in the order they
    apply (priority, then creation), with the stops of `stop_processing` rules and the version's window."""
    budget = SimulationBudget()
    uow = reader(database)
    row = uow.programmes.get_version(scope, version_id_of(uow, scope, program_id, _version(version)))
    specs, number, schedule = version_rules(database, scope, program_id, version)
    assert row is not None
    asset_id = programme_row(uow, scope, program_id).asset_id
    facts, tier = _facts(database, scope, body, specs, row, asset_id)
    event_type, verdicts, window = _run(specs, body, facts, schedule)
    spending = spending_of(uow, scope, row, asset_id, specs)
    found = effects_of(uow, scope, spending, verdicts, body.customer_id, facts.occurred_at or utcnow())
    found = _unless_too_old(row, verdicts, body.occurred_at, found)
    simulation = outcome(verdicts, event_type, program_id, number, window, found, budget)
    return _with_tier(simulation, tier, body, budget)


def _unless_too_old(
    version: VersionRow, verdicts: list[RuleVerdict], occurred_at: datetime | None, found: dict[Key, Effect]
) -> dict[Key, Effect]:
    """As the worker: an event received now that occurred longer ago than the version's `max_event_age_days`
    issues nothing, and each action that would have issued says so (`event_too_old`)."""
    days = version.spending.max_event_age_days
    if occurred_at is None or not too_old(epoch_us(occurred_at), epoch_us(utcnow()), days):
        return found
    reason = f"; not issued: the event occurred more than {days} days before now (max_event_age_days)"
    stale = {
        (verdict.rule_id, action.action_index): Effect(0, error_code=EVENT_TOO_OLD, reason_suffix=reason)
        for verdict in verdicts
        if verdict.matched
        for action in verdict.actions
        if action.issues and action.reversal is None and action.error_code is None
    }
    return found | stale
