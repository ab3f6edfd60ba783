"""The DuckDB executor: the replay plan's steps on one DuckDB connection, spilling beside the output.

`map_partitions` runs in this process (the query's rows in (key, order) through the function, its batches
written to a Parquet file in the spill directory, read back as the table) or, with a key and at least
`worker_rows` rows, in worker processes: the rows split by a hash of the key into sorted Parquet files, each run
by a `forkserver` process (never fork a process holding a DuckDB connection) into its own output file.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.processing_order import time_positions
from rewards_lab.replay.engine import quiet_connection
from rewards_lab.replay.engines.base import (
    CSV_CELLS,
    INPUT,
    POS,
    BatchFunction,
    EngineName,
    Loaded,
    Query,
    SourceKind,
    render,
)
from rewards_lab.replay.inputs import literal, quote, read_events
from rewards_lab.replay.order import never_decreases
from rewards_lab.replay.to_file import connection

READ_BATCH = 65_536  # rows per Arrow batch read by a pass
WORKER_ROWS = 200_000  # fewer rows: a pass runs in process (a worker pool takes about 0.3 s to start)
_FORMATS = {".parquet": "FORMAT PARQUET", ".csv": "FORMAT CSV, HEADER true"}


def _ordered(sql: str, columns: Sequence[str]) -> str:
    """`sql` sorted by `columns`, NULLs first (as Spark sorts ascending)."""
    if not columns:
        return sql
    return f"SELECT * FROM ({sql}) ORDER BY {', '.join(f'{quote(c)} NULLS FIRST' for c in columns)}"


def _run(fn: BatchFunction, batches: Iterable[pa.RecordBatch], target: Path, schema: pa.Schema) -> None:
    """`fn` over `batches`, its output streamed to the Parquet file `target` (cast to `schema` when it differs)."""
    with pq.ParquetWriter(target, schema) as writer:
        for batch in fn(iter(batches)):
            if batch.num_rows:
                writer.write_batch(batch if batch.schema.equals(schema) else batch.cast(schema))


def _run_file(fn: BatchFunction, source: Path, target: Path, schema: pa.Schema) -> None:
    """A worker's job: `fn` over the Parquet file `source`, read in file order."""
    _run(fn, pq.ParquetFile(source).iter_batches(READ_BATCH), target, schema)


class DuckDBExecutor:
    """A replay's tables on a DuckDB connection: the one given (kept open on close), or one of its own (within
    `memory_limit`, spilling to `spill`, when given; else the replay's quiet connection)."""

    engine: EngineName = "duckdb"

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection | None = None,
        *,
        spill: Path | None = None,
        memory_limit: str | None = None,
        workers: int | None = None,
        worker_rows: int = WORKER_ROWS,
    ) -> None:
        self.workers = self.default_workers() if workers is None else workers
        self.worker_rows = worker_rows
        self._spill_in = spill
        self._spill_dir: Path | None = None  # made when first needed (a pass's files, or a connection's spill)
        self._own = con is None
        if con is None:
            con = connection(str(self._spill), memory_limit) if memory_limit or spill else quiet_connection()
        self.con = con
        self._origins: dict[str, pa.Table | str] = {}  # what a loaded table was read from (for `number`)
        self._files = itertools.count()

    @staticmethod
    def default_workers() -> int:
        """Processes for a keyed `map_partitions` with enough rows: the cores, at most four."""
        return min(os.cpu_count() or 1, 4)

    @property
    def _spill(self) -> Path:
        if self._spill_dir is None:
            self._spill_dir = Path(tempfile.mkdtemp(prefix="replay-", dir=self._spill_in))
        return self._spill_dir

    # sources ---------------------------------------------------------------------------------------------------
    def load(self, name: str, source: object, *, kind: SourceKind) -> Loaded:
        """Events: a path (Parquet, CSV, JSON lines), pandas, Arrow or a relation, read as today's replay reads
        them (replay.inputs), with `__input`; customers and redemptions: Parquet, pandas, Arrow or a relation."""
        try:
            if kind == "events":
                origin, csv = read_events(self.con, source)
                if csv and isinstance(origin, pa.Table):  # the field readers must know the cells are untyped text
                    origin = origin.replace_schema_metadata({**(origin.schema.metadata or {}), CSV_CELLS: b"true"})
            else:
                origin = self._table(source)
        except duckdb.Error as error:
            raise ServiceError("field_invalid", f"{kind}: cannot be read: {error}", field=kind) from None
        if isinstance(origin, str):
            numbered = ", file_row_number = true" if kind == "events" else ""
            rename = f" RENAME (file_row_number AS {INPUT})" if kind == "events" else ""
            self.con.execute(
                f"CREATE OR REPLACE TEMP VIEW {quote(name)} AS "
                f"SELECT *{rename} FROM read_parquet({literal(origin)}{numbered})"
            )
            schema = pq.read_schema(origin)
            schema = schema.append(pa.field(INPUT, pa.int64())) if kind == "events" else schema
            rows: int = pq.ParquetFile(origin).metadata.num_rows
        else:
            if kind == "events":
                origin = origin.append_column(INPUT, pa.array(np.arange(origin.num_rows, dtype=np.int64)))
            self.con.register(name, origin)
            schema, rows = origin.schema, origin.num_rows
        self._origins[name] = origin
        return Loaded(name, schema, rows)

    @staticmethod
    def _table(source: object) -> pa.Table | str:
        if isinstance(source, str | Path):
            if Path(source).suffix.lower() != ".parquet":
                raise ServiceError("field_invalid", f"{source}: must be a .parquet file", field="source")
            return str(source)
        if isinstance(source, pd.DataFrame):
            return pa.Table.from_pandas(source, preserve_index=False)
        if isinstance(source, pa.Table):
            return source
        if isinstance(source, duckdb.DuckDBPyRelation):
            return source.to_arrow_table()
        raise ServiceError("field_invalid", "must be a Parquet path, a DataFrame, a pyarrow Table or a relation")

    def number(self, name: str, source: str, *, by: str = "occurred_at") -> int:
        """Positions in processing order; the input's own order when `by` never decreases along it (read from the
        loaded Arrow table or Parquet file without a sort when it is a timestamp column there). `source` is a
        table `load`ed here: its `__input` numbers the rows 0 to n - 1."""
        origin = self._origins.get(source)
        column: pa.ChunkedArray | None = None
        schema = pq.read_schema(origin) if isinstance(origin, str) else origin.schema if origin is not None else None
        timed = schema is not None and by in schema.names and pa.types.is_timestamp(schema.field(by).type)
        if timed and isinstance(origin, str):
            column = pq.read_table(origin, columns=[by]).column(0)
        elif timed and isinstance(origin, pa.Table):
            column = origin.column(by)
        if column is not None and not column.null_count and never_decreases(column):
            self.con.execute(
                f"CREATE OR REPLACE TEMP VIEW {quote(name)} AS SELECT *, {INPUT} AS {POS} FROM {quote(source)}"
            )
            return len(column)
        fetched = self.con.sql(
            f"SELECT {INPUT} AS i, epoch_us(CAST({quote(by)} AS TIMESTAMPTZ)) AS t FROM {quote(source)}"
        ).fetchnumpy()
        times = fetched["t"]
        if isinstance(times, np.ma.MaskedArray) and times.mask.any():
            raise ServiceError("field_required", f"every event needs an {by}", field=by)
        stamps = np.empty(len(times), dtype=np.int64)
        stamps[np.asarray(fetched["i"], dtype=np.int64)] = np.asarray(times, dtype=np.int64)
        positions = time_positions(stamps)
        self.register(f"{name}__pos", pa.table({"i": np.arange(len(stamps), dtype=np.int64), POS: positions}))
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW {quote(name)} AS SELECT s.*, p.{POS} "
            f"FROM {quote(source)} s JOIN {quote(name + '__pos')} p ON p.i = s.{INPUT}"
        )
        return len(stamps)

    # tables and queries ----------------------------------------------------------------------------------------
    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)

    def create(self, name: str, query: Query, *, stored: bool) -> None:
        kind = "TABLE" if stored else "VIEW"
        self.con.execute(f"CREATE OR REPLACE TEMP {kind} {quote(name)} AS {render(query, self.engine)}")

    def fetch(self, query: Query) -> pa.Table:
        return self.con.sql(render(query, self.engine)).to_arrow_table()

    def stream(self, query: Query, *, order: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        reader = self.con.sql(_ordered(render(query, self.engine), order)).to_arrow_reader(batch_rows)
        yield from reader

    def map_partitions(
        self,
        name: str,
        query: Query,
        fn: BatchFunction,
        schema: pa.Schema,
        *,
        key: Sequence[str] = (),
        order: Sequence[str] = (),
    ) -> None:
        """Sorted by (key, order): in process, one call over all the rows (so each key's rows are whole and
        contiguous); by `workers` processes, one call per hash partition of the key, when there are enough rows."""
        sql = render(query, self.engine)
        target = self._spill / f"{name}-{next(self._files)}"
        if key and self.workers > 1:
            (count,) = self.con.sql(f"SELECT count(*) FROM ({sql})").fetchall()[0]
            if count >= self.worker_rows:
                outputs = self._by_processes(sql, fn, schema, target, key, order)
                files = ", ".join(literal(str(path)) for path in outputs)
                self.con.execute(f"CREATE OR REPLACE TEMP VIEW {quote(name)} AS SELECT * FROM read_parquet([{files}])")
                return
        output = target.with_name(f"{target.name}.parquet")
        reader = self.con.sql(_ordered(sql, [*key, *order])).to_arrow_reader(READ_BATCH)
        _run(fn, reader, output, schema)
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW {quote(name)} AS SELECT * FROM read_parquet({literal(str(output))})"
        )

    def _by_processes(
        self, sql: str, fn: BatchFunction, schema: pa.Schema, target: Path, key: Sequence[str], order: Sequence[str]
    ) -> list[Path]:
        """Each hash partition of the key sorted into a Parquet file (in order: insertion order kept while the
        COPY runs), then `fn` over each in a worker process; returns the output files."""
        parts = self.workers
        hashed = f"hash({', '.join(quote(k) for k in key)}) % {parts}"
        inputs = [target.with_name(f"{target.name}-in-{i}.parquet") for i in range(parts)]
        outputs = [target.with_name(f"{target.name}-out-{i}.parquet") for i in range(parts)]
        with self._in_order():
            for i, path in enumerate(inputs):
                part = _ordered(f"SELECT * FROM ({sql}) WHERE {hashed} = {i}", [*key, *order])
                self.con.execute(f"COPY ({part}) TO {literal(str(path))} (FORMAT PARQUET)")
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=parts, mp_context=context) as pool:
            list(pool.map(_run_file, [fn] * parts, inputs, outputs, [schema] * parts))
        for path in inputs:
            path.unlink()
        return outputs

    @contextmanager
    def _in_order(self) -> Iterator[None]:
        """Insertion order preserved while in the block (a COPY then writes the rows in its ORDER BY)."""
        (preserve,) = self.con.sql("SELECT current_setting('preserve_insertion_order')").fetchall()[0]
        self.con.execute("SET preserve_insertion_order = true")
        try:
            yield
        finally:
            self.con.execute(f"SET preserve_insertion_order = {'true' if preserve else 'false'}")

    def write(self, query: Query, path: Path, *, order: Sequence[str] = ("seq",)) -> Path:
        """One file, in `order` (the COPY keeps it: insertion order preserved while it runs)."""
        options = _FORMATS.get(path.suffix.lower())
        if options is None:
            raise ServiceError("field_invalid", f"{path}: the output must be .parquet or .csv", field="out")
        with self._in_order():
            sql = _ordered(render(query, self.engine), order)
            self.con.execute(f"COPY ({sql}) TO {literal(str(path))} ({options})")
        return path

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        return self.con.sql(f"SELECT * FROM {quote(name)}")

    def close(self) -> None:
        if self._own:
            self.con.close()
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
