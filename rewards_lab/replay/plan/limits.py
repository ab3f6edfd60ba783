"""The ordered pass on the plan: its operations (`ops`, one step for both engines) and the pass itself, run by the
executor's `map_partitions` (rewards_lab.replay.sequential decides; this module only moves rows).

`ops` reads the rewards the pass needs (`masked_rows`: their mask, whether a refund names their event, whether
their holder is tracked), the rewards surely cut before it (`tail`), the reverse actions' decisions, the moved
refunds and the redemptions (plan.reversals, plan.redemptions) and, for a tracked holder, the running credit of
its set-based rewards (`rewards`); with expiry, each operation's clock and each grant's lot times
(plan.expiry's `expiry_times`). The pass runs per holder (customers share no counter, reward or balance) unless a
counter across customers can bind or the ceiling may refuse: then as one task over every operation in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from rewards_lab.replay.compiler import DUCKDB, string
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.limits_plan import Grouping, LimitsPlan
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text
from rewards_lab.replay.sequential import DECISIONS, OUTCOMES, SequentialPass, as_outcomes

AFTER_EVENTS = 2**31 - 1  # psub of a redemption: after every event (moved or not) at its anchor
KEYS = ("k1", "k2", "k3", "k4")  # an operation's processing key
Credit = Literal["none", "set_based", "zero"]
_SQL_TYPES = {"int64": "BIGINT", "int32": "INTEGER", "string": "VARCHAR", "bool": "BOOLEAN"}  # OUTCOMES' types


@dataclass(frozen=True)
class PassShape:
    """What the pass's operations hold: the periods counters count (`d_<period>` columns), whether every reward
    goes through the pass (`full`: the ceiling may refuse), whether lots expire (`expiring`: every reward of a
    tracked holder, with clocks) and how `credit` is made (`none`: NULL; `zero`: 0 for tracked holders, the pass
    holding all their rewards; `set_based`: the running sum of their rewards outside the pass)."""

    periods: tuple[str, ...]
    full: bool
    expiring: bool
    credit: Credit
    tails: tuple[Grouping, ...] = ()  # the families of one cap whose counters can bind (`tail`)
    bound: tuple[tuple[int, Grouping], ...] = ()  # the families whose counters can bind, by number g (`mask`)


def shape_of(limits: LimitsPlan, bound: list[int], full: bool, expiring: bool, redeeming: bool) -> PassShape:
    """The pass's shape from what the replay found: the families whose counters can bind (`bound`), whether the
    pass holds every reward (`full`), whether lots expire and whether redemptions were given."""
    credit: Credit = "none"
    if expiring:  # every reward of a tracked customer is in the pass: no credit from set-based rows
        credit = "zero"
    elif redeeming:
        credit = "zero" if full else "set_based"
    groupings = limits.groupings()
    tails = () if full else single_caps(limits, bound)
    masks = tuple((g, groupings[g]) for g in bound)
    return PassShape(tuple(limits.periods), full, expiring, credit, tails, masks)


def _shape(ctx: Context) -> PassShape:
    if ctx.shape is None:
        raise ValueError("the pass's steps need its shape (Context.shape)")
    return ctx.shape


def _starts(shape: PassShape) -> list[str]:
    return [period for period in shape.periods if period != "lifetime"]


def lotted(ctx: Context) -> Text:
    """`lotted`: the customers whose lots the pass keeps (their lots get consumed): every rewarded customer when
    the pass holds every reward (`full`), else those who redeem and those a reversal takes from."""
    shape, rewards = _shape(ctx), ctx.table(schema.REWARDS)
    if shape.full:
        return Text(f"SELECT DISTINCT holder FROM {rewards}")
    red, rad = ctx.table(schema.REDEMPTIONS), ctx.table(schema.DECISIONS)
    return Text(
        f"SELECT DISTINCT holder FROM (SELECT holder FROM {red} UNION ALL SELECT r.holder FROM {rewards} r "
        f"WHERE r.pos IN (SELECT opos FROM {rad} WHERE code IS NULL)) h"
    )


def masked(ctx: Context) -> Text:
    """`masked_rows`: the rewards the pass needs (every one when it enforces the ceiling, `full`) with `mask`, the
    bits of their checks whose counter can bind, whether a refund names their event (`keep`) and whether their
    holder's balance is followed (`tracked`: with expiry the `lotted` customers, whose every reward the pass
    then needs, else those who redeem)."""
    shape = _shape(ctx)
    needed, bound, rad = ctx.table(schema.NEEDED), ctx.table(schema.BOUND), ctx.table(schema.DECISIONS)
    joins, bits = [], []
    for g, grouping in shape.bound:
        start = "0" if grouping.period == "lifetime" else f"r.d_{grouping.period}"
        on = [f"b{g}.start = {start}"]
        if grouping.per_customer:
            on.append(f"b{g}.holder = r.holder")
        if grouping.rule_index is not None:
            on.append(f"r.rule_index = {grouping.rule_index}")
        joins.append(f" LEFT JOIN (SELECT holder, start FROM {bound} WHERE g = {g}) b{g} ON {' AND '.join(on)}")
        bits.append(f"CASE WHEN b{g}.start IS NULL THEN 0 ELSE {grouping.bits} END")
    mask = " + ".join(bits) if bits else "0"
    holders = ctx.table(schema.LOTTED) if shape.expiring else ctx.table(schema.REDEMPTIONS)
    rows = (
        f"SELECT r.*, CAST({mask} AS INTEGER) AS mask, o.opos IS NOT NULL AS keep, h.holder IS NOT NULL AS tracked "
        f"FROM {needed} r{''.join(joins)} "
        f"LEFT JOIN (SELECT DISTINCT opos FROM {rad} WHERE code IS NULL) o ON o.opos = r.pos "
        f"LEFT JOIN (SELECT DISTINCT holder FROM {holders}) h ON h.holder = r.holder"
    )
    if shape.full:
        return Text(rows)
    wanted = "mask > 0 OR keep OR tracked" if shape.expiring else "mask > 0 OR keep"
    return Text(f"SELECT * FROM ({rows}) m WHERE {wanted}")


def tail(ctx: Context) -> Text:
    """`tail` (sequential.DECISIONS): rewards surely skipped, decided here rather than in the pass.

    Take a counter of a single cap (bound B: its max_amount, or max_count) and, in processing order, the rewards
    it counts and the reversals of those rewards. A lower bound L of its usage runs along them: a reward this
    counter alone checks adds what it asked for (1 for a count) up to B, as the counter itself does (usage is at
    least L, so it adds at least as much); any other reward adds nothing (it adds something or nothing); a
    reversal takes back what its reward asked for (1 for a count: at least the counter gives back). This running
    sum capped at B is L = S - max(0, max over the prefix of S - B) with S the plain running sum. A reward this
    counter alone checks, arriving when L is already B, finds the counter used up: it is cut to nothing by this
    cap, counts nowhere, and can be decided here instead of in the pass (which it would leave unchanged). So a
    customer past a monthly cap early in the month costs the pass little more that month."""
    shape = _shape(ctx)
    mrows, moved, rad = ctx.table(schema.MASKED_ROWS), ctx.table(schema.MOVED), ctx.table(schema.DECISIONS)
    nothing = (
        "SELECT CAST(NULL AS BIGINT) AS seq, CAST(NULL AS VARCHAR) AS holder, CAST(NULL AS BIGINT) AS requested, "
        "CAST(NULL AS BIGINT) AS g, CAST(NULL AS VARCHAR) AS status, CAST(NULL AS VARCHAR) AS error_code, "
        "CAST(NULL AS VARCHAR) AS cut_scope, CAST(NULL AS VARCHAR) AS cut_period, CAST(NULL AS INTEGER) AS cut_start, "
        "CAST(NULL AS BIGINT) AS cut_minor"
    )
    ctes, parts = [], [f"SELECT * FROM ({nothing}) n WHERE FALSE"]
    for index, grouping in enumerate(shape.tails):
        (cap,) = grouping.caps
        bits, counting = grouping.bits, cap.max_count is not None
        most = cap.max_count if counting else cap.max_amount_minor
        start = "0" if grouping.period == "lifetime" else f"r.d_{grouping.period}"
        holder = "r.holder" if grouping.per_customer else "''"
        rule = "" if grouping.rule_index is None else f" AND r.rule_index = {grouping.rule_index}"
        added = f"CASE WHEN r.mask = {bits} THEN {'1' if counting else 'r.m'} ELSE 0 END"
        keyed, summed, bounded = f"keyed{index}", f"summed{index}", f"bounded{index}"
        ctes.append(
            f"{keyed} AS (SELECT r.seq, r.pos, r.holder, {holder} AS h, CAST({start} AS INTEGER) AS st, r.mask, r.m, "
            "coalesce(mv.ppos, r.pos) AS k1, CAST(coalesce(mv.psub, 0) AS INTEGER) AS k2, "
            "CAST(r.slot AS INTEGER) AS k3, CAST(0 AS BIGINT) AS k4, 0 AS gb, "
            f"CAST({added} AS HUGEINT) AS x FROM {mrows} r LEFT JOIN {moved} mv ON mv.pos = r.pos "
            f"WHERE (r.mask & {bits}) <> 0{rule})"
        )
        taken = "-1" if counting else "-k.m"
        marks = (
            "SELECT CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), k.h, k.st, "
            "CAST(NULL AS INTEGER), CAST(0 AS BIGINT), coalesce(mv.ppos, a.pos), "
            f"CAST(coalesce(mv.psub, 0) AS INTEGER), CAST(a.slot AS INTEGER), k.seq, 1, CAST({taken} AS HUGEINT) "
            f"FROM {rad} a JOIN {keyed} k ON k.pos = a.opos LEFT JOIN {moved} mv ON mv.pos = a.pos "
            "WHERE a.code IS NULL AND a.opos <> a.pos"
        )
        order = "PARTITION BY h, st ORDER BY k1, k2, k3, k4, gb"
        ctes.append(
            f"{summed} AS (SELECT *, sum(x) OVER ({order} ROWS UNBOUNDED PRECEDING) AS s "
            f"FROM (SELECT * FROM {keyed} UNION ALL {marks}) u)"
        )
        ctes.append(
            f"{bounded} AS (SELECT *, s - x - greatest(0, coalesce(max(s - {most}) OVER ({order} "
            f"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS lower FROM {summed})"
        )
        parts.append(
            f"SELECT seq, holder, m, CAST(0 AS BIGINT), 'limited', CAST(NULL AS VARCHAR), "
            f"{DUCKDB.render(string(grouping.scope))}, {DUCKDB.render(string(grouping.period))}, st, m "
            f"FROM {bounded} WHERE gb = 0 AND mask = {bits} AND lower >= {most}"
        )
    head = f"WITH {', '.join(ctes)} " if ctes else ""
    return Text(head + " UNION ALL ".join(parts))


def single_caps(limits: LimitsPlan, bound: list[int]) -> tuple[Grouping, ...]:
    """The families of counters that can bind and hold one cap: their tails are decided before the pass."""
    groupings = limits.groupings()
    return tuple(groupings[g] for g in bound if len(groupings[g].caps) == 1)


def operations_sql(ctx: Context, shape: PassShape) -> str:
    """SQL: the grants, reversal items and redemptions in processing key (without credit and clock)."""
    mrows, tail, moved = ctx.table(schema.MASKED_ROWS), ctx.table(schema.TAIL), ctx.table(schema.MOVED)
    rad, red = ctx.table(schema.DECISIONS), ctx.table(schema.REDEMPTIONS)
    starts = "".join(f", r.d_{period}" for period in _starts(shape))
    nothing = "".join(f", CAST(NULL AS INTEGER) AS d_{period}" for period in _starts(shape))
    wanted = "(r.mask > 0 OR r.tracked)" if shape.expiring else "r.mask > 0"
    grants = "" if shape.full else f" WHERE {wanted} AND r.seq NOT IN (SELECT seq FROM {tail})"
    return f"""
        SELECT coalesce(mv.ppos, r.pos) AS k1, CAST(coalesce(mv.psub, 0) AS INTEGER) AS k2,
               CAST(r.slot AS INTEGER) AS k3, CAST(0 AS BIGINT) AS k4, 0 AS op, r.seq, r.holder, r.m,
               CAST(r.rule_index AS INTEGER) AS rule, r.mask{starts}, r.keep, CAST(NULL AS BIGINT) AS ref,
               CAST(NULL AS BOOLEAN) AS sequential, CAST(NULL AS VARCHAR) AS fraction, r.tracked
        FROM {mrows} r LEFT JOIN {moved} mv ON mv.pos = r.pos{grants}
        UNION ALL
        SELECT coalesce(mv.ppos, a.pos), CAST(coalesce(mv.psub, 0) AS INTEGER), CAST(a.slot AS INTEGER), o.seq, 1,
               a.seq, o.holder, o.m, CAST(o.rule_index AS INTEGER), 0{nothing}, FALSE, o.seq,
               {"TRUE" if shape.full else "o.mask > 0"}, a.fraction, o.tracked
        FROM {rad} a JOIN {mrows} o ON o.pos = a.opos LEFT JOIN {moved} mv ON mv.pos = a.pos
        WHERE a.code IS NULL AND a.opos <> a.pos
        UNION ALL
        SELECT anchor, {AFTER_EVENTS}, 0, rank, 2, CAST(NULL AS BIGINT), holder, amount, CAST(NULL AS INTEGER),
               0{nothing}, FALSE, idx, CAST(NULL AS BOOLEAN), CAST(NULL AS VARCHAR), TRUE
        FROM {red}"""


def with_credit_sql(ctx: Context, shape: PassShape, ops: str) -> str:
    """SQL: the operations with `credit`, what set-based rewards gave their holder before them."""
    if shape.credit == "none":
        return f"SELECT o.*, CAST(NULL AS HUGEINT) AS credit FROM ({ops}) o"
    if shape.credit == "zero":
        return f"SELECT o.*, CASE WHEN o.tracked THEN CAST(0 AS HUGEINT) END AS credit FROM ({ops}) o"
    rewards, mrows, moved = ctx.table(schema.REWARDS), ctx.table(schema.MASKED_ROWS), ctx.table(schema.MOVED)
    red = ctx.table(schema.REDEMPTIONS)
    set_based = (
        f"SELECT coalesce(mv.ppos, r.pos) AS k1, CAST(coalesce(mv.psub, 0) AS INTEGER) AS k2, "
        f"CAST(r.slot AS INTEGER) AS k3, CAST(0 AS BIGINT) AS k4, -1 AS op, r.holder, CAST(r.m AS HUGEINT) AS v "
        f"FROM {rewards} r LEFT JOIN {moved} mv ON mv.pos = r.pos "
        f"WHERE r.holder IN (SELECT holder FROM {red}) "
        f"AND r.seq NOT IN (SELECT seq FROM {mrows} WHERE mask > 0)"
    )
    reading = f"SELECT k1, k2, k3, k4, op, holder, CAST(0 AS HUGEINT) AS v FROM ({ops}) WHERE tracked AND op > 0"
    window = "PARTITION BY holder ORDER BY k1, k2, k3, k4, op ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    running = (
        f"SELECT k1, k2, k3, k4, op, CAST(sum(v) OVER ({window}) AS HUGEINT) AS credit "
        f"FROM ({set_based} UNION ALL {reading}) u"
    )
    return (
        f"SELECT o.*, c.credit FROM ({ops}) o LEFT JOIN ({running}) c ON o.op > 0 AND o.tracked AND c.op = o.op "
        "AND c.k1 = o.k1 AND c.k2 = o.k2 AND c.k3 = o.k3 AND c.k4 = o.k4"
    )


def with_clock_sql(ctx: Context, query: str) -> str:
    """SQL: the operations with `clock` (their anchor event's time, or the redemption's), `issued` and `exp` (a
    grant's event time and when its lot expires), for the pass's expiry."""
    times, red, slots = ctx.table(schema.EXPIRY_TIMES), ctx.table(schema.REDEMPTIONS), ctx.layout.slots
    return (
        f"SELECT o.*, CASE WHEN o.op = 2 THEN rd.t ELSE a.t END AS clock, x.t AS issued, x.exp AS exp "
        f"FROM ({query}) o LEFT JOIN {times} a ON o.op <> 2 AND a.pos = o.k1 "
        f"LEFT JOIN {times} x ON o.op = 0 AND x.pos = o.seq // {slots} "
        f"LEFT JOIN {red} rd ON o.op = 2 AND rd.idx = o.ref"
    )


def ops(ctx: Context) -> Text:
    """`ops`: the pass's operations with credit (and, when lots expire, clocks), as `ctx.shape` says."""
    shape = _shape(ctx)
    query = with_credit_sql(ctx, shape, operations_sql(ctx, shape))
    return Text(with_clock_sql(ctx, query) if shape.expiring else query)


@dataclass(frozen=True)
class Pass:
    """The ordered pass over operations in processing key (one holder's, or all of them), as OUTCOMES batches;
    `room`: the ceiling's (None: the pass does not enforce it); `as_of`: lots expire until then (None: never)."""

    limits: LimitsPlan
    room: int | None
    as_of: int | None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for decisions, items, redemptions, lots in SequentialPass(self.limits, self.room, self.as_of).batches(batches):
            yield as_outcomes(decisions, "d")
            yield as_outcomes(items, "i")
            yield as_outcomes(redemptions, "r")
            if lots.num_rows:
                yield as_outcomes(lots, "l")


def run_pass(executor: Executor[object], ctx: Context, shape: PassShape, run: Pass, *, one_task: bool) -> str:
    """`tail`, `ops`, then `pass_out` (map_partitions: by holder, or as one task in processing key); returns the
    name of a view of the pass's outcome with the tail's decisions (kind `d`)."""
    shaped = dataclasses.replace(ctx, shape=shape)
    executor.create(ctx.table(schema.TAIL), tail(shaped), stored=True)
    executor.create(ctx.table(schema.OPS), ops(shaped), stored=False)
    out = ctx.table(schema.PASS_OUT)
    key: tuple[str, ...] = () if one_task else ("holder",)
    executor.map_partitions(f"{out}_run", f"SELECT * FROM {ctx.table(schema.OPS)}", run, OUTCOMES, key=key, order=KEYS)
    decided = ", ".join(
        name if name in DECISIONS.names else f"CAST(NULL AS {_SQL_TYPES[str(field.type)]}) AS {name}"
        for name, field in zip(OUTCOMES.names[1:], list(OUTCOMES)[1:], strict=True)
    )
    executor.create(
        out,
        Text(f"SELECT * FROM {out}_run UNION ALL SELECT 'd' AS kind, {decided} FROM {ctx.table(schema.TAIL)}"),
        stored=False,
    )
    return out


def one_task(limits: LimitsPlan, bound: list[int], full: bool) -> bool:
    """Whether the pass needs one order across customers: the ceiling may refuse, or a counter of several
    customers (a budget, a programme's cap) can bind."""
    groupings = limits.groupings()
    return full or any(not groupings[g].per_customer for g in bound)
