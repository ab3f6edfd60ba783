"""The forecast gate against a live deployment: the published version read back as a programme definition, and
the gate evaluated on the file (what the draft becomes) against it, before anything is published (push, and
notebook 05 given a `base_url`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import ProgrammeDefinition, definition_of_version, load_programme
from rewards_lab.forecasting.gate import DEFAULT_DAYS, GateReport, evaluate
from rewards_lab.lab.paths import locate
from rewards_lab.lab.push import Plan, make_plan


def publishes(plan: Plan) -> bool:
    return any(step.kind == "publish" for step in plan.steps)


def published_definition(plan: Plan) -> ProgrammeDefinition | None:
    """The live published version as a file would hold it (None: nothing published yet), by the conversion the
    server's gate uses too (`definition_of_version`). The asset's value per unit is the live asset's, else the
    file's."""
    version, asset, programme = plan.published, plan.asset, plan.programme
    if version is None or asset is None or programme is None or not version.rules:
        return None
    return definition_of_version(programme, version, asset, value_per_unit=plan.definition.asset.value_per_unit)


def gate_for(plan: Plan, events: Any, **options: Any) -> GateReport:
    """The file's guards on a replay of `events` through the file and through the live published version."""
    return evaluate(plan.definition, events, published=published_definition(plan), **options)


def evaluate_for(
    programme: str | Path,
    history: str | Path,
    *,
    published: str | Path | None = None,
    base_url: str | None = None,
    organization: str | None = None,
    environment: str = "sandbox",
    redemptions: str | Path | None = None,
    days: int = DEFAULT_DAYS,
) -> GateReport:
    """The gate as notebook 05 runs it: the programme file (the draft) against the published version, read from
    a live deployment when `base_url` is given (the API key from $REWARDS_API_KEY; reads only), else from the
    `published` file (None: nothing published yet)."""
    if not base_url:
        return evaluate_files(programme, history, published=published, redemptions=redemptions, days=days)
    if not organization:
        raise ValueError("reading the published version from a deployment needs its organization id")
    definition = load_programme(locate(programme))
    spent = None if not redemptions else locate(redemptions)
    key = os.environ.get("REWARDS_API_KEY", "")
    with RewardsClient(base_url, key, organization, environment) as client:
        plan = make_plan(definition, client)
    return evaluate(definition, locate(history), published=published_definition(plan), days=days, redemptions=spent)


def evaluate_files(
    programme: str | Path,
    history: str | Path,
    *,
    published: str | Path | None = None,
    redemptions: str | Path | None = None,
    days: int = DEFAULT_DAYS,
    **replay_options: Any,
) -> GateReport:
    """The gate on files (paths relative to the repository, as notebooks name them: `lab.paths.locate`): the
    programme file is the draft, `published` the file of the version it would replace (None: nothing
    published), `history` the events and `redemptions` what customers spent."""
    draft = load_programme(locate(programme))
    live = None if not published else load_programme(locate(published))
    spent = None if not redemptions else locate(redemptions)
    return evaluate(draft, locate(history), published=live, days=days, redemptions=spent, **replay_options)
