"""The plan's runner: the steps in order on one executor, progress after each named stage.

Stages (the progress labels of rewards_lab.replay.engine.STEPS, after "ordered", which the entry point does):
"rules" (`amounts`), "fallback" (the exotic rows through the live evaluation, added to `amounts` when they
issue or refuse anything), "summaries" (`candidates`, `cells`), "ceiling" (`ceiling_kept`, then the `issuances`
view). Today the plan runs the replays without caps, budgets, reversals, redemptions, expiry or a customers table
(rewards_lab.replay.engine.replay, rewards_lab.replay.spark_engine.replay_spark); the others still take their own
paths over the same tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.plan import ceiling, rules, schema, steps
from rewards_lab.replay.plan.rules import Context

Fallback = Callable[[Executor[object], str], tuple[bool, int]]
"""Puts the exotic events' outcomes in the named table (`schema.FALLBACK_ROWS`'s columns); returns (whether it has
rows, how many events were exotic). Engine-specific for now: how a field of an event reads in Python differs."""
Report = Callable[[str], None]


@dataclass(frozen=True)
class PlanRun:
    """What the runner decided: the context (with the ceiling's boundary day) and the fallback's event count."""

    context: Context
    python_rows: int


def run_step(executor: Executor[object], step: steps.Step, ctx: Context) -> None:
    executor.create(step.output.on(ctx.prefix), step.build(ctx), stored=step.stored)


def run(executor: Executor[object], ctx: Context, room: int | None, fallback: Fallback, report: Report) -> PlanRun:
    """Every step over `{prefix}_ordered` (the events in processing order, made by the entry point)."""
    executor.register(schema.SLOTS.on(ctx.prefix), rules.slots_table(ctx.layout))
    run_step(executor, steps.AMOUNTS, ctx)
    report("rules")
    python_rows = 0
    if ctx.plan.exotic_sql is not None:
        found, python_rows = fallback(executor, schema.FALLBACK_ROWS.on(ctx.prefix))
        if found:
            run_step(executor, steps.FALLBACK, ctx)
            run_step(executor, steps.WITH_FALLBACK, ctx)
    report("fallback")
    run_step(executor, steps.CANDIDATES, ctx)
    run_step(executor, steps.CELLS, ctx)
    report("summaries")
    decided = dataclasses.replace(ctx, boundary=ceiling.decide(executor, ctx.prefix, ctx.layout, room))
    run_step(executor, steps.ISSUANCES, decided)
    report("ceiling")
    return PlanRun(decided, python_rows)
