"""Replay an event history through a programme, vectorised in DuckDB, with the live engine's exact results.

Events are processed in `occurred_at` order, ties by input order; within an event, rules in file order and actions
in rule order (that is `seq`). Every rule's conditions and amounts run as set-based SQL (rewards_lab.replay.compiler)
into one stored row per event (rewards_lab.replay.store); the few rows SQL cannot read exactly are evaluated by
the live engine's own Python functions. The asset's supply ceiling is then enforced in `seq` order from
`opening_supply` (rewards_lab.replay.store, rewards_lab.domain.ceiling). Customers are
assumed to exist with a reward wallet; each input row is one event (no deduplication of external_event_id). An
optional customers table (rewards_lab.replay.customers) gives the facts rules read of an event's customer and
resolves beneficiaries; rules read no customer field without one.
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme
from rewards_lab.domain.ceiling import room_under
from rewards_lab.domain.conditions import EventFacts
from rewards_lab.domain.money import parse_amount, parse_ceiling, to_decimal
from rewards_lab.domain.schedule import DAY_US, instant
from rewards_lab.replay import input_checks, issuance_writer, store
from rewards_lab.replay.compiler import (
    DUCKDB,
    CompiledProgramme,
    compile_programme,
    referenced_fields,
    rule_specs,
    string,
)
from rewards_lab.replay.customers import joined, open_customers
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.fallback import Evaluate, all_outcomes, resolved_amount
from rewards_lab.replay.feature_store import FeatureInputs, FeatureTables, decide_features, local_day
from rewards_lab.replay.inputs import ROW, EventSource, literal, open_events
from rewards_lab.replay.limits_plan import has_features, limits_plan
from rewards_lab.replay.order import order_events
from rewards_lab.replay.plan import ceiling as plan_ceiling
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan import outputs, schema
from rewards_lab.replay.plan.expiry import ExpiryPlan, expiry_plan
from rewards_lab.replay.plan.layout import Layout, layout
from rewards_lab.replay.plan.outputs import decimal_sql
from rewards_lab.replay.plan.reversals import holder_sql
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.run import run as run_plan
from rewards_lab.replay.redemptions import redemptions_table
from rewards_lab.replay.sql_values import FieldSource

Progress = Callable[[int, int], None] | bool | None
_names = itertools.count()
_EPOCH = np.datetime64("1970-01-01", "D")
_AUTO_PROGRESS_AFTER = 2.0  # seconds before the default progress starts printing
STEPS = ("ordered", "rules", "fallback", "summaries", "ceiling")  # what each progress step has finished
FEATURED_MEMORY_LIMIT = "1GB"  # DuckDB's share when a replay has caps, budgets, reversals or redemptions
ISSUANCE_COLUMNS = (  # the `issuances` relation's columns, in order
    "seq",
    "external_event_id",
    "customer_id",
    "event_type",
    "occurred_at",
    "rule_index",
    "action_index",
    "asset",
    "amount",
    "amount_minor",
    "status",
    "error_code",
)


class ProgressReporter:
    """Progress as (done, total) steps: a callable, nothing (False), or text on stderr once it takes long (None)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self.started, self.printed = time.perf_counter(), False

    def step(self, label: str) -> None:
        self.done += 1
        if callable(self.progress):
            self.progress(self.done, self.total)
        elif self.progress is None:
            elapsed = time.perf_counter() - self.started
            if elapsed >= _AUTO_PROGRESS_AFTER:
                sys.stderr.write(f"\rreplay: {self.done}/{self.total} {label:<24} {elapsed:6.1f} s")
                sys.stderr.flush()
                self.printed = True

    def close(self) -> None:
        if self.printed:
            sys.stderr.write("\n")


def parse_supply(value: Decimal | int | str, decimals: int, field_name: str = "opening_supply") -> int:
    """An outstanding supply in minor units: zero, or an amount as `parse_amount` reads it."""
    text = format(value, "f") if isinstance(value, Decimal) else str(value)
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text) and Decimal(text) == 0:
        return 0
    return parse_amount(text, decimals, field_name)


@dataclass
class ReplayResult:
    """The outcome of a replay. Stored as one row per event with the amounts of its rules' actions
    (rewards_lab.replay.store); the summaries group those rows, and the `issuances` relation unnests them
    into one row per issuance, with the status, the event's columns and the rule."""

    definition: ProgrammeDefinition
    con: duckdb.DuckDBPyConnection
    events_processed: int
    seconds: float
    ceiling: Decimal | None
    opening_supply: Decimal
    python_rows: int  # events evaluated by the Python fallback
    _name: str  # prefix of this replay's temporary tables and views
    _layout: Layout
    _boundary: int | None  # the day of the first refusal by the ceiling (None: none refused)
    _features: FeatureTables | None = None  # caps, budgets, reversals or redemptions (None: the programme has none)
    _expiry: ExpiryPlan | None = None  # lots expire (None: the programme's points never do)
    warnings: tuple[str, ...] = ()  # inputs that probably make this forecast wrong (replay.input_checks)

    @property
    def _decimals(self) -> int:
        return self.definition.asset.decimals

    @property
    def as_of(self) -> datetime | None:
        """Until when the expiry worker ran (UTC; None: the programme's points never expire)."""
        return None if self._expiry is None else instant(self._expiry.as_of)

    @property
    def lots(self) -> duckdb.DuckDBPyRelation:
        """Every lot (LOT_COLUMNS), by customer then oldest first: what it added, what remains of it, what expired
        (docs/replay.md "Expiry"); empty when the programme's points never expire."""
        if self._expiry is None:
            return self.con.sql(_empty(LOT_COLUMNS))
        return self.con.sql(plan_expiry.lots_sql(self._name, self.definition.asset.symbol, self._amount))

    @property
    def expired(self) -> duckdb.DuckDBPyRelation:
        """Every lot that expired by `as_of` (EXPIRED_COLUMNS), in the order of their expiry."""
        if self._expiry is None:
            return self.con.sql(_empty(EXPIRED_COLUMNS))
        return self.con.sql(plan_expiry.expired_sql(self._name, self.definition.asset.symbol, self._amount))

    def _amount(self, minor: str) -> str:
        return decimal_sql(self._decimals, minor)

    @property
    def issuances(self) -> duckdb.DuckDBPyRelation:
        """One row per attempted issuance, in processing order (ISSUANCE_COLUMNS; with caps, budgets or reversals
        also plan.outputs.ADDED_COLUMNS and one row per reverse action)."""
        return self.con.sql(f"SELECT * FROM {self._name}_issuances ORDER BY seq")

    @property
    def reversals(self) -> duckdb.DuckDBPyRelation:
        """One row per reward a reverse action took back: the action (seq), the original reward (original_seq),
        its customer, the target, what the wallet gave (taken), the shortfall and the clawback policy."""
        if self._features is None:
            return self.con.sql(_empty(REVERSAL_COLUMNS))
        return self.con.sql(
            outputs.reversals_sql(
                self._layout.slots,
                self._name,
                self.definition.asset.symbol,
                self._amount,
                self.definition.programme.clawback,
            )
        )

    @property
    def redemptions(self) -> duckdb.DuckDBPyRelation:
        """The redemptions given, in input order, each `redeemed` or `refused` (the balance could not cover it)."""
        if self._features is None:
            return self.con.sql(_empty(REDEMPTION_COLUMNS))
        return self.con.sql(outputs.redemptions_sql(self._name, self.definition.asset.symbol, self._amount))

    def issuances_query(self, positions: tuple[int, int] | None = None) -> str:
        symbol = self.definition.asset.symbol
        base = outputs.issuances_sql(self._layout, self._name, self._boundary, symbol, self._amount, positions)
        if self._features is None:
            return base
        lookup = self._features.lookup
        return outputs.featured_issuances_sql(base, self._name, symbol, self._amount, lookup, positions)

    def batches(self) -> Iterator[pa.Table]:
        """The issuance rows in processing order, as Arrow tables of the events of one position range at a time:
        each is sorted on its own, so that the rows are never sorted (nor held) all at once."""
        return issuance_writer.tables(self.con, self.issuances_query, self.events_processed)

    def to_pandas(self) -> pd.DataFrame:
        frame: pd.DataFrame = pa.concat_tables(list(self.batches())).to_pandas()
        return frame

    def totals(self) -> dict[str, Any]:
        """issued (Decimal), issuances, failed, and failures by error code; with caps, budgets, reversals or
        redemptions also what was requested and cut, limited, reversed (and its target and shortfall), the net
        issuance and what was redeemed (`feature_totals`); with expiry also what `expired` (and how many lots)."""
        found = self._feature_totals() if self._features is not None else self._plain_totals()
        if self._expiry is not None:
            ((amount, count),) = self.con.sql(plan_expiry.expired_total_sql(self._name)).fetchall()
            found.update({"expired": to_decimal(int(amount), self._decimals), "expired_lots": int(count)})
        return found

    def _plain_totals(self) -> dict[str, Any]:
        (row,) = self.con.sql(outputs.totals_sql(self._name, self._boundary, self._amount)).fetchall()
        return outputs.plain_totals(row)

    def _feature_totals(self) -> dict[str, Any]:
        (row,) = self.con.sql(outputs.featured_totals_sql(self._name, self._boundary)).fetchall()
        failed = self.con.sql(outputs.failed_actions_sql(self._name)).fetchall()
        return outputs.featured_totals(row, failed, self._boundary, self._decimals)

    def daily(self) -> pd.DataFrame:
        """day (UTC), asset, rule_index, issued, cumulative (running total of that rule), issuances (issued rows);
        amounts are exact Arrow decimals (see `per_customer`). With caps, budgets or reversals also requested,
        cut, limited, reversed, net and net_cumulative (plan.outputs.featured_daily_sql); with expiry also
        `expired`: what expired that UTC day of the lots that rule's rewards made."""
        expired = None if self._expiry is None else plan_expiry.expired_cells(self._name, self._layout.slots)
        if self._features is not None:
            query = outputs.featured_daily_sql(
                self._layout.slots, self._name, self._boundary, self.definition.asset.symbol, self._amount, expired
            )
            return frame_of(self.con.sql(query).to_arrow_table())
        query = outputs.daily_sql(self._name, self._boundary, self.definition.asset.symbol, self._amount, expired)
        return frame_of(self.con.sql(query).to_arrow_table())

    def per_customer(self, top: int | None = None) -> pd.DataFrame:
        """customer_id, issued (exact Arrow decimal), issuances (issued rows), for every customer issued anything,
        in no particular order; with `top`, only the `top` largest, largest first (ties by customer id).

        Sorting every customer (there may be millions) would cost as much as grouping them, and building a
        Python `Decimal` per row more: `issued` is a pandas `ArrowDtype(decimal128)` column, exact,
        whose values come out as `Decimal` when read (`to_dict`, iteration, `sum()`)."""
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
            raise ServiceError("field_invalid", f"top must be a whole number of at least 1, not {top!r}", field="top")
        expired = None if self._expiry is None else plan_expiry.expired_per_holder(self._name)
        if self._features is not None:  # also reversed, net, redeemed and balance, per holder
            lookup = self._features.lookup
            query = outputs.featured_per_customer_sql(
                self._layout, self._name, self._boundary, lookup, self._amount, top, expired
            )
            return frame_of(self.con.sql(query).to_arrow_table())
        query = outputs.per_customer_sql(self._layout, self._name, self._boundary, self._amount, top, expired)
        return frame_of(self.con.sql(query).to_arrow_table())

    def write(self, path: str | Path) -> Path:
        """The issuances, in processing order, as Parquet or CSV (by suffix), within DuckDB's memory limit
        (rewards_lab.replay.issuance_writer)."""
        return issuance_writer.write(self.con, self.issuances_query, self.events_processed, path)


def quiet_connection() -> duckdb.DuckDBPyConnection:
    """A connection of the replay's own without DuckDB's progress bar: in a notebook the bar is a widget output of
    any statement over 2 s (a busy machine's replay), which nbval would compare; `progress=` reports instead."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


REVERSAL_COLUMNS = (
    ("seq", "BIGINT"),
    ("external_event_id", "VARCHAR"),
    ("occurred_at", "TIMESTAMPTZ"),
    ("rule_index", "INTEGER"),
    ("action_index", "INTEGER"),
    ("original_seq", "BIGINT"),
    ("original_external_event_id", "VARCHAR"),
    ("original_rule_index", "INTEGER"),
    ("original_action_index", "INTEGER"),
    ("customer_id", "VARCHAR"),
    ("asset", "VARCHAR"),
    ("target_amount", "DECIMAL(38, 0)"),
    ("target_minor", "BIGINT"),
    ("taken_amount", "DECIMAL(38, 0)"),
    ("taken_minor", "BIGINT"),
    ("shortfall_amount", "DECIMAL(38, 0)"),
    ("shortfall_minor", "BIGINT"),
    ("clawback", "VARCHAR"),
)
LOT_COLUMNS = (
    ("customer_id", "VARCHAR"),
    ("asset", "VARCHAR"),
    ("seq", "BIGINT"),
    ("issued_at", "TIMESTAMPTZ"),
    ("expires_at", "TIMESTAMPTZ"),
    ("amount", "DECIMAL(38, 0)"),
    ("amount_minor", "BIGINT"),
    ("remaining", "DECIMAL(38, 0)"),
    ("remaining_minor", "BIGINT"),
    ("expired", "DECIMAL(38, 0)"),
    ("expired_minor", "BIGINT"),
)
EXPIRED_COLUMNS = (
    ("customer_id", "VARCHAR"),
    ("asset", "VARCHAR"),
    ("seq", "BIGINT"),
    ("issued_at", "TIMESTAMPTZ"),
    ("expires_at", "TIMESTAMPTZ"),
    ("amount", "DECIMAL(38, 0)"),
    ("amount_minor", "BIGINT"),
)
REDEMPTION_COLUMNS = (
    ("idx", "BIGINT"),
    ("customer_id", "VARCHAR"),
    ("occurred_at", "TIMESTAMPTZ"),
    ("asset", "VARCHAR"),
    ("amount", "DECIMAL(38, 0)"),
    ("amount_minor", "BIGINT"),
    ("status", "VARCHAR"),
)


def _empty(columns: tuple[tuple[str, str], ...]) -> str:
    """SQL of an empty relation with these columns (a replay without reversals or redemptions)."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {kind}) AS {column}" for column, kind in columns) + " WHERE FALSE"


def frame_of(table: pa.Table) -> pd.DataFrame:
    """A pandas frame of a summary: decimal columns stay Arrow decimals (exact, no Python object per row)."""
    frame: pd.DataFrame = table.to_pandas(types_mapper=_arrow_decimals)
    return frame


def _arrow_decimals(arrow_type: pa.DataType) -> pd.ArrowDtype | None:
    return pd.ArrowDtype(arrow_type) if pa.types.is_decimal(arrow_type) else None


def definition_of(programme: ProgrammeDefinition | str | Path) -> ProgrammeDefinition:
    return programme if isinstance(programme, ProgrammeDefinition) else load_programme(programme)


def candidate_selects(plan: CompiledProgramme, events: str) -> list[tuple[str, str]]:
    """(event type, SELECT seq, day, m, ok) per rule action: its candidate issuances, nothing-issued rows dropped."""
    selects = []
    keep = "" if plan.exotic_sql is None else f" AND NOT {plan.exotic_sql}"
    for rule in plan.rules:
        for action_index in range(len(rule.parts)):
            slot = plan.first_slot[rule.index] + action_index
            selects.append(
                (
                    rule.event_type,
                    f"SELECT __pos * {plan.slots} + {slot} AS seq, day, m, m > 0 AS ok FROM ("
                    f"SELECT __pos, CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day, "
                    f"{plan.render(rule.candidate(action_index))} AS m FROM {events} "
                    f"WHERE type = {plan.render(string(rule.event_type))}{keep} AND {plan.render(rule.where)}"
                    f") WHERE m <> 0",
                )
            )
    return selects


ReverseRow = tuple[int, int, str | None, str | None, str | None]  # (seq, occurred_at us, code, original, numerator)


def python_outcomes(
    con: duckdb.DuckDBPyConnection, source: EventSource, plan: CompiledProgramme, events: str
) -> tuple[list[tuple[int, int, int]], dict[int, str], int, list[ReverseRow]]:
    """(seq, occurred_at in epoch microseconds, m) of the events SQL cannot read exactly, evaluated by the live
    engine's own functions with the facts the SQL reads (time, customer); seq -> the customer a beneficiary's
    action rewards; how many such events there were; and their matched reverse actions."""
    if plan.exotic_sql is None:
        return [], {}, 0, []
    reader = source.customers.reader() if source.customers is not None and plan.reads_customers else None
    facts_columns = reader.columns if reader is not None else []
    extra = "".join(f", {column}" for column in facts_columns)
    query = f"SELECT __pos, {ROW}, type, epoch_us(occurred_at){extra} FROM {events} WHERE {plan.exotic_sql}"
    fetched = con.sql(query).fetchall()
    data = source.python_data([int(e[1]) for e in fetched], plan.fields)
    typed = [(row[2], data.get(int(row[1]), {})) for row in fetched]
    facts = [
        EventFacts(
            instant(int(row[3])),
            reader.facts(dict(zip(facts_columns, row[4:], strict=True))) if reader is not None else None,
        )
        for row in fetched
    ]
    both = all_outcomes(plan.specs, plan.first_slot, typed, facts)
    evaluated = [issues for issues, _ in both]
    named = [reference for found in evaluated for _, m, reference in found if reference is not None and m > 0]
    resolved = source.customers.resolve(named) if source.customers is not None else None
    rows, recipients, reversing = [], {}, []
    for row, outcomes, (_, reversals) in zip(fetched, evaluated, both, strict=True):
        for slot, m, reference in outcomes:
            seq = int(row[0]) * plan.slots + slot
            amount, customer = resolved_amount(m, reference, resolved)
            rows.append((seq, int(row[3]), amount))
            if customer is not None:
                recipients[seq] = customer
        for slot, code, original, numerator in reversals:
            reversing.append((int(row[0]) * plan.slots + slot, int(row[3]), code, original, numerator))
    return rows, recipients, len(fetched), reversing


def prepared(
    con: duckdb.DuckDBPyConnection, definition: ProgrammeDefinition, source: EventSource, customers: Any, name: str
) -> tuple[str, CompiledProgramme]:
    """(the FROM clause over the events with what the rules read, the compiled plan), with the customers table
    (None: none) registered on the source; `name`: the replay's prefix (its lookup and facts views)."""
    if customers is not None:
        source.customers = open_customers(con, customers, name)
    from_sql = source.prepare(referenced_fields(rule_specs(definition)))
    plan = compile_programme(definition, source, DUCKDB)
    return joined(con, name, from_sql, [plan], source.customers), plan


def _executor(con: duckdb.DuckDBPyConnection) -> Executor[object]:
    """A DuckDB executor over the replay's connection (left open), for the plan's steps of a replay off it."""
    from rewards_lab.replay.engines.duckdb import DuckDBExecutor  # imports this module

    return DuckDBExecutor(con)


def _ceiling(con: duckdb.DuckDBPyConnection, lay: Layout, name: str, room: int | None) -> int | None:
    """The ceiling's boundary day (rewards_lab.replay.plan.ceiling) over the tables of a replay off the plan."""
    return plan_ceiling.decide(_executor(con), name, lay, room)


def issued_sql(lay: Layout, name: str, featured: bool, lookup: str | None = None) -> str:
    """SQL of `issued` (plan.schema.ISSUED: seq, customer_id, amount_minor) of every issued reward, from the
    stored amounts (one plain scan per field: cheaper than unnesting every event's struct). With expiry the
    ceiling is never enforced set-based (a ceiling that can bind sends every reward through the pass), so every
    positive amount is issued, unless the pass decided otherwise (`featured`: `{name}_dec`, the customer resolved
    through `lookup`)."""
    named = set(lay.beneficiary_fields)
    stored = " UNION ALL ".join(
        f"SELECT p.pos * {lay.slots} + s.slot AS seq, "
        f"{f'coalesce(p.a.b{i}, p.customer_id)' if i in named else 'p.customer_id'} AS customer_id, "
        f"p.a.c{i} AS amount_minor FROM {name}_pe p JOIN {name}_slots s ON s.k = p.a.k AND s.i = {i} "
        f"WHERE p.a.c{i} > 0"
        for i in range(1, lay.width + 1)
    )
    if not featured:
        return stored
    holder, join = holder_sql("b.customer_id", lookup)
    return (
        f"SELECT b.seq, {holder} AS customer_id, CASE WHEN d.seq IS NULL THEN b.amount_minor ELSE d.g END "
        f"AS amount_minor FROM ({stored}) b LEFT JOIN {name}_dec d ON d.seq = b.seq {join} "
        "WHERE d.seq IS NULL OR d.status = 'issued'"
    )


def evaluation(source: Any, plan: CompiledProgramme) -> tuple[tuple[tuple[str, Any], ...], Evaluate]:
    """What the plan's `exotic` step selects for the live evaluation, and the evaluation (`map_partitions`);
    `source`: the events as either engine reads them (inputs.EventSource, spark_inputs.SparkEventSource)."""
    customers = source.customers
    facts = customers.reader() if customers is not None and plan.reads_customers else None
    reading, reader = source.fallback_reading(plan.fields, facts)
    return reading, Evaluate(tuple(plan.specs), tuple(plan.first_slot), reader)


def _on_plan(
    con: duckdb.DuckDBPyConnection,
    source: EventSource,
    plan: CompiledProgramme,
    lay: Layout,
    name: str,
    definition: ProgrammeDefinition,
    room: int | None,
    report: Callable[[str], None],
) -> tuple[int | None, int]:
    """The plan's steps on `con` over `{name}_ordered`: (the ceiling's boundary day, the fallback's events)."""
    from rewards_lab.replay.engines.duckdb import DuckDBExecutor  # imports this module

    executor = DuckDBExecutor(con)
    asset = definition.asset
    reading, evaluate = evaluation(source, plan)
    joins = source.customers is not None and plan.joins_customers  # the lookup was built (`joined`)
    lookup = source.customers.lookup_spec(plan.reads_customers) if joins and source.customers else None
    context = Context(name, plan, lay, "duckdb", asset.symbol, asset.decimals, lookup=lookup, reading=reading)
    done = run_plan(executor, context, room, evaluate, report)
    executor.close()
    return done.context.boundary, done.python_rows


def replay(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    *,
    opening_supply: Decimal | int | str = 0,
    progress: Progress = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    customers: Any = None,
    redemptions: Any = None,
    as_of: Any = None,
) -> ReplayResult:
    """Replay `events` through `programme`; see the module docstring and docs/decisions.md ("Replay").
    `customers`: the customers table (a path, a DataFrame, an Arrow table or a relation; docs/replay.md).
    `redemptions`: what customers spent (rewards_lab.replay.redemptions; None: nothing). `as_of`: until when
    lots expire, when the programme's points do (rewards_lab.replay.plan.expiry; None: the history's end)."""
    started = time.perf_counter()
    definition = definition_of(programme)
    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    spent = None if redemptions is None else redemptions_table(redemptions, decimals)
    con = connection if connection is not None else quiet_connection()
    con.execute("SET TimeZone = 'UTC'")
    name = f"__replay_{next(_names)}"
    source = open_events(con, events, f"{name}_events")  # reads CSV and JSON lines in file order
    expiry = expiry_plan(definition)
    featured = has_features(definition) or spent is not None or (expiry is not None and ceiling is not None)
    if connection is None:
        con.execute("SET preserve_insertion_order = false")  # from here every order is explicit (seq, __rn)
        if featured:  # the pass's state lives beside DuckDB's: DuckDB holds less back (it spills, if it must)
            con.execute(f"SET memory_limit = {literal(FEATURED_MEMORY_LIMIT)}")
    from_sql, plan = prepared(con, definition, source, customers, name)
    lay = layout(plan)
    reporter = ProgressReporter(progress, len(STEPS))
    ordered = f"{name}_ordered"
    limits = limits_plan(definition, plan.specs) if featured else None
    lday = local_day(definition.programme.zone) if limits is not None and limits.capped else None
    room = room_under(ceiling, opening)
    tables: FeatureTables | None = None
    on_plan = not featured
    symbol = definition.asset.symbol
    expiry_ctx = None if expiry is None else Context(name, plan, lay, "duckdb", symbol, decimals, expiry=expiry)
    try:
        count = order_events(con, source, from_sql, name)
        reporter.step("ordered")
        if on_plan:  # the replay plan (rewards_lab.replay.plan): the other paths move onto it in later increments
            boundary, python_events = _on_plan(con, source, plan, lay, name, definition, room, reporter.step)
        else:
            store.create(con, lay, ordered, plan.exotic_sql, name, local_day=lday)
            reporter.step("rules")
            fallback, recipients, python_events, reversing = python_outcomes(con, source, plan, ordered)
            store.add_fallback(con, lay, ordered, fallback, name, recipients, local_day=lday)
            reporter.step("fallback")
            store.summarise(con, lay, name)
            reporter.step("summaries")
        if expiry_ctx is not None:  # each event's expiry (plan.expiry), `as_of` resolved
            expiry_ctx = plan_expiry.prepare(_executor(con), expiry_ctx, as_of, spent)
            expiry = expiry_ctx.expiry
            if limits is None:  # no pass: every lot is the closed form's
                plan_expiry.without_pass(_executor(con), name)
        if not on_plan:
            if limits is None:
                boundary = _ceiling(con, lay, name, room)
            else:
                inputs = FeatureInputs(limits, room, spent, reversing, lday is not None, expiry)
                boundary, tables = decide_features(con, source, plan, lay, name, inputs)
            reporter.step("ceiling")
        result = ReplayResult(
            definition=definition,
            con=con,
            events_processed=count,
            seconds=0.0,
            ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
            opening_supply=to_decimal(opening, decimals),
            python_rows=python_events,
            _name=name,
            _layout=lay,
            _boundary=boundary,
            _features=tables,
            _expiry=expiry,
        )
        if not on_plan:
            con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_issuances AS {result.issuances_query()}")
        if expiry_ctx is not None:  # the lots (plan.expiry): the pass's, and one per other issued reward
            assert boundary is None  # a ceiling that can bind sends every reward through the pass
            issued = issued_sql(lay, name, tables is not None, None if tables is None else tables.lookup)
            executor = _executor(con)
            executor.create(schema.ISSUED.on(name), issued, stored=False)
            plan_expiry.make_lots(executor, expiry_ctx)
    finally:
        reporter.close()
    result.warnings = tuple(input_warnings(con, source, [plan], count) + _outcome_warnings(result, spent))
    input_checks.emit(result.warnings)
    result.seconds = time.perf_counter() - started
    return result


def input_warnings(
    con: duckdb.DuckDBPyConnection, source: EventSource, plans: list[CompiledProgramme], count: int
) -> list[str]:
    """What about the events and the customers table probably makes the forecast wrong (replay.input_checks)."""
    types = sorted({spec.event_type for plan in plans for spec in plan.specs})
    listed = ", ".join(DUCKDB.render(string(t)) for t in types)
    typed = bool(types) and bool(con.sql(f"SELECT 1 FROM {source.view} WHERE type IN ({listed}) LIMIT 1").fetchall())
    found = input_checks.event_warnings(count, int(typed), plans, partial(_read_as, source), types)
    if source.customers is not None and count and not source.customers.names_any(source.view):
        found.append(input_checks.no_customer_matches(count, source.customers.rows))
    return found


def _read_as(source: EventSource, name: str) -> FieldSource:
    """How the rules read a field; a column of nothing but NULLs (Arrow's null type) is missing."""
    if str(source.columns.get(name, "")).upper().strip('"') == "NULL":
        return FieldSource("missing")
    return source.field(name)


def _outcome_warnings(result: ReplayResult, spent: pa.Table | None) -> list[str]:
    if result._features is None:  # noqa: SLF001 - the result's own tables
        return []
    given = 0 if spent is None else spent.num_rows
    empty = [input_checks.NO_REDEMPTIONS] if spent is not None and given == 0 else []
    reverses = any(action.reverse_of is not None for spec in rule_specs(result.definition) for action in spec.actions)
    return empty + input_checks.outcome_warnings(result.totals(), given, reverses)
