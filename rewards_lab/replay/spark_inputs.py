"""Event histories for the Spark engine: a Parquet file, a directory or glob of Parquet files, a Spark DataFrame,
or a pandas DataFrame or Arrow table (as the DuckDB engine takes them), as one DataFrame with the input order.

Input order (ties in `occurred_at` are processed in it): for files, the file's path then the row within the file
(Spark's `_metadata.file_path` and `_metadata.row_index`; a data lake's part files sort by name); for a
DataFrame, its own order, partition by partition (`monotonically_increasing_id`).

Data fields are read as the DuckDB engine reads them (rewards_lab.replay.inputs): integer and DECIMAL columns
are exact numbers; FLOAT/DOUBLE columns are compared as doubles, and their `{per, rate}` amounts are evaluated
in Python (Java does not always spell a double as its shortest repr); strings, booleans and arrays are read in
SQL and are never numbers; JSON (a string `data` column, or the JSON columns a pandas frame of mixed values
becomes), MAPs walked into and DECIMALs wider than SQL reads exactly are evaluated in Python (`kind ==
"python"`), inside the executors. A path `a.b` is the column (STRUCT field) spelled `a.b` where present, else the
STRUCT `a`'s field `b`, decided from the schema.
"""

from __future__ import annotations

import glob as globbing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from sqlglot import exp

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.conditions import source_of
from rewards_lab.replay.fallback import FactsReader, fallback_column
from rewards_lab.replay.fallback import RowReader as RowReader  # spark_features reads rows with it
from rewards_lab.replay.inputs import CORE, either, pandas_to_arrow
from rewards_lab.replay.sql_values import SPARK, FieldReader, FieldSource

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from rewards_lab.replay.spark_customers import SparkCustomerTable

ORDER = "__order"  # input order within a file or partition
FILE = "__file"  # the file a row came from ("" for a DataFrame)
_INT_BOUNDS = {"ByteType": 2**7, "ShortType": 2**15, "IntegerType": 2**31, "LongType": 2**63}


def is_parquet_path(events: Any) -> bool:
    return isinstance(events, str | Path)


def check_parquet_path(path: str | Path) -> str:
    """The path Spark reads: a file, a directory, or a glob that matches something."""
    text = str(path)
    if any(mark in text for mark in "*?["):
        if not globbing.glob(text):
            raise ServiceError("field_invalid", f"{text}: no file matches", field="events", file=text)
        return text
    target = Path(text)
    if not target.exists():
        raise ServiceError("field_invalid", f"{target}: no such file", field="events", file=text)
    if target.is_file() and target.suffix.lower() != ".parquet":
        raise ServiceError(
            "field_invalid", f"{target}: the Spark engine reads Parquet (a file, a directory or a glob)", field="events"
        )
    return text


@dataclass
class SparkEventSource(FieldReader):
    """The events as a DataFrame with FILE, ORDER, the core columns (occurred_at as a timestamp) and the data."""

    frame: DataFrame
    mode: str  # columns, json or struct
    types: dict[str, DataType]  # data field -> Spark type (columns and struct modes)
    json_columns: frozenset[str] = frozenset()
    customers: SparkCustomerTable | None = None

    @property
    def resolves_customers(self) -> bool:
        return self.customers is not None

    def field(self, name: str) -> FieldSource:
        if source_of(name) == "customer":
            return self.customers.field(name) if self.customers is not None else FieldSource("missing")
        if self.mode == "json":
            return FieldSource("python", exp.column("data", quoted=True))
        nested = self._nested(name)
        if name not in self.types:
            return nested
        spelled = self._typed_column(name)
        return spelled if nested.kind == "missing" else either(spelled, nested)

    def _column(self, name: str) -> exp.Expr:
        if self.mode == "struct":
            return exp.Dot(this=exp.column("data", quoted=True), expression=exp.to_identifier(name, quoted=True))
        return exp.column(name, quoted=True)

    def _typed_column(self, name: str) -> FieldSource:
        column = self._column(name)
        if name in self.json_columns:
            return FieldSource("python", column)
        return spark_typed(column, self.types[name])

    def _nested(self, name: str) -> FieldSource:
        """`a.b.c` where no column is spelled so: a STRUCT column `a` holding `b`, then `c`."""
        from pyspark.sql.types import MapType, StructType

        parts = name.split(".")
        if len(parts) < 2 or parts[0] not in self.types:
            return FieldSource("missing")
        if parts[0] in self.json_columns:
            return FieldSource("python", self._column(parts[0]))
        node, kind = self._column(parts[0]), self.types[parts[0]]
        for key in parts[1:]:
            if isinstance(kind, MapType):
                return FieldSource("python", node)  # Python walks into a MAP (a dict to it)
            children = {f.name: f.dataType for f in kind.fields} if isinstance(kind, StructType) else {}
            if key not in children:
                return FieldSource("missing")
            node, kind = exp.Dot(this=node, expression=exp.to_identifier(key, quoted=True)), children[key]
        return spark_typed(node, kind)

    def _top_level(self, fields: list[str]) -> list[str]:
        """The columns (STRUCT fields) the live engine reads the fields from: each one spelled so, and each
        path's first key."""
        wanted = (column for name in fields for column in (name, name.split(".")[0]))
        return [column for column in dict.fromkeys(wanted) if column in self.types]

    def python_columns(self, fields: list[str]) -> list[Column]:
        """The columns the Python fallback reads for these fields (renamed `fallback_column(i)`: mapInArrow
        resolves its input by name, and a field's name may hold dots)."""
        from pyspark.sql import functions as F

        if self.mode == "json":
            return [F.col("data")]
        return [
            F.expr(SPARK.render(self._column(name))).alias(fallback_column(index))
            for index, name in enumerate(self._top_level(fields))
        ]

    def fallback_reading(
        self, fields: list[str], facts: FactsReader | None
    ) -> tuple[tuple[tuple[str, exp.Expr], ...], RowReader]:
        """As the DuckDB source's (inputs.EventSource.fallback_reading): the columns the plan's `exotic` step
        selects for the live evaluation, and how it reads them."""
        facts_columns = tuple((column, exp.column(column)) for column in (facts.columns if facts else []))
        if self.mode == "json":
            return (("data", exp.column("data")), *facts_columns), self.row_reader(fields, facts)
        reading = tuple((fallback_column(i), self._column(name)) for i, name in enumerate(self._top_level(fields)))
        return reading + facts_columns, self.row_reader(fields, facts)

    def row_reader(self, fields: list[str], facts: FactsReader | None = None) -> RowReader:
        columns = tuple(self._top_level(fields)) if self.mode != "json" else ()
        return RowReader(self.mode, self.json_columns, columns, customers=facts)


def spark_identifier(name: str) -> str:
    """A column name as Spark SQL, quoted by SQLGlot (a name may hold dots)."""
    return SPARK.render(exp.to_identifier(name, quoted=True))


def spark_typed(column: exp.Expr, data_type: DataType) -> FieldSource:
    """How a typed Spark column reads."""
    from pyspark.sql.types import ArrayType, BooleanType, StringType

    name = type(data_type).__name__
    if name in _INT_BOUNDS:
        return FieldSource("int", column, bound=_INT_BOUNDS[name])
    if name == "DecimalType":
        precision, scale = data_type.precision, data_type.scale  # type: ignore[attr-defined]
        if scale <= 10 and precision - scale <= 18:
            return FieldSource("decimal", column, precision, scale)
        return FieldSource("python", column)
    if name in ("DoubleType", "FloatType"):
        return FieldSource("double", column)
    if isinstance(data_type, StringType):
        return FieldSource("string", column)
    if isinstance(data_type, BooleanType):
        return FieldSource("boolean", column)
    if isinstance(data_type, ArrayType):
        element = spark_typed(exp.null(), data_type.elementType)
        if element.kind == "python":
            return FieldSource("python", column)
        return FieldSource("list", column, element=element)
    return FieldSource("never", column)


def _read(spark: SparkSession, events: Any) -> tuple[DataFrame, frozenset[str]]:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    if is_parquet_path(events):
        frame = spark.read.parquet(check_parquet_path(events))
        return (
            frame.withColumn(FILE, F.col("_metadata.file_path")).withColumn(ORDER, F.col("_metadata.row_index")),
            frozenset(),
        )
    json_columns: frozenset[str] = frozenset()
    if isinstance(events, pd.DataFrame):
        events = pandas_to_arrow(events)
    if isinstance(events, pa.Table):
        metadata = events.schema.metadata or {}
        if b"replay_json_columns" in metadata:
            json_columns = frozenset(jsonutil.loads(metadata[b"replay_json_columns"]))
        events = spark.createDataFrame(events.replace_schema_metadata(None))
    if not isinstance(events, DataFrame):
        raise ServiceError(
            "field_invalid",
            "events for the Spark engine must be Parquet (a file, a directory or a glob), a Spark DataFrame, "
            "a pandas DataFrame or a pyarrow Table",
            field="events",
        )
    return events.withColumn(FILE, F.lit("")).withColumn(ORDER, F.monotonically_increasing_id()), json_columns


def open_spark_events(spark: SparkSession, events: Any) -> SparkEventSource:
    """The events as a SparkEventSource: core columns typed, the data as columns, a JSON string or a STRUCT."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructType

    frame, json_columns = _read(spark, events)
    types = {field.name: field.dataType for field in frame.schema.fields}
    absent = [name for name in CORE if name not in types]
    if absent:
        raise ServiceError("field_required", f"events need the column(s) {', '.join(absent)}", field=absent[0])
    mode = "columns"
    if "data" in types:
        mode = "struct" if isinstance(types["data"], StructType) else "json"
    core = [
        F.col(FILE),
        F.col(ORDER),
        *(F.col(name).cast("string").alias(name) for name in ("external_event_id", "type", "customer_id")),
        F.col("occurred_at").cast("timestamp").alias("occurred_at"),
    ]
    others = [name for name in types if name not in (*CORE, FILE, ORDER, "data")] if mode == "columns" else []
    as_text = F.col("data") if isinstance(types.get("data"), StringType) else F.to_json(F.col("data"))
    data = [as_text.alias("data")] if mode == "json" else []  # a MAP (or any non-struct value) read as its JSON
    data += [F.col("data")] if mode == "struct" else []
    selected = frame.select(*core, *data, *(F.col(spark_identifier(name)) for name in others))
    if mode == "struct":
        struct = types["data"]
        assert isinstance(struct, StructType)
        field_types = {field.name: field.dataType for field in struct.fields}
    else:
        field_types = {name: types[name] for name in others}
    return SparkEventSource(selected, mode, field_types, json_columns & set(others))
