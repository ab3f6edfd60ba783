"""Caps, budgets, reversals and redemptions on Spark: the DuckDB engine's method (rewards_lab.replay.feature_store)
with DataFrames, and the same sequential pass (rewards_lab.replay.sequential) inside `mapInArrow`.

What is distributed:
- the reverse actions, their originals and decisions, and the redemptions' places (the plan's steps on a
  SparkExecutor: rewards_lab.replay.plan.reversals, rewards_lab.replay.plan.redemptions); the reverse actions
  and divisors of rows SQL cannot read exactly through the live evaluation in `mapInArrow`;
- the counters that can bind (an aggregation per family of counters) and each reward's `mask` (joins);
- the tail, the pass's operations with their credit, and the pass itself: the plan's steps on a SparkExecutor
  (rewards_lab.replay.plan.limits, the same as on DuckDB), the pass **per customer** (`map_partitions` keyed by
  holder: customers never share a counter, a reward or a balance) or, when a budget can bind or the ceiling may
  refuse, as **one task** over all operations in processing order.
What reaches the driver: the refunds processed after a later original (few: their (position, original) pairs
order them, `domain.processing_order`), which families of counters can bind (one number each), the redemptions
(read there) and, per redemption, how many events come at or before it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rewards_lab.domain.limits import LIFETIME_START, week_start
from rewards_lab.domain.rules import RuleSpec, number_of, read
from rewards_lab.replay.compiler import CompiledProgramme
from rewards_lab.replay.customers import FOUND
from rewards_lab.replay.fallback import all_outcomes
from rewards_lab.replay.limits_plan import LimitsPlan
from rewards_lab.replay.plan import limits as plan_limits
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.expiry import ExpiryPlan
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.redemptions import place_redemptions
from rewards_lab.replay.plan.reversals import DIVISORS, HOLDERS, REVERSE_FALLBACK, decide_reversals
from rewards_lab.replay.plan.rules import Context, slots_table
from rewards_lab.replay.sequential import DECISIONS, ITEMS, REDEMPTIONS
from rewards_lab.replay.spark_inputs import RowReader, SparkEventSource

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


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
    """The featured part of a Spark replay: the pass's outcome (None when it did not run), the reverse actions'
    decisions, the redemptions, and how customers resolve (`lookup`: None without a customers table)."""

    limits: LimitsPlan
    outcome: DataFrame | None
    actions: DataFrame  # seq, pos, slot, code, opos, fraction, refers, pday
    redemptions: DataFrame  # idx, holder, amount, t, rank, anchor
    lookup: DataFrame | None
    full: bool
    lotted: DataFrame | None = None  # with expiry: the customers whose lots the pass kept (holder)
    prefix: str = ""  # the plan's tables the outputs read (`outputs`): ordered, slots, decisions, the pass's parts

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
    spark: SparkSession,
    plan: CompiledProgramme,
    frames: dict[schema.Table, DataFrame],
    run: plan_limits.Pass,
    shape: plan_limits.PassShape,
    one_task: bool,
) -> tuple[DataFrame, DataFrame | None]:
    """(the pass's outcome: sequential.OUTCOMES; with expiry, the `lotted` customers): the plan's `lotted`,
    `masked_rows` and ordered pass (rewards_lab.replay.plan.limits) on a SparkExecutor over `frames` (its input
    tables as DataFrames; `bound` empty when absent)."""
    from rewards_lab.replay.engines.spark import SparkExecutor  # imports rewards_lab.replay.spark_engine

    ctx = Context(f"__spark_pass_{next(_names)}", plan, layout(plan), "spark", "", 0, shape=shape)
    executor = SparkExecutor(spark)
    made = [ctx.table(table) for table in frames]
    for table, frame in frames.items():
        frame.createOrReplaceTempView(ctx.table(table))
    if schema.BOUND not in frames:
        executor.register(ctx.table(schema.BOUND), BOUND.empty_table())
    try:
        lotted = None
        if shape.expiring:
            executor.create(ctx.table(schema.LOTTED), plan_limits.lotted(ctx), stored=True)
            lotted = executor.relation(ctx.table(schema.LOTTED))
        executor.create(ctx.table(schema.MASKED_ROWS), plan_limits.masked(ctx), stored=True)
        out = plan_limits.run_pass(executor, ctx, shape, run, one_task=one_task)
        return executor.relation(out), lotted
    finally:
        executor.close()
        for name in made:
            spark.catalog.dropTempView(name)


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
    events: DataFrame,
    plan: CompiledProgramme,
    source: SparkEventSource,
    lookup: DataFrame | None,
    spent: pa.Table | None,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(the reverse actions' decisions, the moved refunds, the redemptions): the plan's steps on a SparkExecutor
    over `events` (in order, with `__pos`); the exotic rows' reverse actions and divisors through `mapInArrow`."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from rewards_lab.replay.engines.spark import SparkExecutor  # imports rewards_lab.replay.spark_engine

    spark = events.sparkSession
    ctx = Context(f"__spark_features_{next(_names)}", plan, layout(plan), "spark", "", 0)  # no asset read
    executor = SparkExecutor(spark)
    made = [ctx.table(schema.ORDERED), ctx.table(schema.HOLDERS)]
    events.createOrReplaceTempView(made[0])
    if lookup is None:
        executor.register(made[1], HOLDERS.empty_table())
    else:
        lookup.select("__ref", F.col(FOUND).alias("__cid")).createOrReplaceTempView(made[1])

    def fallback(target: str) -> None:
        made.append(target)
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
        made.append(target)
        found = spark.createDataFrame(DIVISORS.empty_table())
        for of, sql in wanted:
            rows = spark.sql(sql).select("opos", *source.python_columns([of]))
            found = found.unionByName(
                rows.mapInArrow(_Divisors(of, source.row_reader([of])), from_arrow_schema(DIVISORS))
            )
        found.localCheckpoint(eager=True).createOrReplaceTempView(target)

    try:
        decide_reversals(executor, ctx, fallback, python_divisors)
        place_redemptions(executor, ctx, spent)
        tables = (schema.DECISIONS, schema.MOVED, schema.REDEMPTIONS)
        return tuple(spark.table(ctx.table(table)) for table in tables)  # type: ignore[return-value]
    finally:
        executor.close()
        for name in made:
            spark.catalog.dropTempView(name)


# the whole of it ----------------------------------------------------------------------------------------------
def decide_features(
    events: DataFrame,
    candidates: DataFrame,
    plan: CompiledProgramme,
    source: SparkEventSource,
    limits: LimitsPlan,
    zone: str,
    room: int | None,
    spent: pa.Table | None,
    expiry: ExpiryPlan | None = None,
    times: DataFrame | None = None,
) -> SparkFeatures:
    """Caps, budgets, reversals and redemptions over the candidates (as the DuckDB engine's `decide_features`):
    the pass runs when a counter can bind, a reverse action reverses or a redemption is given, and then also
    enforces the ceiling when the rewards asked for more than its room (`full`); `outcome` is None otherwise."""
    from pyspark.sql import functions as F

    lookup = None
    if source.customers is not None:
        built = source.customers.lookup is not None and plan.joins_customers
        lookup = source.customers.lookup if built else source.customers.build(False)
    decided, moved, redemptions = reversals_and_redemptions(events, plan, source, lookup, spent)
    refunds = decided.join(
        events.select(
            F.col("__pos").alias("pos"),
            "external_event_id",
            "customer_id",
            "occurred_at",
            F.col("type").alias("event_type"),
        ),
        "pos",
    )
    rule_index, action_index = F.lit(None).cast("int"), F.lit(None).cast("int")
    for slot in range(plan.slots):
        rule, action = plan.rule_of(slot)
        rule_index = F.when(F.col("slot") == F.lit(slot), F.lit(rule)).otherwise(rule_index)
        action_index = F.when(F.col("slot") == F.lit(slot), F.lit(action)).otherwise(action_index)
    refunds = refunds.withColumn("rule_index", rule_index).withColumn("action_index", action_index)
    refunds = holder_of(refunds, "customer_id", lookup).localCheckpoint(eager=True)
    positive = candidates.where(F.col("m") > 0).select(
        "seq", F.col("__pos").alias("pos"), "slot", "rule_index", "customer_id", "m", "occurred_at"
    )
    if expiry is not None:  # each reward's time and its lot's expiry (plan.expiry's `expiry_times`: pos, t, exp)
        assert times is not None
        positive = positive.join(times, "pos")
    rows = period_columns(holder_of(positive, "customer_id", lookup), limits.periods, zone).drop(
        "customer_id", "occurred_at"
    )
    bound, groups = binding(rows, limits) if limits.capped else (None, [])
    redeeming = spent is not None and spent.num_rows > 0
    full = expiry is not None and _asks_more(rows, room)  # expired points give room back: the pass holds it
    if not (groups or plan.reversals or redeeming or full):
        found = SparkFeatures(limits, None, refunds, redemptions, lookup, False)
        return outputs(found, events, plan, decided)
    if expiry is None:
        full = _asks_more(rows, room)
    shape = plan_limits.shape_of(limits, groups, full, expiry is not None, redeeming)
    frames = {schema.REWARDS: rows, schema.NEEDED: rows, schema.DECISIONS: decided, schema.MOVED: moved,
              schema.REDEMPTIONS: redemptions}  # fmt: skip
    if bound is not None:
        frames[schema.BOUND] = bound
    if times is not None:
        frames[schema.EXPIRY_TIMES] = times
    run = plan_limits.Pass(limits, room if full else None, None if expiry is None else expiry.as_of)
    outcome, lotted = run_pass(
        events.sparkSession, plan, frames, run, shape, plan_limits.one_task(limits, groups, full)
    )
    return outputs(SparkFeatures(limits, outcome, refunds, redemptions, lookup, full, lotted), events, plan, decided)


def outputs(features: SparkFeatures, events: DataFrame, plan: CompiledProgramme, decided: DataFrame) -> SparkFeatures:
    """`features` with the tables rewards_lab.replay.plan.outputs reads registered under a prefix of their own:
    `ordered`, `slots`, `decisions`, `redemptions`, `holders` (with a customers table) and the pass's parts
    (`redeemed`, `taken`, `decided_rewards`; empty when the pass did not run)."""
    from pyspark.sql import functions as F

    spark, prefix = events.sparkSession, f"__spark_outputs_{next(_names)}"
    views = {
        schema.ORDERED: events,
        schema.SLOTS: spark.createDataFrame(slots_table(layout(plan))),
        schema.DECISIONS: decided,
        schema.REDEMPTIONS: features.redemptions,
    }
    for table, frame in views.items():
        frame.createOrReplaceTempView(table.on(prefix))
    if features.lookup is not None:
        features.lookup.select("__ref", F.col(FOUND).alias("__cid")).createOrReplaceTempView(schema.HOLDERS.on(prefix))
    parts = ((schema.REDEEMED, "r", REDEMPTIONS), (schema.TAKEN, "i", ITEMS), (schema.DECIDED_REWARDS, "d", DECISIONS))
    for table, kind, columns in parts:
        part = features.part(kind)
        frame = spark.createDataFrame(columns.empty_table()) if part is None else part.select(*columns.names)
        frame.createOrReplaceTempView(table.on(prefix))
    return replace(features, prefix=prefix)


def _asks_more(rows: DataFrame, room: int | None) -> bool:
    """Whether the rewards ask for more than the ceiling's room (None: no ceiling): the ceiling can bind."""
    from pyspark.sql import functions as F

    if room is None:
        return False
    requested = rows.agg(F.sum(F.col("m").cast("decimal(38,0)"))).first()
    return int((requested[0] if requested is not None else 0) or 0) > room
