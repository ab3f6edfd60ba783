"""Event histories in every supported shape, as one DuckDB view with typed access to the event data.

Inputs: a path (.parquet, .csv, .jsonl/.ndjson/.json lines), a pandas DataFrame, a pyarrow Table or a DuckDB
relation, with columns external_event_id, type, customer_id, occurred_at, and the data either as a `data` column
(JSON text, JSON, STRUCT or MAP) or as further columns.

Every data field a rule reads becomes a `FieldSource`: how to read the value in SQL and of which kind it is, so that
the compiler can reproduce the live engine's reading exactly (rewards_lab.domain.conditions.read_value):
- integer and DECIMAL columns are numbers as stored; FLOAT/DOUBLE are the number their shortest repr writes
  (what the live engine reads from a Python float); NaN and infinities are not numbers;
- VARCHAR (and ENUM) columns of a typed source (Parquet, Arrow, pandas) hold strings, never numbers, BOOLEAN
  columns booleans, LIST columns lists, like the live engine;
- CSV cells have no type: a cell is read as a JSON scalar (a JSON number is a number, true and false are
  booleans, anything else is the string itself);
- JSON data are read field by field, numbers as the text DuckDB gives back. DuckDB parses JSON numbers into
  doubles, which is exact only for numbers of at most 15 significant digits written without an exponent, so a
  row whose JSON holds anything else is exotic wherever a rule reads a number from it (evaluated in Python).
A field path `a.b` is the key (or column) spelled `a.b` first, else the nested walk: JSON paths for JSON data,
STRUCT fields decided from the schema, in columns mode a column `a` that is a STRUCT (or JSON) holding `b`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.conditions import source_of
from rewards_lab.replay.fallback import FactsReader, RowReader, fallback_column, text_scalar
from rewards_lab.replay.sql_values import (
    DUCKDB,
    UNSAFE_JSON_RE,
    FieldReader,
    FieldSource,
    call,
    cast,
    number,
    string,
    when,
)

if TYPE_CHECKING:
    from rewards_lab.replay.customers import CustomerTable

CORE = ("external_event_id", "type", "customer_id", "occurred_at")
ROW = "__rn"  # input order, 0-based
VIEW = "replay_events"
JSON_TYPE = "JSON"  # the type name of a JSON column (and of object columns of a pandas frame, JSON text)
_INT_BOUNDS = {
    "TINYINT": 2**7,
    "SMALLINT": 2**15,
    "INTEGER": 2**31,
    "BIGINT": 2**63,
    "UTINYINT": 2**8,
    "USMALLINT": 2**16,
    "UINTEGER": 2**32,
    "UBIGINT": 2**64,
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_LIST_ELEMENTS = ("int", "decimal", "double", "string", "boolean", "never")  # element kinds SQL compares exactly


def quote(name: str) -> str:
    """An identifier as DuckDB SQL, quoted by SQLGlot."""
    return DUCKDB.render(exp.to_identifier(name, quoted=True))


def literal(value: str) -> str:
    """A string literal as DuckDB SQL, quoted by SQLGlot."""
    return DUCKDB.render(string(value))


def json_path(keys: Iterable[str]) -> str:
    """A JSON path of object keys, each quoted: ["a", "b.c"] -> `$."a"."b.c"` (field names hold no quotes)."""
    return "$" + "".join(f'."{key}"' for key in keys)


def unsafe_json(text: exp.Expr) -> exp.Expr:
    """Rows whose JSON text DuckDB may read inexactly (a number through a double). A \\u escape in a string
    ("\\u00e9" has "0e") is no number: the text is looked at again without them, where the first look finds
    something (rarely: the second test runs on those rows only)."""
    found = call("regexp_matches", text, string(UNSAFE_JSON_RE))
    unescaped = call("regexp_replace", text.copy(), string(r"\\u[0-9a-fA-F]{4}"), string(""), string("g"))
    return exp.Paren(this=exp.and_(found, call("regexp_matches", unescaped, string(UNSAFE_JSON_RE))))


@dataclass
class EventSource(FieldReader):
    """The events as a view (`view`) with __rn, the core columns (occurred_at as TIMESTAMPTZ) and the data."""

    con: duckdb.DuckDBPyConnection
    view: str
    mode: Literal["columns", "json", "struct"]
    columns: dict[str, Any]  # data column (or STRUCT field) -> DuckDB type, or JSON_TYPE (columns and struct modes)
    csv: bool = False
    json_paths: tuple[str, ...] = ()  # json mode: the paths extracted once per row into __j
    origin: pa.Table | str | None = None  # the rows in input order: a table, or a Parquet file's path
    select: str = ""  # the view's SELECT ... FROM, without its source (rewards_lab.replay.to_file streams one)
    customers: CustomerTable | None = field(default=None)

    @property
    def resolves_customers(self) -> bool:
        return self.customers is not None

    def field(self, name: str) -> FieldSource:
        if source_of(name) == "customer":
            return self.customers.field(name) if self.customers is not None else FieldSource("missing")
        if self.mode == "json":
            return self._json_field(name)
        nested = self._nested(name)
        if name not in self.columns:
            return nested
        spelled = typed_source(self._column(name), self.columns[name], self.csv)
        return spelled if nested.kind == "missing" else either(spelled, nested)

    def _column(self, name: str) -> exp.Expr:
        if self.mode == "struct":
            return exp.Dot(this=exp.column("data"), expression=exp.to_identifier(name, quoted=True))
        return exp.column(name, quoted=True)

    def _extracted(self, path: str) -> exp.Expr:
        element = exp.Bracket(this=exp.column("__j"), expressions=[number(self.json_paths.index(path))])
        return element  # SQLGlot's index is 0-based, DuckDB's 1-based: SQLGlot adds the one

    def _json_field(self, name: str) -> FieldSource:
        literal_key = self._extracted(json_path([name]))
        unsafe = unsafe_json(cast(exp.column("data"), "VARCHAR"))
        parts = name.split(".")
        if len(parts) == 1:
            return FieldSource("json", literal_key, unsafe=unsafe)
        if "" in parts:  # a JSON path cannot name an empty key: Python reads it (where its first key is there)
            first = self._extracted(json_path(parts[:1]))
            return FieldSource("python", exp.Coalesce(this=literal_key, expressions=[first]))
        nested = self._extracted(json_path(parts))
        return FieldSource("json", exp.Coalesce(this=literal_key, expressions=[nested]), unsafe=unsafe)

    def _nested(self, name: str) -> FieldSource:
        """`a.b.c` where no column is spelled so: a STRUCT (or JSON) column `a` holding `b`, then `c`."""
        parts = name.split(".")
        if len(parts) < 2 or parts[0] not in self.columns:
            return FieldSource("missing")
        node, kind = self._column(parts[0]), self.columns[parts[0]]
        for index, key in enumerate(parts[1:], start=1):
            if _is_json(kind):
                rest = parts[index:]
                if "" in rest:
                    return FieldSource("python", node)
                text = cast(node, "VARCHAR")
                value = call("json_extract", cast(node.copy(), "JSON"), string(json_path(rest)))
                return FieldSource("json", value, unsafe=unsafe_json(text))
            type_id = getattr(kind, "id", "")
            if type_id == "map":
                return FieldSource("python", node)  # Python walks into a MAP (a dict to it)
            children = dict(kind.children) if type_id == "struct" else {}
            if key not in children:
                return FieldSource("missing")
            node, kind = exp.Dot(this=node, expression=exp.to_identifier(key, quoted=True)), children[key]
        return typed_source(node, kind, False)

    def prepare(self, fields: Iterable[str], view: str | None = None) -> str:
        """The FROM clause over the events (`view`, by default this source's), parsing JSON data once per row
        for the given fields."""
        events = view or self.view
        if self.mode != "json":
            return events
        paths: list[str] = []
        for name in fields:
            parts = name.split(".")
            paths.append(json_path([name]))
            if len(parts) > 1:
                paths.append(json_path(parts) if "" not in parts else json_path(parts[:1]))
        self.json_paths = tuple(dict.fromkeys(paths))
        if not self.json_paths:
            return events
        listed = exp.Array(expressions=[string(path) for path in self.json_paths])
        extract = DUCKDB.render(call("json_extract", exp.column("data"), listed))
        return f"(SELECT *, {extract} AS __j FROM {events})"

    def python_data(self, rows: list[int], fields: Iterable[str]) -> dict[int, dict[str, Any]]:
        """The exact data of the given input rows (by __rn), as the live engine would read it: the JSON object,
        or the columns (STRUCT fields) the fields name, as Python values."""
        if not rows:
            return {}
        keys = pa.table({"rn": pa.array(rows, pa.int64())})
        self.con.register("__replay_rows", keys)
        wanted = f"{ROW} IN (SELECT rn FROM __replay_rows)"
        try:
            if self.mode == "json":
                fetched = self.con.sql(
                    f"SELECT {ROW}, CAST(data AS VARCHAR) FROM {self.view} WHERE {wanted}"
                ).fetchall()
                return {int(rn): _json_object(text) for rn, text in fetched}
            present = list(dict.fromkeys(column for name in fields for column in self._top_level(name)))
            select = ", ".join([ROW, *(DUCKDB.render(self._column(name)) for name in present)])
            fetched = self.con.sql(f"SELECT {select} FROM {self.view} WHERE {wanted}").fetchall()
        finally:
            self.con.unregister("__replay_rows")
        result: dict[int, dict[str, Any]] = {}
        for row in fetched:
            data: dict[str, Any] = {}
            for name, value in zip(present, row[1:], strict=True):
                if value is None:
                    continue
                if _is_json(self.columns[name]):
                    data[name] = jsonutil.loads(value)
                elif self.csv:
                    data[name] = text_scalar(value)
                else:
                    data[name] = value
            result[int(row[0])] = data
        return result

    def fallback_reading(
        self, fields: Iterable[str], facts: FactsReader | None
    ) -> tuple[tuple[tuple[str, exp.Expr], ...], RowReader]:
        """What the live evaluation reads of an exotic event ((column, tree) of the plan's `exotic` step: the JSON
        object as text, or the columns the fields name, and the customer's facts) and how it reads them."""
        facts_columns = tuple((column, exp.column(column)) for column in (facts.columns if facts else []))
        if self.mode == "json":
            data = (("data", cast(exp.column("data"), "VARCHAR")),)
            return data + facts_columns, RowReader("json", frozenset(), (), self.csv, facts)
        present = list(dict.fromkeys(column for name in fields for column in self._top_level(name)))
        reading = tuple((fallback_column(i), self._column(name)) for i, name in enumerate(present))
        json_columns = frozenset(name for name in present if _is_json(self.columns[name]))
        return reading + facts_columns, RowReader(self.mode, json_columns, tuple(present), self.csv, facts)

    def _top_level(self, name: str) -> list[str]:
        """The columns (STRUCT fields) the live engine reads a field from: the one spelled so, and the path's
        first key (when the first is empty in a row)."""
        first = name.split(".")[0]
        return [column for column in dict.fromkeys([name, first]) if column in self.columns]


def either(first: FieldSource, second: FieldSource) -> FieldSource:
    """A field read from `first` where it is present, else from `second` (a column spelled `a.b`, else a
    STRUCT `a`'s field `b`): one column of their common kind, or Python's where they differ."""
    same = first.kind == second.kind and (first.precision, first.scale) == (second.precision, second.scale)
    if same and first.kind in ("int", "double", "string", "boolean", "json", "csv"):
        value = exp.Coalesce(this=first.value, expressions=[second.value])
        text = (
            None
            if first.text is None or second.text is None
            else exp.Coalesce(this=first.text, expressions=[second.text])
        )
        unsafe = None if first.unsafe is None else exp.or_(first.unsafe, second.unsafe or exp.false())
        return FieldSource(first.kind, value, bound=max(first.bound, second.bound), text=text, unsafe=unsafe)
    either_present = exp.or_(
        exp.not_(exp.Is(this=first.value, expression=exp.null())),
        exp.not_(exp.Is(this=second.value, expression=exp.null())),
    )
    return FieldSource("python", exp.Paren(this=when(either_present, exp.true())))


def _is_json(kind: Any) -> bool:
    return str(kind).upper() == JSON_TYPE


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    value = jsonutil.loads(text)
    return value if isinstance(value, dict) else {}


def typed_source(column: exp.Expr, kind: Any, csv: bool) -> FieldSource:
    """How a typed column (a DuckDB type, or JSON_TYPE) reads."""
    if _is_json(kind):
        text = cast(column, "VARCHAR")
        return FieldSource("json", cast(column.copy(), "JSON"), text=text, unsafe=unsafe_json(text.copy()))
    upper = str(kind).upper()
    type_id = getattr(kind, "id", "")
    if upper in _INT_BOUNDS:
        return FieldSource("int", column, bound=_INT_BOUNDS[upper])
    match = _DECIMAL.fullmatch(upper)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if scale <= 10 and precision - scale <= 18:
            return FieldSource("decimal", column, precision, scale)
        return FieldSource("text", cast(column, "VARCHAR"))
    if upper in ("HUGEINT", "UHUGEINT"):
        return FieldSource("text", cast(column, "VARCHAR"))
    if upper in ("DOUBLE", "FLOAT", "REAL"):
        return FieldSource("double", column)
    if upper == "VARCHAR":
        return FieldSource("csv" if csv else "string", column)
    if type_id == "enum":
        return FieldSource("string", cast(column, "VARCHAR"))
    if upper == "BOOLEAN":
        return FieldSource("boolean", column)
    if type_id in ("list", "array"):
        element = typed_source(exp.null(), dict(kind.children)["child"], False)
        if element.kind not in _LIST_ELEMENTS:
            return FieldSource("python", column)
        return FieldSource("list", column, element=element)
    return FieldSource("never", column)


# loading ----------------------------------------------------------------------------------------------------
def _missing(columns: Iterable[str]) -> None:
    absent = [name for name in CORE if name not in columns]
    if absent:
        raise ServiceError("field_required", f"events need the column(s) {', '.join(absent)}", field=absent[0])


def pandas_to_arrow(frame: pd.DataFrame) -> pa.Table:
    """Object columns become JSON text (exact numbers), so that mixed values keep their JSON kinds."""
    converted: dict[str, Any] = {}
    for name in frame.columns:
        column = frame[name]
        key = str(name)
        if key in ("external_event_id", "type", "customer_id"):
            converted[key] = pa.array(column.astype(str).to_numpy(), pa.string())
        elif column.dtype == object and key != "occurred_at":
            converted[key] = pa.array(
                [None if _is_missing(v) else jsonutil.dumps(v) for v in column.tolist()], pa.string()
            )
            converted[key] = converted[key].cast(pa.string())
        else:
            converted[key] = pa.Array.from_pandas(column)
    table = pa.table(converted)
    json_columns = [str(n) for n in frame.columns if frame[n].dtype == object and str(n) not in CORE]
    metadata = {b"replay_json_columns": jsonutil.dumps(json_columns).encode()}
    return table.replace_schema_metadata(metadata)


def _is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def read_events(con: duckdb.DuckDBPyConnection, events: Any) -> tuple[pa.Table | str, bool]:
    """(table in input order, or a Parquet path; whether its VARCHAR data columns are untyped CSV cells)."""
    (preserve,) = con.sql("SELECT current_setting('preserve_insertion_order')").fetchall()[0]
    con.execute("SET preserve_insertion_order = true")  # CSV and JSON lines must come back in file order
    try:
        return _read(con, events)
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if preserve else 'false'}")


def _read(con: duckdb.DuckDBPyConnection, events: Any) -> tuple[pa.Table | str, bool]:
    if isinstance(events, str | Path):
        path = Path(events)
        if not path.exists():
            raise ServiceError("field_invalid", f"{path}: no such file", field="events", file=str(path))
        suffix = path.suffix.lower()
        name = literal(str(path))
        if suffix == ".parquet":
            return str(path), False
        if suffix == ".csv":
            return con.sql(f"SELECT * FROM read_csv({name}, all_varchar = true, header = true)").to_arrow_table(), True
        if suffix in (".jsonl", ".ndjson", ".json"):
            core = ", ".join(f"json ->> {literal(c)} AS {quote(c)}" for c in CORE)
            lines = f"read_json_objects({name}, format = 'newline_delimited')"
            query = f"SELECT {core}, coalesce(json -> 'data', json) AS data FROM {lines}"
            return con.sql(query).to_arrow_table(), False
        raise ServiceError("field_invalid", f"{path}: events must be .parquet, .csv or .jsonl", field="events")
    if isinstance(events, pd.DataFrame):
        return pandas_to_arrow(events), False
    if isinstance(events, pa.Table):
        return events, False
    if isinstance(events, duckdb.DuckDBPyRelation):
        return events.to_arrow_table(), False
    raise ServiceError("field_invalid", "events must be a path, a DataFrame, a pyarrow Table or a relation")


def open_events(con: duckdb.DuckDBPyConnection, events: Any, view: str = VIEW) -> EventSource:
    """Register the events on `con` as the temporary view `view`; returns how to read their data."""
    try:
        return _open_events(con, events, view)
    except duckdb.Error as error:  # a file DuckDB cannot read (not Parquet, a bad CSV, an unreadable timestamp)
        where = f"{events}: " if isinstance(events, str | Path) else ""
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ServiceError("field_invalid", f"events: {where}cannot be read: {message}", field="events") from None


def _open_events(con: duckdb.DuckDBPyConnection, events: Any, view: str) -> EventSource:
    table, csv = read_events(con, events)
    json_columns = set()
    if isinstance(table, str):  # Parquet is read in place; its row number is the input order
        source = (
            f"(SELECT * RENAME (file_row_number AS {ROW}) FROM read_parquet({literal(table)}, file_row_number = true))"
        )
    else:
        if table.schema.metadata and b"replay_json_columns" in table.schema.metadata:
            json_columns = set(jsonutil.loads(table.schema.metadata[b"replay_json_columns"]))
        table = table.append_column(ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        con.register(f"{view}_input", table)
        source = f"{view}_input"
    described = con.sql(f"SELECT * FROM {source} LIMIT 0")
    types = dict(zip(described.columns, described.types, strict=True))
    _missing(types)
    data_type = str(types["data"]).upper() if "data" in types else None
    mode: Literal["columns", "json", "struct"] = "columns"
    data_sql = ""
    if data_type is not None and not data_type.startswith("STRUCT"):
        mode = "json"
        data_sql = ", CAST(data AS JSON) AS data"
    elif data_type is not None:
        mode = "struct"
        data_sql = ", data"
    occurred = "CAST(occurred_at AS TIMESTAMPTZ)"
    others = [c for c in types if c not in (*CORE, ROW, "data")] if mode == "columns" else []
    extra = "".join(f", {quote(c)}" for c in others)
    select = (
        f"SELECT {ROW}, CAST(external_event_id AS VARCHAR) AS external_event_id, "
        f"CAST(type AS VARCHAR) AS type, CAST(customer_id AS VARCHAR) AS customer_id, {occurred} AS occurred_at"
        f"{data_sql}{extra} FROM "
    )
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {select}{source}")
    columns: dict[str, Any]
    if mode == "struct":
        struct = con.sql(f"SELECT data FROM {view} LIMIT 0").types[0]
        columns = {str(k): v for k, v in struct.children}
    else:
        columns = {c: JSON_TYPE if c in json_columns else types[c] for c in others}
    return EventSource(con, view, mode, columns, csv=csv, origin=table, select=select)
