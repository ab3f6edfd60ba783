"""The plan's runner: the steps in order on one executor, progress after each named stage.

Stages (the progress labels of rewards_lab.replay.engine.STEPS, after "ordered", which the entry point does):
"rules" (`amounts`), "fallback" (the `exotic` rows through the live evaluation, `map_partitions` without a key,
their outcomes resolved and added to `amounts` when they issue or refuse anything), "summaries" (`candidates`,
`cells`), "ceiling" (`ceiling_kept`, then the `issuances` view). The customers steps (`customers`, `facts`:
rewards_lab.replay.plan.customers) come before, run by the entry points: on DuckDB before the events are
numbered, on Spark after. `rules` and `decide` are the two halves: between them a featured replay decides its caps,
budgets, reversals and redemptions (the ordered pass, which then may decide the ceiling itself: `decide` gets no
room). Spark runs every replay this way (rewards_lab.replay.spark_engine.replay_ordered); DuckDB runs its plain
replays with `run` and its featured ones still over rewards_lab.replay.store's tables of the same names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.fallback import OUTCOMES, Evaluate
from rewards_lab.replay.plan import ceiling, schema, steps
from rewards_lab.replay.plan import rules as rules_step
from rewards_lab.replay.plan.rules import Context

Report = Callable[[str], None]


@dataclass(frozen=True)
class PlanRun:
    """What the runner decided: the context (with the ceiling's boundary day) and the fallback's event count."""

    context: Context
    python_rows: int


def run_step(executor: Executor[object], step: steps.Step, ctx: Context) -> None:
    executor.create(step.output.on(ctx.prefix), step.build(ctx), stored=step.stored)


def evaluated(executor: Executor[object], ctx: Context, evaluate: Evaluate) -> tuple[int, int]:
    """The exotic events through the live evaluation (`map_partitions`, no key) and, when they issue or refuse
    anything, `fallback_rows` (beneficiaries resolved); returns (how many events were exotic, their outcomes)."""
    run_step(executor, steps.EXOTIC, ctx)
    outcomes = ctx.table(schema.FALLBACK_OUTCOMES)
    executor.map_partitions(outcomes, f"SELECT * FROM {ctx.table(schema.EXOTIC)}", evaluate, OUTCOMES)
    counted = executor.fetch(
        f"SELECT count_if(slot IS NULL) AS events, count_if(slot IS NOT NULL) AS found FROM {outcomes}"
    )
    events, found = (int(counted.column(c)[0].as_py() or 0) for c in ("events", "found"))
    if found:
        run_step(executor, steps.FALLBACK_ROWS, ctx)
    return events, found


def fallback(executor: Executor[object], ctx: Context, evaluate: Evaluate) -> int:
    """The exotic events' outcomes (`evaluated`) added to `amounts`; returns how many events were exotic."""
    events, found = evaluated(executor, ctx, evaluate)
    if found:
        run_step(executor, steps.FALLBACK, ctx)
        run_step(executor, steps.WITH_FALLBACK, ctx)
    return events


def rules(executor: Executor[object], ctx: Context, evaluate: Evaluate | None, report: Report) -> int:
    """The steps before the ceiling over `{prefix}_ordered` (the events in processing order with their facts, made
    by the entry point): `slots`, `amounts` (with the fallback's rows), `candidates`, `cells`; `evaluate`: the
    live evaluation of the exotic rows (None: no row is exotic). Returns how many events were exotic."""
    executor.register(schema.SLOTS.on(ctx.prefix), rules_step.slots_table(ctx.layout))
    run_step(executor, steps.AMOUNTS, ctx)
    report("rules")
    python_rows = 0
    if ctx.plan.exotic_sql is not None and evaluate is not None:
        python_rows = fallback(executor, ctx, evaluate)
    report("fallback")
    run_step(executor, steps.CANDIDATES, ctx)
    run_step(executor, steps.CELLS, ctx)
    report("summaries")
    return python_rows


def decide(executor: Executor[object], ctx: Context, room: int | None, python_rows: int, report: Report) -> PlanRun:
    """`ceiling_kept` (the ceiling's room: None when nothing can be refused, or when the ordered pass decided the
    ceiling) and the `issuances` view."""
    decided = dataclasses.replace(ctx, boundary=ceiling.decide(executor, ctx.prefix, ctx.layout, room))
    run_step(executor, steps.ISSUANCES, decided)
    report("ceiling")
    return PlanRun(decided, python_rows)


def run(
    executor: Executor[object], ctx: Context, room: int | None, evaluate: Evaluate | None, report: Report
) -> PlanRun:
    """Every step (`rules`, then `decide`)."""
    return decide(executor, ctx, room, rules(executor, ctx, evaluate, report), report)
