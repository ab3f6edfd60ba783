"""Redemptions on the plan: each redemption's anchor (the last event at or before it in processing order) and
customer, the pass's `redemptions` table.

The anchors come from a bucket map: each event falls in the bucket of the first redemption at or after it (a
search in the sorted redemption times, mapped over the events without order: Spark runs it on the executors,
DuckDB in process), each batch yields its buckets' counts, and the driver adds them up: a redemption's anchor is
the number of events in its bucket and the earlier ones, less one. Only counts per redemption reach the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rewards_lab.replay.engines.base import Executor
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.reversals import holder_sql
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text
from rewards_lab.replay.redemptions import SCHEMA

INPUT = SCHEMA.append(pa.field("anchor", pa.int64()))  # `schema.REDEMPTION_INPUT`
BUCKETS = pa.schema([pa.field("b", pa.int64()), pa.field("n", pa.int64())])


@dataclass(frozen=True)
class Buckets:
    """Event times (epoch microseconds, the first column) -> (bucket, count) per batch: the bucket of an event is
    the place of the first redemption at or after it among the sorted times (picklable: Spark sends it out)."""

    times: np.ndarray  # the redemptions' times, sorted

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            stamps = np.asarray(batch.column(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            counts = np.bincount(np.searchsorted(self.times, stamps, side="left"), minlength=len(self.times) + 1)
            (found,) = np.nonzero(counts)
            yield pa.RecordBatch.from_arrays(
                [pa.array(found, pa.int64()), pa.array(counts[found], pa.int64())], schema=BUCKETS
            )


def anchored(executor: Executor[object], ctx: Context, table: pa.Table | None) -> pa.Table:
    """The redemptions (`rewards_lab.replay.redemptions.SCHEMA`) with their anchor (`schema.REDEMPTION_INPUT`)."""
    if table is None or table.num_rows == 0:
        return INPUT.empty_table()
    times = np.asarray(table.column("t").to_numpy(), dtype=np.int64)
    order = np.argsort(times, kind="stable")
    buckets = ctx.table(schema.EVENT_BUCKETS)
    executor.map_partitions(
        buckets,
        Text(f"SELECT epoch_us(occurred_at) AS t FROM {ctx.table(schema.ORDERED)}"),
        Buckets(times[order]),
        BUCKETS,
    )
    summed = executor.fetch(f"SELECT b, sum(n) AS n FROM {buckets} GROUP BY b")
    counts = np.zeros(len(times) + 1, dtype=np.int64)
    counts[np.asarray(summed.column("b").to_numpy(), dtype=np.int64)] = np.asarray(
        summed.column("n").to_numpy(), dtype=np.int64
    )
    anchors = np.empty(len(times), dtype=np.int64)
    anchors[order] = np.cumsum(counts)[: len(times)] - 1  # events at or before each sorted redemption time, less one
    return table.select(list(SCHEMA.names)).cast(SCHEMA).append_column("anchor", pa.array(anchors, pa.int64()))


def redemptions(ctx: Context) -> Text:
    """`redemptions` (idx, holder, amount, t, rank, anchor): the redemptions' customers as resolved."""
    holder, join = holder_sql("r.customer_id", ctx.table(schema.HOLDERS))
    return Text(
        f"SELECT r.idx, {holder} AS holder, r.amount_minor AS amount, r.t, r.rank, r.anchor "
        f"FROM {ctx.table(schema.REDEMPTION_INPUT)} r{join}"
    )


def place_redemptions(executor: Executor[object], ctx: Context, table: pa.Table | None) -> None:
    """`redemption_input` (registered) and `redemptions` over `{prefix}_ordered` and `{prefix}_holders`."""
    executor.register(ctx.table(schema.REDEMPTION_INPUT), anchored(executor, ctx, table))
    executor.create(ctx.table(schema.REDEMPTIONS), redemptions(ctx), stored=True)
