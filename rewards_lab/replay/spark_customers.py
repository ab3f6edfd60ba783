"""A replay's customers table on Spark: the same table and the same reading as the DuckDB engine's
(rewards_lab.replay.customers); the lookup and the join with the events are the plan's steps, one definition for
both engines (rewards_lab.replay.plan.customers), with Spark's own expressions of the facts.

The table may also be a Spark DataFrame, and a Parquet path is read by Spark; other shapes (CSV, JSON lines, pandas,
Arrow) are read as the DuckDB engine reads them, on the driver (and their lookup broadcast). Attributes in columns,
a STRUCT or a MAP are read in SQL; attributes given as JSON text (and CSV cells) are read in Python on the
executors, as JSON event data is.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.conditions import ATTRIBUTES_PREFIX
from rewards_lab.replay.customers import ROLES, customers_arrow, open_customers
from rewards_lab.replay.fallback import FactsReader, Reading
from rewards_lab.replay.input_checks import check_customer_types
from rewards_lab.replay.plan.customers import FOUND, Lookup, lookup_query
from rewards_lab.replay.spark_inputs import spark_identifier, spark_typed
from rewards_lab.replay.sql_values import SPARK, FieldSource, call, string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

_names = itertools.count()


def _refuse(message: str) -> ServiceError:
    return ServiceError("field_invalid", f"customers: {message}", field="customers")


@dataclass
class SparkCustomerTable:
    """The customers as a DataFrame; `field` gives the customer fields' sources (columns of `lookup`)."""

    frame: DataFrame
    types: dict[str, DataType]
    text_columns: frozenset[str]  # columns of JSON text (a pandas frame's objects) or CSV cells: read in Python
    csv: bool
    local: pa.Table | None  # the table as read on the driver (checked there, by the DuckDB engine's refusals)
    wanted: dict[str, str] = field(default_factory=dict)  # attribute read -> its lookup column
    lookup: DataFrame | None = None

    def field(self, name: str) -> FieldSource:
        if name == "customer.country":
            return FieldSource("string", exp.column("__cc")) if "country" in self.types else FieldSource("missing")
        if name == "customer.segments":
            return FieldSource("list", exp.column("__cs"), element=FieldSource("string"))
        attribute = name.removeprefix(ATTRIBUTES_PREFIX)
        reading = self._reading(attribute)
        if reading is None:
            return FieldSource("missing")
        column = self.wanted.setdefault(attribute, f"__ca{len(self.wanted)}")
        if reading == "document":
            return FieldSource("python", exp.column("__cattr"))
        if reading != "value":
            return FieldSource("python", exp.column(column))
        return spark_typed(exp.column(column), self._value_type(attribute))

    def _reading(self, attribute: str) -> Reading | None:
        """How an attribute reads (None: no customer has it)."""
        from pyspark.sql.types import MapType, StringType, StructType

        if attribute in self.types and attribute not in ROLES:
            if attribute in self.text_columns:
                return "csv" if self.csv else "json"
            return "value"
        kind = self.types.get("attributes")
        if kind is None:
            return None
        if isinstance(kind, StringType):
            return "document"
        if isinstance(kind, StructType):
            return "value" if attribute in kind.fieldNames() else None
        if isinstance(kind, MapType):
            return "value"
        raise _refuse(f"attributes must be a JSON object as text, a STRUCT or a MAP, not {kind.simpleString()}")

    def _value_type(self, attribute: str) -> DataType:
        from pyspark.sql.types import MapType, StructType

        if attribute in self.types and attribute not in ROLES:
            return self.types[attribute]
        kind = self.types["attributes"]
        if isinstance(kind, StructType):
            return kind[attribute].dataType
        assert isinstance(kind, MapType)
        return kind.valueType

    def _attribute_sql(self, attribute: str) -> str:
        from pyspark.sql.types import StructType

        if attribute in self.types and attribute not in ROLES:
            return spark_identifier(attribute)
        if isinstance(self.types["attributes"], StructType):
            return f"`attributes`.{spark_identifier(attribute)}"
        return SPARK.render(call("try_element_at", exp.column("attributes"), string(attribute)))

    def _segments_sql(self) -> str:
        from pyspark.sql.types import ArrayType, StringType

        kind = self.types.get("segments")
        if kind is None:
            return "CAST(array() AS ARRAY<STRING>)"
        if isinstance(kind, StringType):
            listed = "from_json(`segments`, 'ARRAY<STRING>')"
        elif isinstance(kind, ArrayType):
            listed = "CAST(`segments` AS ARRAY<STRING>)"
        else:
            raise _refuse(f"segments must be a list of strings or a JSON array as text, not {kind.simpleString()}")
        return f"coalesce({listed}, CAST(array() AS ARRAY<STRING>))"

    def rows(self) -> int:
        """How many customers the table has (a Spark job for a DataFrame)."""
        return self.local.num_rows if self.local is not None else int(self.frame.count())

    def names_any(self, events: DataFrame) -> bool:
        """Whether some event's customer_id is a customer's id or external_id (one job, stopping at the first)."""
        from pyspark.sql import functions as F

        references = self.frame.select(F.col("id").cast("string").alias("__ref"))
        if "external_id" in self.types:
            references = references.unionByName(self.frame.select(F.col("external_id").cast("string").alias("__ref")))
        named = events.join(F.broadcast(references), events["customer_id"] == references["__ref"], "left_semi")
        return bool(named.limit(1).count())

    def _documented(self) -> bool:
        return any(self._reading(attribute) == "document" for attribute in self.wanted)

    def lookup_spec(self, facts: bool) -> Lookup:
        """The lookup's facts columns as Spark reads them (none without `facts`)."""
        columns: list[tuple[str, str]] = []
        if facts:
            if "country" in self.types:
                columns.append(("__cc", "CAST(`country` AS STRING)"))
            columns.append(("__cs", self._segments_sql()))
            if self._documented():
                columns.append(("__cattr", "CAST(`attributes` AS STRING)"))
            columns += [(column, self._attribute_sql(a)) for a, column in self._columned()]
        parsed = tuple((name, sqlglot.parse_one(text, read="spark"), None) for name, text in columns)
        return Lookup(parsed, "external_id" in self.types)

    def build(self, facts: bool) -> DataFrame:
        """The lookup (rewards_lab.replay.plan.customers: one row per reference, every customer under its id and
        its external_id), computed once; a table read on the driver is small: broadcast to every join."""
        from pyspark.sql import functions as F

        view = f"__spark_customers_{next(_names)}"
        self.frame.createOrReplaceTempView(view)
        query = lookup_query(view, self.lookup_spec(facts)).on("spark")
        if self.local is None:
            _check_unique(self.frame)
        lookup = self.frame.sparkSession.sql(query).localCheckpoint(eager=True)  # once, not once per join
        self.frame.sparkSession.catalog.dropTempView(view)
        self.lookup = F.broadcast(lookup) if self.local is not None else lookup
        return self.lookup

    @property
    def columns(self) -> list[str]:
        """The lookup's columns the events are joined with (built with facts)."""
        names = [FOUND, *(["__cc"] if "country" in self.types else []), "__cs"]
        names += ["__cattr"] if self._documented() else []
        return names + [column for _, column in self._columned()]

    def _columned(self) -> list[tuple[str, str]]:
        """(attribute, column) of the attributes read from a column of their own (not the JSON document)."""
        return [(a, column) for a, column in self.wanted.items() if self._reading(a) != "document"]

    def reader(self) -> FactsReader:
        attributes = tuple(
            (attribute, column, self._reading(attribute) or "value") for attribute, column in self.wanted.items()
        )
        document = "__cattr" if self._documented() else None
        country = "__cc" if "country" in self.types else None
        return FactsReader(FOUND, country, "__cs", document, attributes)


def open_spark_customers(spark: SparkSession, customers: Any) -> SparkCustomerTable:
    """The customers as a DataFrame: a Spark DataFrame as it is, a Parquet path read by Spark, any other shape
    read on the driver (rewards_lab.replay.customers.customers_arrow)."""
    from pyspark.sql import DataFrame

    text_columns: frozenset[str] = frozenset()
    csv, local = False, None
    if isinstance(customers, DataFrame):
        frame = customers
    elif isinstance(customers, str | Path) and Path(customers).suffix.lower() == ".parquet":
        if not Path(customers).exists():
            raise ServiceError("field_invalid", f"{customers}: no such file", field="customers", file=str(customers))
        frame = spark.read.parquet(str(customers))
    else:
        table, csv = customers_arrow(customers)
        open_customers(duckdb.connect(), table, "__check")  # the DuckDB engine's refusals, on the driver
        if "id" in table.column_names:
            ids = table.column("id").drop_null()
            if len(ids) != len(pc.unique(ids)):  # checked here, on the driver, without a Spark job
                counts = pc.value_counts(ids)
                twice = next(item["values"] for item in counts.to_pylist() if item["counts"] > 1)
                raise _refuse(f"the id {twice!r} appears on more than one row")
        metadata = table.schema.metadata or {}
        marked = metadata.get(b"replay_json_columns")
        text_columns = frozenset(jsonutil.loads(marked)) if marked is not None else frozenset()
        if csv:
            text_columns = frozenset(table.column_names)
        frame, local = spark.createDataFrame(table.replace_schema_metadata(None)), table
    types = {f.name: f.dataType for f in frame.schema.fields}
    if "id" not in types:
        raise ServiceError("field_required", "customers need an id column", field="customers.id")
    if local is None:
        _check_types(types)
    return SparkCustomerTable(frame, types, text_columns, csv, local)


def _check_types(types: dict[str, DataType]) -> None:
    """The DuckDB engine's type refusals (input_checks.check_customer_types) for a table Spark reads."""
    from pyspark.sql.types import IntegralType, StringType

    def spark_kind(kind: DataType) -> str:
        if isinstance(kind, StringType):
            return "VARCHAR"
        return "BIGINT" if isinstance(kind, IntegralType) else kind.simpleString().upper()

    named: dict[str, Any] = {
        role: spark_kind(types[role]) for role in ("id", "external_id", "country") if role in types
    }
    others = {c: k for c, k in types.items() if c not in ROLES}
    check_customer_types({**named, **others}, _readable)  # roles as the names of their types


def _readable(kind: DataType) -> bool:
    return spark_typed(exp.null(), kind).kind != "never"


def _check_unique(frame: DataFrame) -> None:
    """Refuse a table naming one id twice (a Spark job: run only when the table is used)."""
    from pyspark.sql import functions as F

    twice = frame.where(F.col("id").isNotNull()).groupBy("id").count().where("count > 1").limit(1).collect()
    if twice:
        raise _refuse(f"the id {twice[0]['id']!r} appears on more than one row")
