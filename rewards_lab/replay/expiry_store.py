"""Expiry in the DuckDB replay (issue 19): each event's lot expiry, the lots of the replay and the SQL of the
result's expiry outputs (docs/replay.md "Expiry").

Tables and views of a replay `{name}`:
- `{name}_xt` (view; pos, t, exp): each event's time and when a lot it issues expires (epoch microseconds), with
  `{name}_xends` (mon, exp) for `at_end_of` policies: the expiry of each local month of the history;
- `{name}_lotted` (holder): the customers whose lots the sequential pass keeps (rewards_lab.replay.lot_pass), and
  `{name}_plots`: those lots;
- `{name}_lots` (seq, holder, issued, expires, amount, remaining, expired): every lot of the replay. A customer
  the pass does not keep never has a lot consumed (no redemption, no reversal, no binding ceiling), so each of
  their issued rewards is one lot that expires whole when `expires <= as_of` (closed form).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import pyarrow as pa
from sqlglot import exp

from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import DUCKDB, string
from rewards_lab.replay.expiry_plan import ExpiryPlan
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.plan.layout import Layout
from rewards_lab.replay.plan.reversals import holder_sql

Amount = Callable[[str], str]
LOT_COLUMNS = ("seq", "holder", "issued", "expires", "amount", "remaining", "expired")


def last_moment(con: duckdb.DuckDBPyConnection, events: str, redemptions: pa.Table | None) -> int | None:
    """The history's last moment (epoch microseconds): its last event or redemption (None: neither)."""
    ((last,),) = con.sql(f"SELECT max(epoch_us(occurred_at)) FROM {events}").fetchall()
    moments = [int(last)] if last is not None else []
    if redemptions is not None and redemptions.num_rows:
        moments.append(max(int(t) for t in redemptions.column("t").to_pylist()))
    return max(moments) if moments else None


def times_view(con: duckdb.DuckDBPyConnection, name: str, plan: ExpiryPlan) -> None:
    """`{name}_xt` (pos, t, exp) over `{name}_ordered`."""
    stamp = "epoch_us(occurred_at)"
    days = plan.after_days(stamp)
    if days is not None:
        con.execute(
            f"CREATE TEMP VIEW {name}_xt AS SELECT __pos AS pos, {stamp} AS t, {days} AS exp FROM {name}_ordered"
        )
        return
    month = DUCKDB.render(plan.local_month(DUCKDB.local_time(exp.column("occurred_at", table="o"), plan.zone)))
    months = [int(m) for (m,) in con.sql(f"SELECT DISTINCT {month} FROM {name}_ordered o").fetchall() if m is not None]
    ends = plan.month_ends(months)
    table = pa.table({"mon": pa.array(list(ends), pa.int64()), "exp": pa.array(list(ends.values()), pa.int64())})
    con.register(f"{name}_xends_input", table)
    con.execute(f"CREATE TEMP TABLE {name}_xends AS SELECT * FROM {name}_xends_input")
    con.unregister(f"{name}_xends_input")
    con.execute(
        f"CREATE TEMP VIEW {name}_xt AS SELECT o.__pos AS pos, epoch_us(o.occurred_at) AS t, x.exp "
        f"FROM {name}_ordered o JOIN {name}_xends x ON x.mon = {month}"
    )


def lotted_table(con: duckdb.DuckDBPyConnection, name: str, holders: str | None) -> None:
    """`{name}_lotted` from SQL of holders (None: nobody): the customers whose lots the pass keeps."""
    found = holders if holders is not None else "SELECT CAST(NULL AS VARCHAR) AS holder WHERE FALSE"
    con.execute(f"CREATE TEMP TABLE {name}_lotted AS SELECT DISTINCT holder FROM ({found})")


def pass_lots(con: duckdb.DuckDBPyConnection, name: str, lots: pa.Table | None) -> None:
    """`{name}_plots` from the pass's LOTS (None: the pass kept none)."""
    con.register(f"{name}_plots_input", lots if lots is not None else LOTS.empty_table())
    con.execute(f"CREATE TEMP TABLE {name}_plots AS SELECT * FROM {name}_plots_input")
    con.unregister(f"{name}_plots_input")


def issued_sql(lay: Layout, name: str, featured: bool, lookup: str | None = None) -> str:
    """SQL: (seq, customer_id, amount_minor) of every issued reward, from the stored amounts (one plain scan per
    field: cheaper than unnesting every event's struct). With expiry the ceiling is never enforced set-based (a
    ceiling that can bind sends every reward through the pass), so every positive amount is issued, unless the
    pass decided otherwise (`featured`: `{name}_dec`, the customer resolved through `lookup`)."""
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


def lots_table(con: duckdb.DuckDBPyConnection, name: str, issued: str, slots: int, as_of: int) -> None:
    """`{name}_lots`: the closed-form lots of every issued reward (`issued_sql`) of a customer the pass did not
    keep, and the pass's lots."""
    con.execute(
        f"""CREATE TEMP TABLE {name}_lots AS
        SELECT i.seq, i.customer_id AS holder, x.t AS issued, x.exp AS expires, i.amount_minor AS amount,
               CASE WHEN x.exp <= {as_of} THEN 0 ELSE i.amount_minor END AS remaining,
               CASE WHEN x.exp <= {as_of} THEN i.amount_minor ELSE 0 END AS expired
        FROM ({issued}) i
        LEFT JOIN {name}_lotted l ON l.holder = i.customer_id
        JOIN {name}_xt x ON x.pos = i.seq // {slots}
        WHERE l.holder IS NULL
        UNION ALL SELECT seq, holder, lot_issued, lot_expires, lot_amount, lot_remaining, lot_expired
        FROM {name}_plots"""
    )


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
        FROM {name}_lots ORDER BY holder, issued, seq"""


def expired_sql(name: str, asset: str, amount: Amount) -> str:
    """SQL: every lot that expired by `as_of` (customer, issued_at, expires_at, amount), by expiry."""
    symbol = DUCKDB.render(string(asset))
    return f"""
        SELECT holder AS customer_id, {symbol} AS asset, seq, {_instant("issued")} AS issued_at,
               {_instant("expires")} AS expires_at, {amount("expired")} AS amount, expired AS amount_minor
        FROM {name}_lots WHERE expired > 0 ORDER BY expires, holder, issued, seq"""


def expired_total_sql(name: str) -> str:
    return f"SELECT coalesce(sum(expired), 0), coalesce(count_if(expired > 0), 0) FROM {name}_lots"


def expired_cells(name: str, slots: int) -> str:
    """SQL: (day, slot, x) what expired per UTC day (of expires_at) and the slot of the reward that made it."""
    return (
        f"SELECT CAST(expires // {DAY_US} AS INTEGER) AS day, CAST(seq % {slots} AS INTEGER) AS slot, expired AS x "
        f"FROM {name}_lots WHERE expired > 0"
    )


def expired_per_holder(name: str) -> str:
    """SQL: (holder, x) what expired of each customer's lots."""
    return f"SELECT holder, sum(expired) AS x FROM {name}_lots WHERE expired > 0 GROUP BY holder"
