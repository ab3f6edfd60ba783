"""The plan's SQL steps and their registry `STEPS`, in the order the runner (`run`) takes them.

A step builds ONE query (DuckDB SQL parsed by SQLGlot: `plan.sql`) from the replay's `Context`; the executor
renders it for its engine and stores its output as a table or a view. Driver work between steps (the slots
table, the fallback's rows, the ceiling) is the runner's. Every step is tested on both executors
(tests/replay/test_plan_steps.py: a new step without a fixture fails there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.replay.plan import customers, expiry, limits, outputs, redemptions, reversals, rules, schema
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text


@dataclass(frozen=True)
class Step:
    """A step: the table it makes (stored, or a view computed where read) from the tables it reads."""

    name: str
    output: schema.Table
    inputs: tuple[schema.Table, ...]
    build: Callable[[Context], Text]
    stored: bool


def issuances(ctx: Context) -> Text:
    """`issuances`: one row per attempted issuance (engine.ISSUANCE_COLUMNS), the ceiling's decision applied."""
    amount = outputs.amount_sql(ctx.decimals)
    return Text(outputs.issuances_sql(ctx.layout, ctx.prefix, ctx.boundary, ctx.asset, amount))


AMOUNTS = Step("amounts", schema.AMOUNTS, (schema.ORDERED,), rules.amounts, stored=True)
# `fallback_amounts` is a view: stored (checkpointed) too, Spark 4.3's optimizer fails on the UNION ALL of the two
# checkpoints in `with_fallback` ("key not found: pos" in Union.rewriteConstraints); `with_fallback` stores it once.
FALLBACK = Step(
    "fallback",
    schema.FALLBACK_AMOUNTS,
    (schema.FALLBACK_ROWS, schema.SLOTS, schema.ORDERED),
    rules.fallback_amounts,
    stored=False,
)
WITH_FALLBACK = Step(
    "with_fallback", schema.AMOUNTS, (schema.AMOUNTS, schema.FALLBACK_AMOUNTS), rules.with_fallback, stored=True
)
CANDIDATES = Step("candidates", schema.CANDIDATES, (schema.AMOUNTS,), rules.candidates, stored=False)
CELLS = Step("cells", schema.CELLS, (schema.AMOUNTS, schema.SLOTS), rules.cells, stored=True)
ISSUANCES = Step(
    "issuances",
    schema.ISSUANCES,
    (schema.ORDERED, schema.AMOUNTS, schema.SLOTS, schema.CEILING_KEPT),
    issuances,
    stored=False,
)

# customers and the fallback (increment 4) ------------------------------------------------------------------------
CUSTOMERS = Step("customers", schema.CUSTOMERS_LOOKUP, (schema.CUSTOMERS,), customers.customers, stored=True)
FACTS = Step("facts", schema.FACTS, (schema.EVENTS, schema.CUSTOMERS_LOOKUP), customers.facts, stored=False)
EXOTIC = Step("exotic", schema.EXOTIC, (schema.ORDERED,), rules.exotic, stored=False)
# then executor.map_partitions(`fallback_outcomes`, `exotic`, fallback.Evaluate): the live evaluation (run.py)
FALLBACK_ROWS = Step(
    "fallback_rows",
    schema.FALLBACK_ROWS,
    (schema.FALLBACK_OUTCOMES, schema.CUSTOMERS_LOOKUP),
    rules.fallback_rows,
    stored=False,
)
CUSTOMER_STEPS: tuple[Step, ...] = (CUSTOMERS, FACTS)  # before the events are numbered on DuckDB, after on Spark
FALLBACK_STEPS: tuple[Step, ...] = (EXOTIC, FALLBACK_ROWS)
# end of increment 4's steps -------------------------------------------------------------------------------------

STEPS: tuple[Step, ...] = (
    *CUSTOMER_STEPS,
    AMOUNTS,
    *FALLBACK_STEPS,
    FALLBACK,
    WITH_FALLBACK,
    CANDIDATES,
    CELLS,
    ISSUANCES,
)

# reverse actions and redemptions (plan.reversals, plan.redemptions; run by `decide_reversals`, `place_redemptions`)
REVERSE_ACTIONS = Step(
    "reverse_actions",
    schema.REVERSE_ACTIONS,
    (schema.ORDERED, schema.REVERSE_FALLBACK),
    reversals.reverse_actions,
    stored=True,
)
ORIGINALS = Step(
    "originals", schema.ORIGINALS, (schema.ORDERED, schema.REVERSE_ACTIONS), reversals.originals, stored=True
)
ACTIONS = Step(
    "actions",
    schema.ACTIONS,
    (schema.REVERSE_ACTIONS, schema.ORDERED, schema.ORIGINALS, schema.HOLDERS, schema.DIVISORS),
    reversals.actions,
    stored=False,
)
DECISIONS = Step("decisions", schema.DECISIONS, (schema.DECIDED, schema.MOVED), reversals.decisions, stored=True)
REDEMPTIONS = Step(
    "redemptions", schema.REDEMPTIONS, (schema.REDEMPTION_INPUT, schema.HOLDERS), redemptions.redemptions, stored=True
)
STEPS += (REVERSE_ACTIONS, ORIGINALS, ACTIONS, DECISIONS, REDEMPTIONS)

# expiry (plan.expiry): the history's local months (`at_end_of`: the driver makes `month_ends` from them), each
# event's expiry, then, once the rewards are decided, the lots (the pass's, and the closed form's)
MONTHS = Step("months", schema.MONTHS, (schema.ORDERED,), expiry.months, stored=False)
EXPIRY_TIMES = Step(
    "expiry_times", schema.EXPIRY_TIMES, (schema.ORDERED, schema.MONTH_ENDS), expiry.times, stored=False
)
LOTS = Step(
    "lots",
    schema.LOTS,
    (schema.ISSUED, schema.LOTTED, schema.PASS_LOTS, schema.EXPIRY_TIMES),
    expiry.lots,
    stored=True,
)
EXPIRY_STEPS: tuple[Step, ...] = (MONTHS, EXPIRY_TIMES, LOTS)

STEPS += EXPIRY_STEPS

# the ordered pass (plan.limits): with expiry the customers whose lots it keeps, the rewards it needs (their masks),
# the tail decided before it, its operations, then executor.map_partitions over
# `ops` (limits.Pass) by holder or as one task, the tail's decisions added to its outcome (limits.run_pass)
LOTTED = Step(
    "lotted", schema.LOTTED, (schema.REWARDS, schema.REDEMPTIONS, schema.DECISIONS), limits.lotted, stored=True
)
MASKED_ROWS = Step(
    "masked_rows",
    schema.MASKED_ROWS,
    (schema.NEEDED, schema.BOUND, schema.DECISIONS, schema.LOTTED, schema.REDEMPTIONS),
    limits.masked,
    stored=True,
)
TAIL = Step("tail", schema.TAIL, (schema.MASKED_ROWS, schema.MOVED, schema.DECISIONS), limits.tail, stored=True)
OPS = Step(
    "ops",
    schema.OPS,
    (schema.MASKED_ROWS, schema.TAIL, schema.MOVED, schema.DECISIONS, schema.REDEMPTIONS, schema.REWARDS,
     schema.EXPIRY_TIMES),
    limits.ops,
    stored=False,
)  # fmt: skip
STEPS += (LOTTED, MASKED_ROWS, TAIL, OPS)
