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
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from rewards_lab.domain.schedule import DAY_US
from rewards_lab.replay.compiler import (
    BENEFICIARY_MISSING,
    DUCKDB,
    NOT_FOUND_BASE,
    TOO_LARGE,
    CompiledProgramme,
    string,
)


@dataclass(frozen=True)
class Layout:
    """Where each rule action's amount sits in `a`: slot numbers (the programme's actions in file order) per
    event type, in processing order within an event."""

    slots: int  # actions in the programme: the width of one event's seq range (seq = pos * slots + slot)
    types: tuple[str, ...]  # event types that have rules; k indexes them
    slots_of: tuple[tuple[int, ...], ...]  # per type: its slots in order (field c{i + 1} holds slots_of[k][i])
    expressions: tuple[tuple[str, ...], ...]  # per type: SQL of each slot's amount (0 when nothing is issued)
    refusing: frozenset[int]  # slots whose amount may be TOO_LARGE (or a beneficiary's refusal)
    largest: tuple[int, ...]  # per slot: no amount is above this
    rule_of: tuple[tuple[int, int], ...]  # per slot: (rule index, action index)
    # per type: SQL of the customer each field's action rewards (None: the event's customer), when an action
    # names a beneficiary; fields b{i} of `a` hold them
    recipients: tuple[tuple[str | None, ...], ...] = ()

    @property
    def beneficiary_fields(self) -> list[int]:
        """Field numbers i whose b{i} names a beneficiary for some event type."""
        width = self.width
        return [i for i in range(1, width + 1) if any(len(r) >= i and r[i - 1] is not None for r in self.recipients)]

    @property
    def width(self) -> int:
        """Fields c1 .. cW of `a`: the most actions any event type has."""
        return max((len(s) for s in self.slots_of), default=1)

    @property
    def fields(self) -> list[str]:
        return [f"a.c{index}" for index in range(1, self.width + 1)]

    def refuses(self, index: int) -> bool:
        """Whether field c{index} may hold TOO_LARGE for some event type."""
        return any(len(s) >= index and s[index - 1] in self.refusing for s in self.slots_of)

    def where(self, slot: int) -> tuple[int, int]:
        """(k, field number) of a slot."""
        for k, slots in enumerate(self.slots_of):
            if slot in slots:
                return k, slots.index(slot) + 1
        raise KeyError(slot)

    def positive(self, index: int) -> str:
        """SQL: field c{index} where it issues, else 0."""
        return f"greatest(a.c{index}, 0)" if self.refuses(index) else f"a.c{index}"

    def event_total(self) -> str:
        """SQL: the sum of an event's positive amounts (HUGEINT arithmetic only where BIGINT could overflow)."""
        parts = [self.positive(index) for index in range(1, self.width + 1)]
        fits = all(sum(self.largest[slot] for slot in slots) < 2**63 for slots in self.slots_of)
        return " + ".join(parts if fits else [f"CAST({p} AS HUGEINT)" for p in parts])

    def event_count(self) -> str:
        """SQL: how many of an event's amounts are positive."""
        parts = [
            f"CAST(a.c{i} > 0 AS INTEGER)" if self.refuses(i) or self.width > 100 else f"sign(a.c{i})"
            for i in range(1, self.width + 1)
        ]
        return " + ".join(parts)


def layout(plan: CompiledProgramme) -> Layout:
    refusing: set[int] = set()
    largest, rule_of = [0] * plan.slots, [(0, 0)] * plan.slots  # by slot: slots follow processing order
    for rule in plan.rules:
        for action, part in enumerate(rule.parts):
            slot = plan.first_slot[rule.index] + action
            rule_of[slot] = (rule.index, action)
            largest[slot] = part.largest
            if part.may_refuse or rule.recipient(action) is not None:
                refusing.add(slot)
    recipients = tuple(tuple(None if r is None else plan.render(r) for r in group.recipients) for group in plan.by_type)
    return Layout(
        slots=plan.slots,
        types=tuple(group.event_type for group in plan.by_type),
        slots_of=tuple(group.slots for group in plan.by_type),
        expressions=tuple(tuple(plan.render(amount) for amount in group.amounts) for group in plan.by_type),
        refusing=frozenset(refusing),
        largest=tuple(largest),
        rule_of=tuple(rule_of),
        recipients=recipients if any(r is not None for group in recipients for r in group) else (),
    )


def _struct(k: str, values: Sequence[str], width: int, recipients: dict[int, str] | None = None) -> str:
    """`a`: k, the amounts c1 .. cW and, for the fields of `recipients` (field number -> SQL), b{i}."""
    padded = [*values, *["0"] * (width - len(values))]
    fields = "".join(f", 'c{index + 1}': {value}" for index, value in enumerate(padded))
    fields += "".join(f", 'b{index}': {value}" for index, value in (recipients or {}).items())
    return "{'k': " + k + fields + "}"


def _recipients_of(lay: Layout, k: int) -> dict[int, str]:
    """The b{i} fields of type k's struct: its beneficiaries, NULL for the other fields; always VARCHAR (a reference
    the SQL cannot read, left to the fallback, is a NULL literal, and the fallback's rows must fit the column)."""
    own = lay.recipients[k] if lay.recipients else ()
    found: dict[int, str] = {}
    for i in lay.beneficiary_fields:
        recipient = own[i - 1] if i <= len(own) else None
        found[i] = f"CAST({recipient if recipient is not None else 'NULL'} AS VARCHAR)"  # a bare NULL has no type
    return found


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
    slots = [(k, i + 1, slot) for k, slots_k in enumerate(lay.slots_of) for i, slot in enumerate(slots_k)]
    rows = {
        "k": pa.array([k for k, _, _ in slots], pa.int32()),
        "i": pa.array([i for _, i, _ in slots], pa.int32()),
        "slot": pa.array([s for _, _, s in slots], pa.int32()),
        "rule_index": pa.array([lay.rule_of[s][0] for _, _, s in slots], pa.int32()),
        "action_index": pa.array([lay.rule_of[s][1] for _, _, s in slots], pa.int32()),
        "event_type": pa.array([lay.types[k] for k, _, _ in slots], pa.string()),
    }
    con.register(f"{name}_slots_input", pa.table(rows))
    con.execute(f"CREATE TEMP TABLE {name}_slots AS SELECT * FROM {name}_slots_input")
    con.unregister(f"{name}_slots_input")
    day = f"CAST(epoch_us(occurred_at) // {DAY_US} AS INTEGER)"
    a = " ".join(
        f"WHEN {DUCKDB.render(string(t))} THEN "
        f"{_struct(str(index), lay.expressions[index], lay.width, _recipients_of(lay, index))}"
        for index, t in enumerate(lay.types)
    )
    keep = "" if exotic is None else f" WHERE NOT {exotic}"
    kind = "TABLE" if materialise else "VIEW"
    lday = "" if local_day is None else f", {local_day} AS lday"
    con.execute(
        f"CREATE TEMP {kind} {name}_pe AS SELECT __pos AS pos, customer_id, {day} AS day, CASE type {a} END AS a"
        f"{lday} FROM {events}{keep}"
    )


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
    struct = _struct("f.k", [f"f.c{index}" for index in range(1, lay.width + 1)], lay.width, beneficiaries)
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
