"""Expiry on Spark (issue 19; the DuckDB engine's rewards_lab.replay.expiry_store): when each reward's lot expires,
the lots of the replay and what expired, as DataFrames.

The expiry of a lot issued at an event is a column of the event (`after_days`: its time plus the days; `at_end_of`:
a lookup of its local month, `domain.expiry.month_index` over the columns, in a map of the history's months,
computed on the driver by `domain.expiry.month_end` from the distinct months, a few numbers). Customers whose lots
the sequential pass keeps (`lotted`) have the pass's lots (`kind` l of its outcome); every other customer's issued
rewards are one lot each, expired whole when due by `as_of` (closed form, distributed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rewards_lab.domain.expiry import month_index
from rewards_lab.replay.expiry_plan import ExpiryPlan, until

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Amount = Callable[["Column"], "Column"]


@dataclass
class SparkExpiry:
    """A Spark replay's expiry: the plan (with `as_of`), the month map's values, and what the result reads."""

    plan: ExpiryPlan
    ends: dict[int, int]  # local month index -> expiry (epoch microseconds); empty for `after_days`

    def expires(self, occurred_at: Column) -> Column:
        """The expiry (epoch microseconds) of a lot issued at `occurred_at` (a timestamp column)."""
        from pyspark.sql import functions as F

        micros = F.unix_micros(occurred_at)
        after = self.plan.policy.after_us
        if after is not None:
            return micros + F.lit(after)
        local = F.from_utc_timestamp(occurred_at, self.plan.zone)
        month = month_index(F.year(local), F.month(local))
        pairs = [value for key, end in sorted(self.ends.items()) for value in (F.lit(key), F.lit(end))]
        return F.element_at(F.create_map(*pairs), month.cast("long")).cast("long")


def spark_expiry(plan: ExpiryPlan, events: DataFrame, as_of: object, redemptions_last: int | None) -> SparkExpiry:
    """The expiry of a replay over `events` (its `as_of` resolved against the history's last moment)."""
    from pyspark.sql import functions as F

    last_row = events.agg(F.max(F.unix_micros("occurred_at"))).first()
    moments = [int(last_row[0])] if last_row is not None and last_row[0] is not None else []
    if redemptions_last is not None:
        moments.append(redemptions_last)
    resolved = until(plan, as_of, max(moments) if moments else None)
    if plan.policy.after_days is not None:
        return SparkExpiry(resolved, {})
    local = F.from_utc_timestamp(F.col("occurred_at"), plan.zone)
    months = events.select(month_index(F.year(local), F.month(local)).alias("m")).distinct().collect()
    return SparkExpiry(resolved, plan.month_ends(int(row["m"]) for row in months if row["m"] is not None))


def lot_rows(
    issued: DataFrame, expiry: SparkExpiry, lotted: DataFrame | None, pass_lots: DataFrame | None
) -> DataFrame:
    """(seq, holder, issued, expires, amount, remaining, expired): the closed-form lots of the issued rewards
    (`issued`: seq, customer_id, occurred_at, amount_minor) of customers not `lotted`, and the pass's lots."""
    from pyspark.sql import functions as F

    rows = issued
    if lotted is not None:
        rows = rows.join(lotted.select(F.col("holder").alias("customer_id")), "customer_id", "left_anti")
    expires = F.col("expires")
    due = expires <= F.lit(expiry.plan.as_of)
    closed = (
        rows.select(
            "seq",
            F.col("customer_id").alias("holder"),
            F.unix_micros("occurred_at").alias("issued"),
            expiry.expires(F.col("occurred_at")).alias("expires"),
            F.col("amount_minor").cast("long").alias("amount"),
        )
        .withColumn("remaining", F.when(due, F.lit(0)).otherwise(F.col("amount")).cast("long"))
        .withColumn("expired", F.when(due, F.col("amount")).otherwise(F.lit(0)).cast("long"))
    )
    if pass_lots is None:
        return closed
    kept = pass_lots.select(
        "seq",
        "holder",
        F.col("lot_issued").alias("issued"),
        F.col("lot_expires").alias("expires"),
        F.col("lot_amount").alias("amount"),
        F.col("lot_remaining").alias("remaining"),
        F.col("lot_expired").alias("expired"),
    )
    return closed.unionByName(kept)


def lots_frame(lots: DataFrame, amount: Amount, asset: str) -> DataFrame:
    """Every lot, as the DuckDB result's `lots` (rewards_lab.replay.engine.LOT_COLUMNS), by customer then FIFO."""
    from pyspark.sql import functions as F

    return lots.orderBy("holder", "issued", "seq").select(
        F.col("holder").alias("customer_id"),
        F.lit(asset).alias("asset"),
        "seq",
        F.timestamp_micros("issued").alias("issued_at"),
        F.timestamp_micros("expires").alias("expires_at"),
        amount(F.col("amount")).alias("amount"),
        F.col("amount").alias("amount_minor"),
        amount(F.col("remaining")).alias("remaining"),
        F.col("remaining").alias("remaining_minor"),
        amount(F.col("expired")).alias("expired"),
        F.col("expired").alias("expired_minor"),
    )


def expired_frame(lots: DataFrame, amount: Amount, asset: str) -> DataFrame:
    """Every lot that expired by `as_of`, as the DuckDB result's `expired`, in the order of their expiry."""
    from pyspark.sql import functions as F

    return (
        lots.where(F.col("expired") > 0)
        .orderBy("expires", "holder", "issued", "seq")
        .select(
            F.col("holder").alias("customer_id"),
            F.lit(asset).alias("asset"),
            "seq",
            F.timestamp_micros("issued").alias("issued_at"),
            F.timestamp_micros("expires").alias("expires_at"),
            amount(F.col("expired")).alias("amount"),
            F.col("expired").alias("amount_minor"),
        )
    )


def expired_per_day(lots: DataFrame, rule_of_slot: Callable[[Column], Column], slots: int) -> DataFrame:
    """(day, rule_index, x): what expired per UTC day and rule of the reward that made the lot."""
    from pyspark.sql import functions as F

    return (
        lots.where(F.col("expired") > 0)
        .groupBy(
            F.to_date(F.timestamp_micros("expires")).alias("day"),
            rule_of_slot(F.col("seq") % F.lit(slots)).alias("rule_index"),
        )
        .agg(F.sum(F.col("expired").cast("decimal(38,0)")).alias("x"))
    )


def expired_per_holder(lots: DataFrame) -> DataFrame:
    """(customer_id, x): what expired of each customer's lots."""
    from pyspark.sql import functions as F

    return (
        lots.where(F.col("expired") > 0)
        .groupBy(F.col("holder").alias("customer_id"))
        .agg(F.sum(F.col("expired").cast("decimal(38,0)")).alias("x"))
    )
