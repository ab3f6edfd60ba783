"""A stored replay's issuance rows, read or written in processing order within DuckDB's memory limit.

The rows are taken one range of event positions at a time, each range sorted by `seq` by DuckDB (a sort that
spills to the connection's temp_directory when it must) and streamed out of it: never fetched whole into a
result DuckDB holds in memory (`to_arrow_table` of a million events' rows did not fit the CLI's 1 GB limit,
issue 27), never sorted all at once (one ORDER BY over the 25.8M rows of the 10M-event benchmark took 2.5x as
long as ten ranges).

While they are read, DuckDB's `build_side_probe_side` optimizer is off: it estimates the unnested issuance rows
at a few thousand where there are millions, and so builds the hash table of the LEFT JOIN with a featured
replay's few decisions on the issuance rows instead (that table did not fit either). The setting is the
connection's previous one again once each range is read.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract.errors import ServiceError
from rewards_lab.replay.inputs import literal

RANGE_EVENTS = 1_000_000  # events per range of issuance rows, at most; fewer under a memory limit below 1 GB
BYTES_PER_EVENT = 1_000  # of the memory limit, per event of a range (a range's sort and joins need about half)
MIN_RANGE_EVENTS = 10_000
_UNITS = {"": 1, "B": 1, "BYTES": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS |= {"KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}
BATCH_ROWS = 100_000  # rows per Arrow batch streamed out of DuckDB
FORMATS = {".parquet": "FORMAT PARQUET", ".csv": "FORMAT CSV"}
_OPTIMIZER = "build_side_probe_side"

Query = Callable[[tuple[int, int]], str]  # SQL of the issuance rows of the events in [from, to)


def output_path(path: str | Path) -> Path:
    """The file to write, refused unless .parquet or .csv."""
    target = Path(path)
    if target.suffix.lower() not in FORMATS:
        raise ServiceError("field_invalid", f"{target}: the output must be .parquet or .csv", field="out")
    return target


@contextmanager
def _planned(con: duckdb.DuckDBPyConnection, preserve_order: bool = False) -> Iterator[None]:
    """The settings the ranges are planned and run with; the connection's own again afterwards."""
    (disabled, preserve) = con.sql(
        "SELECT current_setting('disabled_optimizers'), current_setting('preserve_insertion_order')"
    ).fetchall()[0]
    names = [name.strip() for name in str(disabled or "").split(",") if name.strip()]
    con.execute(f"SET disabled_optimizers = {literal(','.join([*names, _OPTIMIZER]))}")
    if preserve_order:  # a COPY of sorted rows writes them in that order only if it preserves it
        con.execute("SET preserve_insertion_order = true")
    try:
        yield
    finally:
        con.execute(f"SET disabled_optimizers = {literal(','.join(names))}")
        con.execute(f"SET preserve_insertion_order = {'true' if preserve else 'false'}")


def range_events(con: duckdb.DuckDBPyConnection) -> int:
    """Events per range: RANGE_EVENTS under DuckDB's 1 GB, proportionally fewer under a smaller limit (a range's
    rows are sorted, and its events joined, within the limit: the need grows with the range, not the history)."""
    (text,) = con.sql("SELECT current_setting('memory_limit')").fetchall()[0]
    number, _, unit = str(text).strip().partition(" ")
    try:
        limit = float(number) * _UNITS[unit.strip().upper()]
    except (ValueError, KeyError):
        return RANGE_EVENTS
    return max(MIN_RANGE_EVENTS, min(RANGE_EVENTS, int(limit // BYTES_PER_EVENT)))


def _ranges(con: duckdb.DuckDBPyConnection, events: int) -> Iterator[tuple[int, int]]:
    step = range_events(con)
    for low in range(0, max(events, 1), step):
        yield low, low + step


def tables(con: duckdb.DuckDBPyConnection, query: Query, events: int) -> Iterator[pa.Table]:
    """The issuance rows in processing order, one Arrow table per range of events (the caller may run other
    queries on `con` between them)."""
    for positions in _ranges(con, events):
        with _planned(con):
            table = con.sql(f"{query(positions)} ORDER BY seq").to_arrow_reader(BATCH_ROWS).read_all()
        yield table


def write(con: duckdb.DuckDBPyConnection, query: Query, events: int, path: str | Path) -> Path:
    """Write the issuance rows in processing order to `path` (.parquet, or .csv with a header)."""
    target = output_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix.lower() == ".parquet":
        _write_parquet(con, query, events, target)
    else:
        _write_csv(con, query, events, target)
    return target


def _write_parquet(con: duckdb.DuckDBPyConnection, query: Query, events: int, target: Path) -> None:
    writer: pq.ParquetWriter | None = None
    try:
        with _planned(con):  # nothing else runs on `con` while a range streams out of it
            for positions in _ranges(con, events):
                reader = con.sql(f"{query(positions)} ORDER BY seq").to_arrow_reader(BATCH_ROWS)
                for batch in reader:
                    writer = writer or pq.ParquetWriter(target, batch.schema)
                    writer.write_batch(batch)
                if writer is None:  # no rows yet: the file still gets the columns
                    writer = pq.ParquetWriter(target, reader.schema)
    finally:
        if writer is not None:
            writer.close()


def _write_csv(con: duckdb.DuckDBPyConnection, query: Query, events: int, target: Path) -> None:
    """Each range is written by DuckDB's own CSV writer (the header with the first), the parts appended."""
    part = target.with_name(f".{target.name}.part")
    try:
        with target.open("wb") as out, _planned(con, preserve_order=True):
            for number, positions in enumerate(_ranges(con, events)):
                header = "true" if number == 0 else "false"
                con.execute(
                    f"COPY ({query(positions)} ORDER BY seq) TO {literal(str(part))} (FORMAT CSV, HEADER {header})"
                )
                with part.open("rb") as written:
                    shutil.copyfileobj(written, out)
    finally:
        part.unlink(missing_ok=True)
