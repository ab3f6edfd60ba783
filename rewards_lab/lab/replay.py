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
from collections.abc import Callable
from dataclasses import dataclass, field
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
_AUTO_PROGRESS_AFTER = 2.0  # seconds before the default progress starts printing
ISSUANCE_COLUMNS = (
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
    definition: ProgrammeDefinition
    con: duckdb.DuckDBPyConnection
    table: str
    events_processed: int
    seconds: float
    ceiling: Decimal | None
    opening_supply: Decimal
    python_rows: int = 0  # events evaluated by the Python fallback
    _decimals: int = field(default=0)

    @property
    def issuances(self) -> duckdb.DuckDBPyRelation:
        """One row per attempted issuance, in processing order (ISSUANCE_COLUMNS)."""
        return self.con.sql(f"SELECT * FROM {self.table} ORDER BY seq")

    def to_pandas(self) -> pd.DataFrame:
        frame: pd.DataFrame = self.issuances.to_arrow_table().to_pandas()
        return frame

    def totals(self) -> dict[str, Any]:
        """issued (Decimal), issuances, failed, and failures by error code."""
        (row,) = self.con.sql(
            f"SELECT coalesce(sum(amount) FILTER (status = 'issued'), 0), count(*) FILTER (status = 'issued'), "
            f"count(*) FILTER (status = 'failed') FROM {self.table}"
        ).fetchall()
        codes = self.con.sql(
            f"SELECT error_code, count(*) FROM {self.table} WHERE status = 'failed' GROUP BY 1 ORDER BY 1"
        ).fetchall()
        issued = Decimal(row[0]).quantize(Decimal(1).scaleb(-self._decimals))
        return {"issued": issued, "issuances": int(row[1]), "failed": int(row[2]), "failed_by_code": dict(codes)}

    def daily(self) -> pd.DataFrame:
        """day, asset, rule_index, issued, cumulative (running total of that rule), issuances (issued rows)."""
        query = f"""
            SELECT day, asset, rule_index, issued,
                   sum(issued) OVER (PARTITION BY rule_index ORDER BY day) AS cumulative, issuances
            FROM (
                SELECT CAST(occurred_at AS DATE) AS day, any_value(asset) AS asset, rule_index,
                       CAST(sum(amount) AS DECIMAL(38, {self._decimals})) AS issued, count(*) AS issuances
                FROM {self.table} WHERE status = 'issued' GROUP BY day, rule_index
            ) ORDER BY day, rule_index"""
        frame: pd.DataFrame = self.con.sql(query).to_arrow_table().to_pandas()
        return frame

    def per_customer(self) -> pd.DataFrame:
        """customer_id, issued, issuances (issued rows), largest first."""
        query = f"""
            SELECT customer_id, CAST(sum(amount) AS DECIMAL(38, {self._decimals})) AS issued, count(*) AS issuances
            FROM {self.table} WHERE status = 'issued' GROUP BY customer_id ORDER BY issued DESC, customer_id"""
        frame: pd.DataFrame = self.con.sql(query).to_arrow_table().to_pandas()
        return frame

    def write(self, path: str | Path) -> Path:
        """The issuances, in processing order, as Parquet or CSV (by suffix)."""
        target = Path(path)
        formats = {".parquet": "PARQUET", ".csv": "CSV"}
        if target.suffix.lower() not in formats:
            raise ServiceError("field_invalid", f"{target}: the output must be .parquet or .csv", field="out")
        target.parent.mkdir(parents=True, exist_ok=True)
        kind = formats[target.suffix.lower()]
        options = "FORMAT PARQUET" if kind == "PARQUET" else "FORMAT CSV, HEADER true"
        self.con.execute(f"COPY (SELECT * FROM {self.table} ORDER BY seq) TO {literal(str(target))} ({options})")
        return target


def _definition(programme: ProgrammeDefinition | str | Path) -> ProgrammeDefinition:
    return programme if isinstance(programme, ProgrammeDefinition) else load_programme(programme)


def _order(con: duckdb.DuckDBPyConnection, source: EventSource, name: str) -> tuple[int, str]:
    """(number of events, SQL of the event's position in processing order over the events' FROM)."""
    times = con.sql(f"SELECT epoch_us(occurred_at) AS t FROM {source.view}").fetchnumpy()["t"]
    if isinstance(times, np.ma.MaskedArray) and times.mask.any():
        raise ServiceError("field_required", "every event needs an occurred_at", field="occurred_at")
    stamps = np.asarray(times, dtype=np.int64)
    if len(stamps) < 2 or bool(np.all(stamps[1:] >= stamps[:-1])):
        return len(stamps), ROW  # already in processing order: the position is the input row
    order = np.argsort(stamps, kind="stable")  # stable: ties keep input order
    positions = np.empty(len(stamps), dtype=np.int64)
    positions[order] = np.arange(len(stamps), dtype=np.int64)
    con.register(f"{name}_pos", pa.table({"rn": np.arange(len(stamps), dtype=np.int64), "pos": positions}))
    return len(stamps), f"(SELECT pos FROM {name}_pos WHERE rn = {ROW})"


def _amount_sql(decimals: int, minor: str) -> str:
    unit = format(Decimal(1).scaleb(-decimals), "f")
    return f"CAST({minor} AS DECIMAL(38, 0)) * CAST({literal(unit)} AS DECIMAL(38, {decimals}))"


def _rule_selects(plan: CompiledProgramme, from_sql: str, pos: str) -> list[tuple[int, str]]:
    """(rule index, SELECT of its candidate issuances: seq, rn, event columns, rule, action, m)."""
    selects = []
    for rule in plan.rules:
        parts = []
        for action_index, amount in enumerate(rule.amounts):
            slot = plan.first_slot[rule.index] + action_index
            parts.append(
                f"SELECT {pos} * {plan.slots} + {slot} AS seq, {ROW} AS rn, external_event_id, customer_id, "
                f"occurred_at, {rule.index} AS rule_index, {action_index} AS action_index, m FROM ("
                f"SELECT *, {amount} AS m FROM {from_sql} WHERE type = {literal(rule.event_type)} "
                f"AND NOT {plan.exotic} AND {rule.where}) WHERE m <> 0"
            )
        selects.append((rule.index, " UNION ALL ".join(parts)))
    return selects


def _python_rows(
    con: duckdb.DuckDBPyConnection, source: EventSource, plan: CompiledProgramme, from_sql: str, pos: str
) -> list[tuple[Any, ...]]:
    """Candidate rows of the events SQL cannot read exactly, evaluated by the live engine's functions."""
    if plan.exotic == "FALSE":
        return []
    events = con.sql(
        f"SELECT {pos} AS pos, {ROW}, type, external_event_id, customer_id, epoch_us(occurred_at) FROM {from_sql} "
        f"WHERE {plan.exotic}"
    ).fetchall()
    data = source.python_data([int(e[1]) for e in events], plan.fields)
    rows = []
    for position, rn, event_type, external_id, customer_id, occurred_at in events:
        for verdict in evaluate_rules(plan.specs, event_type, data.get(int(rn), {})):
            if not verdict.matched:
                continue
            rule_index = int(verdict.rule_id)
            for action in verdict.actions:
                if not action.issues and action.error_code is None:
                    continue
                slot = plan.first_slot[rule_index] + action.action_index
                m = TOO_LARGE if action.error_code is not None else action.amount_minor
                seq = int(position) * plan.slots + slot
                rows.append((seq, int(rn), external_id, customer_id, occurred_at, rule_index, action.action_index, m))
    return rows


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
    definition = _definition(programme)
    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    con = connection if connection is not None else duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    name = f"__replay_{next(_names)}"
    source = open_events(con, events, f"{name}_events")
    from_sql = source.prepare(referenced_fields(rule_specs(definition)))
    plan = compile_programme(definition, source)
    reporter = _Reporter(progress, len(plan.rules) + 3)
    try:
        count, pos = _order(con, source, name)
        reporter.step("ordered")
        table = f"{name}_issuances"
        asset = literal(definition.asset.symbol)
        con.execute(
            f"CREATE TEMP TABLE {table} (seq BIGINT, external_event_id VARCHAR, customer_id VARCHAR, "
            f"event_type VARCHAR, occurred_at TIMESTAMPTZ, rule_index INTEGER, action_index INTEGER, asset VARCHAR, "
            f"amount DECIMAL(38, {decimals}), amount_minor BIGINT, status VARCHAR, error_code VARCHAR)"
        )
        project = (
            f"SELECT seq, external_event_id, customer_id, {{event_type}}, occurred_at, rule_index, action_index, "
            f"{asset}, {_amount_sql(decimals, f'greatest(m, 0)')}, greatest(m, 0), "
            f"CASE WHEN m = {TOO_LARGE} THEN 'failed' ELSE 'issued' END, "
            f"CASE WHEN m = {TOO_LARGE} THEN 'amount_too_large' END FROM ({{select}})"
        )
        for (index, select), rule in zip(_rule_selects(plan, from_sql, pos), plan.rules, strict=True):
            con.execute(f"INSERT INTO {table} {project.format(event_type=literal(rule.event_type), select=select)}")
            reporter.step(f"rule {index}")
        fallback = _python_rows(con, source, plan, from_sql, pos)
        if fallback:
            columns = ["seq", "rn", "external_event_id", "customer_id", "occurred_at", "rule_index", "action_index", "m"]
            frame = pa.table({c: [row[i] for row in fallback] for i, c in enumerate(columns)})
            stamps = frame["occurred_at"].cast(pa.int64()).cast(pa.timestamp("us", tz="UTC"))
            frame = frame.set_column(columns.index("occurred_at"), "occurred_at", stamps)
            types = {r.index: r.event_type for r in plan.rules}
            frame = frame.append_column("event_type", pa.array([types[row[5]] for row in fallback], pa.string()))
            con.register(f"{name}_fallback", frame)
            select = f"SELECT * FROM {name}_fallback"
            con.execute(f"INSERT INTO {table} {project.format(event_type='event_type', select=select)}")
        reporter.step("fallback")
        if ceiling is not None:
            _enforce_ceiling(con, table, name, ceiling - opening)
        reporter.step("ceiling")
    finally:
        reporter.close()
    return ReplayResult(
        definition=definition,
        con=con,
        table=table,
        events_processed=count,
        seconds=time.perf_counter() - started,
        ceiling=None if ceiling is None else to_decimal(ceiling, decimals),
        opening_supply=to_decimal(opening, decimals),
        python_rows=len({row[1] for row in fallback}),
        _decimals=decimals,
    )


def _enforce_ceiling(con: duckdb.DuckDBPyConnection, table: str, name: str, room: int) -> None:
    """Mark as asset_supply_exhausted the issuances the ceiling refuses, in seq order."""
    fetched = con.sql(f"SELECT seq, amount_minor FROM {table} WHERE status = 'issued' ORDER BY seq").fetchnumpy()
    seqs = np.asarray(fetched["seq"], dtype=np.int64)
    first, issued_after = resolve(np.asarray(fetched["amount_minor"], dtype=np.int64), room)
    if first >= len(seqs):
        return
    con.register(f"{name}_kept", pa.table({"seq": seqs[issued_after]}))
    con.execute(
        f"UPDATE {table} SET status = 'failed', error_code = 'asset_supply_exhausted' "
        f"WHERE status = 'issued' AND seq >= {int(seqs[first])} AND seq NOT IN (SELECT seq FROM {name}_kept)"
    )
