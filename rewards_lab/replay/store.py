"""The stored form of a replay's result: one row per event, and the SQL that derives everything else from it.

`{name}_pe` has one row per event: `pos` (its position in processing order), `customer_id`, `day` (UTC days
since the epoch) and `a`, a STRUCT of `k` (the event type's index in `Layout.types`) and a fixed number of fields
c1 .. cW: the amounts of that type's rule actions ("slots") in processing order, in minor units. 0 means nothing
is issued (the rule did not match, the value is missing or not a number, the amount rounds to nothing, or the
field is beyond the type's own slots); TOO_LARGE means the action is refused as amount_too_large. `a` is NULL for
an event of a type without rules: such events are kept rather than filtered out (a `type IN (...)` filter would
cost a comparison per event), and every query below drops NULL amounts. The table is computed in ONE projection
over the events, one CASE branch per event type, like a hand-written query: each rule is evaluated once, and the
summaries group events, not issuances (of which there are more). A STRUCT is stored as one column per field, so
a summary reads an amount as a plain column.

Derived from it (rewards_lab.replay.engine puts them together):
- `{name}_cand`: per day and slot, the candidate issuances (sum and count of the positive amounts) and the
  refusals as too large, from one GROUP BY day, a.k over the stored rows;
- the supply ceiling (`enforce_ceiling`): the boundary day, on which the first refusal falls, and `{name}_kept`,
  every issuance on or after that day that is issued. Before the boundary day every positive amount is issued;
- `{name}_issuances`: one row per attempted issuance, a view that unnests `a` and joins the slots' rules and the
  events' ids and times; it is materialised only when the rows are read or written.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import (
    BENEFICIARY_MISSING,
    NOT_FOUND_BASE,
    TOO_LARGE,
)
from rewards_lab.replay.plan.layout import Layout, struct_sql
from rewards_lab.replay.plan.rules import amounts_sql, slots_table


def create(
    con: duckdb.DuckDBPyConnection,
    lay: Layout,
    events: str,
    exotic: str | None,
    name: str,
    materialise: bool = True,
    local_day: str | None = None,
) -> None:
    """`{name}_pe` from the events view (with __pos), and `{name}_slots`; rows flagged `exotic` are left out (the
    Python fallback adds them). Not materialised, `{name}_pe` is a view: every query over it reads the events
    again (the streaming writer's ceiling queries, which read it a few times, not the summaries). `local_day`:
    SQL of the day in the programme's timezone, stored as `lday` (caps count in its calendar periods)."""
    con.register(f"{name}_slots_input", slots_table(lay))
    con.execute(f"CREATE TEMP TABLE {name}_slots AS SELECT * FROM {name}_slots_input")
    con.unregister(f"{name}_slots_input")
    kind = "TABLE" if materialise else "VIEW"
    con.execute(f"CREATE TEMP {kind} {name}_pe AS {amounts_sql(lay, events, exotic, local_day)}")


def add_fallback(
    con: duckdb.DuckDBPyConnection,
    lay: Layout,
    events: str,
    rows: Sequence[tuple[int, int, int]],
    name: str,
    recipients: dict[int, str] | None = None,
    local_day: str | None = None,
) -> None:
    """Add the Python fallback's issuances, (seq, occurred_at in epoch microseconds, amount), as stored rows;
    `recipients`: seq -> the customer a beneficiary's action rewards; `local_day` as for `create`."""
    if not rows:
        return
    by_event: dict[int, tuple[int, int, list[int], list[str | None]]] = {}
    for seq, stamp, amount in rows:
        position, slot = divmod(seq, lay.slots)
        k, index = lay.where(slot)
        entry = by_event.setdefault(position, (stamp, k, [0] * lay.width, [None] * lay.width))
        entry[2][index - 1] = amount
        entry[3][index - 1] = (recipients or {}).get(seq)
    columns = {
        "pos": pa.array(list(by_event), pa.int64()),
        "t": pa.array([v[0] for v in by_event.values()], pa.int64()),
        "k": pa.array([v[1] for v in by_event.values()], pa.int32()),
    }
    for index in range(lay.width):
        columns[f"c{index + 1}"] = pa.array([v[2][index] for v in by_event.values()], pa.int64())
    for index in lay.beneficiary_fields:
        columns[f"b{index}"] = pa.array([v[3][index - 1] for v in by_event.values()], pa.string())
    con.register(f"{name}_fallback", pa.table(columns))
    beneficiaries = {index: f"f.b{index}" for index in lay.beneficiary_fields}
    struct = struct_sql("f.k", [f"f.c{index}" for index in range(1, lay.width + 1)], lay.width, beneficiaries)
    lday = "" if local_day is None else f", {local_day}"
    con.execute(
        f"INSERT INTO {name}_pe SELECT f.pos, e.customer_id, CAST(f.t // {DAY_US} AS INTEGER), {struct}{lday} "
        f"FROM {name}_fallback f JOIN {events} e ON e.__pos = f.pos"
    )
    con.unregister(f"{name}_fallback")


def summarise(con: duckdb.DuckDBPyConnection, lay: Layout, name: str) -> None:
    """`{name}_cand` (day, slot, p: sum of positive amounts, n: their count, x: refusals as too large)."""
    aggregates: list[str] = []
    lists: dict[str, list[str]] = {"p": [], "n": [], "x": [], "y": [], "z": []}
    named = set(lay.beneficiary_fields)
    for index in range(1, lay.width + 1):
        field = f"a.c{index}"
        aggregates.append(f"sum({lay.positive(index)}) AS p{index}, count_if({field} > 0) AS n{index}")
        if lay.refuses(index):
            aggregates.append(f"count_if({field} = {TOO_LARGE}) AS x{index}")
        if index in named:
            aggregates.append(f"count_if({field} = {BENEFICIARY_MISSING}) AS y{index}")
            aggregates.append(f"count_if({field} < {NOT_FOUND_BASE}) AS z{index}")
        lists["p"].append(f"p{index}")
        lists["n"].append(f"n{index}")
        lists["x"].append(f"x{index}" if lay.refuses(index) else "0")
        lists["y"].append(f"y{index}" if index in named else "0")
        lists["z"].append(f"z{index}" if index in named else "0")
    spread = ", ".join(f"unnest([{', '.join(v)}]) AS {c}" for c, v in lists.items())
    con.execute(
        f"""CREATE TEMP TABLE {name}_cand AS
        SELECT u.day, s.slot, CAST(coalesce(u.p, 0) AS HUGEINT) AS p, CAST(u.n AS BIGINT) AS n,
               CAST(u.x AS BIGINT) AS x, CAST(u.y AS BIGINT) AS y, CAST(u.z AS BIGINT) AS z
        FROM (SELECT day, k, unnest(range(1, {lay.width + 1})) AS i, {spread}
              FROM (SELECT day, a.k AS k, {", ".join(aggregates)} FROM {name}_pe GROUP BY day, a.k)) u
        JOIN {name}_slots s ON s.k = u.k AND s.i = u.i
        WHERE u.n > 0 OR u.x > 0 OR u.y > 0 OR u.z > 0"""
    )
