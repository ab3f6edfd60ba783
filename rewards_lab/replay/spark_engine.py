"""Replay on Spark: the same compiled plan as the DuckDB engine (rewards_lab.replay.compiler, rendered with
SQLGlot's Spark dialect), the same issuance table, row for row.

1. **Order.** Events are range-partitioned and sorted by (`occurred_at`, input order) across the cluster; each
   row's position is its partition's offset (per-partition counts, a number per partition on the driver) plus its
   index within the partition: `seq = position * slots + slot`, as on DuckDB.
2. **Rules.** One projection per event: the compiled amounts of its type's rule actions as an array, exploded
   into candidate issuances (nothing-issued amounts dropped). Rows SQL cannot read exactly are evaluated by the
   live engine's own functions inside `mapInArrow`, on the executors (rewards_lab.replay.fallback).
3. **Ceiling.** The supply ceiling in `seq` order across the whole history, by the two-pass method of
   rewards_lab.replay.spark_ceiling: a few numbers and at most a bounded set of `seq`s reach the driver.

Nothing of the history is collected to the driver; the issuance table is a DataFrame, written by the executors.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from sqlglot import exp

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.ceiling import room_under
from rewards_lab.domain.money import parse_ceiling, to_decimal
from rewards_lab.domain.schedule import instant
from rewards_lab.replay import input_checks, spark_feature_result
from rewards_lab.replay.compiler import (
    BENEFICIARY_MISSING,
    NOT_FOUND_BASE,
    SPARK,
    TOO_LARGE,
    CompiledProgramme,
    cast,
    compile_programme,
    number,
    rule_specs,
    string,
)
from rewards_lab.replay.engine import (
    EXPIRED_COLUMNS,
    ISSUANCE_COLUMNS,
    LOT_COLUMNS,
    REDEMPTION_COLUMNS,
    REVERSAL_COLUMNS,
    STEPS,
    Progress,
    ProgressReporter,
    definition_of,
    evaluation,
    frame_of,
    parse_supply,
)
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.limits_plan import has_features, limits_plan
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan import outputs, rules, schema
from rewards_lab.replay.plan.customers import facts_query
from rewards_lab.replay.plan.expiry import ExpiryPlan, expiry_plan
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.run import PlanRun, evaluated
from rewards_lab.replay.plan.run import run as run_plan
from rewards_lab.replay.redemptions import redemptions_table
from rewards_lab.replay.spark_ceiling import CeilingDecision, decide
from rewards_lab.replay.spark_customers import open_spark_customers
from rewards_lab.replay.spark_features import SparkFeatures, decide_features
from rewards_lab.replay.spark_inputs import (
    FILE,
    ORDER,
    SparkEventSource,
    check_parquet_path,
    open_spark_events,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# PySpark 4.x warns about pandas 3 on every Arrow exchange; this engine exchanges Arrow tables only.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
_CANDIDATE_COLUMNS = ("__pos", "external_event_id", "customer_id", "occurred_at", "type")
_names = itertools.count()
_CODES = ("amount_too_large", "asset_supply_exhausted", "beneficiary_missing", "beneficiary_not_found")


def spark_session() -> SparkSession:
    """The active Spark session; else one from spark-submit's configuration; else a local one (all cores)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName("rewards-lab replay")
    if not SparkConf().contains("spark.master"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local workers run this interpreter
        builder = (
            builder.master("local[*]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.driver.memory", "2g")
        )
    session = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# 1. order ------------------------------------------------------------------------------------------------------
def with_positions(frame: DataFrame, keys: Sequence[str] = ("occurred_at", FILE, ORDER)) -> tuple[DataFrame, int]:
    """The events with `__pos`, their position in processing order (by `keys`, the first a time every event
    has); and how many there are."""
    from pyspark.sql import functions as F

    partitions = max(1, int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1))
    numbered = (
        frame.repartitionByRange(partitions, *keys)
        .sortWithinPartitions(*keys)
        .withColumn("__pid", F.spark_partition_id())
        .withColumn("__local", F.monotonically_increasing_id())
        .localCheckpoint(eager=True)  # fixed from here: the counts and the positions see the same partitions
    )
    per_partition = numbered.groupBy("__pid").agg(
        F.count("*").alias("rows"), F.count_if(F.col(keys[0]).isNull()).alias("untimed")
    )
    fetched = per_partition.collect()
    if any(int(row["untimed"]) for row in fetched):
        raise ServiceError("field_required", "every event needs an occurred_at", field="occurred_at")
    counts = {int(row["__pid"]): int(row["rows"]) for row in fetched}
    offsets, total = [], 0
    for pid in range(max(counts, default=-1) + 1):
        offsets.append(total)
        total += counts.get(pid, 0)
    if not offsets:
        return numbered.withColumn("__pos", F.lit(0).cast("long")), 0
    # monotonically_increasing_id is (partition index << 33) + the row's index within the partition
    local = F.col("__local") - F.col("__pid").cast("long") * F.lit(1 << 33)
    offset = F.element_at(F.array(*(F.lit(o).cast("long") for o in offsets)), F.col("__pid") + 1)
    return numbered.withColumn("__pos", offset + local).drop("__pid", "__local"), total


# 2. rules -------------------------------------------------------------------------------------------------------
def amounts_expression(plan: CompiledProgramme) -> str:
    """Spark SQL: per event, an array of (slot, m, r) for its type's rule actions (NULL for a type without
    rules); r is the customer a beneficiary's action rewards (NULL: the event's customer)."""
    case = exp.Case(this=exp.column("type", quoted=True))
    for group in plan.by_type:
        elements = [
            exp.Struct(
                expressions=[
                    exp.PropertyEQ(this=exp.to_identifier("slot"), expression=cast(number(slot), "INT")),
                    exp.PropertyEQ(this=exp.to_identifier("m"), expression=cast(amount, "BIGINT")),
                    exp.PropertyEQ(this=exp.to_identifier("r"), expression=cast(recipient or exp.null(), "STRING")),
                ]
            )
            for slot, amount, recipient in zip(group.slots, group.amounts, group.recipients, strict=True)
        ]
        case = case.when(string(group.event_type), exp.Array(expressions=elements))
    return plan.render(case)


def with_facts(ordered: DataFrame, plan: CompiledProgramme, source: SparkEventSource) -> DataFrame:
    """The events with what the rules read beyond them (rewards_lab.replay.plan.customers.facts_query): the
    customer's facts, each beneficiary field's reference and, with a customers table, the id it resolves to."""
    customers = source.customers
    lookup = None
    if customers is not None and plan.joins_customers:
        lookup = customers.build(plan.reads_customers)
    facts = customers.columns if customers is not None and plan.reads_customers else []
    if not facts and not plan.beneficiaries:
        return ordered
    prefix = f"__spark_facts_{next(_names)}"
    events, table = schema.EVENTS.on(prefix), schema.CUSTOMERS_LOOKUP.on(prefix)
    ordered.createOrReplaceTempView(events)
    if lookup is not None:
        lookup.createOrReplaceTempView(table)
    query = facts_query(events, None if lookup is None else table, facts, plan.beneficiaries)
    return ordered.sparkSession.sql(query.on("spark"))


def sql_candidates(events: DataFrame, plan: CompiledProgramme) -> DataFrame:
    from pyspark.sql import functions as F

    rows = events if plan.exotic_sql is None else events.where(~F.expr(plan.exotic_sql))
    exploded = rows.select(*_CANDIDATE_COLUMNS, F.explode(F.expr(amounts_expression(plan))).alias("__c"))
    rewarded = F.coalesce(F.col("__c.r"), F.col("customer_id")).alias("customer_id")
    columns = [rewarded if name == "customer_id" else F.col(name) for name in _CANDIDATE_COLUMNS]
    return exploded.select(*columns, "__c.slot", "__c.m").where(F.col("m") != 0)


def fallback_candidates(
    events: DataFrame, plan: CompiledProgramme, source: SparkEventSource
) -> tuple[DataFrame | None, int]:
    """The candidates of the rows SQL cannot read exactly (the plan's fallback: rewards_lab.replay.plan.run.
    evaluated), and how many such rows there are."""
    from pyspark.sql import functions as F

    from rewards_lab.replay.engines.spark import SparkExecutor  # imports this module

    if plan.exotic_sql is None:
        return None, 0
    prefix = f"__spark_fallback_{next(_names)}"
    events.createOrReplaceTempView(schema.ORDERED.on(prefix))
    customers, lookup = source.customers, None
    if customers is not None and plan.joins_customers:
        built = customers.lookup if customers.lookup is not None else customers.build(plan.reads_customers)
        built.createOrReplaceTempView(schema.CUSTOMERS_LOOKUP.on(prefix))
        lookup = customers.lookup_spec(plan.reads_customers)
    reading, evaluate = evaluation(source, plan)
    context = Context(prefix, plan, layout(plan), "spark", "", 0, lookup=lookup, reading=reading)
    count, found = evaluated(SparkExecutor(events.sparkSession), context, evaluate)
    if not found:
        return None, count
    rows = events.sparkSession.table(schema.FALLBACK_ROWS.on(prefix))
    joined = rows.join(events.select(*_CANDIDATE_COLUMNS), rows["pos"] == events["__pos"])
    rewarded = F.coalesce(F.col("b"), F.col("customer_id")).alias("customer_id")
    columns = [rewarded if name == "customer_id" else F.col(name) for name in _CANDIDATE_COLUMNS]
    return joined.select(*columns, F.col("slot"), F.col("m")), count


def _by_slot(values: list[int], slot: Column) -> Column:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*(F.lit(v) for v in values)), slot + 1).cast("int")


# the replay -----------------------------------------------------------------------------------------------------
@dataclass
class SparkReplayResult:
    """The outcome of a replay on Spark, with the DuckDB engine's API (rewards_lab.replay.engine.ReplayResult):
    `issuances` is a DataFrame with the same columns and rows (order by `seq` to read them in order)."""

    definition: ProgrammeDefinition
    spark: SparkSession
    events_processed: int
    seconds: float
    ceiling: Decimal | None
    opening_supply: Decimal
    python_rows: int  # events evaluated by the Python fallback
    _candidates: DataFrame  # on the plan: its `candidates` view
    _decision: CeilingDecision | None  # None: on the plan (its `ceiling_kept` holds the ceiling's decision)
    _features: SparkFeatures | None = None  # caps, budgets, reversals or redemptions (None: the programme has none)
    _expiry: ExpiryPlan | None = None  # lots expire (None: the programme's points never do)
    _tables: str = ""  # with expiry: the prefix of its tables (plan.schema.EXPIRY_TABLES, `slots`)
    _rule_of: tuple[tuple[int, int], ...] = ()  # per slot: (rule index, action index)
    _plan: PlanRun | None = None  # the replay plan's tables (rewards_lab.replay.plan): no features, no customers
    warnings: tuple[str, ...] = ()  # inputs that probably make this forecast wrong (replay.input_checks)

    @property
    def _decimals(self) -> int:
        return self.definition.asset.decimals

    @property
    def as_of(self) -> datetime | None:
        """Until when the expiry worker ran (UTC; None: the programme's points never expire)."""
        return None if self._expiry is None else instant(self._expiry.as_of)

    def _expiry_output(self, sql: str) -> DataFrame:
        """An output of rewards_lab.replay.plan.expiry over the replay's `lots`, rendered for Spark."""
        return self.spark.sql(outputs.spark(sql))

    @property
    def lots(self) -> DataFrame:
        """Every lot, by customer then oldest first (the DuckDB result's `lots`); empty without expiry."""
        if self._expiry is None:
            return self.spark.createDataFrame([], _schema(LOT_COLUMNS))
        amount = outputs.amount_sql(self._decimals)
        return self._expiry_output(plan_expiry.lots_sql(self._tables, self.definition.asset.symbol, amount))

    @property
    def expired(self) -> DataFrame:
        """Every lot that expired by `as_of`, in the order of their expiry (the DuckDB result's `expired`)."""
        if self._expiry is None:
            return self.spark.createDataFrame([], _schema(EXPIRED_COLUMNS))
        amount = outputs.amount_sql(self._decimals)
        return self._expiry_output(plan_expiry.expired_sql(self._tables, self.definition.asset.symbol, amount))

    def _expired_per_day(self) -> DataFrame | None:
        """(day, rule_index, x) of what expired (None without expiry)."""
        if self._expiry is None:
            return None
        return self._expiry_output(plan_expiry.expired_per_rule(self._tables, max(len(self._rule_of), 1)))

    def _amount(self, minor: Column) -> Column:
        """Exact DECIMAL(38, decimals) of minor units: a 20-digit integer times one minor unit never rounds."""
        from pyspark.sql import functions as F

        d = self._decimals
        if d == 0:
            return minor.cast("decimal(38,0)")
        unit = F.lit(Decimal(1).scaleb(-d)).cast(f"decimal({d + 1},{d})")
        return (minor.cast("decimal(20,0)") * unit).cast(f"decimal(38,{d})")

    @property
    def columns(self) -> tuple[str, ...]:
        """The issuance table's columns (with caps, budgets or reversals also plan.outputs.ADDED_COLUMNS)."""
        return ISSUANCE_COLUMNS if self._features is None else (*ISSUANCE_COLUMNS, *outputs.ADDED_COLUMNS)

    @property
    def issuances(self) -> DataFrame:
        """One row per attempted issuance (`columns`; with reverse actions also one row per reverse action)."""
        if self._plan is not None:
            return self.spark.table(schema.ISSUANCES.on(self._plan.context.prefix))
        base = self._base_issuances
        if self._features is None:
            return base
        prefix = self._featured()
        base.createOrReplaceTempView(f"{prefix}_base")
        lookup = None if self._features.lookup is None else schema.HOLDERS.on(prefix)
        amount, symbol = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        sql = outputs.featured_issuances_sql(f"SELECT * FROM {prefix}_base", prefix, symbol, amount, lookup)
        return self.spark.sql(outputs.spark(sql))

    @property
    def reversals(self) -> DataFrame:
        """One row per reward a reverse action took back (as the DuckDB result's `reversals`)."""
        if self._features is None:
            return self.spark.createDataFrame([], _schema(REVERSAL_COLUMNS))
        amount, asset = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        sql = outputs.reversals_sql(
            max(len(self._rule_of), 1), self._featured(), asset, amount, self.definition.programme.clawback
        )
        return self.spark.sql(outputs.spark(sql))

    @property
    def redemptions(self) -> DataFrame:
        """The redemptions given, in input order (`idx`), each `redeemed` or `refused`."""
        if self._features is None:
            return self.spark.createDataFrame([], _schema(REDEMPTION_COLUMNS))
        amount, symbol = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        return self.spark.sql(outputs.spark(outputs.redemptions_sql(self._featured(), symbol, amount)))

    def _featured(self) -> str:
        """The prefix of the plan's tables the featured outputs read (spark_features.outputs)."""
        assert self._features is not None
        return self._features.prefix

    @property
    def _base_issuances(self) -> DataFrame:
        from pyspark.sql import functions as F

        c = self._candidates
        m = F.col("m")
        assert self._decision is not None
        issued = (m > 0) & self._decision.issued(F.col("seq"), m)
        not_found = m < F.lit(NOT_FOUND_BASE)
        minor = F.when(not_found, F.lit(NOT_FOUND_BASE) - m).otherwise(F.greatest(m, F.lit(0))).cast("long")
        return c.select(
            F.col("seq"),
            F.col("external_event_id"),
            F.col("customer_id"),
            F.col("type").alias("event_type"),
            F.col("occurred_at"),
            F.col("rule_index"),
            F.col("action_index"),
            F.lit(self.definition.asset.symbol).alias("asset"),
            self._amount(minor).alias("amount"),
            minor.alias("amount_minor"),
            F.when(issued, "issued").otherwise("failed").alias("status"),
            F.when(m == F.lit(TOO_LARGE), "amount_too_large")
            .when(m == F.lit(BENEFICIARY_MISSING), "beneficiary_missing")
            .when(not_found, "beneficiary_not_found")
            .when(~issued, "asset_supply_exhausted")
            .alias("error_code"),
        )

    def exhausted_on(self) -> date | None:
        """The day (UTC) of the first refusal by the supply ceiling; None when it never binds."""
        from pyspark.sql import functions as F

        if self._features is not None and self._features.outcome is not None:  # the pass decided the ceiling
            exhausted = self.issuances.where(F.col("error_code") == F.lit("asset_supply_exhausted"))
            first = exhausted.agg(F.min(F.to_date("occurred_at"))).first()
            return None if first is None else first[0]
        if self._plan is not None:  # the first refused issuance's day
            exhausted = self.issuances.where(F.col("error_code") == F.lit("asset_supply_exhausted"))
            first_day = exhausted.agg(F.min(F.to_date("occurred_at"))).first()
            return None if first_day is None else first_day[0]
        assert self._decision is not None
        refusal = self._decision.first_refusal
        if refusal is None:
            return None
        row = self._candidates.where(F.col("seq") == F.lit(refusal)).select(F.to_date("occurred_at")).first()
        return None if row is None else row[0]

    def release(self) -> None:
        """Free the cached candidates, or the plan's views (a sweep releases each grid point's before the next)."""
        if self._tables:
            for table in (*schema.EXPIRY_TABLES, schema.ORDERED, schema.SLOTS):
                self.spark.catalog.dropTempView(table.on(self._tables))
        if self._plan is None:
            self._candidates.unpersist()
            return
        prefix = self._plan.context.prefix
        for table in schema.PLAN_TABLES:
            self.spark.catalog.dropTempView(table.on(prefix))

    def to_arrow(self) -> pa.Table:
        table: pa.Table = self.issuances.orderBy("seq").toArrow()
        return table.select(list(self.columns))

    def to_pandas(self) -> pd.DataFrame:
        return frame_of(self.to_arrow())

    def totals(self) -> dict[str, Any]:
        """issued (Decimal), issuances, failed, and failures by error code (with caps, budgets, reversals or
        redemptions and with expiry, as the DuckDB result's)."""

        found = self._plain_totals() if self._features is None else None
        if found is None:
            assert self._features is not None
            found = spark_feature_result.totals(self.issuances, self._features, self._decimals)
        if self._expiry is not None:
            row = self._expiry_output(plan_expiry.expired_total_sql(self._tables)).first()
            amount = 0 if row is None or row["x"] is None else int(row["x"])
            found.update({"expired": to_decimal(amount, self._decimals), "expired_lots": int(row["n"] if row else 0)})
        return found

    def _plan_query(self, sql: Callable[[PlanRun, Callable[[str], str]], str]) -> pa.Table:
        """An output of rewards_lab.replay.plan.outputs over the plan's tables, rendered for Spark."""
        assert self._plan is not None
        query = sql(self._plan, outputs.amount_sql(self._decimals))
        return self.spark.sql(outputs.spark(query)).toArrow()

    def _plain_totals(self) -> dict[str, Any]:
        from pyspark.sql import functions as F

        if self._plan is not None:
            row = self._plan_query(
                lambda run, amount: outputs.totals_sql(run.context.prefix, run.context.boundary, amount)
            )
            issued, issuances, candidates, x, y, z = (v[0] for v in row.to_pydict().values())
            codes = {
                "amount_too_large": int(x),
                "asset_supply_exhausted": int(candidates) - int(issuances),
                "beneficiary_missing": int(y),
                "beneficiary_not_found": int(z),
            }
            return {
                "issued": issued,
                "issuances": int(issuances),
                "failed": sum(codes.values()),
                "failed_by_code": {code: count for code, count in codes.items() if count},
            }
        rows = self.issuances
        row = rows.agg(
            F.sum(F.when(F.col("status") == "issued", F.col("amount_minor").cast("decimal(38,0)"))).alias("issued"),
            F.count_if(F.col("status") == "issued").alias("issuances"),
            *(F.count_if(F.col("error_code") == code).alias(code) for code in _CODES),
        ).first()
        assert row is not None
        codes = {code: int(row[code]) for code in _CODES}
        return {
            "issued": to_decimal(int(row["issued"] or 0), self._decimals),
            "issuances": int(row["issuances"]),
            "failed": sum(codes.values()),
            "failed_by_code": {code: count for code, count in codes.items() if count},
        }

    def daily(self) -> pd.DataFrame:
        """day (UTC), asset, rule_index, issued, cumulative (running total of that rule), issuances (issued rows)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        expired = self._expired_per_day()
        if self._features is not None:
            symbol = self.definition.asset.symbol
            return frame_of(
                spark_feature_result.daily(
                    self.issuances, self._candidates, self._features, self._amount, symbol, expired
                )
            )
        if self._plan is not None:
            symbol = self.definition.asset.symbol
            cells = None if self._expiry is None else plan_expiry.expired_cells(self._tables, len(self._rule_of))
            return frame_of(
                self._plan_query(
                    lambda run, amount: outputs.daily_sql(
                        run.context.prefix, run.context.boundary, symbol, amount, cells
                    )
                )
            )
        issued = self.issuances.where(F.col("status") == "issued")
        per_day = issued.groupBy(F.to_date("occurred_at").alias("day"), "rule_index").agg(
            F.sum(F.col("amount_minor").cast("decimal(38,0)")).alias("minor"), F.count("*").alias("issuances")
        )
        columns = []
        if expired is not None:  # what expired, on days with or without issuance
            zero = F.lit(0).cast("decimal(38,0)")
            per_day = (
                per_day.withColumn("x", zero)
                .unionByName(
                    expired.select(
                        "day", "rule_index", zero.alias("minor"), F.lit(0).cast("long").alias("issuances"), "x"
                    )
                )
                .groupBy("day", "rule_index")
                .agg(F.sum("minor").alias("minor"), F.sum("issuances").alias("issuances"), F.sum("x").alias("x"))
            )
            columns = [self._amount(F.col("x")).alias("expired")]
        window = Window.partitionBy("rule_index").orderBy("day")
        table = (
            per_day.select(
                "day",
                F.lit(self.definition.asset.symbol).alias("asset"),
                "rule_index",
                self._amount(F.col("minor")).alias("issued"),
                self._amount(F.sum("minor").over(window)).alias("cumulative"),
                F.col("issuances").cast("long"),
                *columns,
            )
            .orderBy("day", "rule_index")
            .toArrow()
        )
        return frame_of(table)

    def per_customer(self, top: int | None = None) -> pd.DataFrame:
        """customer_id, issued (exact Arrow decimal), issuances, for every customer issued anything; with `top`,
        only the `top` largest, largest first (ties by customer id)."""
        from pyspark.sql import functions as F

        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise ServiceError("field_invalid", f"top must be a whole number of at least 1, not {top!r}", field="top")
        expired = None
        if self._expiry is not None:  # (customer_id, x)
            per_holder = self._expiry_output(plan_expiry.expired_per_holder(self._tables))
            expired = per_holder.withColumnRenamed("holder", "customer_id")
        if self._features is not None:
            return frame_of(
                spark_feature_result.per_customer(self.issuances, self._features, self._amount, top, expired)
            )
        if self._plan is not None:
            return frame_of(
                self._plan_query(
                    lambda run, amount: outputs.per_customer_sql(
                        run.context.layout,
                        run.context.prefix,
                        run.context.boundary,
                        amount,
                        top,
                        None if self._expiry is None else plan_expiry.expired_per_holder(self._tables),
                        wide=True,
                    )
                )
            )
        issued = self.issuances.where(F.col("status") == "issued")
        grouped = issued.groupBy("customer_id").agg(
            F.sum(F.col("amount_minor").cast("decimal(38,0)")).alias("minor"), F.count("*").alias("issuances")
        )
        if top is not None:
            grouped = grouped.orderBy(F.col("minor").desc(), F.col("customer_id")).limit(top)
        columns = []
        if expired is not None:  # also what expired, and the balance it leaves
            grouped = grouped.join(expired, "customer_id", "left")
            x = F.coalesce(F.col("x"), F.lit(0).cast("decimal(38,0)"))
            columns = [self._amount(x).alias("expired"), self._amount(F.col("minor") - x).alias("balance")]
        selected = grouped.select("customer_id", self._amount(F.col("minor")).alias("issued"), "issuances", *columns)
        return frame_of(selected.toArrow())

    def write(self, path: str | Path) -> Path:
        """The issuances, in processing order, as a directory of Parquet or CSV part files (by suffix)."""
        target = Path(path)
        if target.suffix.lower() not in (".parquet", ".csv"):
            raise ServiceError("field_invalid", f"{target}: the output must be .parquet or .csv", field="out")
        writer = self.issuances.orderBy("seq").write.mode("overwrite")
        if target.suffix.lower() == ".parquet":
            writer.parquet(str(target))
        else:
            writer.option("header", "true").csv(str(target))
        return target


def replay_spark(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    *,
    opening_supply: Decimal | int | str = 0,
    progress: Progress = None,
    spark: SparkSession | None = None,
    customers: Any = None,
    redemptions: Any = None,
    as_of: Any = None,
) -> SparkReplayResult:
    """Replay `events` through `programme` on Spark; see the module docstring and docs/replay.md. `customers`:
    the customers table (a Spark DataFrame, a Parquet path, or any shape the DuckDB engine takes);
    `redemptions`: what customers spent (rewards_lab.replay.redemptions; a Spark DataFrame is collected);
    `as_of`: until when lots expire, when the programme's points do (None: the history's end)."""
    started = time.perf_counter()
    definition = definition_of(programme)  # a bad programme file or events path is refused before Spark starts
    spent = _redemptions(redemptions, definition.asset.decimals)
    if isinstance(events, str | Path):
        check_parquet_path(events)
    session = spark if spark is not None else spark_session()
    reporter = ProgressReporter(progress, len(STEPS))
    try:
        source = open_spark_events(session, events)
        if customers is not None:
            source.customers = open_spark_customers(session, customers)
        ordered, count = with_positions(source.frame)
        reporter.step("ordered")
        result = replay_ordered(definition, source, ordered, count, opening_supply, started, reporter, spent, as_of)
    finally:
        reporter.close()
    result.warnings = tuple(_input_warnings(definition, source, count) + _outcome_warnings(result, spent))
    input_checks.emit(result.warnings)
    return result


def _input_warnings(definition: ProgrammeDefinition, source: SparkEventSource, count: int) -> list[str]:
    """As the DuckDB engine's (engine.input_warnings): a Spark job or two, each stopping at the first match."""
    from pyspark.sql import functions as F

    plan = compile_programme(definition, source, SPARK)
    types = sorted({spec.event_type for spec in plan.specs})
    typed = count > 0 and bool(types) and bool(source.frame.where(F.col("type").isin(types)).limit(1).count())
    found = input_checks.event_warnings(count, int(typed), [plan], source.field, types)
    if source.customers is not None and count and not source.customers.names_any(source.frame):
        found.append(input_checks.no_customer_matches(count, source.customers.rows()))
    return found


def _outcome_warnings(result: SparkReplayResult, spent: pa.Table | None) -> list[str]:
    if result._features is None:  # noqa: SLF001 - the result's own
        return []
    given = 0 if spent is None else spent.num_rows
    empty = [input_checks.NO_REDEMPTIONS] if spent is not None and given == 0 else []
    reverses = any(action.reverse_of is not None for spec in rule_specs(result.definition) for action in spec.actions)
    return empty + input_checks.outcome_warnings(result.totals(), given, reverses)


def _redemptions(redemptions: Any, decimals: int) -> pa.Table | None:
    if redemptions is None:
        return None
    from pyspark.sql import DataFrame

    if isinstance(redemptions, DataFrame):
        redemptions = redemptions.toArrow()
    return redemptions_table(redemptions, decimals)


def _schema(columns: tuple[tuple[str, str], ...]) -> str:
    """A Spark DDL schema of the DuckDB engine's empty relations' columns."""
    kinds = {"BIGINT": "long", "VARCHAR": "string", "TIMESTAMPTZ": "timestamp", "INTEGER": "int"}
    return ", ".join(f"{name} {kinds.get(kind, 'decimal(38,0)')}" for name, kind in columns)


def _on_plan(
    events: DataFrame,
    plan: CompiledProgramme,
    source: SparkEventSource,
    definition: ProgrammeDefinition,
    room: int | None,
    report: Callable[[str], None],
) -> PlanRun:
    """The plan's steps on a SparkExecutor over `events` (in order, with `__pos`, with their facts): its tables
    stay as temporary views of the session (the result reads them)."""
    from rewards_lab.replay.engines.spark import SparkExecutor  # imports this module

    prefix = f"__spark_replay_{next(_names)}"
    events.createOrReplaceTempView(schema.ORDERED.on(prefix))
    customers = source.customers
    lookup = None
    if customers is not None and customers.lookup is not None and plan.joins_customers:  # built by `with_facts`
        customers.lookup.createOrReplaceTempView(schema.CUSTOMERS_LOOKUP.on(prefix))
        lookup = customers.lookup_spec(plan.reads_customers)
    reading, evaluate = evaluation(source, plan)
    asset = definition.asset
    lay = layout(plan)
    context = Context(prefix, plan, lay, "spark", asset.symbol, asset.decimals, lookup=lookup, reading=reading)
    return run_plan(SparkExecutor(events.sparkSession), context, room, evaluate, report)


def replay_ordered(
    definition: ProgrammeDefinition,
    source: SparkEventSource,
    ordered: DataFrame,
    count: int,
    opening_supply: Decimal | int | str,
    started: float,
    reporter: ProgressReporter | None = None,
    spent: pa.Table | None = None,
    as_of: Any = None,
) -> SparkReplayResult:
    """Steps 2 and 3 over events already in order (a sweep orders them once for every grid point); `spent`:
    the redemptions (rewards_lab.replay.redemptions.redemptions_table); `as_of` as for `replay_spark`."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    step = reporter.step if reporter is not None else (lambda _label: None)
    plan = compile_programme(definition, source, SPARK)
    events = with_facts(ordered, plan, source)
    expiring, room = expiry_plan(definition), room_under(ceiling, opening)
    plain = not has_features(definition) and spent is None and (expiring is None or room is None)
    if plain:  # the replay plan; the other paths move onto it in later increments
        run = _on_plan(events, plan, source, definition, room, step)
        on_plan = None
        if expiring is not None:  # no ceiling: every lot is the closed form's
            executor = _executor(ordered.sparkSession)
            on_plan = plan_expiry.prepare(executor, replace(run.context, expiry=expiring), as_of, spent)
        result = SparkReplayResult(
            definition=definition,
            spark=ordered.sparkSession,
            events_processed=count,
            seconds=time.perf_counter() - started,
            ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
            opening_supply=to_decimal(opening, decimals),
            python_rows=run.python_rows,
            _candidates=ordered.sparkSession.table(schema.CANDIDATES.on(run.context.prefix)),
            _decision=None,
            _expiry=None if on_plan is None else on_plan.expiry,
            _tables="" if on_plan is None else on_plan.prefix,
            _rule_of=tuple(plan.rule_of(slot) for slot in range(plan.slots)),
            _plan=run,
        )
        if on_plan is not None:
            _lots(result, on_plan)
            result.seconds = time.perf_counter() - started
        return result
    candidates = sql_candidates(events, plan)
    step("rules")
    fallback, python_events = fallback_candidates(events, plan, source)
    if fallback is not None:
        candidates = candidates.unionByName(fallback)
    step("fallback")
    rule_of = [plan.rule_of(slot) for slot in range(plan.slots)]
    slot = F.col("slot")
    candidates = (
        candidates.withColumn("seq", F.col("__pos") * F.lit(plan.slots) + slot)
        .withColumn("rule_index", _by_slot([r for r, _ in rule_of], slot) if rule_of else F.lit(0))
        .withColumn("action_index", _by_slot([a for _, a in rule_of], slot) if rule_of else F.lit(0))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    step("summaries")
    features, expiry = None, _expiry_times(definition, plan, ordered, as_of, spent)
    plan_of_expiry = None if expiry is None else expiry.expiry
    if has_features(definition) or spent is not None or (expiry is not None and room is not None):
        limits = limits_plan(definition, plan.specs)
        zone = definition.programme.zone
        times = None if expiry is None else ordered.sparkSession.table(schema.EXPIRY_TIMES.on(expiry.prefix))
        features = decide_features(events, candidates, plan, source, limits, zone, room, spent, plan_of_expiry, times)
    if features is not None and features.outcome is not None:  # the pass decided the ceiling, if any
        decision = CeilingDecision(None)
    else:
        decision = decide(candidates.where(F.col("m") > 0), room, max(plan.slots, 1))
    step("ceiling")
    result = SparkReplayResult(
        definition=definition,
        spark=ordered.sparkSession,
        events_processed=count,
        seconds=time.perf_counter() - started,
        ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
        opening_supply=to_decimal(opening, decimals),
        python_rows=python_events,
        _candidates=candidates,
        _decision=decision,
        _features=features,
        _expiry=plan_of_expiry,
        _tables="" if expiry is None else expiry.prefix,
        _rule_of=tuple(rule_of),
    )
    if expiry is not None:
        _lots(result, expiry)
        result.seconds = time.perf_counter() - started
    return result


def _executor(spark: SparkSession) -> Executor[object]:
    from rewards_lab.replay.engines.spark import SparkExecutor  # imports this module

    return SparkExecutor(spark)


def _expiry_times(
    definition: ProgrammeDefinition, plan: CompiledProgramme, ordered: DataFrame, as_of: Any, spent: pa.Table | None
) -> Context | None:
    """With expiry, plan.expiry's `expiry_times` (and `slots`) as views over `ordered` (`as_of` resolved against
    the history's last moment); None when the programme's points never expire."""
    found = expiry_plan(definition)
    if found is None:
        return None
    prefix = f"__spark_replay_{next(_names)}"
    ordered.createOrReplaceTempView(schema.ORDERED.on(prefix))
    executor, lay, asset = _executor(ordered.sparkSession), layout(plan), definition.asset
    executor.register(schema.SLOTS.on(prefix), rules.slots_table(lay))
    ctx = Context(prefix, plan, lay, "spark", asset.symbol, asset.decimals, expiry=found)
    return plan_expiry.prepare(executor, ctx, as_of, spent)


def _lots(result: SparkReplayResult, ctx: Context) -> None:
    """plan.expiry's `lots` of a replay: its issued rewards (`issued`), the customers whose lots the pass kept
    (`lotted`) and their lots (`pass_lots`)."""
    from pyspark.sql import functions as F

    executor, features = _executor(result.spark), result._features  # noqa: SLF001 - the result being made
    rows = result.issuances if features is None else result.issuances.where(F.col("kind") == F.lit("issue"))
    issued = rows.where(F.col("status") == F.lit("issued")).select("seq", "customer_id", "amount_minor")
    issued.createOrReplaceTempView(schema.ISSUED.on(ctx.prefix))
    kept = None if features is None or features.lotted is None else features.part("l")
    if features is None or features.lotted is None or kept is None:
        plan_expiry.without_pass(executor, ctx.prefix)
    else:
        features.lotted.createOrReplaceTempView(schema.LOTTED.on(ctx.prefix))
        kept.select(*(name for name, _ in schema.PASS_LOTS.columns)).createOrReplaceTempView(
            schema.PASS_LOTS.on(ctx.prefix)
        )
    plan_expiry.make_lots(executor, ctx)
