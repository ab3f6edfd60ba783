"""The rules steps: `amounts` (one row per event, its type's amounts in a STRUCT), the fallback's rows in that
form, the `candidates` view (one row per amount) and `cells` (per UTC day and slot: what the summaries and the
ceiling read).

`amounts` is ONE projection over the events, one CASE branch per event type (each rule evaluated once), like a
hand-written query; `a` is NULL for an event of a type without rules (kept: a filter would cost a comparison per
event). On DuckDB it is the statement the engine has always run (rewards_lab.replay.store's module docstring tells
why a row per event); on Spark every STRUCT field is cast to its type (a CASE's branches must agree there).
The compiled rules come in as SQLGlot trees of the executor's engine (the compiler's dialect reads fields per
engine) through placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import (
    BENEFICIARY_MISSING,
    DUCKDB,
    NOT_FOUND_BASE,
    TOO_LARGE,
    CompiledProgramme,
    string,
)
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.layout import Layout, recipients_of, struct_sql
from rewards_lab.replay.plan.sql import Engine, Text

if TYPE_CHECKING:
    from rewards_lab.replay.plan.customers import Lookup
    from rewards_lab.replay.plan.expiry import ExpiryPlan
    from rewards_lab.replay.plan.limits import PassShape

UTC_DAY = f"CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER)"


@dataclass(frozen=True)
class Context:
    """What a step's query is built from: the replay's table prefix, its compiled programme (trees of `engine`),
    where each rule action's amount sits, the asset (symbol, decimals) and, once decided, the ceiling's boundary
    day (None: nothing refused); `lookup`, the customers lookup's columns (None: no customers table);
    `reading`, the columns the fallback's live evaluation reads (rewards_lab.replay.fallback.RowReader); when
    lots expire, `expiry`, the expiry plan (plan.expiry; its `as_of` resolved); when the ordered pass runs,
    `shape`, what its operations hold (plan.limits)."""

    prefix: str
    plan: CompiledProgramme
    layout: Layout
    engine: Engine
    asset: str
    decimals: int
    boundary: int | None = None
    lookup: Lookup | None = None
    reading: tuple[tuple[str, exp.Expr], ...] = ()  # (name, tree): what the live evaluation reads of an event
    expiry: ExpiryPlan | None = None
    shape: PassShape | None = None

    def table(self, table: schema.Table) -> str:
        return table.on(self.prefix)


def _typed(node: exp.Expr, kind: str, engine: Engine) -> exp.Expr:
    """`node` cast to `kind` on Spark (a CASE's STRUCT branches and a list's STRUCTs must agree in type there)."""
    return exp.cast(node, kind) if engine == "spark" else node


def _field(name: str, value: exp.Expr) -> exp.PropertyEQ:
    return exp.PropertyEQ(this=exp.to_identifier(name), expression=value)


def _struct(ctx: Context, k: int) -> exp.Struct:
    """Type k's `a`: k, the amounts c1 .. cW (0 beyond its own actions) and b{i} for every beneficiary field (the
    customer it rewards, NULL: the event's; always VARCHAR, so that the fallback's rows fit)."""
    lay, group = ctx.layout, ctx.plan.by_type[k]
    amounts = [*group.amounts, *[exp.Literal.number(0)] * (lay.width - len(group.amounts))]
    fields = [_field("k", _typed(exp.Literal.number(k), "INT", ctx.engine))]
    fields += [_field(f"c{i}", _typed(a.copy(), "BIGINT", ctx.engine)) for i, a in enumerate(amounts, start=1)]
    for i in lay.beneficiary_fields:
        recipient = group.recipients[i - 1] if i <= len(group.recipients) else None
        fields.append(_field(f"b{i}", exp.cast(recipient.copy() if recipient is not None else exp.null(), "VARCHAR")))
    return exp.Struct(expressions=fields)


def amounts_sql(lay: Layout, events: str, exotic: str | None, local_day: str | None = None) -> str:
    """DuckDB SQL of `amounts` from the layout's rendered rules (`lday`, the local day, with `local_day`): the
    statement the DuckDB engine has always run."""
    a = " ".join(
        f"WHEN {DUCKDB.render(string(t))} THEN "
        f"{struct_sql(str(index), lay.expressions[index], lay.width, recipients_of(lay, index))}"
        for index, t in enumerate(lay.types)
    )
    keep = "" if exotic is None else f" WHERE NOT {exotic}"
    lday = "" if local_day is None else f", {local_day} AS lday"
    return f"SELECT __pos AS pos, customer_id, {UTC_DAY} AS day, CASE type {a} END AS a{lday} FROM {events}{keep}"


def amounts(ctx: Context) -> Text:
    """`amounts`: pos, customer_id, day (UTC), a; the exotic rows left out (the fallback step adds them). DuckDB
    runs `amounts_sql` (the rules already rendered by the layout), Spark the tree with its own rules."""
    case = exp.Case(this=exp.column("type"))
    for k, group in enumerate(ctx.plan.by_type):
        case = case.when(string(group.event_type), _struct(ctx, k))
    exotic = ctx.plan.exotic
    keep = "" if ctx.plan.exotic_sql is None else " WHERE NOT :exotic"
    sql = f"SELECT __pos AS pos, customer_id, {UTC_DAY} AS day, :a AS a FROM {ctx.table(schema.ORDERED)}{keep}"
    duckdb = amounts_sql(ctx.layout, ctx.table(schema.ORDERED), ctx.plan.exotic_sql) if ctx.engine == "duckdb" else None
    return Text(sql, {"a": case, **({"exotic": exotic} if keep else {})}, duckdb)


def exotic(ctx: Context) -> Text:
    """`exotic`: the events SQL cannot read exactly, with what the live evaluation reads of them."""
    reading = "".join(f", :d{i} AS {name}" for i, (name, _) in enumerate(ctx.reading))
    placeholders = {f"d{i}": node for i, (_, node) in enumerate(ctx.reading)}
    return Text(
        f"SELECT __pos, type, epoch_us(occurred_at) AS __t{reading} FROM {ctx.table(schema.ORDERED)} WHERE :exotic",
        {**placeholders, "exotic": ctx.plan.exotic},
    )


def fallback_rows(ctx: Context) -> Text:
    """`fallback_rows`: the live evaluation's outcomes with each beneficiary's reference resolved in the customers
    lookup (fallback.resolved_amount: an unknown one refuses the action as beneficiary_not_found); without a
    customers table the reference is the customer."""
    outcomes = ctx.table(schema.FALLBACK_OUTCOMES)
    if ctx.lookup is None:
        return Text(f"SELECT pos, slot, m, r AS b FROM {outcomes} WHERE slot IS NOT NULL")
    named = "o.r IS NOT NULL AND o.m > 0"
    return Text(
        f"SELECT o.pos AS pos, o.slot AS slot, "
        f"CASE WHEN {named} AND l.__cid IS NULL THEN {NOT_FOUND_BASE} - o.m ELSE o.m END AS m, "
        f"CASE WHEN {named} AND l.__cid IS NOT NULL THEN l.__cid ELSE o.r END AS b "
        f"FROM {outcomes} o LEFT JOIN {ctx.table(schema.CUSTOMERS_LOOKUP)} l ON l.__ref = o.r "
        f"WHERE o.slot IS NOT NULL"
    )


def fallback_amounts(ctx: Context) -> Text:
    """`fallback_amounts`: the fallback's outcomes (`fallback_rows`, one per outcome) as `amounts` rows."""
    lay = ctx.layout
    fields = ["'k': CAST(min(s.k) AS INTEGER)"]
    fields += [
        f"'c{i}': CAST(coalesce(max(CASE WHEN s.i = {i} THEN f.m END), 0) AS BIGINT)" for i in range(1, lay.width + 1)
    ]
    fields += [f"'b{i}': CAST(max(CASE WHEN s.i = {i} THEN f.b END) AS VARCHAR)" for i in lay.beneficiary_fields]
    return Text(
        f"SELECT f.pos AS pos, e.customer_id AS customer_id, "
        f"CAST(epoch_us(e.occurred_at) // {DAY_US} AS INTEGER) AS day, "
        f"{{{', '.join(fields)}}} AS a "
        f"FROM {ctx.table(schema.FALLBACK_ROWS)} f JOIN {ctx.table(schema.SLOTS)} s ON s.slot = f.slot "
        f"JOIN {ctx.table(schema.ORDERED)} e ON e.__pos = f.pos GROUP BY f.pos, e.customer_id, e.occurred_at"
    )


def with_fallback(ctx: Context) -> Text:
    """`amounts` and the fallback's rows (when the fallback issued or refused anything)."""
    return Text(
        f"SELECT * FROM {ctx.table(schema.AMOUNTS)} UNION ALL SELECT * FROM {ctx.table(schema.FALLBACK_AMOUNTS)}"
    )


def unnested(lay: Layout, events: str, where: str = "", beneficiaries: bool = True) -> str:
    """DuckDB SQL: one row per stored amount of the rows of `events` (`amounts` or its rows) that hold one (m <> 0):
    pos, customer_id (with `beneficiaries`, the one the amount rewards), day, k, i (its field) and m.

    The amounts are unnested in the SELECT list, as a list of structs that carry their field number: a lateral
    `unnest(...) WITH ORDINALITY` is planned by DuckDB as a dependent join that groups the events by their whole
    STRUCT in a hash table (3x slower, and held in memory: the issuance rows of a million events did not fit in
    the CLI's memory limit, issue 27). One unnest of a list of structs is portable (Spark's EXPLODE)."""
    named = set(lay.beneficiary_fields) if beneficiaries else set()
    pairs = ", ".join(
        f"{{'m': CAST(a.c{i} AS BIGINT), 'i': CAST({i} AS BIGINT)"
        + (f", 'b': {f'a.b{i}' if i in named else 'CAST(NULL AS VARCHAR)'}" if named else "")
        + "}"
        for i in range(1, lay.width + 1)
    )
    customer = "coalesce(u.b, customer_id)" if named else "customer_id"
    return (
        f"SELECT pos, {customer} AS customer_id, day, k, u.i AS i, u.m AS m FROM ("
        f"SELECT p.pos, p.customer_id, p.day, p.a.k AS k, unnest([{pairs}]) AS u FROM {events} p{where}"
        f") WHERE u.m <> 0"
    )


def candidates(ctx: Context) -> Text:
    """`candidates`: a view, one row per amount; its customer is the one the amount rewards."""
    return Text(unnested(ctx.layout, ctx.table(schema.AMOUNTS)))


def cells(ctx: Context) -> Text:
    """`cells` (day, slot, p, n, x, y, z) from one GROUP BY day, a.k over `amounts` (events, not issuances)."""
    lay = ctx.layout
    aggregates: list[str] = []
    elements: list[str] = []
    named = set(lay.beneficiary_fields)
    for index in range(1, lay.width + 1):
        field = f"a.c{index}"
        positive = lay.positive(index)
        if ctx.engine == "spark":  # Spark's sum of BIGINTs is a BIGINT (it overflows); DuckDB's a HUGEINT
            positive = f"CAST({positive} AS HUGEINT)"
        aggregates.append(f"sum({positive}) AS p{index}, count_if({field} > 0) AS n{index}")
        if lay.refuses(index):
            aggregates.append(f"count_if({field} = {TOO_LARGE}) AS x{index}")
        if index in named:
            aggregates.append(f"count_if({field} = {BENEFICIARY_MISSING}) AS y{index}")
            aggregates.append(f"count_if({field} < {NOT_FOUND_BASE}) AS z{index}")
        counts = {
            "x": f"x{index}" if lay.refuses(index) else "0",
            "y": f"y{index}" if index in named else "0",
            "z": f"z{index}" if index in named else "0",
        }
        elements.append(
            f"{{'i': CAST({index} AS INTEGER), 'p': CAST(p{index} AS HUGEINT), 'n': CAST(n{index} AS BIGINT), "
            + ", ".join(f"'{c}': CAST({v} AS BIGINT)" for c, v in counts.items())
            + "}"
        )
    fields, amounts = ", ".join(f"c.{c} AS {c}" for c in ("i", "p", "n", "x", "y", "z")), ctx.table(schema.AMOUNTS)
    return Text(
        f"""SELECT u.day AS day, s.slot AS slot, CAST(coalesce(u.p, 0) AS HUGEINT) AS p, u.n AS n, u.x AS x,
               u.y AS y, u.z AS z
        FROM (SELECT day, k, {fields} FROM (
              SELECT day, k, unnest([{", ".join(elements)}]) AS c
              FROM (SELECT day, a.k AS k, {", ".join(aggregates)} FROM {amounts} GROUP BY day, a.k))) u
        JOIN {ctx.table(schema.SLOTS)} s ON s.k = u.k AND s.i = u.i
        WHERE u.n > 0 OR u.x > 0 OR u.y > 0 OR u.z > 0"""
    )


def slots_table(lay: Layout) -> pa.Table:
    """`slots`: per rule action, its type's k and field i, its rule and action index and event type."""
    slots = [(k, i + 1, slot) for k, slots_k in enumerate(lay.slots_of) for i, slot in enumerate(slots_k)]
    return pa.table(
        {
            "k": pa.array([k for k, _, _ in slots], pa.int32()),
            "i": pa.array([i for _, i, _ in slots], pa.int32()),
            "slot": pa.array([s for _, _, s in slots], pa.int32()),
            "rule_index": pa.array([lay.rule_of[s][0] for _, _, s in slots], pa.int32()),
            "action_index": pa.array([lay.rule_of[s][1] for _, _, s in slots], pa.int32()),
            "event_type": pa.array([lay.types[k] for k, _, _ in slots], pa.string()),
        }
    )
