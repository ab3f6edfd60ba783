"""A table of events as rows the engine evaluates one at a time (simulation, the live engine in tests).

The table has a `type` column and the event's data either as one `data` column (a dict or JSON text) or as
further columns. A null in a data column (pandas NaN/None/NA, Arrow null) means the field is missing from that
event, the way a Parquet history records "this event had no such field". Numbers keep their exact value: ints
stay ints, floats are read through their shortest repr (as JSON would have written them), decimals stay decimals.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError

META_COLUMNS = ("type", "external_event_id", "customer_id", "occurred_at")


@dataclass(frozen=True, slots=True)
class EventRow:
    type: str
    data: dict[str, Any]
    external_event_id: str | None = None
    customer_id: str | None = None
    occurred_at: datetime | None = None


def plain(value: Any) -> Any:
    """A numpy/pandas scalar as the plain Python value; a missing value (NaN, NA, NaT, None) as None."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return plain(item())
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def _data(record: Mapping[str, Any], position: int) -> dict[str, Any]:
    if "data" in record:
        raw = plain(record["data"])
        if raw is None:
            return {}
        if isinstance(raw, str | bytes):
            raw = jsonutil.loads(raw)
        if isinstance(raw, list):  # an Arrow MAP comes back as a list of (key, value) pairs
            raw = dict(raw)
        if not isinstance(raw, Mapping):
            raise ServiceError("field_invalid", f"row {position}: data must be an object", field="data")
        return {str(k): plain(v) for k, v in raw.items() if plain(v) is not None}
    return {k: plain(v) for k, v in record.items() if k not in META_COLUMNS and plain(v) is not None}


def _records(events: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(events, pd.DataFrame):
        for record in events.to_dict("records"):
            yield {str(key): value for key, value in record.items()}
    elif isinstance(events, pa.Table):
        yield from events.to_pylist()
    elif isinstance(events, Mapping):
        yield events
    else:
        yield from events


def event_rows(events: Any) -> Iterator[EventRow]:
    """Rows of a DataFrame, an Arrow table, one event dict or an iterable of event dicts."""
    for position, record in enumerate(_records(events)):
        event_type = plain(record.get("type"))
        if not isinstance(event_type, str) or not event_type:
            raise ServiceError("field_required", f"row {position}: type is required", field="type")
        external = plain(record.get("external_event_id"))
        customer = plain(record.get("customer_id"))
        yield EventRow(
            type=event_type,
            data=_data(record, position),
            external_event_id=None if external is None else str(external),
            customer_id=None if customer is None else str(customer),
            occurred_at=plain(record.get("occurred_at")),
        )
