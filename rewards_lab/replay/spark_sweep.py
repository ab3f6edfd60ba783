"""Sweeps on Spark: every grid point replayed over the events ordered once (rewards_lab.replay.spark_engine),
with the same frame as the DuckDB sweep (rewards_lab.replay.sweep)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.replay.engine import definition_of, parse_supply
from rewards_lab.replay.spark_customers import open_spark_customers
from rewards_lab.replay.spark_engine import replay_ordered, spark_session, with_positions
from rewards_lab.replay.spark_inputs import open_spark_events
from rewards_lab.replay.sweep import grid_points, point_row, sweep_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def sweep_spark(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    grid: dict[str, Sequence[Any]],
    *,
    opening_supply: Decimal | int | str = 0,
    spark: SparkSession | None = None,
    customers: Any = None,
) -> pd.DataFrame:
    """One row per grid point, as rewards_lab.replay.sweep.sweep, computed on Spark."""
    from pyspark import StorageLevel

    started = time.perf_counter()
    keys, points, definitions = grid_points(definition_of(programme), grid)
    session = spark if spark is not None else spark_session()
    source = open_spark_events(session, events)
    if customers is not None:
        source.customers = open_spark_customers(session, customers)
    ordered, count = with_positions(source.frame)
    ordered = ordered.persist(StorageLevel.MEMORY_AND_DISK)
    rows = []
    for point, definition in zip(points, definitions, strict=True):
        result = replay_ordered(definition, source, ordered, count, opening_supply, started)
        totals = result.totals()
        decimals = definition.asset.decimals
        issued_minor = int(Decimal(totals["issued"]).scaleb(decimals))
        opening = parse_supply(opening_supply, decimals)
        values = dict(zip(keys, point, strict=True))
        counts = (int(totals["issuances"]), int(totals["failed"]))
        reversed_minor = int(Decimal(totals.get("reversed", 0)).scaleb(decimals))
        reversed_minor += int(Decimal(totals.get("expired", 0)).scaleb(decimals))  # out of the liability alike
        rows.append(point_row(values, decimals, issued_minor, counts, opening, result.exhausted_on(), reversed_minor))
        result.release()
    ordered.unpersist()
    return sweep_frame(keys, rows, started)
