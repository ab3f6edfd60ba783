"""Reverse actions and redemptions on Spark (as rewards_lab.replay.reversal_store on DuckDB): each matched reverse
action and its decision, distributed (`mapInArrow` runs `replay.reversal_actions` on the executors, and the live
evaluation for rows SQL cannot read exactly), the refunds processed after a later original (their pairs reach the
driver, where `domain.processing_order` places them), and the redemptions' places (one search per event on the
executors in the sorted redemption times; a count per redemption reaches the driver).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.processing_order import processing_keys
from rewards_lab.domain.rules import RuleSpec, number_of, read
from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import SPARK, CompiledProgramme
from rewards_lab.replay.customers import FOUND
from rewards_lab.replay.fallback import all_outcomes
from rewards_lab.replay.reversal_actions import decide
from rewards_lab.replay.spark_inputs import RowReader, SparkEventSource
from rewards_lab.replay.sql_values import number_markers, numeric

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def holder_of(frame: DataFrame, column: str, lookup: DataFrame | None, alias: str = "holder") -> DataFrame:
    """The frame with `alias`: the customer id `column` resolves to in the lookup, else the reference itself."""
    from pyspark.sql import functions as F

    if lookup is None:
        return frame.withColumn(alias, F.col(column))
    ids = lookup.select(F.col("__ref").alias("__href"), F.col(FOUND).alias("__hid"))
    joined = frame.join(ids, frame[column] == ids["__href"], "left")
    return joined.withColumn(alias, F.coalesce(F.col("__hid"), F.col(column))).drop("__href", "__hid")


# reverse actions ----------------------------------------------------------------------------------------------
def _reverse_batches(
    specs: list[RuleSpec], first_slot: tuple[int, ...], reader: RowReader, schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The live evaluation's reverse actions of rows SQL cannot read exactly (runs on the executors)."""

    def evaluate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            events = [(str(row["type"]), reader.data(row)) for row in rows]
            facts = [reader.facts(row) for row in rows]
            found: dict[str, list[Any]] = {name: [] for name in schema.names}
            for row, (_, reversals) in zip(rows, all_outcomes(specs, first_slot, events, facts), strict=True):
                for slot, code, original, numerator in reversals:
                    for key, value in zip(
                        schema.names, (row["__pos"], slot, row["occurred_at"], code, original, numerator), strict=True
                    ):
                        found[key].append(value)
            yield pa.RecordBatch.from_pydict(found, schema)

    return evaluate


def reverse_actions(events: DataFrame, plan: CompiledProgramme, source: SparkEventSource) -> DataFrame:
    """(pos, slot, t_at, code, ref, num) of every matched reverse action."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

    schema = StructType(
        [
            StructField("pos", LongType()),
            StructField("slot", IntegerType()),
            StructField("t_at", TimestampType()),
            StructField("code", StringType()),
            StructField("ref", StringType()),
            StructField("num", StringType()),
        ]
    )
    exotic = plan.exotic_sql
    parts = []
    for reversal in plan.reversals:
        slot = plan.first_slot[reversal.rule_index] + reversal.action_index
        rows = events.where(F.col("type") == F.lit(reversal.event_type)).where(F.expr(plan.render(reversal.where)))
        if exotic is not None:
            rows = rows.where(~F.expr(exotic))
        numerator = F.lit(None) if reversal.numerator is None else F.expr(plan.render(reversal.numerator))
        parts.append(
            rows.select(
                F.col("__pos").alias("pos"),
                F.lit(slot).cast("int").alias("slot"),
                F.col("occurred_at").alias("t_at"),
                F.lit(None).cast("string").alias("code"),
                F.expr(plan.render(reversal.reference)).cast("string").alias("ref"),
                numerator.cast("string").alias("num"),
            )
        )
    found = parts[0] if parts else events.sparkSession.createDataFrame([], schema)
    for part in parts[1:]:
        found = found.unionByName(part)
    if exotic is not None and plan.reversals:
        types = sorted({r.event_type for r in plan.reversals})
        facts = source.customers.reader() if source.customers is not None and plan.reads_customers else None
        reading = [*source.python_columns(plan.fields), *(F.col(c) for c in (facts.columns if facts else []))]
        rows = events.where(F.col("type").isin(types)).where(F.expr(exotic))
        rows = rows.select("__pos", "type", "occurred_at", *reading)
        arrow = pa.schema(
            [
                pa.field("pos", pa.int64()),
                pa.field("slot", pa.int32()),
                pa.field("t_at", pa.timestamp("us", tz="UTC")),
                pa.field("code", pa.string()),
                pa.field("ref", pa.string()),
                pa.field("num", pa.string()),
            ]
        )
        reader = source.row_reader(plan.fields, facts)
        found = found.unionByName(rows.mapInArrow(_reverse_batches(plan.specs, plan.first_slot, reader, arrow), schema))
    return found


def _divisor_batches(of: str, reader: RowReader) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def divisors(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            values = []
            for row in rows:
                found = number_of(read(reader.data(row), of))
                values.append(None if found is None else str(found))
            yield pa.RecordBatch.from_pydict(
                {"opos": [row["opos"] for row in rows], "of": [of] * len(rows), "dv": values},
                pa.schema([("opos", pa.int64()), ("of", pa.string()), ("dv", pa.string())]),
            )

    return divisors


def divisors(events: DataFrame, originals: DataFrame, plan: CompiledProgramme, source: SparkEventSource) -> DataFrame:
    """(opos, of, dv): each original's number in each field a fraction divides by, as exact text."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [StructField("opos", LongType()), StructField("of", StringType()), StructField("dv", StringType())]
    )
    found = events.sparkSession.createDataFrame([], schema)
    for of in dict.fromkeys(r.of for r in plan.reversals if r.of is not None):
        field_source = source.field(of)
        value = numeric(field_source, SPARK).value
        exotic, unsafe = number_markers(field_source, SPARK)
        rows = events.join(originals.select("opos"), events["__pos"] == originals["opos"])
        marker = exotic if unsafe is None else exp.or_(exotic, unsafe)
        flagged = F.coalesce(F.expr(SPARK.render(marker)), F.lit(False))
        plain = rows.where(~flagged).select(
            "opos", F.lit(of).alias("of"), F.expr(SPARK.render(value)).cast("string").alias("dv")
        )
        python = rows.where(flagged).select("opos", *source.python_columns([of]))
        reader = source.row_reader([of])
        found = found.unionByName(plain).unionByName(python.mapInArrow(_divisor_batches(of, reader), schema))
    return found


def _decision_batches(
    by_slot: dict[int, tuple[Decimal | None, str | None, bool]], slots: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("pos", pa.int64()),
            ("slot", pa.int32()),
            ("code", pa.string()),
            ("opos", pa.int64()),
            ("fraction", pa.string()),
            ("refers", pa.bool_()),
            ("t", pa.int64()),
            ("ot", pa.int64()),
            ("oholder", pa.string()),
        ]
    )

    def decisions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list[Any]] = {name: [] for name in schema.names}
            for row in batch.to_pylist():
                constant, of, anyone = by_slot[row["slot"]]
                numerator = None if row["num"] is None else Decimal(row["num"])
                divisor = None if row["dv"] is None else Decimal(row["dv"])
                same = anyone or row["rh"] == row["oholder"]
                found = row["opos"] is not None
                made = decide(row["ref"], numerator, constant, of, found, divisor, row["code"], same)
                values = (
                    row["pos"] * slots + row["slot"],
                    row["pos"],
                    row["slot"],
                    made.code,
                    row["opos"],
                    made.fraction,
                    made.references,
                    row["t"],
                    row["ot"],
                    row["oholder"],
                )
                for key, value in zip(schema.names, values, strict=True):
                    out[key].append(value)
            yield pa.RecordBatch.from_pydict(out, schema)

    return decisions


def decide_actions(
    events: DataFrame,
    actions: DataFrame,
    plan: CompiledProgramme,
    source: SparkEventSource,
    lookup: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame]:
    """(the actions' decisions with pday and oholder, the original event's customer (whose reversal it is), the
    moved refunds (pos, ppos, psub, pt: the time of their place)); `lookup` resolves customers."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

    spark = events.sparkSession
    named = actions.where(F.col("ref").isNotNull()).select("ref").distinct()
    first = Window.partitionBy("ref").orderBy("opos")
    originals = (
        events.select(
            F.col("external_event_id").alias("ref"), F.col("__pos").alias("opos"), "occurred_at", "customer_id"
        )
        .join(named, "ref", "left_semi")
        .withColumn("__rank", F.row_number().over(first))
        .where("__rank = 1")
        .select("ref", "opos", (F.unix_micros(F.col("occurred_at"))).alias("ot"), F.col("customer_id").alias("oc"))
    )
    by_slot = {
        plan.first_slot[r.rule_index] + r.action_index: (r.fraction, r.of, r.any_customer) for r in plan.reversals
    }
    of_of = F.lit(None).cast("string")
    for slot, (_, of, _) in by_slot.items():
        of_of = F.when(F.col("slot") == F.lit(slot), F.lit(of)).otherwise(of_of)
    refunders = events.select(F.col("__pos").alias("pos"), F.col("customer_id").alias("rc"))
    joined = (
        actions.join(originals, "ref", "left")
        .join(refunders, "pos")
        .withColumn("of", of_of)
        .join(divisors(events, originals, plan, source), ["opos", "of"], "left")
    )
    joined = holder_of(holder_of(joined, "rc", lookup, "rh"), "oc", lookup, "oholder").select(
        "pos", "slot", "code", "ref", "num", "opos", "dv", F.unix_micros("t_at").alias("t"), "ot", "rh", "oholder"
    )
    schema = StructType(
        [
            StructField("seq", LongType()),
            StructField("pos", LongType()),
            StructField("slot", IntegerType()),
            StructField("code", StringType()),
            StructField("opos", LongType()),
            StructField("fraction", StringType()),
            StructField("refers", BooleanType()),
            StructField("t", LongType()),
            StructField("ot", LongType()),
            StructField("oholder", StringType()),
        ]
    )
    decided = joined.mapInArrow(_decision_batches(by_slot, plan.slots), schema).localCheckpoint(eager=True)
    later = decided.where(F.col("refers") & (F.col("opos") > F.col("pos")))
    pairs = later.groupBy("pos").agg(F.max(F.struct("opos", "ot")).alias("o")).collect()
    follows = {int(row["pos"]): int(row["o"]["opos"]) for row in pairs}
    stamps = {int(row["o"]["opos"]): int(row["o"]["ot"]) for row in pairs}
    keys = processing_keys(follows)
    moved_rows = [(pos, ppos, psub, stamps[ppos] // DAY_US, stamps[ppos]) for pos, (ppos, psub) in keys.items()]
    moved_schema = StructType(
        [
            StructField("pos", LongType()),
            StructField("ppos", LongType()),
            StructField("psub", IntegerType()),
            StructField("mday", IntegerType()),
            StructField("pt", LongType()),  # the time of the event it is processed after (epoch microseconds)
        ]
    )
    moved = spark.createDataFrame(moved_rows, moved_schema)
    with_day = decided.join(F.broadcast(moved.select("pos", "mday")), "pos", "left").withColumn(
        "pday", F.coalesce(F.col("mday"), F.floor(F.col("t") / F.lit(DAY_US))).cast("int")
    )
    return with_day.drop("mday"), moved.drop("mday")


# redemptions --------------------------------------------------------------------------------------------------
def _bucket_batches(times: np.ndarray) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def buckets(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            stamps = np.asarray(batch.column(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            found = np.searchsorted(times, stamps, side="left")
            yield pa.RecordBatch.from_pydict({"b": pa.array(found, pa.int64())})

    return buckets


def redemption_rows(ordered: DataFrame, table: pa.Table | None, lookup: DataFrame | None) -> DataFrame:
    """(idx, holder, amount, t, rank, anchor): the redemptions, each after the last event at or before it. Counted
    distributed: each event falls in the bucket of the first redemption at or after it (a search in the sorted
    redemption times, sent to the executors); a redemption's anchor is the events of its bucket and the earlier
    ones, less one."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    spark = ordered.sparkSession
    if table is None or table.num_rows == 0:
        schema = "idx long, customer_id string, amount long, t long, rank long, anchor long"
        return holder_of(spark.createDataFrame([], schema), "customer_id", lookup).drop("customer_id")
    times = np.asarray(table.column("t").to_numpy(), dtype=np.int64)
    order = np.argsort(times, kind="stable")
    sorted_times = times[order]
    stamps = ordered.select(F.unix_micros(F.col("occurred_at")).alias("t"))
    bucketed = stamps.mapInArrow(_bucket_batches(sorted_times), StructType([StructField("b", LongType())]))
    counts = np.zeros(len(times) + 1, dtype=np.int64)
    for row in bucketed.groupBy("b").count().collect():
        counts[int(row["b"])] = int(row["count"])
    at_or_before = np.cumsum(counts)[: len(times)]  # events at or before each sorted redemption time
    anchors = np.empty(len(times), dtype=np.int64)
    anchors[order] = at_or_before - 1
    rows = table.rename_columns(["idx", "customer_id", "amount", "t", "rank"]).append_column(
        "anchor", pa.array(anchors, pa.int64())
    )
    frame = spark.createDataFrame(rows.to_pandas())
    return holder_of(frame, "customer_id", lookup).drop("customer_id")
