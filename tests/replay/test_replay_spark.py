"""The Spark engine gives the DuckDB engine's issuance table row for row, from every input shape it takes
(a Parquet file, a directory or glob of part files, a Spark DataFrame), with and without a binding ceiling, with
the two-pass ceiling forced through every branch; and the CLI, the lab and sweeps run on it."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme
from rewards_lab.lab.synthetic import generate_events
from rewards_lab.replay.engine import ISSUANCE_COLUMNS, replay
from rewards_lab.replay.entry import run_replay, run_sweep
from rewards_lab.replay.plan import ceiling as plan_ceiling
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.replay.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
PROGRAMME = ROOT / "benchmarks" / "replay_programme.json"


def _with_ceiling(definition: ProgrammeDefinition, ceiling: str | None) -> ProgrammeDefinition:
    asset = definition.asset.model_copy(update={"supply_ceiling": ceiling})
    return definition.model_copy(update={"asset": asset})


def _rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Every column, occurred_at as UTC microseconds (DuckDB gives TIMESTAMPTZ, Spark a UTC timestamp)."""
    copy = frame.copy()
    copy["occurred_at"] = pd.to_datetime(copy["occurred_at"], utc=True).astype("datetime64[us, UTC]").astype("int64")
    return [tuple(row) for row in copy[list(ISSUANCE_COLUMNS)].astype(str).itertuples(index=False)]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 events of the synthetic generator (four event types, typed columns), out of order on purpose."""
    table = generate_events(3000, 200, seed=7)
    shuffled = table.take(pa.array(list(range(1500, 3000)) + list(range(1500))))
    path = tmp_path_factory.mktemp("spark") / "events.parquet"
    pq.write_table(shuffled, path)
    return path


@pytest.mark.parametrize("ceiling", [None, "500", "0.01"])
def test_spark_gives_duckdbs_rows_from_a_parquet_file(history: Path, spark: Any, ceiling: str | None) -> None:
    definition = _with_ceiling(load_programme(PROGRAMME), ceiling)
    on_spark = replay_spark(history, definition, spark=spark)
    on_duckdb = replay(history, definition)
    assert on_spark.events_processed == on_duckdb.events_processed == 3000
    expected = _rows(on_duckdb.to_pandas())
    assert _rows(on_spark.to_pandas()) == expected
    assert on_spark.totals() == on_duckdb.totals()
    if ceiling is not None:
        assert on_spark.totals()["failed_by_code"].get("asset_supply_exhausted", 0) > 0
    pd.testing.assert_frame_equal(on_spark.daily(), on_duckdb.daily(), check_dtype=False)
    top_spark, top_duckdb = on_spark.per_customer(top=5), on_duckdb.per_customer(top=5)
    assert top_spark.astype(str).values.tolist() == top_duckdb.astype(str).values.tolist()


def test_part_files_in_a_directory_or_a_glob_are_one_history_in_name_order(
    history: Path, spark: Any, tmp_path: Path
) -> None:
    """A data lake's part files: read in name order, then row order (ties in occurred_at keep that order)."""
    table = pq.read_table(history)
    lake = tmp_path / "lake"
    lake.mkdir()
    for number, start in enumerate(range(0, table.num_rows, 1000)):
        pq.write_table(table.slice(start, 1000), lake / f"part-{number:05d}.parquet")
    definition = _with_ceiling(load_programme(PROGRAMME), "800")
    expected = _rows(replay(history, definition).to_pandas())
    assert _rows(replay_spark(lake, definition, spark=spark).to_pandas()) == expected
    assert _rows(replay_spark(str(lake / "part-*.parquet"), definition, spark=spark).to_pandas()) == expected


def test_a_spark_dataframe_in_its_own_order(history: Path, spark: Any) -> None:
    definition = load_programme(PROGRAMME)
    frame = spark.createDataFrame(pq.read_table(history)).coalesce(1)
    assert _rows(replay_spark(frame, definition, spark=spark).to_pandas()) == _rows(
        replay(history, definition).to_pandas()
    )


def test_a_featured_replay_whose_pass_does_not_run_decides_the_ceiling_on_the_plan(
    history: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cap that cannot bind keeps the ordered pass from running: the ceiling is then the plan's, set-based
    (rewards_lab.replay.plan.ceiling, in chunks of one or two events after the boundary day); the rows with their
    featured columns must be DuckDB's."""
    monkeypatch.setattr(plan_ceiling, "FIRST_CHUNK", 1)
    monkeypatch.setattr(plan_ceiling, "LAST_CHUNK", 2)
    definition = _with_ceiling(load_programme(PROGRAMME), "2000")
    document = definition.model_dump(mode="json")
    document["rules"][0]["limits"] = [{"period": "lifetime", "max_count": 1_000_000}]
    definition = parse_programme(document)
    on_spark = replay_spark(history, definition, opening_supply="3", spark=spark)
    assert on_spark._features is not None and on_spark._features.outcome is None, "the pass ran"
    assert on_spark._plan.context.boundary is not None, "the ceiling did not bind"
    on_duckdb = replay(history, definition, opening_supply="3")
    assert _rows(on_spark.to_pandas()) == _rows(on_duckdb.to_pandas())
    assert on_spark.totals() == on_duckdb.totals()


def test_every_branch_of_the_plans_ceiling(history: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's ceiling (rewards_lab.replay.plan.ceiling) on Spark: the first refusal is a large amount mid-history
    with room left for later amounts, so that the events after the boundary day come by chunks of one or two
    events; the rows must be DuckDB's."""
    monkeypatch.setattr(plan_ceiling, "FIRST_CHUNK", 1)
    monkeypatch.setattr(plan_ceiling, "LAST_CHUNK", 2)
    definition = load_programme(PROGRAMME)
    issued = replay(history, definition).to_pandas()
    amounts = [int(m) for m in issued["amount_minor"]]
    middle = len(amounts) // 2
    largest = max(range(middle, len(amounts)), key=lambda j: amounts[j])
    room = sum(amounts[:largest]) + amounts[largest] - 1  # refused: the amount at `largest`, with room for most after
    ceiling = format(Decimal(room).scaleb(-definition.asset.decimals), "f")
    definition = _with_ceiling(definition, ceiling)
    on_spark = replay_spark(history, definition, spark=spark)
    assert on_spark._plan is not None and on_spark._plan.context.boundary is not None
    kept = spark.table(f"{on_spark._plan.context.prefix}_kept")
    assert kept.where(f"day > {on_spark._plan.context.boundary}").count() > 1, "one chunk was enough"
    assert _rows(on_spark.to_pandas()) == _rows(replay(history, definition).to_pandas())


def test_an_opening_supply_above_the_ceiling_refuses_everything(history: Path, spark: Any) -> None:
    definition = _with_ceiling(load_programme(PROGRAMME), "10")
    on_spark = replay_spark(history, definition, opening_supply="11", spark=spark)
    assert on_spark.totals()["issuances"] == 0
    assert _rows(on_spark.to_pandas()) == _rows(replay(history, definition, opening_supply="11").to_pandas())


def test_sweeps_on_spark_equal_duckdbs(history: Path, spark: Any) -> None:
    definition = _with_ceiling(load_programme(PROGRAMME), "3000")
    grid = {"rules[0].actions[0].amount.rate": [0.05, 0.2], "asset.supply_ceiling": ["3000", None]}
    on_duckdb = sweep(history, definition, grid)
    on_spark = run_sweep(history, definition, grid, engine="spark")
    columns = ["issued", "issuances", "failed", "liability", "exhausted_on"]
    assert on_spark[columns].astype(str).values.tolist() == on_duckdb[columns].astype(str).values.tolist()
    assert on_spark["exhausted_on"].notna().any()


def test_the_engine_is_checked(history: Path) -> None:
    with pytest.raises(ServiceError) as error:
        run_replay(history, PROGRAMME, engine="postgres")
    assert error.value.code == "field_invalid" and error.value.details["field"] == "engine"


def test_spark_reads_parquet_not_csv(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "events.csv"
    path.write_text("external_event_id,type,customer_id,occurred_at\n")
    with pytest.raises(ServiceError) as error:
        replay_spark(path, PROGRAMME, spark=spark)
    assert error.value.code == "field_invalid" and "Parquet" in error.value.message
    with pytest.raises(ServiceError) as missing:
        replay_spark(tmp_path / "nothing-*.parquet", PROGRAMME, spark=spark)
    assert missing.value.code == "field_invalid"


def test_the_cli_replays_on_spark_into_part_files(
    history: Path, tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rewards-lab replay --engine spark`, in this process: it uses the active session, as under spark-submit
    (a local session of its own is what `make bench-replay` starts)."""
    out = tmp_path / "issuances.parquet"
    command = ["replay", str(history), "--programme", str(PROGRAMME), "--out", str(out), "--engine", "spark"]
    assert main(command) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["engine"] == "spark" and out.is_dir()
    written = pq.read_table(out).to_pandas().sort_values("seq", ignore_index=True)
    expected = replay(history, PROGRAMME)
    assert _rows(written) == _rows(expected.to_pandas())
    assert summary["issuances"] == expected.totals()["issuances"]
    assert Decimal(summary["issued"]) == expected.totals()["issued"]
    shutil.rmtree(out)


def test_the_lab_replays_a_programme_on_spark(history: Path, spark: Any, tmp_path: Path) -> None:
    from rewards_lab.lab.workbench import Lab

    lab = Lab(tmp_path / "lab.duckdb")
    try:
        programme = lab.load(PROGRAMME)
        on_spark = programme.replay(history, version="draft", engine="spark")
        on_duckdb = programme.replay(history, version="draft")
        assert _rows(on_spark.to_pandas()) == _rows(on_duckdb.to_pandas())
    finally:
        lab.close()


def test_an_event_without_occurred_at_is_refused(history: Path, spark: Any) -> None:
    table = pq.read_table(history).slice(0, 50)
    times = table.column("occurred_at").to_pylist()
    times[7] = None
    broken = table.set_column(
        table.schema.get_field_index("occurred_at"),
        "occurred_at",
        pa.array(times, table.schema.field("occurred_at").type),
    )
    with pytest.raises(ServiceError) as error:
        replay_spark(broken, PROGRAMME, spark=spark)
    assert error.value.code == "field_required" and error.value.details["field"] == "occurred_at"


@pytest.mark.parametrize("shape", ["struct", "map"])
def test_a_data_column_as_a_struct_or_a_map(spark: Any, shape: str) -> None:
    """The data as one STRUCT column (typed fields, read in SQL) or a MAP (read as JSON, evaluated in Python)."""
    definition = load_programme(ROOT / "data" / "programmes" / "spring_launch.json")
    events = generate_events(400, 40, seed=3)
    names = [n for n in events.column_names if n not in ("external_event_id", "type", "customer_id", "occurred_at")]
    if shape == "struct":
        data = pa.StructArray.from_arrays([events.column(n).combine_chunks() for n in names], names=names)
    else:
        rows = [
            {k: float(v) for k, v in zip(names, values, strict=True) if v is not None}
            for values in zip(*(events.column(n).to_pylist() for n in names), strict=True)
        ]
        data = pa.array([list(row.items()) for row in rows], pa.map_(pa.string(), pa.float64()))
    table = events.select(["external_event_id", "type", "customer_id", "occurred_at"]).append_column("data", data)
    on_spark = replay_spark(table, definition, spark=spark)
    assert _rows(on_spark.to_pandas()) == _rows(replay(table, definition).to_pandas())
    assert (on_spark.python_rows > 0) == (shape == "map")
