"""Replay on Spark: the replay plan (rewards_lab.replay.plan) on a SparkExecutor, the same steps as the DuckDB
engine rendered with SQLGlot's Spark dialect, the same issuance table, row for row.

1. **Order.** Events are range-partitioned and sorted by (`occurred_at`, input order) across the cluster; each
   row's position is its partition's offset (per-partition counts, a number per partition on the driver) plus its
   index within the partition: `seq = position * slots + slot`, as on DuckDB.
2. **The plan.** `amounts`, the fallback (rows SQL cannot read exactly, evaluated by the live engine's own
   functions inside `mapInArrow`), `candidates` and `cells` (rewards_lab.replay.plan.run.rules); with caps,
   budgets, reversals or redemptions their steps and the ordered pass (rewards_lab.replay.spark_features); the
   ceiling (rewards_lab.replay.plan.ceiling, unless the pass decided it) and the `issuances` view; with expiry the
   lots (rewards_lab.replay.plan.expiry).

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

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.ceiling import room_under
from rewards_lab.domain.money import parse_ceiling, to_decimal
from rewards_lab.domain.schedule import instant
from rewards_lab.replay import input_checks
from rewards_lab.replay.compiler import SPARK, CompiledProgramme, compile_programme, rule_specs
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
from rewards_lab.replay.limits_plan import has_features, limits_plan
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan import outputs, schema
from rewards_lab.replay.plan import run as plan_run
from rewards_lab.replay.plan.customers import facts_query
from rewards_lab.replay.plan.expiry import ExpiryPlan, expiry_plan
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.run import PlanRun
from rewards_lab.replay.redemptions import redemptions_table
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
    from pyspark.sql import DataFrame, SparkSession

    from rewards_lab.replay.engines.spark import SparkExecutor

# PySpark 4.x warns about pandas 3 on every Arrow exchange; this engine exchanges Arrow tables only.
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
_names = itertools.count()


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


# the replay -----------------------------------------------------------------------------------------------------
@dataclass
class SparkReplayResult:
    """The outcome of a replay on Spark, with the DuckDB engine's API (rewards_lab.replay.engine.ReplayResult):
    `issuances` is a DataFrame with the same columns and rows (order by `seq` to read them in order). Every output
    is rewards_lab.replay.plan.outputs' text over the plan's tables (temporary views under the replay's prefix)."""

    definition: ProgrammeDefinition
    spark: SparkSession
    events_processed: int
    seconds: float
    ceiling: Decimal | None
    opening_supply: Decimal
    python_rows: int  # events evaluated by the Python fallback
    _plan: PlanRun  # the replay plan's tables (rewards_lab.replay.plan) and the ceiling's boundary day
    _features: SparkFeatures | None = None  # caps, budgets, reversals or redemptions (None: the programme has none)
    _expiry: ExpiryPlan | None = None  # lots expire (None: the programme's points never do)
    warnings: tuple[str, ...] = ()  # inputs that probably make this forecast wrong (replay.input_checks)

    @property
    def _decimals(self) -> int:
        return self.definition.asset.decimals

    @property
    def _prefix(self) -> str:
        return self._plan.context.prefix

    @property
    def _boundary(self) -> int | None:
        return self._plan.context.boundary

    @property
    def as_of(self) -> datetime | None:
        """Until when the expiry worker ran (UTC; None: the programme's points never expire)."""
        return None if self._expiry is None else instant(self._expiry.as_of)

    def _sql(self, sql: str) -> DataFrame:
        """An output of rewards_lab.replay.plan (DuckDB text) rendered for Spark."""
        return self.spark.sql(outputs.spark(sql))

    @property
    def lots(self) -> DataFrame:
        """Every lot, by customer then oldest first (the DuckDB result's `lots`); empty without expiry."""
        if self._expiry is None:
            return self.spark.createDataFrame([], _schema(LOT_COLUMNS))
        amount = outputs.amount_sql(self._decimals)
        return self._sql(plan_expiry.lots_sql(self._prefix, self.definition.asset.symbol, amount))

    @property
    def expired(self) -> DataFrame:
        """Every lot that expired by `as_of`, in the order of their expiry (the DuckDB result's `expired`)."""
        if self._expiry is None:
            return self.spark.createDataFrame([], _schema(EXPIRED_COLUMNS))
        amount = outputs.amount_sql(self._decimals)
        return self._sql(plan_expiry.expired_sql(self._prefix, self.definition.asset.symbol, amount))

    @property
    def columns(self) -> tuple[str, ...]:
        """The issuance table's columns (with caps, budgets or reversals also plan.outputs.ADDED_COLUMNS)."""
        return ISSUANCE_COLUMNS if self._features is None else (*ISSUANCE_COLUMNS, *outputs.ADDED_COLUMNS)

    @property
    def issuances(self) -> DataFrame:
        """One row per attempted issuance (`columns`; with reverse actions also one row per reverse action)."""
        base = schema.ISSUANCES.on(self._prefix)
        if self._features is None:
            return self.spark.table(base)
        lookup = schema.HOLDERS.on(self._prefix) if self._features.lookup else None
        amount, symbol = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        return self._sql(outputs.featured_issuances_sql(f"SELECT * FROM {base}", self._prefix, symbol, amount, lookup))

    @property
    def reversals(self) -> DataFrame:
        """One row per reward a reverse action took back (as the DuckDB result's `reversals`)."""
        if self._features is None:
            return self.spark.createDataFrame([], _schema(REVERSAL_COLUMNS))
        amount, asset = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        slots, clawback = self._plan.context.layout.slots, self.definition.programme.clawback
        return self._sql(outputs.reversals_sql(slots, self._prefix, asset, amount, clawback))

    @property
    def redemptions(self) -> DataFrame:
        """The redemptions given, in input order (`idx`), each `redeemed` or `refused`."""
        if self._features is None:
            return self.spark.createDataFrame([], _schema(REDEMPTION_COLUMNS))
        amount, symbol = outputs.amount_sql(self._decimals), self.definition.asset.symbol
        return self._sql(outputs.redemptions_sql(self._prefix, symbol, amount))

    def exhausted_on(self) -> date | None:
        """The day (UTC) of the first refusal by the supply ceiling; None when it never binds."""
        from pyspark.sql import functions as F

        exhausted = self.issuances.where(F.col("error_code") == F.lit("asset_supply_exhausted"))
        first = exhausted.agg(F.min(F.to_date("occurred_at"))).first()
        return None if first is None else first[0]

    def release(self) -> None:
        """Drop the plan's views (a sweep releases each grid point's before the next)."""
        for table in schema.PLAN_TABLES:
            self.spark.catalog.dropTempView(table.on(self._prefix))

    def to_arrow(self) -> pa.Table:
        table: pa.Table = self.issuances.orderBy("seq").toArrow()
        return table.select(list(self.columns))

    def to_pandas(self) -> pd.DataFrame:
        return frame_of(self.to_arrow())

    def totals(self) -> dict[str, Any]:
        """issued (Decimal), issuances, failed, and failures by error code (with caps, budgets, reversals or
        redemptions and with expiry, as the DuckDB result's)."""
        prefix, boundary = self._prefix, self._boundary
        if self._features is None:
            found = outputs.plain_totals(list(self._row(outputs.totals_sql(prefix, boundary, self._amounts))))
        else:
            failed = [(row[0], row[1]) for row in self._sql(outputs.failed_actions_sql(prefix)).collect()]
            row = self._row(outputs.featured_totals_sql(prefix, boundary))
            found = outputs.featured_totals(list(row), failed, boundary, self._decimals)
        if self._expiry is not None:
            row = self._row(plan_expiry.expired_total_sql(prefix))
            expired = 0 if row["x"] is None else int(row["x"])
            found.update({"expired": to_decimal(expired, self._decimals), "expired_lots": int(row["n"] or 0)})
        return found

    def _row(self, sql: str) -> Any:
        row = self._sql(sql).first()
        assert row is not None
        return row

    def daily(self) -> pd.DataFrame:
        """day (UTC), asset, rule_index, issued, cumulative (running total of that rule), issuances (issued rows);
        with caps, budgets or reversals also requested, cut, limited, reversed, net, net_cumulative; with expiry
        also `expired` (as the DuckDB result's)."""
        symbol, slots, amount = self.definition.asset.symbol, self._plan.context.layout.slots, self._amounts
        cells = None if self._expiry is None else plan_expiry.expired_cells(self._prefix, slots)
        if self._features is None:
            sql = outputs.daily_sql(self._prefix, self._boundary, symbol, amount, cells)
        else:
            sql = outputs.featured_daily_sql(slots, self._prefix, self._boundary, symbol, amount, cells)
        return frame_of(self._sql(sql).toArrow())

    @property
    def _amounts(self) -> Callable[[str], str]:
        return outputs.amount_sql(self._decimals)

    def per_customer(self, top: int | None = None) -> pd.DataFrame:
        """customer_id, issued (exact Arrow decimal), issuances, for every customer issued anything; with `top`,
        only the `top` largest, largest first (ties by customer id); with caps, budgets, reversals or redemptions
        also reversed, net, redeemed and balance; with expiry also expired (as the DuckDB result's)."""
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise ServiceError("field_invalid", f"top must be a whole number of at least 1, not {top!r}", field="top")
        lay, prefix, boundary = self._plan.context.layout, self._prefix, self._boundary
        expired = None if self._expiry is None else plan_expiry.expired_per_holder(prefix)
        if self._features is None:
            sql = outputs.per_customer_sql(lay, prefix, boundary, self._amounts, top, expired, wide=True)
        else:
            lookup = schema.HOLDERS.on(prefix) if self._features.lookup else None
            sql = outputs.featured_per_customer_sql(lay, prefix, boundary, lookup, self._amounts, top, expired)
        return frame_of(self._sql(sql).toArrow())

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
    report: Callable[[str], None],
) -> tuple[SparkExecutor, Context, int]:
    """The plan's steps before the ceiling (rewards_lab.replay.plan.run.rules) on a SparkExecutor over `events` (in
    order, with `__pos`, with their facts): (the executor, the replay's context, the fallback's event count). The
    tables stay as temporary views of the session (the result reads them; `release` drops them)."""
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
    executor = SparkExecutor(events.sparkSession)
    return executor, context, plan_run.rules(executor, context, evaluate, report)


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
    the redemptions (rewards_lab.replay.redemptions.redemptions_table); `as_of` as for `replay_spark`.

    The plan's rules, fallback and cells; with expiry each event's expiry; with caps, budgets, reversals or
    redemptions their steps and the ordered pass (rewards_lab.replay.spark_features); then the ceiling (set-based
    unless the pass decided it) and the `issuances` view; with expiry the lots."""
    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    step = reporter.step if reporter is not None else (lambda _label: None)
    plan = compile_programme(definition, source, SPARK)
    events = with_facts(ordered, plan, source)
    expiring, room = expiry_plan(definition), room_under(ceiling, opening)
    featured = has_features(definition) or spent is not None or (expiring is not None and room is not None)
    executor, ctx, python_rows = _on_plan(events, plan, source, definition, step)
    if expiring is not None:  # each event's expiry (plan.expiry), `as_of` resolved
        ctx = plan_expiry.prepare(executor, replace(ctx, expiry=expiring), as_of, spent)
    features = None
    if featured:
        limits = limits_plan(definition, plan.specs)
        features = decide_features(executor, ctx, source, limits, definition.programme.zone, room, spent)
    by_pass = features is not None and features.outcome is not None  # the pass decided the ceiling
    run = plan_run.decide(executor, ctx, None if by_pass else room, python_rows, step)
    result = SparkReplayResult(
        definition=definition,
        spark=ordered.sparkSession,
        events_processed=count,
        seconds=time.perf_counter() - started,
        ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
        opening_supply=to_decimal(opening, decimals),
        python_rows=python_rows,
        _plan=run,
        _features=features,
        _expiry=ctx.expiry,
    )
    if expiring is not None:
        _lots(result, executor)
        result.seconds = time.perf_counter() - started
    return result


def _lots(result: SparkReplayResult, executor: SparkExecutor) -> None:
    """plan.expiry's `lots` of a replay: its issued rewards (`issued`), with the pass's `lotted` and `pass_lots`
    (made by the featured steps; empty without them)."""
    from pyspark.sql import functions as F

    ctx, features = result._plan.context, result._features  # noqa: SLF001 - the result being made
    rows = result.issuances if features is None else result.issuances.where(F.col("kind") == F.lit("issue"))
    issued = rows.where(F.col("status") == F.lit("issued")).select("seq", "customer_id", "amount_minor")
    issued.createOrReplaceTempView(schema.ISSUED.on(ctx.prefix))
    if features is None:
        plan_expiry.without_pass(executor, ctx.prefix)
    plan_expiry.make_lots(executor, ctx)
