"""Reverse actions and redemptions in the DuckDB replay: what each reverse action asks for and where its refund
goes in processing order, and where each redemption goes; inputs of the sequential pass (rewards_lab.replay.
feature_store) besides the rewards.

Tables of a replay `{name}`:
- `{name}_ra`: one row per matched reverse action (pos, slot, t, reference, numerator; `code` for rows the live
  evaluation decided in Python); `{name}_orig`: each original (the first event of its external id in processing
  order) with its time and the numbers fractions divide by; `{name}_rad`: each action's decision
  (`replay.reversal_actions`): code, the original's position `opos`, the fraction, whether it names an original,
  and the UTC day of its place in processing order; `{name}_moved`: the processing key (ppos, psub) of refunds
  processed after an original that comes later (`domain.processing_order`);
- `{name}_red`: the redemptions (idx, holder, amount, t, rank, anchor: the last event at or before their time).
"""

from __future__ import annotations

from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.processing_order import note_original, processing_keys
from rewards_lab.domain.rules import number_of, read
from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import DUCKDB, CompiledProgramme, string
from rewards_lab.replay.customers import FOUND
from rewards_lab.replay.inputs import ROW, EventSource
from rewards_lab.replay.reversal_actions import decide
from rewards_lab.replay.sql_values import number_markers, numeric


def holder_sql(column: str, lookup: str | None) -> tuple[str, str]:
    """(SQL of the holder of a customer reference column, the join it needs)."""
    if lookup is None:
        return column, ""
    return f"coalesce(hl.{FOUND}, {column})", f"LEFT JOIN {lookup} hl ON hl.__ref = {column}"


# reverse actions ----------------------------------------------------------------------------------------------
def reverse_actions(
    con: duckdb.DuckDBPyConnection,
    plan: CompiledProgramme,
    events: str,
    name: str,
    fallback: list[tuple[int, int, str | None, str | None, str | None]],
) -> None:
    """`{name}_ra` (pos, slot, t, code, ref, num): every matched reverse action, SQL's rows and the fallback's
    (pos * slots + slot, occurred_at in epoch microseconds, code, reference, numerator)."""
    con.execute(
        f"CREATE TEMP TABLE {name}_ra (pos BIGINT, slot INTEGER, t BIGINT, code VARCHAR, ref VARCHAR, num VARCHAR)"
    )
    keep = "" if plan.exotic_sql is None else f" AND NOT {plan.exotic_sql}"
    for reversal in plan.reversals:
        slot = plan.first_slot[reversal.rule_index] + reversal.action_index
        numerator = "CAST(NULL AS VARCHAR)" if reversal.numerator is None else plan.render(reversal.numerator)
        con.execute(
            f"INSERT INTO {name}_ra SELECT __pos, {slot}, epoch_us(occurred_at), CAST(NULL AS VARCHAR), "
            f"{plan.render(reversal.reference)}, "
            f"{numerator} FROM {events} WHERE type = {plan.render(string(reversal.event_type))}{keep} "
            f"AND {plan.render(reversal.where)}"
        )
    if fallback:
        seqs, stamps, codes, refs, nums = (list(column) for column in zip(*fallback, strict=True))
        table = pa.table(
            {
                "pos": pa.array([seq // plan.slots for seq in seqs], pa.int64()),
                "slot": pa.array([seq % plan.slots for seq in seqs], pa.int32()),
                "t": pa.array(stamps, pa.int64()),
                "code": pa.array(codes, pa.string()),
                "ref": pa.array(refs, pa.string()),
                "num": pa.array(nums, pa.string()),
            }
        )
        con.register(f"{name}_ra_fallback", table)
        con.execute(f"INSERT INTO {name}_ra SELECT * FROM {name}_ra_fallback")
        con.unregister(f"{name}_ra_fallback")


def _divisor_columns(source: EventSource, plan: CompiledProgramme) -> tuple[list[str], str]:
    """(the `of` fields reverse actions divide by, SQL of their exact text and of whether SQL cannot read it,
    each taken at the original: the first event of its external id)."""
    fields = list(dict.fromkeys(r.of for r in plan.reversals if r.of is not None))
    columns = ""
    for index, of in enumerate(fields):
        field_source = source.field(of)
        exotic, unsafe = number_markers(field_source, DUCKDB)
        flagged = DUCKDB.render(exotic if unsafe is None else exp.or_(exotic, unsafe))
        value = DUCKDB.render(exp.cast(numeric(field_source, DUCKDB).value, exp.DataType.build("VARCHAR")))
        columns += f", arg_min({value}, __pos) AS v{index}, arg_min(coalesce({flagged}, FALSE), __pos) AS x{index}"
    return fields, columns


def _divisors(
    con: duckdb.DuckDBPyConnection, source: EventSource, fields: list[str], name: str
) -> dict[tuple[str, int], Decimal | None]:
    """(the `of` field, an original's position) -> the original's number there, read exactly (SQL where it can,
    else the live engine's `read` of the original's data)."""
    found: dict[tuple[str, int], Decimal | None] = {}
    for index, of in enumerate(fields):
        rows = con.sql(f"SELECT opos, v{index}, x{index}, rn FROM {name}_orig").fetchall()
        python = {int(rn): int(pos) for pos, _, exotic_row, rn in rows if exotic_row}
        for pos, text, exotic_row, _ in rows:
            if not exotic_row:
                found[(of, int(pos))] = None if text is None else Decimal(text)
        for rn, data in source.python_data(list(python), [of]).items():
            found[(of, python[rn])] = number_of(read(data, of))
        for rn in python:
            found.setdefault((of, python[rn]), None)
    return found


def _resolved(column: str, lookup: str | None, alias: str) -> tuple[str, str]:
    """(SQL of the customer a reference column names, the join it needs under `alias`)."""
    if lookup is None:
        return column, ""
    return f"coalesce({alias}.{FOUND}, {column})", f" LEFT JOIN {lookup} {alias} ON {alias}.__ref = {column}"


def decide_reversals(
    con: duckdb.DuckDBPyConnection,
    source: EventSource,
    plan: CompiledProgramme,
    events: str,
    name: str,
    lookup: str | None = None,
) -> None:
    """`{name}_rad` (seq, pos, slot, code, opos, fraction, refers, pday, oholder: the original event's customer,
    whose reversal it is) and `{name}_moved` (pos, ppos, psub)."""
    fields, columns_sql = _divisor_columns(source, plan)
    con.execute(
        f"CREATE TEMP TABLE {name}_orig AS SELECT external_event_id AS ref, min(__pos) AS opos, "
        f"arg_min(epoch_us(occurred_at), __pos) AS t, arg_min({ROW}, __pos) AS rn, "
        f"arg_min(customer_id, __pos) AS c{columns_sql} FROM {events} "
        f"WHERE external_event_id IN (SELECT ref FROM {name}_ra WHERE ref IS NOT NULL) GROUP BY external_event_id"
    )
    divisors = _divisors(con, source, fields, name)
    by_slot = {plan.first_slot[r.rule_index] + r.action_index: r for r in plan.reversals}
    refunder, refunder_join = _resolved("e.customer_id", lookup, "hr")
    owner, owner_join = _resolved("o.c", lookup, "ho")
    fetched = con.sql(
        f"SELECT a.pos, a.slot, a.code, a.ref, a.num, o.opos, a.t, o.t, {refunder}, {owner} FROM {name}_ra a "
        f"JOIN {events} e ON e.__pos = a.pos LEFT JOIN {name}_orig o ON o.ref = a.ref{refunder_join}{owner_join} "
        "ORDER BY a.pos, a.slot"
    ).fetchall()
    names = ("seq", "pos", "slot", "code", "opos", "fraction", "refers", "pday", "oholder")
    columns: dict[str, list[object]] = {n: [] for n in names}
    follows: dict[int, int] = {}
    stamps: dict[int, int] = {}
    positions: list[int] = []
    for pos, slot, code, reference, numerator, opos, t, original_t, refunder_id, owner_id in fetched:
        stamps[int(pos)] = int(t)
        positions.append(int(pos))
        if opos is not None:
            stamps[int(opos)] = int(original_t)
        reversal = by_slot[int(slot)]
        divisor = divisors.get((reversal.of, int(opos))) if reversal.of is not None and opos is not None else None
        decision = decide(
            reference,
            None if numerator is None else Decimal(numerator),
            reversal.fraction,
            reversal.of,
            opos is not None,
            divisor,
            code,
            reversal.any_customer or refunder_id == owner_id,
        )
        if decision.references and opos is not None:
            note_original(follows, int(pos), int(opos))
        for key, value in (
            ("seq", int(pos) * plan.slots + int(slot)),
            ("pos", int(pos)),
            ("slot", int(slot)),
            ("code", decision.code),
            ("opos", None if opos is None else int(opos)),
            ("fraction", decision.fraction),
            ("refers", decision.references),
            ("oholder", owner_id),
        ):
            columns[key].append(value)
    keys = processing_keys(follows)
    anchors = [keys.get(position, (position, 0))[0] for position in positions]
    columns["pday"] = [stamps[anchor] // DAY_US for anchor in anchors]  # the day its processing place falls on
    types = {
        "seq": pa.int64(),
        "pos": pa.int64(),
        "slot": pa.int32(),
        "code": pa.string(),
        "opos": pa.int64(),
        "fraction": pa.string(),
        "refers": pa.bool_(),
        "pday": pa.int32(),
        "oholder": pa.string(),
    }
    table(con, f"{name}_rad", pa.table({k: pa.array(v, types[k]) for k, v in columns.items()}))
    moved = {
        "pos": pa.array(list(keys), pa.int64()),
        "ppos": pa.array([k[0] for k in keys.values()], pa.int64()),
        "psub": pa.array([k[1] for k in keys.values()], pa.int32()),
    }
    table(con, f"{name}_moved", pa.table(moved))


def table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register(f"{name}_input", table)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}_input")
    con.unregister(f"{name}_input")


# redemptions --------------------------------------------------------------------------------------------------
def redemption_rows(
    con: duckdb.DuckDBPyConnection, table: pa.Table | None, events: str, name: str, lookup: str | None
) -> None:
    """`{name}_red` (idx, holder, amount, t, rank, anchor): each redemption after the last event at or before it
    (several there by `rank`: time, then input order)."""
    if table is None or table.num_rows == 0:
        con.execute(
            f"CREATE TEMP TABLE {name}_red (idx BIGINT, holder VARCHAR, amount BIGINT, t BIGINT, rank BIGINT, "
            "anchor BIGINT)"
        )
        return
    stamps = con.sql(f"SELECT epoch_us(occurred_at) FROM {events} ORDER BY __pos").fetchnumpy()
    times = np.asarray(next(iter(stamps.values())), dtype=np.int64)
    anchors = np.searchsorted(times, np.asarray(table.column("t").to_numpy(), dtype=np.int64), side="right") - 1
    con.register(f"{name}_red_input", table.append_column("anchor", pa.array(anchors, pa.int64())))
    holder, join = holder_sql("r.customer_id", lookup)
    con.execute(
        f"CREATE TEMP TABLE {name}_red AS SELECT r.idx, {holder} AS holder, r.amount_minor AS amount, r.t, r.rank, "
        "r.anchor "
        f"FROM {name}_red_input r {join}"
    )
    con.unregister(f"{name}_red_input")
