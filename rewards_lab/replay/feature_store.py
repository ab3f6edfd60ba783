"""Caps, budgets, reversals and redemptions in the DuckDB replay: the set-based part, the sequential pass's input
and its outcome as tables (`replay.sequential` decides; this module only moves rows).

Tables of a replay `{name}` (besides rewards_lab.replay.store's and those of the plan's reverse actions and
redemptions, rewards_lab.replay.plan.reversals and .redemptions: `{name}_rad`, `{name}_moved`, `{name}_red`):
- `{name}_bind`: the counters that can bind (grouping number, holder, period start; `replay.limits_plan`) and
  `{name}_mpos`: the events holding a reward they count;
- `{name}_mrows`: the candidate rewards the pass needs: those whose counters can bind (`mask` > 0) and those of
  originals (to take back); `{name}_rewards`, a view of every candidate reward (the credit reads it);
- the plan's ordered pass (rewards_lab.replay.plan.limits: `{name}_tail`, `{name}_ops`, `{name}_passout`, the
  same steps as on Spark), stored here as `{name}_dec`, `{name}_items`, `{name}_redout` (and, with expiry,
  `pass_lots`); `{name}_corr`: the decisions with their day and slot.

Every reward not in the pass keeps its set-based row: its amount, issued. A customer is its `holder`: with a
customers table, the id its reference resolves to (as the live engine resolves an event's customer), else the
reference itself; counters and balances are per holder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.limits import LIFETIME_START, week_start
from rewards_lab.domain.rules import number_of, read
from rewards_lab.replay.compiler import DUCKDB, CompiledProgramme
from rewards_lab.replay.customers import FOUND, CustomerTable
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.inputs import ROW, EventSource
from rewards_lab.replay.limits_plan import Grouping, LimitsPlan
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.plan import ceiling, outputs, schema
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan import limits as plan_limits
from rewards_lab.replay.plan.expiry import ExpiryPlan
from rewards_lab.replay.plan.layout import Layout
from rewards_lab.replay.plan.redemptions import place_redemptions
from rewards_lab.replay.plan.reversals import DIVISORS, HOLDERS, REVERSE_FALLBACK, decide_reversals, holder_sql
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.sequential import DECISIONS, ITEMS, REDEMPTIONS


@dataclass
class FeatureTables:
    """What the result needs to read a featured replay: its limits, its customers' lookup (None: holders are the
    references), whether the pass enforced the ceiling (`full`) and whether redemptions were given."""

    limits: LimitsPlan
    lookup: str | None
    full: bool
    redemptions: bool


# How many operations a pass keyed by holder needs before it runs in worker processes; None: always in process.
# In process by default: on the two-core benchmark machine the worker processes doubled the pass's wall time at
# 1M events (11-13 s against 5.2-5.5 s, reports/benchmarks.md); the tests set 0 to run the pass by processes.
PASS_WORKER_ROWS: int | None = None
EPOCH_SQL = f"DATE '{LIFETIME_START.isoformat()}'"  # day number 0 (`domain.limits.day_number`)


def period_starts(periods: list[str], lday: str) -> dict[str, str]:
    """SQL of each period's first day (a day number, `domain.limits.day_number`) from the local day `lday`, as
    `domain.limits.period_start`: ISO weeks (Monday: `domain.limits.week_start` rendered over it)."""
    epoch = EPOCH_SQL
    day: exp.Expr = exp.maybe_parse(lday, dialect=DUCKDB.name)
    forms = {
        "day": lday,
        "week": DUCKDB.render(week_start(day)),
        "month": f"CAST(CAST(date_trunc('month', {epoch} + {lday}) AS DATE) - {epoch} AS INTEGER)",
        "year": f"CAST(CAST(date_trunc('year', {epoch} + {lday}) AS DATE) - {epoch} AS INTEGER)",
    }
    return {period: forms[period] for period in periods if period != "lifetime"}


def local_day(zone: str) -> str:
    """SQL of an event's day in the programme's timezone (its day number; a calendar day, also before 1970,
    unlike the UTC `day` of the summaries, which divides the time)."""
    local = DUCKDB.render(DUCKDB.local_time(exp.column("occurred_at"), zone))
    return f"CAST(CAST({local} AS DATE) - {EPOCH_SQL} AS INTEGER)"


def lookup_of(customers: CustomerTable | None, plan: CompiledProgramme) -> str | None:
    """The customers' lookup table (built here when the rules did not need it), or None without a table."""
    if customers is None:
        return None
    if not plan.joins_customers:
        customers.build(False)
    return customers.lookup


# the candidate rewards and their counters ---------------------------------------------------------------------
def rows_sql(
    lay: Layout, name: str, limits: LimitsPlan, lookup: str | None, lday: bool, events: str | None = None
) -> str:
    """SQL: every positive candidate reward (seq, pos, slot, rule_index, holder, m, d_<period>...) of `events`
    (rows of `{name}_pe`; all of them by default); `lday`: whether they hold the local day (when the programme
    has caps or a budget)."""
    named = set(lay.beneficiary_fields)
    pairs = ", ".join(
        f"{{'m': a.c{i}, 'b': {f'a.b{i}' if i in named else 'CAST(NULL AS VARCHAR)'}}}" for i in range(1, lay.width + 1)
    )
    day = "p.lday" if lday else "p.day"
    unnested = (
        f"SELECT p.pos, coalesce(u.x.b, p.customer_id) AS customer_id, {day} AS lday, p.a.k AS k, u.i, u.x.m AS m "
        f"FROM {events or f'{name}_pe'} p, unnest([{pairs}]) WITH ORDINALITY AS u(x, i) WHERE u.x.m > 0"
    )
    holder, join = holder_sql("r.customer_id", lookup)
    starts = "".join(f", {sql} AS d_{period}" for period, sql in period_starts(limits.periods, "r.lday").items())
    return (
        f"SELECT r.pos * {lay.slots} + s.slot AS seq, r.pos, s.slot, s.rule_index, {holder} AS holder, r.m{starts} "
        f"FROM ({unnested}) r JOIN {name}_slots s ON s.k = r.k AND s.i = r.i {join}"
    )


def grouping_rows_sql(lay: Layout, name: str, limits: LimitsPlan, lookup: str | None, grouping: Grouping) -> str:
    """SQL: what a family of counters counts, as narrowly as it can be read (pos, holder, m, n, its d_<period>):
    a rule's amounts from its own fields only; the programme's and the budget's as each event's total and count
    (one row per event, no unnesting), unless beneficiaries make one event reward several customers."""
    starts = "".join(f", {sql} AS d_{period}" for period, sql in period_starts([grouping.period], "p.lday").items())
    if grouping.rule_index is not None:
        parts = []
        for slot, (rule, _) in enumerate(lay.rule_of):
            if rule != grouping.rule_index or all(slot not in slots for slots in lay.slots_of):
                continue
            k, i = lay.where(slot)
            named = f"coalesce(a.b{i}, p.customer_id)" if i in lay.beneficiary_fields else "p.customer_id"
            holder, join = holder_sql(named, lookup)
            parts.append(
                f"SELECT p.pos, {holder} AS holder, a.c{i} AS m, 1 AS n{starts} FROM {name}_pe p {join} "
                f"WHERE p.a.k = {k} AND a.c{i} > 0"
            )
        return " UNION ALL ".join(parts)
    if grouping.per_customer and lay.beneficiary_fields:
        fields = "" if grouping.period == "lifetime" else f", d_{grouping.period}"
        return f"SELECT pos, holder, m, 1 AS n{fields} FROM ({rows_sql(lay, name, limits, lookup, True)})"
    holder, join = holder_sql("p.customer_id", lookup)
    return (
        f"SELECT p.pos, {holder} AS holder, {lay.event_total()} AS m, {lay.event_count()} AS n{starts} "
        f"FROM {name}_pe p {join} WHERE p.a.k IS NOT NULL AND {lay.event_count()} > 0"
    )


def binding(
    con: duckdb.DuckDBPyConnection, lay: Layout, limits: LimitsPlan, lookup: str | None, name: str
) -> list[int]:
    """Fill `{name}_bind` (g, holder, start): the counters that can bind, and `{name}_mpos`: the events holding
    a reward they count; returns the groupings that have some."""
    bound: list[int] = []
    for g, grouping in enumerate(limits.groupings()):
        rows = grouping_rows_sql(lay, name, limits, lookup, grouping)
        if not rows:
            continue
        start = "0" if grouping.period == "lifetime" else f"d_{grouping.period}"
        holder = "holder" if grouping.per_customer else "''"
        over = []
        for cap in grouping.caps:
            if cap.max_amount_minor is not None:
                over.append(f"sum(m) > {cap.max_amount_minor}")
            if cap.max_count is not None:
                over.append(f"sum(n) > {cap.max_count}")
        con.execute(
            f"INSERT INTO {name}_bind SELECT {g}, {holder}, {start} FROM ({rows}) "
            f"GROUP BY ALL HAVING {' OR '.join(over)}"
        )
        if not con.sql(f"SELECT 1 FROM {name}_bind WHERE g = {g} LIMIT 1").fetchall():
            continue
        bound.append(g)
        on = f"b.start = r.{start}" if grouping.period != "lifetime" else "TRUE"
        if grouping.per_customer:
            on += " AND b.holder = r.holder"
        con.execute(
            f"INSERT INTO {name}_mpos SELECT DISTINCT r.pos FROM ({rows}) r "
            f"SEMI JOIN (SELECT holder, start FROM {name}_bind WHERE g = {g}) b ON {on}"
        )
    return bound


# the pass -----------------------------------------------------------------------------------------------------
def run_pass(
    con: duckdb.DuckDBPyConnection,
    executor: Executor[object],
    ctx: Context,
    limits: LimitsPlan,
    room: int | None,
    bound: list[int],
    as_of: int | None,
) -> None:
    """The plan's ordered pass (rewards_lab.replay.plan.limits) on `executor` (over this connection); stores
    `{name}_dec` (with the tail's decisions), `{name}_items`, `{name}_redout` and, when lots expire, plan.expiry's
    `pass_lots`."""
    name, shape = ctx.prefix, ctx.shape
    assert shape is not None
    run = plan_limits.Pass(limits, room if shape.full else None, as_of)
    many = plan_limits.one_task(limits, bound, shape.full)
    out = plan_limits.run_pass(executor, ctx, shape, run, one_task=many)
    parts = [("dec", "d", DECISIONS), ("items", "i", ITEMS), ("redout", "r", REDEMPTIONS)]
    for suffix, kind, columns in parts:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {name}_{suffix} AS SELECT {', '.join(columns.names)} FROM {out} "
            f"WHERE kind = '{kind}'"
        )
    if shape.expiring:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {schema.PASS_LOTS.on(name)} AS SELECT {', '.join(LOTS.names)} "
            f"FROM {out} WHERE kind = 'l'"
        )
    con.execute(f"DROP VIEW IF EXISTS {out}")
    con.execute(f"DROP VIEW IF EXISTS {out}_run")  # the map's files go with the executor


def _spill_directory(con: duckdb.DuckDBPyConnection) -> str | None:
    """DuckDB's own spill directory when it has one (the CLI's), else the system's."""
    (found,) = con.sql("SELECT current_setting('temp_directory')").fetchall()[0]
    return str(found) if found and Path(str(found)).is_dir() else None


def empty_outcome(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """The pass's tables when it has nothing to decide."""
    table(con, f"{name}_dec", DECISIONS.empty_table())
    table(con, f"{name}_items", ITEMS.empty_table())
    table(con, f"{name}_redout", REDEMPTIONS.empty_table())


def with_days(con: duckdb.DuckDBPyConnection, lay: Layout, name: str) -> None:
    """`{name}_corr`: the pass's decisions with their UTC day and slot (for the summaries)."""
    con.execute(f"CREATE TEMP TABLE {schema.CORRECTIONS.on(name)} AS {outputs.corrections_sql(lay.slots, name)}")


# the whole of it ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FeatureInputs:
    """What the featured part of a replay reads: its limits, the ceiling's room (None: no ceiling), the
    redemptions (None: none), the fallback's reverse actions and whether `_pe` holds the local day (`lday`)."""

    limits: LimitsPlan
    room: int | None
    redemptions: pa.Table | None
    reversing: list[tuple[int, int, str | None, str | None, str | None]]
    lday: bool
    expiry: ExpiryPlan | None = None  # lots expire (`expiry_times` exists): the pass keeps the consumed ones


def decide_features(
    con: duckdb.DuckDBPyConnection,
    source: EventSource,
    plan: CompiledProgramme,
    lay: Layout,
    name: str,
    inputs: FeatureInputs,
) -> tuple[int | None, FeatureTables]:
    """Caps, budgets, reversals and redemptions over the stored rows; returns the ceiling's boundary day (when
    the pass did not run and the ceiling binds) and the tables the result reads.

    The pass runs when a counter can bind, a reverse action reverses or a redemption is given; it then also
    enforces the ceiling when the rewards asked for more than its room (`full`: every reward goes through it,
    since reversals and redemptions give room back). Otherwise the ceiling is enforced set-based, as without
    these features."""
    limits = inputs.limits
    lookup = lookup_of(source.customers, plan)
    reversals_and_redemptions(con, source, plan, lay, name, inputs, lookup)
    rows = rows_sql(lay, name, limits, lookup, inputs.lday)
    con.execute(f"CREATE TEMP TABLE {name}_bind (g INTEGER, holder VARCHAR, start INTEGER)")
    con.execute(f"CREATE TEMP TABLE {name}_mpos (pos BIGINT)")
    bound = binding(con, lay, limits, lookup, name) if limits.capped else []
    ((reversing, redeeming, requested),) = con.sql(
        f"SELECT (SELECT count_if(code IS NULL) FROM {name}_rad), (SELECT count(*) FROM {name}_red), "
        f"(SELECT coalesce(sum(p), 0) FROM {name}_cand)"
    ).fetchall()
    expiry = inputs.expiry
    full = inputs.room is not None and int(requested) > inputs.room
    if not (bound or reversing or redeeming or (expiry is not None and full)):
        boundary = _ceiling(con, lay, name, inputs.room)
        empty_outcome(con, name)
        with_days(con, lay, name)
        if expiry is not None:
            plan_expiry.without_pass(_executor(con), name)
        return boundary, FeatureTables(limits, lookup, False, False)
    _ceiling(con, lay, name, None)  # the kept table, empty: the pass decides the ceiling
    shape = plan_limits.shape_of(limits, bound, full, expiry is not None, bool(redeeming))
    ctx = Context(name, plan, lay, "duckdb", "", 0, shape=shape)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {schema.REWARDS.on(name)} AS {rows}")
    from rewards_lab.replay.engines.duckdb import WORKER_ROWS, DuckDBExecutor  # imports rewards_lab.replay.engine

    spill = _spill_directory(con)
    by_processes = PASS_WORKER_ROWS is not None
    executor = DuckDBExecutor(
        con,
        spill=None if spill is None else Path(spill),
        workers=DuckDBExecutor.default_workers() if by_processes else 1,
        worker_rows=PASS_WORKER_ROWS if PASS_WORKER_ROWS is not None else WORKER_ROWS,
    )
    try:
        if expiry is not None:  # the customers whose lots get consumed (every customer's, `full`)
            executor.create(ctx.table(schema.LOTTED), plan_limits.lotted(ctx), stored=True)
        needed = rows
        if not full and not (expiry is not None and lay.beneficiary_fields):
            # only the events the pass can need: those some counter that can bind counts, the originals' and,
            # with expiry, the lotted customers' (an event's rewards are then its customer's)
            con.execute(f"INSERT INTO {name}_mpos SELECT opos FROM {name}_rad WHERE code IS NULL")
            holder, join = holder_sql("p.customer_id", lookup) if expiry is not None else ("", "")
            lotted = "" if expiry is None else f" OR {holder} IN (SELECT holder FROM {ctx.table(schema.LOTTED)})"
            events = f"(SELECT p.* FROM {name}_pe p {join} WHERE p.pos IN (SELECT pos FROM {name}_mpos){lotted})"
            needed = rows_sql(lay, name, limits, lookup, inputs.lday, events)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {ctx.table(schema.NEEDED)} AS {needed}")
        executor.create(ctx.table(schema.MASKED_ROWS), plan_limits.masked(ctx), stored=True)
        run_pass(con, executor, ctx, limits, inputs.room, bound, None if expiry is None else expiry.as_of)
    finally:
        executor.close()
    with_days(con, lay, name)
    return None, FeatureTables(limits, lookup, full, bool(redeeming))


def table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register(f"{name}_input", table)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}_input")
    con.unregister(f"{name}_input")


def reversals_and_redemptions(
    con: duckdb.DuckDBPyConnection,
    source: EventSource,
    plan: CompiledProgramme,
    lay: Layout,
    name: str,
    inputs: FeatureInputs,
    lookup: str | None,
) -> None:
    """The plan's reverse actions and redemptions (`{name}_rad`, `{name}_moved`, `{name}_red`) on a DuckDB
    executor over this connection; the exotic events' reverse actions and the divisors only Python reads come
    from the live evaluation here."""
    from rewards_lab.replay.engines.duckdb import DuckDBExecutor  # imports rewards_lab.replay.engine

    spill = _spill_directory(con)
    executor = DuckDBExecutor(con, spill=None if spill is None else Path(spill))
    ctx = Context(name, plan, lay, "duckdb", "", 0)  # the asset: only the issuances step reads it
    holders = ctx.table(schema.HOLDERS)
    if lookup is None:
        table(con, holders, HOLDERS.empty_table())
    else:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {holders} AS SELECT __ref, {FOUND} AS __cid FROM {lookup}")

    def fallback(target: str) -> None:
        rows = inputs.reversing
        seqs, stamps, codes, refs, nums = (list(column) for column in zip(*rows, strict=True)) if rows else [[]] * 5
        arrays = [[seq // plan.slots for seq in seqs], [seq % plan.slots for seq in seqs], stamps, codes, refs, nums]
        table(con, target, pa.table([pa.array(a, f.type) for a, f in zip(arrays, REVERSE_FALLBACK, strict=True)],
                                    schema=REVERSE_FALLBACK))  # fmt: skip

    def python_divisors(target: str, wanted: Sequence[tuple[str, str]]) -> None:
        found: list[tuple[int, str, str | None]] = []
        for of, sql in wanted:
            by_row = {int(rn): int(opos) for opos, rn in con.sql(f"SELECT opos, {ROW} FROM ({sql})").fetchall()}
            for rn, data in source.python_data(list(by_row), [of]).items():
                number = number_of(read(data, of))
                found.append((by_row[rn], of, None if number is None else str(number)))
        columns = list(zip(*found, strict=True)) if found else [()] * 3
        table(con, target, pa.table([pa.array(list(c), f.type) for c, f in zip(columns, DIVISORS, strict=True)],
                                    schema=DIVISORS))  # fmt: skip

    try:
        decide_reversals(executor, ctx, fallback, python_divisors)
        place_redemptions(executor, ctx, inputs.redemptions)
    finally:  # the map's files go with the executor: what read them is stored
        for made in (schema.DECIDED, schema.EVENT_BUCKETS):
            con.execute(f"DROP VIEW IF EXISTS {ctx.table(made)}")
        executor.close()


def _ceiling(con: duckdb.DuckDBPyConnection, lay: Layout, name: str, room: int | None) -> int | None:
    """The ceiling's boundary day and `{name}_kept` (rewards_lab.replay.plan.ceiling)."""
    return ceiling.decide(_executor(con), name, lay, room)


def _executor(con: duckdb.DuckDBPyConnection) -> Executor[object]:
    from rewards_lab.replay.engines.duckdb import (
        DuckDBExecutor,
    )  # imports rewards_lab.replay.engine, which imports this

    return DuckDBExecutor(con)
