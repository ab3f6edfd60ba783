"""The Spark executor: the replay plan's steps as SQL over temporary views of one SparkSession.

`map_partitions` is `repartition` by the key + `sortWithinPartitions` + `mapInArrow`, checkpointed locally (as
today's `replay.spark_features.run_pass`): Spark sends each key to one task, its rows in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.replay.engines.base import INPUT, POS, BatchFunction, EngineName, Loaded, Query, SourceKind, render
from rewards_lab.replay.inputs import pandas_to_arrow
from rewards_lab.replay.spark_engine import with_positions
from rewards_lab.replay.spark_inputs import check_parquet_path, is_parquet_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_FILE_ROWS = 1 << 40  # __input of a Parquet row: its file's place among the files * _FILE_ROWS + its row index


class SparkExecutor:
    """A replay's tables as temporary views of `spark` (left running on close; the views are dropped)."""

    engine: EngineName = "spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._views: set[str] = set()

    def _partitions(self) -> int:
        return max(1, int(self.spark.conf.get("spark.sql.shuffle.partitions") or 1))

    def _zone(self) -> str:
        return str(self.spark.conf.get("spark.sql.session.timeZone") or "UTC")

    def _view(self, name: str, frame: DataFrame) -> None:
        frame.createOrReplaceTempView(name)
        self._views.add(name)

    # sources ---------------------------------------------------------------------------------------------------
    def load(self, name: str, source: object, *, kind: SourceKind) -> Loaded:
        """Parquet (a file, a directory or a glob), a Spark DataFrame, pandas or Arrow; events get `__input`:
        increasing along the input (a Parquet row: its file in name order, then its row in the file)."""
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_schema

        metadata: dict[bytes, bytes] = {}
        if is_parquet_path(source):
            assert isinstance(source, str | Path)
            frame = self.spark.read.parquet(check_parquet_path(source))
            if kind == "events":
                files = sorted(row[0] for row in frame.select("_metadata.file_path").distinct().collect())
                place = F.create_map(*(F.lit(v) for i, path in enumerate(files) for v in (path, i)))
                number = place[F.col("_metadata.file_path")].cast("long") * F.lit(_FILE_ROWS)
                frame = frame.withColumn(INPUT, number + F.col("_metadata.row_index"))
        else:
            if isinstance(source, pd.DataFrame):
                source = (
                    pandas_to_arrow(source) if kind == "events" else pa.Table.from_pandas(source, preserve_index=False)
                )
            if isinstance(source, pa.Table):
                metadata = dict(source.schema.metadata or {})
                source = self.spark.createDataFrame(source.replace_schema_metadata(None))
            if not isinstance(source, DataFrame):
                raise ServiceError(
                    "field_invalid", f"{kind}: must be Parquet, a Spark DataFrame, pandas or a pyarrow Table"
                )
            frame = source.withColumn(INPUT, F.monotonically_increasing_id()) if kind == "events" else source
        self._view(name, frame)
        schema = to_arrow_schema(frame.schema, timezone=self._zone()).with_metadata(metadata or None)
        return Loaded(name, schema, None)

    def number(self, name: str, source: str, *, by: str = "occurred_at") -> int:
        numbered, count = with_positions(self.spark.table(source), (by, INPUT))
        self._view(name, numbered.withColumnRenamed("__pos", POS))
        return count

    # tables and queries ----------------------------------------------------------------------------------------
    def register(self, name: str, data: pa.Table) -> None:
        self._view(name, self.spark.createDataFrame(data.replace_schema_metadata(None)))

    def create(self, name: str, query: Query, *, stored: bool) -> None:
        frame = self.spark.sql(render(query, self.engine))
        self._view(name, frame.localCheckpoint(eager=True) if stored else frame)

    def fetch(self, query: Query) -> pa.Table:
        return self.spark.sql(render(query, self.engine)).toArrow()

    def stream(self, query: Query, *, order: Sequence[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """The rows through the driver a partition at a time (`toLocalIterator`), in batches of `batch_rows`."""
        from pyspark.sql.pandas.types import to_arrow_schema

        frame = self.spark.sql(render(query, self.engine))
        frame = frame.orderBy(*order) if order else frame
        schema = to_arrow_schema(frame.schema, timezone=self._zone())
        rows: list[dict[str, object]] = []
        for row in frame.toLocalIterator(prefetchPartitions=False):
            rows.append(row.asDict())
            if len(rows) == batch_rows:
                yield pa.RecordBatch.from_pylist(rows, schema)
                rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema)

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
        """With `key`: repartitioned by it, each partition sorted by (key, order); without a key but with an
        `order`: one partition (one task) in that order; without either: the query's own partitions.
        Checkpointed: the function runs once."""
        from pyspark.sql.pandas.types import from_arrow_schema

        frame = self.spark.sql(render(query, self.engine))
        if key:
            frame = frame.repartition(self._partitions(), *key)
        elif order:
            frame = frame.repartition(1)
        if key or order:
            frame = frame.sortWithinPartitions(*key, *order)
        self._view(name, frame.mapInArrow(fn, from_arrow_schema(schema)).localCheckpoint(eager=True))

    def write(self, query: Query, path: Path, *, order: Sequence[str] = ("seq",)) -> Path:
        """Part files of a range partitioning by `order`: read in name order, the rows come in `order`."""
        frame = self.spark.sql(render(query, self.engine))
        writer = (frame.orderBy(*order) if order else frame).write.mode("overwrite")
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            writer.parquet(str(path))
        elif suffix == ".csv":
            writer.option("header", True).csv(str(path))
        else:
            raise ServiceError("field_invalid", f"{path}: the output must be .parquet or .csv", field="out")
        return path

    def relation(self, name: str) -> DataFrame:
        return self.spark.table(name)

    def close(self) -> None:
        for name in self._views:
            self.spark.catalog.dropTempView(name)
        self._views.clear()
