"""Reverse actions on the plan: what each matched reverse action asks for, decided once per action with the live
engine's functions (rewards_lab.replay.reversal_actions), and where its refund goes in processing order.

Steps (SQL, both engines): `reverse_actions` (one SELECT per reverse action, and the exotic events' actions from
the live evaluation), `originals` (the first event of each external id an action names, with the numbers fractions
divide by), `actions` (a view: each action with its original, divisor and both customers), `decisions` (the
decisions with the UTC day of their place). Between them: the divisors only Python can read (engine-specific, like
the fallback), the decision itself as a map without order (`Decide` through the executor's `map_partitions`: Spark
runs it on the executors, DuckDB in process), and on the driver the refunds processed after a later original
(`moved`: few; `domain.processing_order` places them).

A customer is the `holders` table's id for its reference (a customers table's lookup; empty without one, when a
customer is its reference).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.processing_order import note_original, processing_keys
from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import CompiledProgramme, string
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text
from rewards_lab.replay.reversal_actions import decide


def holder_sql(column: str, lookup: str | None, alias: str = "hl") -> tuple[str, str]:
    """(SQL of the customer a reference column names, the join it needs): the id the lookup (`__ref` -> `__cid`,
    a customers table's or `holders`) resolves it to, else the reference itself (no lookup: the reference)."""
    if lookup is None:
        return column, ""
    return f"coalesce({alias}.__cid, {column})", f" LEFT JOIN {lookup} {alias} ON {alias}.__ref = {column}"


def _stored(table: schema.Table) -> bool:
    return table.kind == "stored"


def _typed(fields: tuple[tuple[str, str], ...]) -> pa.Schema:
    kinds = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "VARCHAR": pa.string(), "BOOLEAN": pa.bool_()}
    return pa.schema([pa.field(name, kinds[kind]) for name, kind in fields])


REVERSE_FALLBACK = _typed(schema.REVERSE_FALLBACK.columns)
DIVISORS = _typed(schema.DIVISORS.columns)
DECIDED = _typed(schema.DECIDED.columns)
MOVED = _typed(schema.MOVED.columns)
HOLDERS = _typed(schema.HOLDERS.columns)


# steps --------------------------------------------------------------------------------------------------------
def _wrapped(trees: dict[str, exp.Expr]) -> dict[str, exp.Expr]:
    """Copies of the trees, each in parentheses: DuckDB's text and Spark's tree then read the same."""
    return {name: exp.Paren(this=node.copy()) for name, node in trees.items()}


def reverse_actions(ctx: Context) -> Text:
    """`reverse_actions` (pos, slot, t, code, ref, num): every matched reverse action of the events SQL reads, and
    the exotic events' (`reverse_fallback`)."""
    plan, trees = ctx.plan, dict[str, exp.Expr]()
    keep = "" if plan.exotic_sql is None else " AND NOT :exotic"
    if keep:
        trees["exotic"] = plan.exotic
    parts = []
    for n, reversal in enumerate(plan.reversals):
        slot = plan.first_slot[reversal.rule_index] + reversal.action_index
        trees |= {f"type{n}": string(reversal.event_type), f"ref{n}": reversal.reference, f"where{n}": reversal.where}
        numerator = "CAST(NULL AS VARCHAR)"
        if reversal.numerator is not None:
            trees[f"num{n}"] = reversal.numerator
            numerator = f"CAST(:num{n} AS VARCHAR)"
        parts.append(
            f"SELECT __pos AS pos, CAST({slot} AS INTEGER) AS slot, epoch_us(occurred_at) AS t, "
            f"CAST(NULL AS VARCHAR) AS code, CAST(:ref{n} AS VARCHAR) AS ref, {numerator} AS num "
            f"FROM {ctx.table(schema.ORDERED)} WHERE type = :type{n}{keep} AND :where{n}"
        )
    parts.append(f"SELECT pos, slot, t, code, ref, num FROM {ctx.table(schema.REVERSE_FALLBACK)}")
    return Text(" UNION ALL ".join(parts), _wrapped(trees))


def originals(ctx: Context) -> Text:
    """`originals` (ref, opos, t, c, v<i>, x<i>): the first event (in processing order) of each external id a
    reverse action names, and per divisor field its exact text (x<i>: only Python reads it exactly)."""
    trees: dict[str, exp.Expr] = {}
    columns = ""
    for i, found in enumerate(ctx.plan.divisors):
        trees |= {f"v{i}": found.value, f"x{i}": found.python}
        columns += f", arg_min(:v{i}, __pos) AS v{i}, arg_min(:x{i}, __pos) AS x{i}"
    return Text(
        f"SELECT external_event_id AS ref, min(__pos) AS opos, arg_min(epoch_us(occurred_at), __pos) AS t, "
        f"arg_min(customer_id, __pos) AS c{columns} FROM {ctx.table(schema.ORDERED)} "
        f"WHERE external_event_id IN (SELECT ref FROM {ctx.table(schema.REVERSE_ACTIONS)} WHERE ref IS NOT NULL) "
        "GROUP BY external_event_id",
        _wrapped(trees),
    )


def python_divisors_sql(ctx: Context, index: int) -> str:
    """SQL: the originals whose divisor field `index` only Python reads exactly (opos, the event's columns)."""
    return (
        f"SELECT o.opos, e.* FROM {ctx.table(schema.ORIGINALS)} o "
        f"JOIN {ctx.table(schema.ORDERED)} e ON e.__pos = o.opos WHERE o.x{index}"
    )


def actions(ctx: Context) -> Text:
    """`actions` (a view): each reverse action with what it is decided from: its original's position and time,
    the divisor its slot reads there (SQL's text, or Python's), the refund's and the original's customers."""
    plan, trees = ctx.plan, dict[str, exp.Expr]()
    index = {found.of: i for i, found in enumerate(plan.divisors)}
    joins, cases = "", []
    for i, found in enumerate(plan.divisors):
        trees[f"of{i}"] = string(found.of)
        joins += f" LEFT JOIN {ctx.table(schema.DIVISORS)} d{i} ON d{i}.opos = o.opos AND d{i}.of = :of{i}"
    for reversal in plan.reversals:
        if reversal.of is not None:
            i = index[reversal.of]
            slot = plan.first_slot[reversal.rule_index] + reversal.action_index
            cases.append(f"WHEN {slot} THEN CASE WHEN o.x{i} THEN d{i}.dv ELSE o.v{i} END")
    divisor = f"CASE a.slot {' '.join(cases)} END" if cases else "CAST(NULL AS VARCHAR)"
    holders = ctx.table(schema.HOLDERS)
    refunder, refunder_join = holder_sql("e.customer_id", holders, "hr")
    owner, owner_join = holder_sql("o.c", holders, "ho")
    return Text(
        f"SELECT a.pos, a.slot, a.code, a.ref, a.num, o.opos, {divisor} AS dv, a.t, o.t AS ot, {refunder} AS rh, "
        f"{owner} AS oholder FROM {ctx.table(schema.REVERSE_ACTIONS)} a "
        f"JOIN {ctx.table(schema.ORDERED)} e ON e.__pos = a.pos "
        f"LEFT JOIN {ctx.table(schema.ORIGINALS)} o ON o.ref = a.ref{refunder_join}{owner_join}{joins}",
        _wrapped(trees),
    )


def decisions(ctx: Context) -> Text:
    """`decisions`: `decided` with `pday`, the UTC day of the action's place in processing order (its own time,
    or its moved place's), floored like Python's `//` (also before 1970)."""
    at = "coalesce(m.pt, d.t)"
    return Text(
        f"SELECT d.*, CAST(({at} - ((({at} % {DAY_US}) + {DAY_US}) % {DAY_US})) // {DAY_US} AS INTEGER) AS pday "
        f"FROM {ctx.table(schema.DECIDED)} d LEFT JOIN {ctx.table(schema.MOVED)} m ON m.pos = d.pos"
    )


# the decision, as a map ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decide:
    """`actions` rows -> `decided` rows: `reversal_actions.decide` per action (picklable: Spark sends it to the
    executors). `by_slot`: per reverse action's slot, (its constant fraction, its `of` field, any customer)."""

    by_slot: dict[int, tuple[Decimal | None, str | None, bool]]
    slots: int

    @classmethod
    def of(cls, plan: CompiledProgramme) -> Decide:
        by_slot = {
            plan.first_slot[r.rule_index] + r.action_index: (r.fraction, r.of, r.any_customer) for r in plan.reversals
        }
        return cls(by_slot, plan.slots)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list[Any]] = {name: [] for name in DECIDED.names}
            for row in batch.to_pylist():
                constant, of, anyone = self.by_slot[row["slot"]]
                numerator = None if row["num"] is None else Decimal(row["num"])
                divisor = None if row["dv"] is None else Decimal(row["dv"])
                same = anyone or row["rh"] == row["oholder"]
                found = row["opos"] is not None
                made = decide(row["ref"], numerator, constant, of, found, divisor, row["code"], same)
                values = (
                    row["pos"] * self.slots + row["slot"],
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
                for key, value in zip(DECIDED.names, values, strict=True):
                    out[key].append(value)
            yield pa.RecordBatch.from_pydict(out, DECIDED)


def moved_table(executor: Executor[object], ctx: Context) -> pa.Table:
    """`moved` (pos, ppos, psub, pt): the refunds processed after an original that comes later (their pairs
    reach the driver, where `domain.processing_order` places them)."""
    later = executor.fetch(
        Text(
            f"SELECT pos, max(opos) AS opos, arg_max(ot, opos) AS ot FROM {ctx.table(schema.DECIDED)} "
            "WHERE refers AND opos > pos GROUP BY pos"
        )
    )
    follows: dict[int, int] = {}
    stamps: dict[int, int] = {}
    for pos, opos, ot in zip(*(later.column(c).to_pylist() for c in ("pos", "opos", "ot")), strict=True):
        note_original(follows, int(pos), int(opos))
        stamps[int(opos)] = int(ot)
    keys = processing_keys(follows)
    rows = [(pos, ppos, psub, stamps[ppos]) for pos, (ppos, psub) in keys.items()]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(MOVED)
    return pa.table([pa.array(list(c), f.type) for c, f in zip(columns, MOVED, strict=True)], schema=MOVED)


# the whole of it ----------------------------------------------------------------------------------------------
ReverseFallback = Callable[[str], None]
"""Makes the named table (`schema.REVERSE_FALLBACK`) of the exotic events' reverse actions (engine-specific, as
the fallback: how a field of an event reads in Python differs)."""
PythonDivisors = Callable[[str, Sequence[tuple[str, str]]], None]
"""Makes the named table (`schema.DIVISORS`) from, per divisor field, the SQL of the originals only Python reads
(`python_divisors_sql`); engine-specific like `ReverseFallback`."""


def decide_reversals(
    executor: Executor[object], ctx: Context, fallback: ReverseFallback, python_divisors: PythonDivisors
) -> None:
    """`reverse_actions`, `originals`, `actions`, `decided`, `moved` and `decisions` over `{prefix}_ordered` and
    `{prefix}_holders` (both made by the caller)."""
    fallback(ctx.table(schema.REVERSE_FALLBACK))
    for table, build in ((schema.REVERSE_ACTIONS, reverse_actions), (schema.ORIGINALS, originals)):
        executor.create(ctx.table(table), build(ctx), stored=_stored(table))
    wanted = [(found.of, python_divisors_sql(ctx, i)) for i, found in enumerate(ctx.plan.divisors)]
    python_divisors(ctx.table(schema.DIVISORS), wanted)
    executor.create(ctx.table(schema.ACTIONS), actions(ctx), stored=_stored(schema.ACTIONS))
    executor.map_partitions(
        ctx.table(schema.DECIDED), f"SELECT * FROM {ctx.table(schema.ACTIONS)}", Decide.of(ctx.plan), DECIDED
    )
    executor.register(ctx.table(schema.MOVED), moved_table(executor, ctx))
    executor.create(ctx.table(schema.DECISIONS), decisions(ctx), stored=_stored(schema.DECISIONS))
