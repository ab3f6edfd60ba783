"""The supply ceiling in processing order, one bucketed method for both executors.

Like the live ledger (rewards_lab.domain.ceiling): an issuance succeeds when outstanding + amount <= ceiling and
then adds to outstanding; a refused one changes nothing, so a later, smaller one may still fit. The bucket is a
UTC day (`day` never decreases along processing order): the per-day totals of `cells` come to the driver, their
running sum names the boundary day, on which the first refusal falls; only that day's events are fetched in order
and walked (`first_over`, `resolve`). After the first refusal only amounts that fit the room left can still
succeed, and only events holding one are fetched, in order, by growing chunks. What is issued on or after the
boundary day is `ceiling_kept` (before it, every positive amount is issued).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rewards_lab.domain.ceiling import first_over, resolve
from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.layout import Layout
from rewards_lab.replay.plan.sql import Text

FIRST_CHUNK, LAST_CHUNK = 50_000, 3_200_000  # events fetched at a time after the first refusal
KEPT_SCHEMA = pa.schema(
    [("pos", pa.int64()), ("day", pa.int32()), ("k", pa.int32()), ("i", pa.int32()), ("m", pa.int64())]
)
Columns = tuple[np.ndarray, ...]  # pos, day, k, i, m


def _flatten(fetched: pa.Table, width: int) -> Columns:
    """(pos, day, k, i, m) per field of the fetched rows, in row order then field order."""

    def column(name: str) -> np.ndarray:
        return np.asarray(fetched.column(name).to_numpy(), dtype=np.int64)

    values = np.stack([column(f"c{i}") for i in range(1, width + 1)], axis=1).ravel()
    pos, day, k = (np.repeat(column(c), width) for c in ("pos", "day", "k"))
    index = np.tile(np.arange(1, width + 1, dtype=np.int64), fetched.num_rows)
    return pos, day, k, index, values


def _named(lay: Layout) -> str:
    return "a.k AS k, " + ", ".join(f"a.c{i} AS c{i}" for i in range(1, lay.width + 1))


def _chosen(columns: Columns, room: int) -> tuple[Columns, int]:
    """The issuances of `columns` (positive amounts, in order) that `room` lets through, and the room left."""
    first, issued_after = resolve(columns[4], room)
    chosen = np.concatenate([np.arange(min(first, len(columns[4])), dtype=np.int64), issued_after])
    picked = tuple(column[chosen] for column in columns)
    return picked, room - int(picked[4].sum())


def decide(executor: Executor[object], prefix: str, lay: Layout, room: int | None) -> int | None:
    """Table `ceiling_kept`; returns the boundary day (None: nothing is refused)."""
    kept: list[Columns] = []
    boundary = None if room is None else _boundary(executor, prefix, room)
    if boundary is not None:
        assert room is not None
        day, running = boundary
        amounts = schema.AMOUNTS.on(prefix)
        fetched = executor.fetch(
            Text(f"SELECT pos, day, {_named(lay)} FROM {amounts} WHERE day = {day} AND a.k IS NOT NULL ORDER BY pos")
        )
        columns = _flatten(fetched, lay.width)
        positive = columns[4] > 0
        columns = tuple(column[positive] for column in columns)
        cut, used = first_over(columns[4], room - running)
        kept.append(tuple(column[:cut] for column in columns))
        part, left = _chosen(tuple(column[cut + 1 :] for column in columns), room - running - used)
        kept.append(part)
        last = int(np.asarray(fetched.column("pos").to_numpy())[-1])
        kept += _after_refusal(executor, amounts, lay, last + 1, left)
    parts = [np.concatenate([part[c] for part in kept]) if kept else np.empty(0, np.int64) for c in range(5)]
    arrays = [pa.array(values, field.type) for values, field in zip(parts, KEPT_SCHEMA, strict=True)]
    executor.register(schema.CEILING_KEPT.on(prefix), pa.Table.from_arrays(arrays, schema=KEPT_SCHEMA))
    return None if boundary is None else boundary[0]


def _boundary(executor: Executor[object], prefix: str, room: int) -> tuple[int, int] | None:
    """(the day of the first refusal, the total issued before it), or None when everything fits."""
    per_day = executor.fetch(
        Text(f"SELECT day, sum(p) AS t FROM {schema.CELLS.on(prefix)} GROUP BY day HAVING sum(n) > 0 ORDER BY day")
    )
    days, totals = per_day.column("day").to_pylist(), [int(t) for t in per_day.column("t").to_pylist()]
    total = sum(totals)
    if total <= room or total == 0:  # everything fits: the ceiling does not bind
        return None
    running = 0
    for day, day_total in zip(days, totals, strict=True):
        if running + day_total > room:
            return int(day), running
        running += day_total
    raise AssertionError("the totals exceed the room on some day")


def _after_refusal(executor: Executor[object], amounts: str, lay: Layout, position: int, room: int) -> list[Columns]:
    """The issuances of the events from `position` on that still fit `room`, in processing order: events
    holding an amount that fits are fetched in order by growing chunks, each resolved from the room the previous
    ones left, until the room is used up or no event is left (usually one query: a few minor units are left)."""
    kept: list[Columns] = []
    chunk = FIRST_CHUNK
    while room > 0:
        fits = " OR ".join(f"(a.c{i} > 0 AND a.c{i} <= {room})" for i in range(1, lay.width + 1))
        fetched = executor.fetch(
            Text(
                f"SELECT pos, day, {_named(lay)} FROM {amounts} WHERE pos >= {position} AND ({fits}) "
                f"ORDER BY pos LIMIT {chunk}"
            )
        )
        if fetched.num_rows == 0:
            break
        columns = _flatten(fetched, lay.width)
        wanted = (columns[4] > 0) & (columns[4] <= room)
        part, room = _chosen(tuple(column[wanted] for column in columns), room)
        kept.append(part)
        if fetched.num_rows < chunk:
            break
        position, chunk = int(np.asarray(fetched.column("pos").to_numpy())[-1]) + 1, min(chunk * 4, LAST_CHUNK)
    return kept
