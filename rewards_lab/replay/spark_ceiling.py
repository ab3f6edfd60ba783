"""The supply ceiling on Spark, in processing order across the whole history, without collecting it to the driver.

Like the live ledger (and rewards_lab.domain.ceiling on DuckDB): an issuance succeeds when outstanding + amount
<= ceiling, and then adds to outstanding; a refused one changes nothing, so a later, smaller one may still fit.

A documented two-pass method:
1. **Where the first refusal falls.** The positive candidates are cut into buckets of consecutive `seq`
   (BUCKET_EVENTS events each); one aggregation gives each bucket's total (a few numbers per million events,
   brought to the driver), whose running sum names the bucket holding the first refusal and the amount issued
   before it. Only that bucket is then ordered, by a window running sum within it, to find the refusal `f`.
   Everything before `f` is issued.
2. **After it.** Only candidates that fit the room left can still succeed; each round filters to those (a
   distributed filter and count). When few remain (at most COLLECT_LIMIT) they are brought to the driver and
   resolved in order (rewards_lab.domain.ceiling.resolve); otherwise pass 1 runs again on them, which issues
   every candidate up to the next refusal, and the round repeats with the room that refusal leaves.
A history with at most COLLECT_LIMIT candidates in all is resolved on the driver at once, after pass 1's
aggregation (which also counts them).
The result is a `CeilingDecision`: a few numbers and, at most, COLLECT_LIMIT issued `seq`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rewards_lab.domain.ceiling import resolve

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

BUCKET_EVENTS = 1_000_000  # events per bucket of the running sum
COLLECT_LIMIT = 200_000  # candidates resolved on the driver once no more than this many still fit


@dataclass(frozen=True)
class Round:
    """After a refusal: every candidate with `after < seq < before` and `m <= room` is issued."""

    after: int
    before: int | None  # None: to the end of the history
    room: int


@dataclass
class CeilingDecision:
    first_refusal: int | None  # seq of the first candidate refused (None: the ceiling does not bind)
    rounds: list[Round] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # further issued seqs, resolved on the driver

    def issued(self, seq: Column, m: Column) -> Column:
        """Whether a positive candidate is issued."""
        from pyspark.sql import functions as F

        if self.first_refusal is None:
            return F.lit(True)
        condition = seq < F.lit(self.first_refusal)
        for round_ in self.rounds:
            within = (seq > F.lit(round_.after)) & (m <= F.lit(round_.room))
            if round_.before is not None:
                within = within & (seq < F.lit(round_.before))
            condition = condition | within
        if self.kept:
            condition = condition | seq.isin(self.kept)
        return condition


def _wide(column: Column) -> Column:
    return column.cast("decimal(38,0)")  # a sum of millions of amounts may pass a BIGINT


def _bucketed(frame: DataFrame, slots: int) -> DataFrame:
    from pyspark.sql import functions as F

    width = slots * BUCKET_EVENTS
    return frame.withColumn("__bucket", F.col("seq") - F.col("seq") % F.lit(width))


def bucket_totals(frame: DataFrame, slots: int) -> list[tuple[int, int, int]]:
    """(bucket, amount total, candidates) per bucket of consecutive seqs, in order: one aggregation."""
    from pyspark.sql import functions as F

    rows = (
        _bucketed(frame, slots)
        .groupBy("__bucket")
        .agg(F.sum(_wide(F.col("m"))).alias("t"), F.count("*").alias("n"))
        .orderBy("__bucket")
        .collect()
    )
    return [(int(row["__bucket"]), int(row["t"]), int(row["n"])) for row in rows]


def first_over(
    frame: DataFrame, room: int, slots: int, totals: list[tuple[int, int, int]] | None = None
) -> tuple[int, int] | None:
    """(seq of the first candidate whose running total passes `room`, total issued before it), or None when
    the whole frame (columns seq, m; positive m) fits. `totals`: the frame's bucket_totals, if known."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    running, bucket = 0, None
    for start, total, _ in totals if totals is not None else bucket_totals(frame, slots):
        if running + total > room:
            bucket = start
            break
        running += total
    if bucket is None:
        return None
    window = Window.partitionBy("__bucket").orderBy("seq").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    inside = (
        _bucketed(frame, slots)
        .where(F.col("__bucket") == F.lit(bucket))
        .withColumn("run", F.sum(_wide(F.col("m"))).over(window))
    )
    over = inside.where(F.col("run") + F.lit(running) > F.lit(room)).orderBy("seq").select("seq", "m", "run").first()
    assert over is not None
    return int(over["seq"]), running + int(over["run"]) - int(over["m"])


def _on_the_driver(frame: DataFrame, room: int) -> tuple[int | None, list[int]]:
    """(seq of the first refusal or None, the seqs issued after it) of a few candidates, resolved in order."""
    fetched = frame.orderBy("seq").toArrow()
    seqs = np.asarray(fetched.column("seq").to_numpy(), dtype=np.int64)
    amounts = np.asarray(fetched.column("m").to_numpy(), dtype=np.int64)
    count, issued_after = resolve(amounts, room)
    refusal = int(seqs[count]) if count < len(seqs) else None
    return refusal, [int(seq) for seq in seqs[issued_after]]


def decide(positive: DataFrame, room: int | None, slots: int) -> CeilingDecision:
    """The ceiling over the positive candidates (columns seq, m), `room` = ceiling - opening supply."""
    from pyspark.sql import functions as F

    if room is None:
        return CeilingDecision(None)
    frame = positive.select("seq", "m")
    totals = bucket_totals(frame, slots)
    if sum(total for _, total, _ in totals) <= room:
        return CeilingDecision(None)
    if sum(count for _, _, count in totals) <= COLLECT_LIMIT:  # few candidates: one pass on the driver
        refusal_seq, kept = _on_the_driver(frame, room)
        return CeilingDecision(refusal_seq, kept=kept)
    first = first_over(frame, room, slots, totals)  # a negative room (opening above the ceiling) refuses the first
    assert first is not None
    refusal, used = first
    decision = CeilingDecision(refusal)
    left = room - used
    after = refusal
    while left > 0:
        remaining = frame.where((F.col("seq") > F.lit(after)) & (F.col("m") <= F.lit(left)))
        if remaining.limit(COLLECT_LIMIT + 1).count() <= COLLECT_LIMIT:
            first_after, kept = _on_the_driver(remaining, left)  # up to its next refusal all are issued
            decision.rounds.append(Round(after, first_after, left))
            decision.kept = kept
            break
        nxt = first_over(remaining, left, slots)
        if nxt is None:
            decision.rounds.append(Round(after, None, left))
            break
        decision.rounds.append(Round(after, nxt[0], left))
        after, left = nxt[0], left - nxt[1]
    return decision
