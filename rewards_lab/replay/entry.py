"""Which engine runs a replay or a sweep: DuckDB on this machine (the default) or Spark (local or a cluster)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.replay.engine import ReplayResult, replay
from rewards_lab.replay.sweep import sweep

if TYPE_CHECKING:
    from rewards_lab.replay.spark_engine import SparkReplayResult

Engine = Literal["duckdb", "spark"]
ENGINES: tuple[Engine, ...] = ("duckdb", "spark")


def _checked(engine: str) -> Engine:
    if engine not in ENGINES:
        raise ServiceError(
            "field_invalid", f"engine must be one of {', '.join(ENGINES)}, not {engine!r}", field="engine"
        )
    if engine == "spark":
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise ServiceError(
                "field_invalid", "the Spark engine needs PySpark: pip install 'rewards_lab[spark]'", field="engine"
            ) from None
    return "spark" if engine == "spark" else "duckdb"


def run_replay(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    *,
    engine: str = "duckdb",
    opening_supply: Decimal | int | str = 0,
    customers: Any = None,
    redemptions: Any = None,
    **options: Any,
) -> ReplayResult | SparkReplayResult:
    """Replay on the chosen engine; both give the same issuance table (docs/replay.md). `customers`: the
    customers table rules read (customer.*) and beneficiaries resolve in (None: none). `redemptions`: what
    customers spent, for clawbacks (rewards_lab.replay.redemptions; None: nothing). `options` go to the
    engine: `progress` to both, `connection` to DuckDB's, `spark` (a session) to Spark's."""
    if _checked(engine) == "spark":
        from rewards_lab.replay.spark_engine import replay_spark

        return replay_spark(
            events, programme, opening_supply=opening_supply, customers=customers, redemptions=redemptions, **options
        )
    return replay(
        events, programme, opening_supply=opening_supply, customers=customers, redemptions=redemptions, **options
    )


def run_sweep(
    events: Any,
    programme: ProgrammeDefinition | str | Path,
    grid: dict[str, Any],
    *,
    engine: str = "duckdb",
    opening_supply: Decimal | int | str = 0,
    customers: Any = None,
) -> pd.DataFrame:
    """A sweep on the chosen engine; both give the same frame."""
    if _checked(engine) == "spark":
        from rewards_lab.replay.spark_sweep import sweep_spark

        return sweep_spark(events, programme, grid, opening_supply=opening_supply, customers=customers)
    return sweep(events, programme, grid, opening_supply=opening_supply, customers=customers)
