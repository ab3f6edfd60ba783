"""Replay an event history through a programme, vectorised in DuckDB, with the live engine's exact results.

Events are processed in `occurred_at` order, ties by input order; within an event, rules in file order and actions
in rule order (that is `seq`). Every rule's conditions and amounts run as set-based SQL (rewards_lab.lab.replay_sql);
the few rows SQL cannot read exactly are evaluated by the live engine's own Python functions. The asset's supply
ceiling is then enforced in `seq` order from `opening_supply` (rewards_lab.lab.replay_ceiling). Customers are
assumed to exist with a reward wallet; each input row is one event (no deduplication of external_event_id).
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.money import parse_amount, parse_ceiling, to_decimal
from rewards_lab.domain.rules import evaluate_rules
from rewards_lab.lab.programme_file import ProgrammeDefinition, load_programme
from rewards_lab.lab.replay_ceiling import resolve
from rewards_lab.lab.replay_inputs import ROW, EventSource, literal, open_events
from rewards_lab.lab.replay_sql import TOO_LARGE, CompiledProgramme, compile_programme, referenced_fields, rule_specs

Progress = Callable[[int, int], None] | bool | None
_names = itertools.count()
DAY_US = 86_400_000_000
_EPOCH = np.datetime64("1970-01-01", "D")
_AUTO_PROGRESS_AFTER = 2.0  # seconds before the default progress starts printing
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


class _Reporter:
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
    """The outcome of a replay. Internally one compact row per issuance (seq, amount in minor units); the
    `issuances` relation adds the status, the event's columns and the rule by joining back to the events, and the
    summaries are computed in one pass over the events with the same compiled rules."""

    definition: ProgrammeDefinition
    con: duckdb.DuckDBPyConnection
    events_processed: int
    seconds: float
    ceiling: Decimal | None
    opening_supply: Decimal
    python_rows: int  # events evaluated by the Python fallback
    _name: str  # prefix of this replay's temporary tables and views
    _plan: CompiledProgramme
    _cutoff: int | None  # seq of the first issuance the ceiling refused (None: none refused)

    @property
    def _decimals(self) -> int:
        return self.definition.asset.decimals

    def _amount(self, minor: str) -> str:
        return decimal_sql(self._decimals, minor)

    @property
    def issuances(self) -> duckdb.DuckDBPyRelation:
        """One row per attempted issuance, in processing order (ISSUANCE_COLUMNS)."""
        return self.con.sql(f"SELECT * FROM {self._name}_issuances ORDER BY seq")

    def to_pandas(self) -> pd.DataFrame:
        frame: pd.DataFrame = self.issuances.to_arrow_table().to_pandas()
        return frame

    def totals(self) -> dict[str, Any]:
        """issued (Decimal), issuances, failed, and failures by error code."""
        (row,) = self.con.sql(
            f"SELECT {self._amount('coalesce(sum(m) FILTER (ok), 0)')}, count(*) FILTER (ok), "
            f"count(*) FILTER (NOT ok), count(*) FILTER (m = {TOO_LARGE}) FROM {self._name}_status"
        ).fetchall()
        codes = {"amount_too_large": int(row[3]), "asset_supply_exhausted": int(row[2]) - int(row[3])}
        failed_by_code = {code: count for code, count in codes.items() if count}
        return {"issued": row[0], "issuances": int(row[1]), "failed": int(row[2]), "failed_by_code": failed_by_code}

    def daily(self) -> pd.DataFrame:
        """day (UTC), asset, rule_index, issued, cumulative (running total of that rule), issuances (issued rows)."""
        rules = " ".join(f"WHEN {slot} THEN {rule}" for slot, (rule, _) in enumerate(_slot_pairs(self.definition)))
        query = f"""
            SELECT DATE '1970-01-01' + day AS day, {literal(self.definition.asset.symbol)} AS asset, rule_index,
                   {self._amount("issued")} AS issued,
                   {self._amount("sum(issued) OVER (PARTITION BY rule_index ORDER BY day)")} AS cumulative,
                   CAST(issuances AS BIGINT) AS issuances
            FROM (
                SELECT day, CASE seq % {self._plan.slots} {rules} END AS rule_index, sum(m) AS issued,
                       count(*) AS issuances
                FROM {self._name}_status WHERE ok GROUP BY ALL
            ) ORDER BY day, rule_index"""
        frame: pd.DataFrame = self.con.sql(query).to_arrow_table().to_pandas()
        return frame

    def per_customer(self) -> pd.DataFrame:
        """customer_id, issued, issuances (issued rows), largest first."""
        query = f"""
            SELECT e.customer_id, {self._amount("sum(i.m)")} AS issued, count(*) AS issuances
            FROM {self._name}_status i JOIN {self._name}_ordered e ON e.__pos = i.seq // {self._plan.slots}
            WHERE i.ok GROUP BY e.customer_id ORDER BY issued DESC, e.customer_id"""
        frame: pd.DataFrame = self.con.sql(query).to_arrow_table().to_pandas()
        return frame

    def write(self, path: str | Path) -> Path:
        """The issuances, in processing order, as Parquet or CSV (by suffix)."""
        target = Path(path)
        formats = {".parquet": "FORMAT PARQUET", ".csv": "FORMAT CSV, HEADER true"}
        if target.suffix.lower() not in formats:
            raise ServiceError("field_invalid", f"{target}: the output must be .parquet or .csv", field="out")
        target.parent.mkdir(parents=True, exist_ok=True)
        query = f"SELECT * FROM {self._name}_issuances ORDER BY seq"
        self.con.execute(f"COPY ({query}) TO {literal(str(target))} ({formats[target.suffix.lower()]})")
        return target


def _slot_pairs(definition: ProgrammeDefinition) -> list[tuple[int, int]]:
    """(rule index, action index) of every slot, in processing order within an event."""
    return [(r, a) for r, rule in enumerate(definition.rules) for a in range(len(rule.actions))]


def definition_of(programme: ProgrammeDefinition | str | Path) -> ProgrammeDefinition:
    return programme if isinstance(programme, ProgrammeDefinition) else load_programme(programme)


def order_events(con: duckdb.DuckDBPyConnection, source: EventSource, from_sql: str, name: str) -> int:
    """Create the view `{name}_ordered`: the events with __pos, their position in processing order."""
    # Rows may come back in any order (preserve_insertion_order = false): place each stamp at its input row.
    fetched = con.sql(f"SELECT {ROW} AS rn, epoch_us(occurred_at) AS t FROM {source.view}").fetchnumpy()
    times = fetched["t"]
    if isinstance(times, np.ma.MaskedArray) and times.mask.any():
        raise ServiceError("field_required", "every event needs an occurred_at", field="occurred_at")
    stamps = np.empty(len(times), dtype=np.int64)
    stamps[np.asarray(fetched["rn"], dtype=np.int64)] = np.asarray(times, dtype=np.int64)
    if len(stamps) < 2 or bool(np.all(stamps[1:] >= stamps[:-1])):  # already in order: position = input row
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_ordered AS SELECT *, {ROW} AS __pos FROM {from_sql}")
        return len(stamps)
    order = np.argsort(stamps, kind="stable")  # stable: ties keep input order
    positions = np.empty(len(stamps), dtype=np.int64)
    positions[order] = np.arange(len(stamps), dtype=np.int64)
    con.register(f"{name}_pos", pa.table({"rn": np.arange(len(stamps), dtype=np.int64), "pos": positions}))
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name}_ordered AS SELECT s.*, p.pos AS __pos "
        f"FROM {from_sql} s JOIN {name}_pos p ON p.rn = s.{ROW}"
    )
    return len(stamps)


def decimal_sql(decimals: int, minor: str) -> str:
    unit = format(Decimal(1).scaleb(-decimals), "f")
    return f"CAST({minor} AS DECIMAL(38, 0)) * CAST({literal(unit)} AS DECIMAL(38, {decimals}))"


def candidate_selects(plan: CompiledProgramme, events: str) -> list[tuple[str, str]]:
    """(event type, SELECT seq, day, m, ok) per rule action: its candidate issuances, nothing-issued rows dropped."""
    selects = []
    for rule in plan.rules:
        for action_index, amount in enumerate(rule.amounts):
            slot = plan.first_slot[rule.index] + action_index
            selects.append(
                (
                    rule.event_type,
                    f"SELECT __pos * {plan.slots} + {slot} AS seq, day, m, m > 0 AS ok FROM ("
                    f"SELECT __pos, CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day, {amount} AS m "
                    f"FROM {events} WHERE type = {literal(rule.event_type)} AND NOT {plan.exotic} AND {rule.where}"
                    f") WHERE m <> 0",
                )
            )
    return selects


def _inserts(plan: CompiledProgramme, events: str, table: str) -> list[tuple[str, str]]:
    """(event type, INSERT) per event type: one scan of that type's events computes every slot of its rules as a
    list, unnested into rows (seq, day, m); rows that issue nothing are dropped."""
    by_type: dict[str, list[tuple[int, str]]] = {}
    for rule in plan.rules:
        for action_index, amount in enumerate(rule.amounts):
            slot = plan.first_slot[rule.index] + action_index
            by_type.setdefault(rule.event_type, []).append((slot, f"CASE WHEN {rule.where} THEN {amount} END"))
    statements = []
    for event_type, slots in by_type.items():
        numbers = ", ".join(str(slot) for slot, _ in slots)
        amounts = ", ".join(amount for _, amount in slots)
        statements.append(
            (
                event_type,
                f"INSERT INTO {table} SELECT seq, day, m FROM ("
                f"SELECT __pos * {plan.slots} + unnest([{numbers}]) AS seq, "
                f"CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER) AS day, unnest([{amounts}]) AS m FROM {events} "
                f"WHERE type = {literal(event_type)} AND NOT {plan.exotic}) WHERE m <> 0",
            )
        )
    return statements


def python_rows(
    con: duckdb.DuckDBPyConnection, source: EventSource, plan: CompiledProgramme, events: str
) -> tuple[list[tuple[int, int, int]], int]:
    """(seq, occurred_at in epoch microseconds, m) of the events SQL cannot read exactly, evaluated by the live
    engine's own functions; and how many such events there were."""
    if plan.exotic == "FALSE":
        return [], 0
    fetched = con.sql(f"SELECT __pos, {ROW}, type, epoch_us(occurred_at) FROM {events} WHERE {plan.exotic}").fetchall()
    data = source.python_data([int(e[1]) for e in fetched], plan.fields)
    rows = []
    for position, rn, event_type, stamp in fetched:
        for verdict in evaluate_rules(plan.specs, event_type, data.get(int(rn), {})):
            if not verdict.matched:
                continue
            for action in verdict.actions:
                if not action.issues and action.error_code is None:
                    continue
                slot = plan.first_slot[int(verdict.rule_id)] + action.action_index
                m = TOO_LARGE if action.error_code is not None else action.amount_minor
                rows.append((int(position) * plan.slots + slot, int(stamp), m))
    return rows, len(fetched)


def replay(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    *,
    opening_supply: Decimal | int | str = 0,
    progress: Progress = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> ReplayResult:
    """Replay `events` through `programme`; see the module docstring and docs/decisions.md ("Replay")."""
    started = time.perf_counter()
    definition = definition_of(programme)
    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    con = connection if connection is not None else duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    name = f"__replay_{next(_names)}"
    source = open_events(con, events, f"{name}_events")  # reads CSV and JSON lines in file order
    if connection is None:
        con.execute("SET preserve_insertion_order = false")  # from here every order is explicit (seq, __rn)
    from_sql = source.prepare(referenced_fields(rule_specs(definition)))
    plan = compile_programme(definition, source)
    statements = _inserts(plan, f"{name}_ordered", f"{name}_iss")
    reporter = _Reporter(progress, len(statements) + 3)
    table, ordered = f"{name}_iss", f"{name}_ordered"
    try:
        count = order_events(con, source, from_sql, name)
        reporter.step("ordered")
        con.execute(f"CREATE TEMP TABLE {table} (seq BIGINT, day INTEGER, m BIGINT)")
        for label, statement in statements:
            con.execute(statement)
            reporter.step(label)
        fallback, python_events = python_rows(con, source, plan, ordered)
        if fallback:
            seqs, stamps, amounts = (list(column) for column in zip(*fallback, strict=True))
            frame = pa.table({"seq": pa.array(seqs, pa.int64()), "t": pa.array(stamps, pa.int64()), "m": amounts})
            con.register(f"{name}_fallback", frame)
            con.execute(f"INSERT INTO {table} SELECT seq, CAST(t // {DAY_US} AS INTEGER), m FROM {name}_fallback")
            con.unregister(f"{name}_fallback")
        reporter.step("fallback")
        cutoff = _enforce_ceiling(con, name, None if ceiling is None else ceiling - opening)
        reporter.step("ceiling")
        _create_views(con, definition, plan, name, cutoff)
    finally:
        reporter.close()
    return ReplayResult(
        definition=definition,
        con=con,
        events_processed=count,
        seconds=time.perf_counter() - started,
        ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
        opening_supply=to_decimal(opening, decimals),
        python_rows=python_events,
        _name=name,
        _plan=plan,
        _cutoff=cutoff,
    )


def _create_views(
    con: duckdb.DuckDBPyConnection,
    definition: ProgrammeDefinition,
    plan: CompiledProgramme,
    name: str,
    cutoff: int | None,
) -> None:
    """`status` (seq, day, m, ok: issued) and `issuances` (the full rows, joined back to the events)."""
    pairs = _slot_pairs(definition)
    slots = pa.table(
        {
            "slot": pa.array(range(len(pairs)), pa.int64()),
            "rule_index": pa.array([r for r, _ in pairs], pa.int32()),
            "action_index": pa.array([a for _, a in pairs], pa.int32()),
            "event_type": pa.array([definition.rules[r].event_type for r, _ in pairs], pa.string()),
        }
    )
    con.register(f"{name}_slots_input", slots)
    con.execute(f"CREATE TEMP TABLE {name}_slots AS SELECT * FROM {name}_slots_input")
    con.unregister(f"{name}_slots_input")
    below = "TRUE" if cutoff is None else f"i.seq < {cutoff}"
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name}_status AS SELECT i.seq, i.day, i.m, "
        f"(i.m > 0 AND ({below} OR k.seq IS NOT NULL)) AS ok FROM {name}_iss i LEFT JOIN {name}_kept k ON k.seq = i.seq"
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP VIEW {name}_issuances AS
        SELECT i.seq, e.external_event_id, e.customer_id, s.event_type, e.occurred_at, s.rule_index, s.action_index,
               {literal(definition.asset.symbol)} AS asset,
               {decimal_sql(definition.asset.decimals, "greatest(i.m, 0)")} AS amount, greatest(i.m, 0) AS amount_minor,
               CASE WHEN i.ok THEN 'issued' ELSE 'failed' END AS status,
               CASE WHEN i.m = {TOO_LARGE} THEN 'amount_too_large'
                    WHEN NOT i.ok THEN 'asset_supply_exhausted' END AS error_code
        FROM {name}_status i JOIN {name}_slots s ON s.slot = i.seq % {plan.slots}
        JOIN {name}_ordered e ON e.__pos = i.seq // {plan.slots}"""
    )


def _enforce_ceiling(con: duckdb.DuckDBPyConnection, name: str, room: int | None) -> int | None:
    """Resolve the ceiling in seq order: returns the seq of the first refusal (None when nothing is refused)
    and fills `{name}_kept` with the seqs after it that still fit."""
    con.execute(f"CREATE TEMP TABLE {name}_kept (seq BIGINT)")
    if room is None:
        return None
    fetched = con.sql(f"SELECT seq, m FROM {name}_iss WHERE m > 0 ORDER BY seq").fetchnumpy()
    seqs = np.asarray(fetched["seq"], dtype=np.int64)
    first, issued_after = resolve(np.asarray(fetched["m"], dtype=np.int64), room)
    if first >= len(seqs):
        return None
    kept = pa.table({"seq": pa.array(seqs[issued_after], pa.int64())})
    con.register(f"{name}_kept_input", kept)
    con.execute(f"INSERT INTO {name}_kept SELECT seq FROM {name}_kept_input")
    con.unregister(f"{name}_kept_input")
    return int(seqs[first])


def sweep(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    grid: dict[str, Sequence[Any]],
    *,
    opening_supply: Decimal | int | str = 0,
) -> pd.DataFrame:
    """One programme over a grid of parameter values in one vectorised pass (see rewards_lab.lab.replay_sweep)."""
    from rewards_lab.lab.replay_sweep import sweep as run  # imported late: replay_sweep builds on this module

    return run(events, programme, grid, opening_supply=opening_supply)
