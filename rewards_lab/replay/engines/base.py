"""The `Executor` protocol both replay executors implement: load, register, query, map Arrow batches, write.

A query is SQL text already written for the executor's engine, or a SQLGlot tree the executor renders for its
engine (`render`). Names are the executor's tables: temporary tables or views on DuckDB, temporary views on Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import pyarrow as pa
from sqlglot import exp

from rewards_lab.replay.plan import sql as plan_sql
from rewards_lab.replay.plan.sql import Engine

EngineName = Engine

BatchFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""What `map_partitions` runs over each partition: picklable (a top-level dataclass with `__call__`) for Spark."""
SourceKind = Literal["events", "customers", "redemptions"]
Query = str | exp.Expr | plan_sql.Text
INPUT = "__input"  # an event's input order (0-based on DuckDB; increasing, maybe with gaps, on Spark)
CSV_CELLS = b"replay_csv_cells"  # schema metadata of events read from CSV: their data columns are untyped text
POS = "pos"  # an event's position in processing order (`number`)

Native = TypeVar("Native", covariant=True)  # duckdb.DuckDBPyRelation | pyspark.sql.DataFrame


@dataclass(frozen=True)
class Loaded:
    """A loaded source: its table name, Arrow schema (what the field readers inspect), row count if known."""

    name: str
    schema: pa.Schema
    rows: int | None


def render(query: Query, engine: EngineName) -> str:
    """The query as SQL text for `engine`: text is taken as written for it; a step's `Text` as DuckDB text, or
    parsed and rendered for Spark; a query tree is rendered in the plan's dialect for the engine
    (`replay.plan.sql`: the Spark hooks), any other tree in sqlglot's own."""
    if isinstance(query, str):
        return query
    if isinstance(query, plan_sql.Text):
        return query.on(engine)
    if isinstance(query, exp.Query):
        return plan_sql.render(query, engine)
    return query.sql(dialect=engine)


class Executor(Protocol[Native]):
    """One engine's way to run the replay plan's steps (docs: reports/i30-replay-plan.md, section 4)."""

    engine: EngineName

    def load(self, name: str, source: object, *, kind: SourceKind) -> Loaded:
        """A path, pandas, Arrow, DuckDB relation or Spark DataFrame as table `name`; events get `__input`, their
        input order."""
        ...

    def number(self, name: str, source: str, *, by: str = "occurred_at") -> int:
        """View `name` = `source` with `pos`: processing order (by `by`, ties by `__input`); returns the count."""
        ...

    def register(self, name: str, data: pa.Table) -> None:
        """A small driver-made table as table `name`."""
        ...

    def create(self, name: str, query: Query, *, stored: bool) -> None:
        """A step's output as table `name`: stored (computed once) or a view (computed where read)."""
        ...

    def fetch(self, query: Query) -> pa.Table:
        """A small result to the driver."""
        ...

    def stream(self, query: Query, *, order: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """A large result to the driver in `order`, in batches of at most `batch_rows` rows (bounded memory)."""
        ...

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
        """Table `name` = `fn` over the rows of `query` (its output has `schema`): with `key`, each call sees whole
        keys, each key's rows contiguous and sorted by `order`; without a key but with `order`, one call over every
        row in that order (one task); without either, any split."""
        ...

    def write(self, query: Query, path: Path, *, order: Sequence[str] = ("seq",)) -> Path:
        """The rows to Parquet or CSV (by `path`'s suffix) in `order`; returns where they went."""
        ...

    def relation(self, name: str) -> Native:
        """Table `name` as the engine's own relation."""
        ...

    def close(self) -> None:
        """Drop what the executor made (its spill files); a session or connection given to it stays open."""
        ...
