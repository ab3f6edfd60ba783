"""Simulation: what a rule or a programme version would issue for one event, and why. Writes nothing."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.rule_evaluation import RuleVerdict, evaluate
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.service.presenters import json_value
from rewards_lab.service.programmes import compile_rows, programme_row, version_id_of
from rewards_lab.store.database import Database
from rewards_lab.store.uow import reader


def split_event(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The seed's flat simulation event: `type` plus the data fields side by side."""
    event_type = event.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise ServiceError("field_required", "event.type is required", field="event.type")
    data = {key: value for key, value in event.items() if key != "type"}
    return event_type, data


def outcome(verdicts: list[RuleVerdict], event_type: str, program_id: str | None, version: int | None) -> r.Simulation:
    rules = []
    totals: dict[tuple[str, int], int] = defaultdict(int)
    for verdict in verdicts:
        conditions = [
            r.ConditionOutcome(
                field=c.field,
                operator=c.operator,
                threshold=str(c.threshold),
                value_read=json_value(c.value_read),
                verdict=c.verdict,
                reason=c.reason,
            )
            for c in verdict.conditions
        ]
        actions = []
        for a in verdict.actions:
            if a.issues:
                totals[(a.asset_id, a.decimals)] += a.amount_minor
            actions.append(
                r.ActionOutcome(
                    action_index=a.action_index,
                    asset_id=a.asset_id,
                    amount=format_amount(a.amount_minor, a.decimals),
                    issues=a.issues,
                    reason=a.reason,
                    inputs={k: json_value(v) for k, v in a.inputs.items()},
                )
            )
        rules.append(
            r.RuleOutcome(
                rule_id=verdict.rule_id,
                event_type=verdict.event_type,
                matched=verdict.matched,
                reason=verdict.reason,
                conditions=conditions,
                actions=actions,
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
    )


def simulate_rule(database: Database, scope: Scope, rule_id: str, body: rq.SimulationRequest) -> r.Simulation:
    """The rule as it stands in the draft (else as last published) against one event."""
    uow = reader(database)
    revisions = uow.programmes.rule_revisions(scope, rule_id)
    if not revisions:
        raise ServiceError("rule_not_found", rule_id=rule_id)
    rule = revisions[0]
    programme = programme_row(uow, scope, rule.program_id)
    specs = compile_rows(uow, scope, [rule], programme.asset_id)
    event_type, data = split_event(body.event)
    (verdicts,) = evaluate(specs, [(event_type, data)], explain=True)
    return outcome(verdicts, event_type, programme.id, rule.version_number)


def version_rules(
    database: Database, scope: Scope, program_id: str, version: int | str | None
) -> tuple[list[RuleSpec], int | None]:
    uow = reader(database)
    version_id = version_id_of(uow, scope, program_id, version)
    programme = programme_row(uow, scope, program_id)
    rows = uow.programmes.rules_of(scope, [version_id])
    number = uow.programmes.get_version(scope, version_id)
    assert number is not None
    return compile_rows(uow, scope, rows, programme.asset_id), number.number


def simulate_programme(
    database: Database,
    scope: Scope,
    program_id: str,
    body: rq.SimulationRequest,
    version: int | str | None = None,
) -> r.Simulation:
    """Every rule of a version (the draft by default; a number or "live") against one event."""
    specs, number = version_rules(database, scope, program_id, version)
    event_type, data = split_event(body.event)
    (verdicts,) = evaluate(specs, [(event_type, data)], explain=True)
    return outcome(verdicts, event_type, program_id, number)
