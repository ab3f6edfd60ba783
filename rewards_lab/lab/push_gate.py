"""The forecast gate inside a push: the live published version read back as a programme definition, and the
gate evaluated on the file (what the draft becomes) against it, before anything is published."""

from __future__ import annotations

from typing import Any

from rewards_lab.contract.programme_file import FileAsset, FileRule, ProgrammeDefinition, ProgrammeInfo
from rewards_lab.lab.gate import GateReport, evaluate
from rewards_lab.lab.push import Plan
from rewards_lab.lab.workbench import file_action


def publishes(plan: Plan) -> bool:
    return any(step.kind == "publish" for step in plan.steps)


def published_definition(plan: Plan) -> ProgrammeDefinition | None:
    """The live published version as a file would hold it (None: nothing published yet). The asset's value per
    unit is the file's: only the lab reads it."""
    version, asset, programme = plan.published, plan.asset, plan.programme
    if version is None or asset is None or programme is None or not version.rules:
        return None
    rules = [
        FileRule(
            event_type=rule.event_type,
            conditions=rule.conditions,
            actions=[file_action(action) for action in rule.actions],
            priority=rule.priority,
            stop_processing=rule.stop_processing,
            limits=rule.limits,
        )
        for rule in version.rules
    ]
    info = ProgrammeInfo(
        name=programme.name,
        description=programme.description,
        timezone=None if version.timezone == "UTC" else version.timezone,
        starts_at=version.starts_at,
        ends_at=version.ends_at,
        limits=version.limits,
        budget=version.budget,
        clawback=version.clawback,
        guards=version.guards,
    )
    unit = plan.definition.asset.value_per_unit
    live_asset = FileAsset(
        name=asset.name,
        symbol=asset.symbol,
        type=asset.type,
        decimals=asset.decimals,
        supply_ceiling=asset.supply_ceiling,
        value_per_unit=unit,
    )
    return ProgrammeDefinition(programme=info, asset=live_asset, rules=rules)


def gate_for(plan: Plan, events: Any, **options: Any) -> GateReport:
    """The file's guards on a replay of `events` through the file and through the live published version."""
    return evaluate(plan.definition, events, published=published_definition(plan), **options)
