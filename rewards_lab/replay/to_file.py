"""A replay written straight to a file: the CLI's path (`rewards-lab replay --out`).

When the events are already in processing order (the usual export) and no row needs the Python fallback, the
issuance rows are computed from the events and written by ONE streaming DuckDB COPY in input order: the query a
person would write by hand, with the compiled rules. Nothing per event is stored, and DuckDB's `memory_limit`
bounds what the order-preserving COPY holds back (it slows the threads down rather than buffer the output).

A binding supply ceiling is resolved first, by replay.store's ceiling over a view of the events (a few scans,
nothing stored): the first refusal `f`, after which only the few issuances that still fit succeed; the COPY
marks every positive amount before `f` issued and looks the later ones up in that short list.

Otherwise (events out of order, a row for the Python fallback, a long list after the first refusal, or a
programme that reads a customers table or names beneficiaries, whose joins would not keep the input order) it is
`replay().write()`, which stores one row per event and sorts each output batch.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.ceiling import room_under
from rewards_lab.domain.money import parse_ceiling, to_decimal
from rewards_lab.replay import input_checks, store
from rewards_lab.replay.compiler import TOO_LARGE, CompiledProgramme, string
from rewards_lab.replay.engine import definition_of, input_warnings, parse_supply, prepared, replay
from rewards_lab.replay.inputs import ROW, literal, open_events
from rewards_lab.replay.issuance_writer import output_path
from rewards_lab.replay.limits_plan import has_features
from rewards_lab.replay.order import input_in_order
from rewards_lab.replay.plan import ceiling
from rewards_lab.replay.plan.expiry import expiry_plan
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.outputs import decimal_sql

MEMORY_LIMIT = "1GB"  # what DuckDB may hold back while writing in order
STREAM_BATCH = 100_000  # events per Arrow batch fed to the COPY: small batches keep the ordered COPY parallel
KEPT_LIMIT = 10_000  # issuances after the first refusal looked up in a list; more: the stored path
_FORMATS = {".parquet": "FORMAT PARQUET", ".csv": "FORMAT CSV, HEADER true"}
_NAME = "__to_file"


@dataclass(frozen=True)
class WrittenReplay:
    """What `replay_to_file` wrote: the events read, the totals (as ReplayResult.totals) and how."""

    definition: ProgrammeDefinition
    path: Path
    events_processed: int
    totals: dict[str, Any]
    seconds: float
    streamed: bool  # one streaming COPY (else the stored path)
    warnings: tuple[str, ...] = ()  # inputs that probably make this forecast wrong (replay.input_checks)


@dataclass(frozen=True)
class _Issued:
    """Which positive amounts are issued: every one before `first_refusal` (all when None), and `after`."""

    first_refusal: int | None
    after: tuple[int, ...] = ()
    largest_after: int = 0


def _stream(origin: pa.Table | str | None) -> pa.RecordBatchReader:
    """The events in input order as small Arrow batches, with their input row number (ROW).

    DuckDB gives each batch of its source its own place in the ordered COPY: fed a Parquet file directly, a batch
    is a row group (a million events, about 2.6 million output rows), and a thread that runs ahead must hold that
    much back; fed batches of STREAM_BATCH events, it holds back little, within MEMORY_LIMIT, at full speed."""
    if isinstance(origin, pa.Table):
        return pa.RecordBatchReader.from_batches(origin.schema, origin.to_batches(max_chunksize=STREAM_BATCH))
    assert isinstance(origin, str)
    parquet = pq.ParquetFile(origin)
    schema = parquet.schema_arrow.append(pa.field(ROW, pa.int64()))

    def numbered() -> Iterator[pa.RecordBatch]:
        start = 0
        for batch in parquet.iter_batches(batch_size=STREAM_BATCH):
            rows = pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64))
            yield pa.RecordBatch.from_arrays([*batch.columns, rows], schema=schema)
            start += batch.num_rows

    return pa.RecordBatchReader.from_batches(schema, numbered())


def _issued(con: duckdb.DuckDBPyConnection, plan: CompiledProgramme, room: int | None) -> _Issued | None:
    """The ceiling resolved over a view of the events; None when too many issue after the first refusal."""
    if room is None:
        return _Issued(None)
    lay = layout(plan)
    store.create(con, lay, f"{_NAME}_ordered", None, _NAME, materialise=False)
    store.summarise(con, lay, _NAME)
    from rewards_lab.replay.engines.duckdb import DuckDBExecutor  # imports this module

    boundary = ceiling.decide(DuckDBExecutor(con), _NAME, lay, room)
    if boundary is None:
        return _Issued(None)
    fields = ", ".join(lay.fields)
    refused = con.sql(
        f"""SELECT min(p.pos * {lay.slots} + s.slot) FROM (
                SELECT p.pos, p.a.k AS k, u.i, u.m FROM {_NAME}_pe p,
                unnest([{fields}]) WITH ORDINALITY AS u(m, i) WHERE p.day = {boundary} AND u.m > 0) p
            JOIN {_NAME}_slots s ON s.k = p.k AND s.i = p.i
            LEFT JOIN {_NAME}_kept q ON q.pos = p.pos AND q.i = p.i WHERE q.pos IS NULL"""
    ).fetchall()[0][0]
    if refused is None:  # the boundary day holds the first refusal by construction
        raise AssertionError("no refusal on the boundary day")
    kept = con.sql(
        f"SELECT q.pos * {lay.slots} + s.slot AS seq, q.m FROM {_NAME}_kept q "
        f"JOIN {_NAME}_slots s ON s.k = q.k AND s.i = q.i WHERE q.pos * {lay.slots} + s.slot > {int(refused)}"
    ).fetchall()
    if len(kept) > KEPT_LIMIT:
        return None
    return _Issued(int(refused), tuple(sorted(int(seq) for seq, _ in kept)), max((int(m) for _, m in kept), default=0))


def _status(issued: _Issued) -> tuple[str, str]:
    """SQL of (status, error_code) from `seq` and `m` (positive: an amount; TOO_LARGE: refused as too large)."""
    if issued.first_refusal is None:
        ok = "m > 0"
    else:
        ok = f"(m > 0 AND seq < {issued.first_refusal})"
        if issued.after:
            listed = "[" + ", ".join(str(seq) for seq in issued.after) + "]"
            ok = f"({ok} OR (m > 0 AND m <= {issued.largest_after} AND list_contains({listed}, seq)))"
    status = f"CASE WHEN {ok} THEN 'issued' ELSE 'failed' END"
    error = f"CASE WHEN m = {TOO_LARGE} THEN 'amount_too_large' WHEN NOT {ok} THEN 'asset_supply_exhausted' END"
    return status, error


def _issuances(plan: CompiledProgramme, decimals: int, asset: str, issued: _Issued) -> str:
    """SQL: the issuance rows (engine.ISSUANCE_COLUMNS) in input order, straight from `{_NAME}_ordered`."""
    slots_when, amounts_when = [], []
    for group in plan.by_type:
        event_type = plan.render(string(group.event_type))
        slots_when.append(f"WHEN {event_type} THEN [{', '.join(str(slot) for slot in group.slots)}]")
        amounts = ", ".join(f"CAST({plan.render(amount)} AS BIGINT)" for amount in group.amounts)
        amounts_when.append(f"WHEN {event_type} THEN [{amounts}]")
    rules = [plan.rule_of(slot) for slot in range(plan.slots)]
    rule_list = "[" + ", ".join(str(rule) for rule, _ in rules) + "]"
    action_list = "[" + ", ".join(str(action) for _, action in rules) + "]"
    status, error = _status(issued)
    return f"""
        SELECT seq, external_event_id, customer_id, event_type, occurred_at,
               CAST({rule_list}[slot + 1] AS INTEGER) AS rule_index,
               CAST({action_list}[slot + 1] AS INTEGER) AS action_index,
               {plan.render(string(asset))} AS asset, {decimal_sql(decimals, "greatest(m, 0)")} AS amount,
               greatest(m, 0) AS amount_minor, {status} AS status, {error} AS error_code
        FROM (
            SELECT __pos * {plan.slots} + slot AS seq, *
            FROM (
                SELECT __pos, external_event_id, customer_id, type AS event_type, occurred_at,
                       unnest(CASE type {" ".join(slots_when)} ELSE [] END) AS slot,
                       unnest(CASE type {" ".join(amounts_when)} ELSE [] END) AS m
                FROM {_NAME}_ordered
            )
            WHERE m <> 0
        )"""


def _totals(con: duckdb.DuckDBPyConnection, target: Path, decimals: int) -> dict[str, Any]:
    reader = "read_parquet" if target.suffix.lower() == ".parquet" else "read_csv"
    ((issued, issuances, too_large, exhausted),) = con.sql(
        f"""SELECT coalesce(sum(amount_minor) FILTER (WHERE status = 'issued'), 0),
                   count(*) FILTER (WHERE status = 'issued'),
                   count(*) FILTER (WHERE error_code = 'amount_too_large'),
                   count(*) FILTER (WHERE error_code = 'asset_supply_exhausted')
            FROM {reader}({literal(str(target))})"""
    ).fetchall()
    codes = {"amount_too_large": int(too_large), "asset_supply_exhausted": int(exhausted)}
    return {
        "issued": to_decimal(int(issued), decimals),
        "issuances": int(issuances),
        "failed": int(too_large) + int(exhausted),
        "failed_by_code": {code: count for code, count in codes.items() if count},
    }


def replay_to_file(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    out: str | Path,
    *,
    opening_supply: Decimal | int | str = 0,
    customers: Any = None,
    redemptions: Any = None,
    as_of: Any = None,
) -> WrittenReplay:
    """Replay `events` through `programme` and write the issuances (in processing order) to `out`, .parquet or
    .csv: the same rows as `replay(...).write(out)`, streamed when it can be (see the module docstring; a
    programme with caps, budgets, reversals or expiry, or given redemptions, is replayed whole, then written,
    so that its totals are whole too; `as_of`: until when lots expire)."""
    started = time.perf_counter()
    target = output_path(out)
    definition = definition_of(programme)
    decimals = definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    opening = parse_supply(opening_supply, decimals)
    target.parent.mkdir(parents=True, exist_ok=True)
    # DuckDB spills beside the output (a disk the user chose for big files; the system's temp may be in memory)
    with tempfile.TemporaryDirectory(prefix=".rewards-lab-replay-", dir=target.parent) as spill:
        con = connection(spill)
        try:
            source = open_events(con, events, f"{_NAME}_events")
            known = input_in_order(source)
            issued: _Issued | None = None
            plain = redemptions is None and not has_features(definition) and expiry_plan(definition) is None
            if plain and known is not None and known[1]:
                from_sql, plan = prepared(con, definition, source, customers, _NAME)
                con.execute(f"CREATE TEMP VIEW {_NAME}_ordered AS SELECT *, {ROW} AS __pos FROM {from_sql}")
                exotic = plan.exotic_sql
                # joins (customers, beneficiaries) do not keep the input order a streaming COPY writes in
                streamable = not plan.beneficiaries and (customers is None or not plan.reads_customers)
                if streamable and (
                    exotic is None or not con.sql(f"SELECT 1 FROM {_NAME}_ordered WHERE {exotic} LIMIT 1").fetchall()
                ):
                    issued = _issued(con, plan, room_under(ceiling, opening))
            if issued is None:
                con.close()
                return _stored(
                    events, definition, target, spill, started, opening_supply, customers, redemptions, as_of
                )
            assert known is not None
            con.execute("SET preserve_insertion_order = true")  # rows leave in input order: processing order
            con.register(f"{_NAME}_stream", _stream(source.origin))
            con.execute(f"CREATE TEMP VIEW {_NAME}_streamed AS {source.select}{_NAME}_stream")
            streamed = source.prepare(plan.fields, f"{_NAME}_streamed")
            con.execute(f"CREATE OR REPLACE TEMP VIEW {_NAME}_ordered AS SELECT *, {ROW} AS __pos FROM {streamed}")
            query = _issuances(plan, decimals, definition.asset.symbol, issued)
            con.execute(f"COPY ({query}) TO {literal(str(target))} ({_FORMATS[target.suffix.lower()]})")
            totals = _totals(con, target, decimals)
            warned = tuple(input_warnings(con, source, [plan], known[0]))
        finally:
            con.close()
    input_checks.emit(warned)
    return WrittenReplay(definition, target, known[0], totals, time.perf_counter() - started, True, warned)


def connection(spill: str, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """A connection of the CLI's: at most `memory_limit` (MEMORY_LIMIT) in memory, the rest spilled to `spill`;
    no order kept unless a query asks (the streaming COPY sets it back); no progress bar."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = {literal(memory_limit or MEMORY_LIMIT)}")
    con.execute(f"SET temp_directory = {literal(spill)}")
    con.execute("SET preserve_insertion_order = false")
    return con


def _stored(
    events: Any,
    definition: ProgrammeDefinition,
    target: Path,
    spill: str,
    started: float,
    opening_supply: Decimal | int | str,
    customers: Any,
    redemptions: Any,
    as_of: Any,
) -> WrittenReplay:
    """`replay().write()` on a connection of the CLI's (the same memory limit, spilled beside the output)."""
    con = connection(spill)
    try:
        result = replay(
            events,
            definition,
            opening_supply=opening_supply,
            connection=con,
            customers=customers,
            redemptions=redemptions,
            as_of=as_of,
        )
        result.write(target)
        totals = result.totals()
    finally:
        con.close()
    seconds = time.perf_counter() - started
    return WrittenReplay(definition, target, result.events_processed, totals, seconds, False, result.warnings)
