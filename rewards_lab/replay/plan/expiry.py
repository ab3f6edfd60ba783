"""Expiry on the plan (issue 19; the live engine's rewards_lab.domain.expiry), written once for both executors:
which policy a programme's rewards expire under, until when the replay runs the expiry worker, when a lot issued
at a time expires, and the replay's lots (docs/replay.md "Expiry").

A reward's lot is issued at its event's `occurred_at` and expires under the programme's `expiry` in the
programme's timezone, else under the asset's own `expiry` in UTC (none: the replay has no lots). `after_days`
adds whole days to the microsecond (`ExpiryPolicy.after_us`); `at_end_of` depends only on the local calendar month
the reward falls in: the `months` step lists the history's local months (`domain.expiry.month_index` over the
engine's time zone conversion, as for `occurred_at.date`), the driver computes each month's end with
`domain.expiry.month_end` itself (`month_ends`, a few rows), and `expiry_times` joins them to the events.

`as_of` is the moment the replay ends: the worker has run until then, so every lot with `expires_at <= as_of` has
expired. It defaults to the history's last moment (its last event or redemption) and cannot be earlier.

The lots (`lots` step): the customers whose lots the ordered pass keeps (`lotted`, the pass's lots input: their
redemptions, reversals or a binding ceiling consume lots) have the pass's lots (`pass_lots`, lot_pass.LOTS);
every other customer's issued rewards (`issued`) are one lot each that expires whole when due by `as_of`
(closed form). The outputs (`lots_sql`, `expired_sql`, ...) are canonical DuckDB text; Spark renders them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from sqlglot import exp

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.expiry import ExpiryPolicy, month_end, month_index, reward_expiry
from rewards_lab.domain.schedule import DAY_US, epoch_us
from rewards_lab.replay.compiler import DUCKDB, string
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.sql import Text
from rewards_lab.replay.sql_values import call

if TYPE_CHECKING:
    from rewards_lab.replay.plan.rules import Context

Amount = Callable[[str], str]


@dataclass(frozen=True)
class ExpiryPlan:
    """The policy of the replayed rewards, its zone and (once known) `as_of` in epoch microseconds."""

    policy: ExpiryPolicy
    zone: str
    as_of: int = 0

    def local_month(self, column: exp.Expr) -> str:
        """DuckDB SQL of the month index (`domain.expiry.month_index`) of an instant's local time."""
        local = DUCKDB.local_time(column, self.zone)
        return DUCKDB.render(month_index(call("year", local), call("month", local)))

    def month_ends(self, months: Iterable[int]) -> dict[int, int]:
        """Month index -> the expiry (epoch microseconds) of a lot issued in that local month (`at_end_of`)."""
        return {int(month): epoch_us(month_end(self.policy, int(month), self.zone)) for month in months}


def expiry_plan(definition: ProgrammeDefinition) -> ExpiryPlan | None:
    """The replayed rewards' expiry (`domain.expiry.reward_expiry`: the programme's in its timezone, else the
    asset's in UTC), None when they never expire."""
    info, asset = definition.programme, definition.asset
    programme = None if info.expiry is None else ExpiryPolicy.of(info.expiry.model_dump())
    own = None if asset.expiry is None else ExpiryPolicy.of(asset.expiry.model_dump())
    governing = reward_expiry(programme, info.zone, own)
    return None if governing is None else ExpiryPlan(*governing)


def as_of_micros(value: Any) -> int:
    """Epoch microseconds of an `as_of` (a datetime, pandas Timestamp or ISO text; naive is UTC)."""
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        raise ServiceError("field_invalid", f"as_of must be a date-time, not {value!r}", field="as_of") from None
    if pd.isna(stamp):
        raise ServiceError("field_invalid", "as_of must be a date-time", field="as_of")
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1000)


def until(plan: ExpiryPlan, as_of: Any, last: int | None) -> ExpiryPlan:
    """The plan with its `as_of`: the one given (not before `last`, the history's last moment), else `last`."""
    if as_of is None:
        return replace(plan, as_of=last if last is not None else 0)
    moment = as_of_micros(as_of)
    if last is not None and moment < last:
        raise ServiceError(
            "field_invalid",
            "as_of must not be before the history's last event or redemption "
            f"({pd.Timestamp(last * 1000, tz='UTC').isoformat()})",
            field="as_of",
        )
    return replace(plan, as_of=moment)


# steps --------------------------------------------------------------------------------------------------------
def _expiry(ctx: Context) -> ExpiryPlan:
    if ctx.expiry is None:
        raise ValueError("an expiry step needs the context's expiry plan")
    return ctx.expiry


def months(ctx: Context) -> Text:
    """`months` (mon): the distinct local months of the events (`at_end_of`)."""
    month = _expiry(ctx).local_month(exp.column("occurred_at", table="o"))
    return Text(f"SELECT DISTINCT {month} AS mon FROM {ctx.table(schema.ORDERED)} o")


def times(ctx: Context) -> Text:
    """`expiry_times` (pos, t, exp): each event's time and when a lot it issues expires (epoch microseconds):
    its time plus the days (`after_days`), or its local month's end from `month_ends` (`at_end_of`)."""
    plan, ordered = _expiry(ctx), ctx.table(schema.ORDERED)
    after = plan.policy.after_us
    if after is not None:
        return Text(
            "SELECT __pos AS pos, epoch_us(occurred_at) AS t, "
            f"(epoch_us(occurred_at) + CAST({after} AS BIGINT)) AS exp FROM {ordered}"
        )
    month = plan.local_month(exp.column("occurred_at", table="o"))
    return Text(
        f"SELECT o.__pos AS pos, epoch_us(o.occurred_at) AS t, x.exp AS exp "
        f"FROM {ordered} o JOIN {ctx.table(schema.MONTH_ENDS)} x ON x.mon = {month}"
    )


def lots(ctx: Context) -> Text:
    """`lots` (seq, holder, issued, expires, amount, remaining, expired): the closed-form lots of every issued
    reward of a customer the pass did not keep (`lotted`), and the pass's lots."""
    as_of, slots = _expiry(ctx).as_of, ctx.layout.slots
    return Text(
        f"""SELECT i.seq AS seq, i.customer_id AS holder, x.t AS issued, x.exp AS expires,
               i.amount_minor AS amount,
               CASE WHEN x.exp <= {as_of} THEN 0 ELSE i.amount_minor END AS remaining,
               CASE WHEN x.exp <= {as_of} THEN i.amount_minor ELSE 0 END AS expired
        FROM {ctx.table(schema.ISSUED)} i
        LEFT JOIN {ctx.table(schema.LOTTED)} l ON l.holder = i.customer_id
        JOIN {ctx.table(schema.EXPIRY_TIMES)} x ON x.pos = i.seq // {slots}
        WHERE l.holder IS NULL
        UNION ALL SELECT seq, holder, lot_issued, lot_expires, lot_amount, lot_remaining, lot_expired
        FROM {ctx.table(schema.PASS_LOTS)}"""
    )


# the driver's part --------------------------------------------------------------------------------------------
def last_moment(executor: Executor[object], prefix: str, redemptions: pa.Table | None) -> int | None:
    """The history's last moment (epoch microseconds): its last event or redemption (None: neither)."""
    found = executor.fetch(Text(f"SELECT max(epoch_us(occurred_at)) AS t FROM {schema.ORDERED.on(prefix)}"))
    last = found.column(0)[0].as_py()
    moments = [int(last)] if last is not None else []
    if redemptions is not None and redemptions.num_rows:
        moments.append(max(int(t) for t in redemptions.column("t").to_pylist()))
    return max(moments) if moments else None


def month_ends_table(plan: ExpiryPlan, found: Iterable[int]) -> pa.Table:
    """`month_ends` (mon, exp) of the months found."""
    ends = plan.month_ends(found)
    return pa.table({"mon": pa.array(list(ends), pa.int64()), "exp": pa.array(list(ends.values()), pa.int64())})


def prepare(executor: Executor[object], ctx: Context, as_of: Any, redemptions: pa.Table | None) -> Context:
    """`expiry_times` over `ordered` (with `month_ends` for `at_end_of`); the context with the expiry plan's
    `as_of` resolved against the history's last moment."""
    from rewards_lab.replay.plan.steps import EXPIRY_TIMES, MONTHS

    plan = until(_expiry(ctx), as_of, last_moment(executor, ctx.prefix, redemptions))
    done = replace(ctx, expiry=plan)
    if plan.policy.after_us is None:
        executor.create(MONTHS.output.on(ctx.prefix), MONTHS.build(done), stored=False)
        found = executor.fetch(Text(f"SELECT mon FROM {ctx.table(schema.MONTHS)} WHERE mon IS NOT NULL"))
        ends = month_ends_table(plan, (int(m) for m in found.column("mon").to_pylist()))
        executor.register(ctx.table(schema.MONTH_ENDS), ends)
    executor.create(EXPIRY_TIMES.output.on(ctx.prefix), EXPIRY_TIMES.build(done), stored=EXPIRY_TIMES.stored)
    return done


def without_pass(executor: Executor[object], prefix: str) -> None:
    """`lotted` and `pass_lots`, empty: the pass keeps no customer's lots."""
    executor.register(schema.LOTTED.on(prefix), pa.table({"holder": pa.array([], pa.string())}))
    executor.register(schema.PASS_LOTS.on(prefix), LOTS.empty_table())


def make_lots(executor: Executor[object], ctx: Context) -> None:
    """The `lots` step (its inputs `issued`, `lotted`, `pass_lots` and `expiry_times` made)."""
    from rewards_lab.replay.plan.steps import LOTS as STEP

    executor.create(STEP.output.on(ctx.prefix), STEP.build(ctx), stored=STEP.stored)


# outputs ------------------------------------------------------------------------------------------------------
def _instant(micros: str) -> str:
    return f"CAST(make_timestamp({micros}) AS TIMESTAMPTZ)"


def lots_sql(name: str, asset: str, amount: Amount) -> str:
    """SQL: every lot (customer, when issued and when it expires, what it added, what remains, what expired),
    by customer, then FIFO order."""
    symbol = DUCKDB.render(string(asset))
    return f"""
        SELECT holder AS customer_id, {symbol} AS asset, seq, {_instant("issued")} AS issued_at,
               {_instant("expires")} AS expires_at, {amount("amount")} AS amount, amount AS amount_minor,
               {amount("remaining")} AS remaining, remaining AS remaining_minor,
               {amount("expired")} AS expired, expired AS expired_minor
        FROM {schema.LOTS.on(name)} ORDER BY holder, issued, seq"""


def expired_sql(name: str, asset: str, amount: Amount) -> str:
    """SQL: every lot that expired by `as_of` (customer, issued_at, expires_at, amount), by expiry."""
    symbol = DUCKDB.render(string(asset))
    return f"""
        SELECT holder AS customer_id, {symbol} AS asset, seq, {_instant("issued")} AS issued_at,
               {_instant("expires")} AS expires_at, {amount("expired")} AS amount, expired AS amount_minor
        FROM {schema.LOTS.on(name)} WHERE expired > 0 ORDER BY expires, holder, issued, seq"""


def expired_total_sql(name: str) -> str:
    """SQL: one row (what expired in all, in how many lots)."""
    return (
        "SELECT coalesce(sum(CAST(expired AS HUGEINT)), 0) AS x, coalesce(count_if(expired > 0), 0) AS n "
        f"FROM {schema.LOTS.on(name)}"
    )


def expired_cells(name: str, slots: int) -> str:
    """SQL: (day, slot, x) what expired per UTC day (of expires_at) and the slot of the reward that made it."""
    return (
        f"SELECT CAST(expires // {DAY_US} AS INTEGER) AS day, CAST(seq % {slots} AS INTEGER) AS slot, expired AS x "
        f"FROM {schema.LOTS.on(name)} WHERE expired > 0"
    )


def expired_per_holder(name: str) -> str:
    """SQL: (holder, x) what expired of each customer's lots."""
    return (
        f"SELECT holder, sum(CAST(expired AS HUGEINT)) AS x FROM {schema.LOTS.on(name)} WHERE expired > 0 "
        "GROUP BY holder"
    )
