"""The two replay executors behind one interface (replay.engines): the same calls give the same rows on DuckDB and
on Spark, `map_partitions` by key hands each call whole keys in order, and writes keep the order asked for."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp, parse_one

from rewards_lab.replay.engines.base import CSV_CELLS, INPUT, POS, Executor, render
from rewards_lab.replay.engines.duckdb import DuckDBExecutor

RUNNING = pa.schema(
    [("k", pa.int64()), ("t", pa.int64()), ("total", pa.int64()), ("call", pa.string()), ("at", pa.int64())]
)


@dataclass(frozen=True)
class RunningTotal:
    """An ordered pass: the running total of `v` per key `k` in the order rows come, with which call saw each row
    and where in that call (picklable for Spark: a top-level dataclass)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        call, at, totals = uuid.uuid4().hex, 0, dict[int, int]()
        for batch in batches:
            rows: dict[str, list[Any]] = {name: [] for name in RUNNING.names}
            for k, t, v in zip(*(batch.column(n).to_pylist() for n in ("k", "t", "v")), strict=True):
                totals[k] = totals.get(k, 0) + v
                for name, value in zip(RUNNING.names, (k, t, totals[k], call, at), strict=True):
                    rows[name].append(value)
                at += 1
            yield pa.RecordBatch.from_pydict(rows, RUNNING)


@pytest.fixture(params=["duckdb", "duckdb-processes", "spark"])
def executor(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Executor[Any]]:
    made: Executor[Any]
    if request.param == "spark":
        from rewards_lab.replay.engines.spark import SparkExecutor

        made = SparkExecutor(request.getfixturevalue("spark"))
    elif request.param == "duckdb-processes":  # map_partitions by key in two worker processes from 100 rows
        made = DuckDBExecutor(spill=tmp_path, memory_limit="256MB", workers=2, worker_rows=100)
    else:
        made = DuckDBExecutor(spill=tmp_path, memory_limit="256MB")
    yield made
    made.close()


def _rows() -> pa.Table:
    """400 rows over 37 keys, shuffled: key, time (ties within a key), value."""
    generator = np.random.default_rng(3)
    k = generator.integers(0, 37, 400)
    t = generator.integers(0, 50, 400) * 1000 + np.arange(400)  # distinct within the table: a total order
    return pa.table({"k": k.astype(np.int64), "t": t.astype(np.int64), "v": generator.integers(1, 9, 400)})


def test_map_partitions_by_key_sees_whole_keys_in_order(executor: Executor[Any]) -> None:
    executor.register("rows", _rows())
    executor.map_partitions("running", "SELECT k, t, v FROM rows", RunningTotal(), RUNNING, key=["k"], order=["t"])
    out = executor.fetch("SELECT * FROM running").to_pandas()
    assert len(out) == 400
    for _, rows in out.groupby("k"):
        assert rows["call"].nunique() == 1  # a key is never split between calls
        rows = rows.sort_values("at")
        assert list(rows["at"]) == list(range(rows["at"].min(), rows["at"].min() + len(rows)))  # contiguous
        assert rows["t"].is_monotonic_increasing
    expected = _rows().to_pandas().sort_values(["k", "t"])
    expected["total"] = expected.groupby("k")["v"].cumsum()
    got = out.sort_values(["k", "t"])
    assert list(got["total"]) == list(expected["total"])


def test_map_partitions_without_a_key_maps_every_row(executor: Executor[Any]) -> None:
    executor.register("rows", _rows())
    executor.map_partitions("mapped", parse_one("SELECT 0 AS k, t, v FROM rows"), RunningTotal(), RUNNING)
    (total,) = executor.fetch("SELECT count(*) AS n FROM mapped").column(0).to_pylist()
    assert total == 400


def test_register_create_fetch_round_trip(executor: Executor[Any]) -> None:
    data = _rows()
    executor.register("rows", data)
    executor.create("stored", "SELECT k, sum(v) AS s FROM rows GROUP BY k", stored=True)
    tree = exp.select("k", "s").from_("stored").where(exp.LT(this=exp.column("k"), expression=exp.Literal.number(5)))
    executor.create("viewed", tree, stored=False)
    got = executor.fetch("SELECT * FROM viewed ORDER BY k").to_pandas()
    expected = data.to_pandas().groupby("k", as_index=False)["v"].sum().query("k < 5")
    assert got["k"].tolist() == expected["k"].tolist()
    assert got["s"].tolist() == expected["v"].tolist()
    relation = executor.relation("stored")
    assert executor.fetch("SELECT count(*) AS n FROM stored").column(0).to_pylist() == [37]
    assert relation is not None


def test_stream_is_ordered_and_bounded(executor: Executor[Any]) -> None:
    executor.register("rows", _rows())
    batches = list(executor.stream("SELECT t, k FROM rows", order=["t"], batch_rows=64))
    assert all(batch.num_rows <= 64 for batch in batches)
    times = [t for batch in batches for t in batch.column("t").to_pylist()]
    assert times == sorted(_rows().column("t").to_pylist())


def test_write_keeps_order(executor: Executor[Any], tmp_path: Path) -> None:
    executor.register("rows", _rows())
    out = executor.write("SELECT t AS seq, k FROM rows", tmp_path / "out.parquet")
    written = pq.read_table(out).column("seq").to_pylist()
    assert written == sorted(_rows().column("t").to_pylist())


def _events() -> pd.DataFrame:
    start = datetime(2025, 3, 1, tzinfo=UTC)
    times = [start + timedelta(minutes=m) for m in (5, 1, 3, 1, 0, 3)]  # out of order, with ties
    return pd.DataFrame(
        {
            "external_event_id": [f"e{i}" for i in range(6)],
            "type": ["purchase"] * 6,
            "customer_id": ["c1", "c2", "c1", "c3", "c2", "c1"],
            "occurred_at": pd.Series(times).astype("datetime64[us, UTC]"),
            "amount": [10, 20, 30, 40, 50, 60],
        }
    )


@pytest.mark.parametrize("as_file", [False, True])
def test_load_numbers_events_in_processing_order(executor: Executor[Any], tmp_path: Path, as_file: bool) -> None:
    events: object = _events()
    if as_file:
        events = tmp_path / "events.parquet"
        pq.write_table(pa.Table.from_pandas(_events(), preserve_index=False), events)
    loaded = executor.load("events", events, kind="events")
    assert INPUT in loaded.schema.names
    assert executor.number("ordered", "events") == 6
    got = executor.fetch(f"SELECT external_event_id, {POS} FROM ordered ORDER BY {POS}").to_pandas()
    # by time, ties by input order: 0:e4, 1:e1, 1:e3, 3:e2, 3:e5, 5:e0
    assert got["external_event_id"].tolist() == ["e4", "e1", "e3", "e2", "e5", "e0"]
    assert got[POS].tolist() == list(range(6))


def test_render_passes_text_and_renders_trees() -> None:
    assert render("SELECT 1", "spark") == "SELECT 1"
    tree = parse_one("SELECT a FROM t", read="duckdb")
    assert render(tree, "duckdb") == render(tree, "spark") == "SELECT a FROM t"


def test_duckdb_loads_csv_events_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    _events().to_csv(path, index=False)
    executor = DuckDBExecutor()
    try:
        loaded = executor.load("events", path, kind="events")
        assert loaded.rows == 6
        assert (loaded.schema.metadata or {}).get(CSV_CELLS) == b"true"
        assert executor.number("ordered", "events") == 6
        got = executor.fetch(f"SELECT external_event_id FROM ordered ORDER BY {POS}").column(0).to_pylist()
        assert got == ["e4", "e1", "e3", "e2", "e5", "e0"]
    finally:
        executor.close()


def test_spark_numbers_parquet_files_in_name_order(spark: Any, tmp_path: Path) -> None:
    """Ties across files: the file first in name order first, then the row within its file."""
    from rewards_lab.replay.engines.spark import SparkExecutor

    events = pa.Table.from_pandas(_events(), preserve_index=False)
    (tmp_path / "in").mkdir()
    pq.write_table(events.slice(3), tmp_path / "in" / "a.parquet")  # e3 (1 min), e4 (0), e5 (3)
    pq.write_table(events.slice(0, 3), tmp_path / "in" / "b.parquet")  # e0 (5), e1 (1), e2 (3)
    executor = SparkExecutor(spark)
    try:
        executor.load("events", tmp_path / "in", kind="events")
        assert executor.number("ordered", "events") == 6
        got = executor.fetch(f"SELECT external_event_id FROM ordered ORDER BY {POS}").column(0).to_pylist()
        assert got == ["e4", "e3", "e1", "e5", "e2", "e0"]
    finally:
        executor.close()


def test_spark_loads_a_dataframe_and_keeps_json_columns_marked(spark: Any) -> None:
    from rewards_lab.replay.engines.spark import SparkExecutor

    events = _events().assign(basket=[{"sku": i} for i in range(6)])  # an object column: JSON text
    executor = SparkExecutor(spark)
    try:
        loaded = executor.load("events", spark.createDataFrame(_events()), kind="events")
        assert INPUT in loaded.schema.names
        assert executor.number("ordered", "events") == 6
        marked = executor.load("marked", events, kind="events")
        assert b"basket" in (marked.schema.metadata or {}).get(b"replay_json_columns", b"")
    finally:
        executor.close()
