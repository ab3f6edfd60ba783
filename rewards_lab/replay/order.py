"""Processing order of a replay: `occurred_at`, ties by input order (`domain.processing_order.time_positions`).

Each event gets `__pos`, its position in that order, in the view `{name}_ordered`. A history export is usually
already in order, and then the position is the input row: when the events come as an Arrow table or a Parquet
file whose `occurred_at` is a timestamp column, pyarrow reads that one column in input order and numpy checks
that it never decreases (one vectorised pass, no DuckDB sort). Otherwise, or when it does decrease,
DuckDB reads the timestamps and a stable argsort gives the positions.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.processing_order import time_positions
from rewards_lab.replay.inputs import ROW, EventSource

_MISSING = "every event needs an occurred_at"


def never_decreases(column: pa.ChunkedArray) -> bool:
    """Whether a timestamp column never decreases along its rows (numpy, chunk by chunk)."""
    last: int | None = None
    for chunk in column.chunks:
        if len(chunk) == 0:
            continue
        values = np.asarray(chunk.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
        if (last is not None and int(values[0]) < last) or bool(np.any(values[1:] < values[:-1])):
            return False
        last = int(values[-1])
    return True


def input_in_order(source: EventSource) -> tuple[int, bool] | None:
    """(rows, whether occurred_at never decreases along the input), read without DuckDB; None when the input's
    occurred_at is not a timestamp column of an Arrow table or a Parquet file."""
    origin = source.origin
    if isinstance(origin, str):
        if not pa.types.is_timestamp(pq.read_schema(origin).field("occurred_at").type):
            return None
        column = pq.read_table(origin, columns=["occurred_at"]).column(0)
    elif isinstance(origin, pa.Table) and pa.types.is_timestamp(origin.schema.field("occurred_at").type):
        column = origin.column("occurred_at")
    else:
        return None
    if column.null_count:
        raise ServiceError("field_required", _MISSING, field="occurred_at")
    # Timestamps of one unit compare as their integers; a finer unit in order is in order at microseconds too.
    return len(column), never_decreases(column)


def order_events(con: duckdb.DuckDBPyConnection, source: EventSource, from_sql: str, name: str) -> int:
    """Create the view `{name}_ordered`: the events with __pos, their position in processing order."""
    known = input_in_order(source)
    if known is not None and known[1]:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_ordered AS SELECT *, {ROW} AS __pos FROM {from_sql}")
        return known[0]
    # Rows may come back in any order (preserve_insertion_order = false): place each stamp at its input row.
    fetched = con.sql(f"SELECT {ROW} AS rn, epoch_us(occurred_at) AS t FROM {source.view}").fetchnumpy()
    times = fetched["t"]
    if isinstance(times, np.ma.MaskedArray) and times.mask.any():
        raise ServiceError("field_required", _MISSING, field="occurred_at")
    stamps = np.empty(len(times), dtype=np.int64)
    stamps[np.asarray(fetched["rn"], dtype=np.int64)] = np.asarray(times, dtype=np.int64)
    if len(stamps) < 2 or bool(np.all(stamps[1:] >= stamps[:-1])):  # already in order: position = input row
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_ordered AS SELECT *, {ROW} AS __pos FROM {from_sql}")
        return len(stamps)
    positions = time_positions(stamps)
    con.register(f"{name}_pos", pa.table({"rn": np.arange(len(stamps), dtype=np.int64), "pos": positions}))
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {name}_ordered AS SELECT s.*, p.pos AS __pos "
        f"FROM {from_sql} s JOIN {name}_pos p ON p.rn = s.{ROW}"
    )
    return len(stamps)
