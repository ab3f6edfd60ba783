"""The optional redemptions of a replay: what customers spent, so that clawbacks meet the balances they would have.

A row is (customer_id, amount, occurred_at): the customer (an id or an external id, resolved like an event's
customer), an amount of the programme's asset (a decimal string or an exact number) and when it was spent. A
redemption at time t is processed after every event with occurred_at <= t (and before refunds that wait for an
original after t); several at one point in time order, ties in input order. Like the ledger, a redemption the customer's
replayed balance cannot cover is refused and spends nothing. Without redemptions, nothing was spent.

Accepted: a .parquet, .csv or .jsonl path, a pandas DataFrame or an Arrow table (the Spark engine also takes a
Spark DataFrame, collected: redemptions are few next to events).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.money import parse_amount
from rewards_lab.domain.processing_order import time_positions

COLUMNS = ("customer_id", "amount", "occurred_at")
SCHEMA = pa.schema(
    [
        ("idx", pa.int64()),
        ("customer_id", pa.string()),
        ("amount_minor", pa.int64()),
        ("t", pa.int64()),  # occurred_at, epoch microseconds
        ("rank", pa.int64()),  # place in processing order among the redemptions: by time, ties in input order
    ]
)


def _refuse(message: str, field: str = "redemptions") -> ServiceError:
    return ServiceError("field_invalid", f"redemptions: {message}", field=field)


def _frame(redemptions: Any) -> pd.DataFrame:
    if isinstance(redemptions, pd.DataFrame):
        frame: pd.DataFrame = redemptions
        return frame
    if isinstance(redemptions, pa.Table):  # decimals stay exact: Decimal values, not floats
        converted: pd.DataFrame = redemptions.to_pandas(
            types_mapper=lambda t: pd.ArrowDtype(t) if pa.types.is_decimal(t) else None
        )
        return converted
    if isinstance(redemptions, str | Path):
        path = Path(redemptions)
        if not path.exists():
            raise _refuse(f"{path}: no such file")
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            return _frame(pq.read_table(path))
        if suffix == ".csv":
            try:
                return pd.read_csv(path, dtype=str, keep_default_na=False)
            except pd.errors.EmptyDataError:  # no header either: refused below, for the columns it lacks
                return pd.DataFrame()
        if suffix in (".jsonl", ".ndjson", ".json"):
            lines = path.read_text(encoding="utf-8").splitlines()
            return pd.DataFrame([jsonutil.loads(line) for line in lines if line.strip()], columns=list(COLUMNS))
        raise _refuse(f"{path}: must be .parquet, .csv or .jsonl")
    raise _refuse("must be a path, a DataFrame or a pyarrow Table")


def _instant(value: Any) -> int:
    """Epoch microseconds of a time (a naive one is UTC, as events' are)."""
    if value is None or pd.isna(value):
        raise _refuse("every redemption needs an occurred_at", "redemptions.occurred_at")
    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1000)


def _amount(value: Any, decimals: int) -> int:
    if isinstance(value, bool) or value is None:
        raise _refuse("every redemption needs an amount", "redemptions.amount")
    text = format(value, "f") if isinstance(value, Decimal) else str(value)
    return parse_amount(text, decimals, "redemptions.amount")


def redemptions_table(redemptions: Any, decimals: int) -> pa.Table:
    """The redemptions as SCHEMA rows in input order (amounts in minor units of the asset), validated."""
    frame = _frame(redemptions)
    absent = [name for name in COLUMNS if name not in frame.columns]
    if absent:
        raise ServiceError(
            "field_required", f"redemptions need the column(s) {', '.join(absent)}", field=f"redemptions.{absent[0]}"
        )
    customers = frame["customer_id"].tolist()
    if any(not isinstance(c, str) or not c for c in customers):
        raise _refuse("every redemption needs a customer_id (a non-empty string)", "redemptions.customer_id")
    amounts = [_amount(value, decimals) for value in frame["amount"].tolist()]
    times = [_instant(value) for value in frame["occurred_at"].tolist()]
    ranks = time_positions(np.asarray(times, dtype=np.int64))
    return pa.table(
        {
            "idx": pa.array(range(len(customers)), pa.int64()),
            "customer_id": pa.array(customers, pa.string()),
            "amount_minor": pa.array(amounts, pa.int64()),
            "t": pa.array(times, pa.int64()),
            "rank": pa.array(ranks, pa.int64()),
        },
        schema=SCHEMA,
    )
