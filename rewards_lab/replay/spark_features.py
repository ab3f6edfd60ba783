"""Caps, budgets, reversals and redemptions on Spark: the plan's steps over the replay's own tables (its prefix:
`candidates`, `slots`, `ordered`, with expiry `expiry_times`), the same as on DuckDB, on a SparkExecutor.

What is distributed:
- the reverse actions, their originals and decisions, and the redemptions' places (rewards_lab.replay.plan.
  reversals, rewards_lab.replay.plan.redemptions); the reverse actions and divisors of rows SQL cannot read
  exactly through the live evaluation in `mapInArrow`;
- the counters that can bind (an aggregation per family of counters);
- `lotted`, `masked_rows`, the tail, the pass's operations with their credit, and the pass itself
  (rewards_lab.replay.plan.limits), **per customer** (`map_partitions` keyed by holder) or, when a budget can bind
  or the ceiling may refuse, as **one task** over all operations in processing order.
What reaches the driver: the refunds processed after a later original (few), which families of counters can bind
(one number each), the redemptions (read there) and, per redemption, how many events come at or before it.
The tables the outputs read (rewards_lab.replay.plan.outputs) stay under the replay's prefix: `holders`,
`decisions`, `redemptions`, the pass's parts (`decided_rewards`, `taken`, `redeemed`) and `corrections`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rewards_lab.domain.limits import LIFETIME_START, week_start
from rewards_lab.domain.rules import RuleSpec, number_of, read
from rewards_lab.replay.customers import FOUND
from rewards_lab.replay.fallback import all_outcomes
from rewards_lab.replay.limits_plan import LimitsPlan
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.plan import limits as plan_limits
from rewards_lab.replay.plan import outputs, schema
from rewards_lab.replay.plan.redemptions import place_redemptions
from rewards_lab.replay.plan.reversals import DIVISORS, HOLDERS, REVERSE_FALLBACK, decide_reversals
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text
from rewards_lab.replay.sequential import DECISIONS, ITEMS, REDEMPTIONS
from rewards_lab.replay.spark_inputs import RowReader, SparkEventSource

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from rewards_lab.replay.engines.spark import SparkExecutor


_names = itertools.count()
BOUND = pa.schema([pa.field("g", pa.int32()), pa.field("holder", pa.string()), pa.field("start", pa.int32())])


def holder_of(frame: DataFrame, column: str, lookup: DataFrame | None, alias: str = "holder") -> DataFrame:
    """The frame with `alias`: the customer id `column` resolves to in the lookup, else the reference itself."""
    from pyspark.sql import functions as F

    if lookup is None:
        return frame.withColumn(alias, F.col(column))
    ids = lookup.select(F.col("__ref").alias("__href"), F.col(FOUND).alias("__hid"))
    joined = frame.join(ids, frame[column] == ids["__href"], "left")
    return joined.withColumn(alias, F.coalesce(F.col("__hid"), F.col(column))).drop("__href", "__hid")


@dataclass
class SparkFeatures:
    """The featured part of a Spark replay: the pass's outcome (None when it did not run), whether customers
    resolve through a customers table (`lookup`: the outputs read `holders`), whether the pass held every reward
    (`full`) and, with expiry, the customers whose lots the pass kept (`lotted`)."""

    limits: LimitsPlan
    outcome: DataFrame | None
    lookup: bool
    full: bool
    lotted: DataFrame | None = None

    def part(self, kind: str) -> DataFrame | None:
        from pyspark.sql import functions as F

        return None if self.outcome is None else self.outcome.where(F.col("kind") == F.lit(kind))


def period_columns(frame: DataFrame, periods: list[str], zone: str) -> DataFrame:
    """The frame with d_<period>: the first local day (a day number, `domain.limits.day_number`) of each period
    holding occurred_at, as `domain.limits.period_start` (ISO weeks: `week_start`)."""
    from pyspark.sql import functions as F

    local = F.to_date(F.from_utc_timestamp(F.col("occurred_at"), zone))
    epoch = F.lit(LIFETIME_START.isoformat()).cast("date")
    lday = F.datediff(local, epoch)
    forms: dict[str, Column] = {
        "day": lday,
        "week": week_start(lday),
        "month": F.datediff(F.trunc(local, "month"), epoch),
        "year": F.datediff(F.trunc(local, "year"), epoch),
    }
    for period in periods:
        if period != "lifetime":
            frame = frame.withColumn(f"d_{period}", forms[period].cast("int"))
    return frame


# the candidate rewards, their counters and the pass -----------------------------------------------------------
def binding(rows: DataFrame, limits: LimitsPlan) -> tuple[DataFrame | None, list[int]]:
    """(the counters that can bind: g, holder, start; the families that have some)."""
    from pyspark.sql import functions as F

    found = None
    for g, grouping in enumerate(limits.groupings()):
        start = F.lit(0) if grouping.period == "lifetime" else F.col(f"d_{grouping.period}")
        holder = F.col("holder") if grouping.per_customer else F.lit("")
        subset = rows if grouping.rule_index is None else rows.where(F.col("rule_index") == grouping.rule_index)
        counted = subset.groupBy(holder.alias("holder"), start.cast("int").alias("start")).agg(
            F.sum(F.col("m").cast("decimal(38,0)")).alias("amount"), F.count("*").alias("n")
        )
        over = F.lit(False)
        for cap in grouping.caps:
            if cap.max_amount_minor is not None:
                over = over | (F.col("amount") > F.lit(cap.max_amount_minor))
            if cap.max_count is not None:
                over = over | (F.col("n") > F.lit(cap.max_count))
        part = counted.where(over).select(F.lit(g).alias("g"), "holder", "start")
        found = part if found is None else found.unionByName(part)
    if found is None:
        return None, []
    found = found.localCheckpoint(eager=True)
    return found, sorted(int(row["g"]) for row in found.select("g").distinct().collect())


def run_pass(
    executor: SparkExecutor, ctx: Context, run: plan_limits.Pass, shape: plan_limits.PassShape, one_task: bool
) -> tuple[DataFrame, DataFrame | None]:
    """(the pass's outcome: sequential.OUTCOMES; with expiry, the `lotted` customers): the plan's `lotted`,
    `masked_rows` and ordered pass (rewards_lab.replay.plan.limits) over the replay's tables."""
    shaped = replace(ctx, shape=shape)
    lotted = None
    if shape.expiring:
        executor.create(ctx.table(schema.LOTTED), plan_limits.lotted(shaped), stored=True)
        lotted = executor.relation(ctx.table(schema.LOTTED))
    executor.create(ctx.table(schema.MASKED_ROWS), plan_limits.masked(shaped), stored=True)
    out = plan_limits.run_pass(executor, shaped, shape, run, one_task=one_task)
    return executor.relation(out), lotted


# reverse actions and redemptions: the plan's steps ------------------------------------------------------------
@dataclass(frozen=True)
class _Reversing:
    """The live evaluation's reverse actions of rows SQL cannot read exactly (runs on the executors)."""

    specs: list[RuleSpec]
    first_slot: tuple[int, ...]
    reader: RowReader

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            events = [(str(row["type"]), self.reader.data(row)) for row in rows]
            facts = [self.reader.facts(row) for row in rows]
            found: dict[str, list[Any]] = {name: [] for name in REVERSE_FALLBACK.names}
            for row, (_, reversals) in zip(rows, all_outcomes(self.specs, self.first_slot, events, facts), strict=True):
                for slot, code, original, numerator in reversals:
                    values = (row["__pos"], slot, row["__t"], code, original, numerator)
                    for key, value in zip(REVERSE_FALLBACK.names, values, strict=True):
                        found[key].append(value)
            yield pa.RecordBatch.from_pydict(found, REVERSE_FALLBACK)


@dataclass(frozen=True)
class _Divisors:
    """Each original's number in the field `of`, read by the live engine's `read` (runs on the executors)."""

    of: str
    reader: RowReader

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            values = []
            for row in rows:
                found = number_of(read(self.reader.data(row), self.of))
                values.append(None if found is None else str(found))
            columns = {"opos": [row["opos"] for row in rows], "of": [self.of] * len(rows), "dv": values}
            yield pa.RecordBatch.from_pydict(columns, DIVISORS)


def reversals_and_redemptions(
    executor: SparkExecutor, ctx: Context, source: SparkEventSource, lookup: DataFrame | None, spent: pa.Table | None
) -> None:
    """The reverse actions' decisions, the moved refunds and the redemptions (`decisions`, `moved`,
    `redemptions`, with `holders`): the plan's steps over the replay's `ordered`; the exotic rows' reverse actions
    and divisors through `mapInArrow`."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    spark, plan = executor.spark, ctx.plan
    events = spark.table(ctx.table(schema.ORDERED))
    if lookup is None:
        executor.register(ctx.table(schema.HOLDERS), HOLDERS.empty_table())
    else:
        lookup.select("__ref", F.col(FOUND).alias("__cid")).createOrReplaceTempView(ctx.table(schema.HOLDERS))

    def fallback(target: str) -> None:
        exotic, types = plan.exotic_sql, sorted({r.event_type for r in plan.reversals})
        if exotic is None or not types:
            executor.register(target, REVERSE_FALLBACK.empty_table())
            return
        facts = source.customers.reader() if source.customers is not None and plan.reads_customers else None
        reading = [*source.python_columns(plan.fields), *(F.col(c) for c in (facts.columns if facts else []))]
        rows = events.where(F.col("type").isin(types)).where(F.expr(exotic))
        rows = rows.select("__pos", "type", F.unix_micros("occurred_at").alias("__t"), *reading)
        function = _Reversing(plan.specs, plan.first_slot, source.row_reader(plan.fields, facts))
        rows.mapInArrow(function, from_arrow_schema(REVERSE_FALLBACK)).createOrReplaceTempView(target)

    def python_divisors(target: str, wanted: Sequence[tuple[str, str]]) -> None:
        found = spark.createDataFrame(DIVISORS.empty_table())
        for of, sql in wanted:
            rows = spark.sql(sql).select("opos", *source.python_columns([of]))
            found = found.unionByName(
                rows.mapInArrow(_Divisors(of, source.row_reader([of])), from_arrow_schema(DIVISORS))
            )
        found.localCheckpoint(eager=True).createOrReplaceTempView(target)

    decide_reversals(executor, ctx, fallback, python_divisors)
    place_redemptions(executor, ctx, spent)


# the whole of it ----------------------------------------------------------------------------------------------
def decide_features(
    executor: SparkExecutor,
    ctx: Context,
    source: SparkEventSource,
    limits: LimitsPlan,
    zone: str,
    room: int | None,
    spent: pa.Table | None,
) -> SparkFeatures:
    """Caps, budgets, reversals and redemptions over the replay's `candidates` (as the DuckDB engine's
    `decide_features`): the pass runs when a counter can bind, a reverse action reverses or a redemption is given,
    and then also enforces the ceiling when the rewards asked for more than its room (`full`); `outcome` is None
    otherwise. With expiry (`ctx.expiry`; `expiry_times` made) the pass keeps the consumed lots."""
    from pyspark.sql import functions as F

    spark, plan, expiry = executor.spark, ctx.plan, ctx.expiry
    lookup = None
    if source.customers is not None:
        built = source.customers.lookup is not None and plan.joins_customers
        lookup = source.customers.lookup if built else source.customers.build(False)
    reversals_and_redemptions(executor, ctx, source, lookup, spent)
    slots = spark.table(ctx.table(schema.SLOTS)).select("k", "i", "slot", "rule_index")
    times = spark.table(ctx.table(schema.ORDERED)).select(F.col("__pos").alias("pos"), "occurred_at")
    positive = (
        spark.table(ctx.table(schema.CANDIDATES))
        .where(F.col("m") > 0)
        .join(slots, ["k", "i"])
        .join(times, "pos")
        .select(
            (F.col("pos") * F.lit(ctx.layout.slots) + F.col("slot")).alias("seq"),
            "pos", "slot", "rule_index", "customer_id", "m", "occurred_at",
        )
    )  # fmt: skip
    if expiry is not None:  # each reward's time and its lot's expiry (plan.expiry's `expiry_times`: pos, t, exp)
        positive = positive.join(spark.table(ctx.table(schema.EXPIRY_TIMES)), "pos")
    rows = period_columns(holder_of(positive, "customer_id", lookup), limits.periods, zone).drop(
        "customer_id", "occurred_at"
    )
    bound, groups = binding(rows, limits) if limits.capped else (None, [])
    redeeming = spent is not None and spent.num_rows > 0
    full = expiry is not None and _asks_more(rows, room)  # expired points give room back: the pass holds it
    outcome, lotted = None, None
    if groups or plan.reversals or redeeming or full:
        if expiry is None:
            full = _asks_more(rows, room)
        shape = plan_limits.shape_of(limits, groups, full, expiry is not None, redeeming)
        for table in (schema.REWARDS, schema.NEEDED):
            rows.createOrReplaceTempView(ctx.table(table))
        if bound is None:
            executor.register(ctx.table(schema.BOUND), BOUND.empty_table())
        else:
            bound.createOrReplaceTempView(ctx.table(schema.BOUND))
        run = plan_limits.Pass(limits, room if full else None, None if expiry is None else expiry.as_of)
        outcome, lotted = run_pass(executor, ctx, run, shape, plan_limits.one_task(limits, groups, full))
    else:
        full = False
    parts = [(schema.REDEEMED, "r", REDEMPTIONS), (schema.TAKEN, "i", ITEMS), (schema.DECIDED_REWARDS, "d", DECISIONS)]
    if expiry is not None:
        parts.append((schema.PASS_LOTS, "l", LOTS))
    for table, kind, columns in parts:
        if outcome is None:
            executor.register(ctx.table(table), columns.empty_table())
        else:
            out = ctx.table(schema.PASS_OUT)
            executor.create(
                ctx.table(table),
                Text(f"SELECT {', '.join(columns.names)} FROM {out} WHERE kind = '{kind}'"),
                stored=False,
            )
    if expiry is not None and lotted is None:
        executor.register(ctx.table(schema.LOTTED), pa.table({"holder": pa.array([], pa.string())}))
    executor.create(
        ctx.table(schema.CORRECTIONS), Text(outputs.corrections_sql(ctx.layout.slots, ctx.prefix)), stored=True
    )
    return SparkFeatures(limits, outcome, lookup is not None, full, lotted)


def _asks_more(rows: DataFrame, room: int | None) -> bool:
    """Whether the rewards ask for more than the ceiling's room (None: no ceiling): the ceiling can bind."""
    from pyspark.sql import functions as F

    if room is None:
        return False
    requested = rows.agg(F.sum(F.col("m").cast("decimal(38,0)"))).first()
    return int((requested[0] if requested is not None else 0) or 0) > room
