"""The Spark summaries of a replay with caps, budgets, reversals or redemptions: the same totals, daily and per
customer summaries as the DuckDB engine's (rewards_lab.replay.feature_sql). The rows (issuances, reversals,
redemptions) are rewards_lab.replay.plan.outputs', on both engines.

The summaries are aggregations of the issuance rows, the reversals' rewards and the redemptions (distributed);
only their results reach the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from rewards_lab.domain.money import to_decimal
from rewards_lab.replay.reversal_actions import REVERSAL_CODES
from rewards_lab.replay.spark_features import SparkFeatures

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

Amount = Callable[["Column"], "Column"]
ISSUE_CODES = ("amount_too_large", "asset_supply_exhausted", "beneficiary_missing", "beneficiary_not_found")


def redemptions(features: SparkFeatures, amount: Amount, asset: str) -> DataFrame:
    """The redemptions in input order (`idx`), each `redeemed` or `refused`."""
    from pyspark.sql import functions as F

    found = features.part("r")
    rows = features.redemptions
    if found is not None:
        rows = rows.join(found.select("idx", "accepted"), "idx", "left")
    else:
        rows = rows.withColumn("accepted", F.lit(None).cast("boolean"))
    return rows.select(
        "idx",
        F.col("holder").alias("customer_id"),
        F.timestamp_micros(F.col("t")).alias("occurred_at"),
        F.lit(asset).alias("asset"),
        amount(F.col("amount")).alias("amount"),
        F.col("amount").alias("amount_minor"),
        F.when(F.col("accepted"), F.lit("redeemed")).otherwise(F.lit("refused")).alias("status"),
    ).orderBy("idx")


def _positive(rows: DataFrame) -> Column:
    """Issue rows that asked for something (the candidates set-based SQL counts as requested)."""
    from pyspark.sql import functions as F

    code = F.col("error_code")
    return (F.col("kind") == F.lit("issue")) & (code.isNull() | (code == F.lit("asset_supply_exhausted")))


def totals(issued_rows: DataFrame, features: SparkFeatures, decimals: int) -> dict[str, Any]:
    """The totals of rewards_lab.replay.engine.ReplayResult.totals with caps, budgets and reversals."""
    from pyspark.sql import functions as F

    wide = F.col("amount_minor").cast("decimal(38,0)")
    issue = F.col("kind") == F.lit("issue")
    codes = (*ISSUE_CODES, *REVERSAL_CODES)
    row = issued_rows.agg(
        F.sum(F.when(issue & (F.col("status") == "issued"), wide)).alias("issued"),
        F.count_if(issue & (F.col("status") == "issued")).alias("issuances"),
        F.sum(F.when(_positive(issued_rows), F.col("requested_minor").cast("decimal(38,0)"))).alias("requested"),
        F.sum(F.col("cut_minor").cast("decimal(38,0)")).alias("cut"),
        F.count_if(F.col("status") == "limited").alias("limited"),
        F.count_if(F.col("status") == "reversed").alias("reversals"),
        *(F.count_if(F.col("error_code") == code).alias(code) for code in codes),
    ).first()
    assert row is not None
    items = features.part("i")
    taken = target = 0
    if items is not None:
        sums = items.agg(F.sum("taken").alias("taken"), F.sum("target").alias("target")).first()
        taken, target = int((sums["taken"] if sums else 0) or 0), int((sums["target"] if sums else 0) or 0)
    spent = (
        redemptions(features, lambda c: c, "")
        .agg(
            F.count_if(F.col("status") == "redeemed").alias("n"),
            F.sum(F.when(F.col("status") == "redeemed", F.col("amount_minor"))).alias("amount"),
            F.count("*").alias("all"),
        )
        .first()
    )
    assert spent is not None
    counts = {code: int(row[code]) for code in codes}
    issued = int(row["issued"] or 0)

    def decimal(minor: int) -> Decimal:
        return to_decimal(minor, decimals)

    return {
        "issued": decimal(issued),
        "issuances": int(row["issuances"]),
        "failed": sum(counts.values()),
        "failed_by_code": {code: count for code, count in counts.items() if count},
        "requested": decimal(int(row["requested"] or 0)),
        "cut": decimal(int(row["cut"] or 0)),
        "limited": int(row["limited"]),
        "reversed": decimal(taken),
        "reversal_target": decimal(target),
        "shortfall": decimal(target - taken),
        "reversals": int(row["reversals"]),
        "net": decimal(issued - taken),
        "redeemed": decimal(int(spent["amount"] or 0)),
        "redemptions": int(spent["n"]),
        "redemptions_refused": int(spent["all"]) - int(spent["n"]),
    }


def daily(
    issued_rows: DataFrame,
    candidates: DataFrame,
    features: SparkFeatures,
    amount: Amount,
    asset: str,
    expired: DataFrame | None = None,
) -> Any:
    """Per UTC day and rule (rewards_lab.replay.feature_sql.daily_sql), as an Arrow table; `expired`: (day,
    rule_index, x) what expired (with expiry)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    issue = issued_rows.where(F.col("kind") == "issue")
    wide = F.col("amount_minor").cast("decimal(38,0)")
    zero = F.lit(0).cast("decimal(38,0)")
    per_day = issue.groupBy(F.to_date("occurred_at").alias("day"), "rule_index").agg(
        F.coalesce(F.sum(F.when(F.col("status") == "issued", wide)), zero).alias("issued"),
        F.count_if(F.col("status") == "issued").alias("issuances"),
        F.coalesce(F.sum(F.when(_positive(issue), F.col("requested_minor").cast("decimal(38,0)"))), zero).alias("req"),
        F.coalesce(F.sum(F.col("cut_minor").cast("decimal(38,0)")), zero).alias("cut"),
        F.count_if(F.col("status") == "limited").alias("lim"),
        zero.alias("rev"),
    )
    items = features.part("i")
    if items is not None:
        rules = candidates.select(F.col("seq").alias("reward"), "rule_index")
        days = features.actions.select("seq", "pday")
        taken = (
            items.join(days, "seq")
            .join(rules, "reward")
            .groupBy(F.date_add(F.lit("1970-01-01").cast("date"), F.col("pday")).alias("day"), "rule_index")
            .agg(F.sum(F.col("taken").cast("decimal(38,0)")).alias("rev"))
            .select(
                "day",
                "rule_index",
                *(zero.alias(c) for c in ("issued",)),
                F.lit(0).cast("long").alias("issuances"),
                zero.alias("req"),
                zero.alias("cut"),
                F.lit(0).cast("long").alias("lim"),
                "rev",
            )
        )
        per_day = per_day.unionByName(taken)
    sums, kept, column = ["issued", "issuances", "req", "cut", "lim", "rev"], F.col("rev") > 0, []
    if expired is not None:
        per_day = per_day.withColumn("xp", zero).unionByName(
            expired.select(
                "day",
                "rule_index",
                zero.alias("issued"),
                F.lit(0).cast("long").alias("issuances"),
                zero.alias("req"),
                zero.alias("cut"),
                F.lit(0).cast("long").alias("lim"),
                zero.alias("rev"),
                F.col("x").alias("xp"),
            )
        )
        sums, kept, column = [*sums, "xp"], kept | (F.col("xp") > 0), [amount(F.col("xp")).alias("expired")]
    grouped = per_day.groupBy("day", "rule_index").agg(*(F.sum(c).alias(c) for c in sums))
    window = Window.partitionBy("rule_index").orderBy("day")
    return (
        grouped.where((F.col("req") > 0) | kept)
        .select(
            "day",
            F.lit(asset).alias("asset"),
            "rule_index",
            amount(F.col("issued")).alias("issued"),
            amount(F.sum("issued").over(window)).alias("cumulative"),
            F.col("issuances").cast("long").alias("issuances"),
            amount(F.col("req")).alias("requested"),
            amount(F.col("cut")).alias("cut"),
            F.col("lim").cast("long").alias("limited"),
            amount(F.col("rev")).alias("reversed"),
            amount(F.col("issued") - F.col("rev")).alias("net"),
            amount(F.sum(F.col("issued") - F.col("rev")).over(window)).alias("net_cumulative"),
            *column,
        )
        .orderBy("day", "rule_index")
        .toArrow()
    )


def per_customer(
    issued_rows: DataFrame, features: SparkFeatures, amount: Amount, top: int | None, expired: DataFrame | None = None
) -> Any:
    """Per customer (rewards_lab.replay.feature_sql.per_customer_sql_with), as an Arrow table; `expired`:
    (customer_id, x) what expired of each customer's lots (with expiry), which the balance is net of."""
    from pyspark.sql import functions as F

    zero = F.lit(0).cast("decimal(38,0)")
    issue = issued_rows.where((F.col("kind") == "issue") & (F.col("status") == "issued"))
    parts = issue.groupBy("customer_id").agg(
        F.sum(F.col("amount_minor").cast("decimal(38,0)")).alias("issued"),
        F.count("*").alias("issuances"),
        zero.alias("rev"),
        zero.alias("red"),
    )
    items = features.part("i")
    if items is not None:
        parts = parts.unionByName(
            items.groupBy(F.col("holder").alias("customer_id")).agg(
                zero.alias("issued"),
                F.lit(0).cast("long").alias("issuances"),
                F.sum(F.col("taken").cast("decimal(38,0)")).alias("rev"),
                zero.alias("red"),
            )
        )
    spent = redemptions(features, lambda c: c, "").where(F.col("status") == "redeemed")
    parts = parts.unionByName(
        spent.groupBy("customer_id").agg(
            zero.alias("issued"),
            F.lit(0).cast("long").alias("issuances"),
            zero.alias("rev"),
            F.sum(F.col("amount_minor").cast("decimal(38,0)")).alias("red"),
        )
    )
    sums, left, column = ["issued", "issuances", "rev", "red"], F.col("issued") - F.col("rev") - F.col("red"), []
    if expired is not None:
        parts = parts.withColumn("xp", zero).unionByName(
            expired.select(
                "customer_id",
                zero.alias("issued"),
                F.lit(0).cast("long").alias("issuances"),
                zero.alias("rev"),
                zero.alias("red"),
                F.col("x").alias("xp"),
            )
        )
        sums, left, column = [*sums, "xp"], left - F.col("xp"), [amount(F.col("xp")).alias("expired")]
    grouped = parts.groupBy("customer_id").agg(*(F.sum(c).alias(c) for c in sums))
    grouped = grouped.where(F.col("issuances") > 0)
    if top is not None:
        grouped = grouped.orderBy(F.col("issued").desc(), F.col("customer_id")).limit(top)
    return grouped.select(
        "customer_id",
        amount(F.col("issued")).alias("issued"),
        F.col("issuances").cast("long").alias("issuances"),
        amount(F.col("rev")).alias("reversed"),
        amount(F.col("issued") - F.col("rev")).alias("net"),
        amount(F.col("red")).alias("redeemed"),
        amount(left).alias("balance"),
        *column,
    ).toArrow()
