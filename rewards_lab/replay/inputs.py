"""Event histories in every supported shape, as one DuckDB view with typed access to the event data.

Inputs: a path (.parquet, .csv, .jsonl/.ndjson/.json lines), a pandas DataFrame, a pyarrow Table or a DuckDB
relation, with columns external_event_id, type, customer_id, occurred_at, and the data either as a `data` column
(JSON text, JSON, STRUCT or MAP) or as further columns.

Every data field a rule reads becomes a `FieldSource`: how to read the value in SQL and of which kind it is, so that
the compiler can reproduce the live engine's reading of JSON numbers exactly:
- integer and DECIMAL columns are numbers as stored; FLOAT/DOUBLE are the number their shortest repr writes
  (what the live engine reads from a Python float); NaN and infinities are not numbers;
- VARCHAR columns of a typed source (Parquet, Arrow, pandas) hold strings, never numbers, like the live engine;
- CSV cells have no type: a cell is read as a JSON scalar (a JSON number is a number, anything else is not);
- JSON data are read field by field, numbers as the text DuckDB gives back. DuckDB parses JSON numbers into
  doubles, which is exact only for numbers of at most 15 significant digits written without an exponent, so a
  row whose JSON holds anything else is flagged `unsafe` and evaluated exactly in Python.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.replay.compiler import DUCKDB, NUMBER_RE, FieldReader, FieldSource, call, cast, number, string

CORE = ("external_event_id", "type", "customer_id", "occurred_at")
ROW = "__rn"  # input order, 0-based
VIEW = "replay_events"

# JSON text that DuckDB may read inexactly: 16 or more digits in a row, or an exponent.
UNSAFE_JSON_RE = r"[0-9.]{16}|[0-9][eE]"
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


def quote(name: str) -> str:
    """An identifier as DuckDB SQL, quoted by SQLGlot."""
    return DUCKDB.render(exp.to_identifier(name, quoted=True))


def literal(value: str) -> str:
    """A string literal as DuckDB SQL, quoted by SQLGlot."""
    return DUCKDB.render(string(value))


@dataclass
class EventSource(FieldReader):
    """The events as a view (`view`) with __rn, the core columns (occurred_at as TIMESTAMPTZ) and the data."""

    con: duckdb.DuckDBPyConnection
    view: str
    mode: Literal["columns", "json", "struct"]
    columns: dict[str, str]  # data column name -> DuckDB type (columns and struct modes)
    csv: bool = False
    json_fields: tuple[str, ...] = ()
    origin: pa.Table | str | None = None  # the rows in input order: a table, or a Parquet file's path
    select: str = ""  # the view's SELECT ... FROM, without its source (rewards_lab.replay.to_file streams one)

    def field(self, name: str) -> FieldSource:
        if self.mode == "json":
            element = exp.Bracket(this=exp.column("__j"), expressions=[number(self.json_fields.index(name))])
            return FieldSource("text", cast(element, "VARCHAR"))  # SQLGlot's index is 0-based, DuckDB's 1-based
        if name not in self.columns:
            return FieldSource("missing")
        column: exp.Expr = (
            exp.Dot(this=exp.column("data"), expression=exp.to_identifier(name, quoted=True))
            if self.mode == "struct"
            else exp.column(name, quoted=True)
        )
        return _typed(column, self.columns[name], self.csv)

    @property
    def unsafe(self) -> exp.Expr | None:
        if self.mode != "json":
            return None
        return call("regexp_matches", cast(exp.column("data"), "VARCHAR"), string(UNSAFE_JSON_RE))

    def prepare(self, fields: Iterable[str], view: str | None = None) -> str:
        """The FROM clause over the events (`view`, by default this source's), parsing JSON data once per row
        for the given fields."""
        events = view or self.view
        if self.mode != "json":
            return events
        self.json_fields = tuple(dict.fromkeys(fields))
        if not self.json_fields:
            return events
        paths = exp.Array(expressions=[string(f'$."{name}"') for name in self.json_fields])
        extract = DUCKDB.render(call("json_extract", exp.column("data"), paths))
        return f"(SELECT *, {extract} AS __j FROM {events})"

    def python_data(self, rows: list[int], fields: Iterable[str]) -> dict[int, dict[str, Any]]:
        """The exact data of the given input rows (by __rn), as the live engine would read it."""
        if not rows:
            return {}
        names = list(dict.fromkeys(fields))
        keys = pa.table({"rn": pa.array(rows, pa.int64())})
        self.con.register("__replay_rows", keys)
        try:
            if self.mode == "json":
                wanted = f"{ROW} IN (SELECT rn FROM __replay_rows)"
                fetched = self.con.sql(
                    f"SELECT {ROW}, CAST(data AS VARCHAR) FROM {self.view} WHERE {wanted}"
                ).fetchall()
                return {int(rn): _json_object(text) for rn, text in fetched}
            sources = [(name, self.field(name)) for name in names]
            present = [(name, source) for name, source in sources if source.kind != "missing"]
            select = ", ".join([ROW, *[DUCKDB.render(source.value) for _, source in present]])
            fetched = self.con.sql(
                f"SELECT {select} FROM {self.view} WHERE {ROW} IN (SELECT rn FROM __replay_rows)"
            ).fetchall()
        finally:
            self.con.unregister("__replay_rows")
        result: dict[int, dict[str, Any]] = {}
        for row in fetched:
            data: dict[str, Any] = {}
            for (name, source), value in zip(present, row[1:], strict=True):
                if value is None:
                    continue
                if source.encoding == "json":
                    data[name] = jsonutil.loads(value)
                elif source.encoding == "csv":
                    data[name] = _text_scalar(value)
                else:
                    data[name] = value
            result[int(row[0])] = data
        return result


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    value = jsonutil.loads(text)
    return value if isinstance(value, dict) else {}


def _text_scalar(text: str) -> Any:
    """A CSV cell as the JSON scalar it spells: a number (exact), true/false, or else the string itself."""
    if re.fullmatch(NUMBER_RE, text):
        return Decimal(text)
    return {"true": True, "false": False}.get(text, text)


def _typed(column: exp.Expr, type_name: str, csv: bool) -> FieldSource:
    upper = type_name.upper()
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
    if upper == "JSON":
        return FieldSource("text", cast(column, "VARCHAR"), encoding="json")
    if csv and upper == "VARCHAR":
        return FieldSource("text", cast(column, "VARCHAR"), encoding="csv")
    return FieldSource("never", column)


# loading ----------------------------------------------------------------------------------------------------
def _missing(columns: Iterable[str]) -> None:
    absent = [name for name in CORE if name not in columns]
    if absent:
        raise ServiceError("field_required", f"events need the column(s) {', '.join(absent)}", field=absent[0])


def _pandas_to_arrow(frame: pd.DataFrame) -> pa.Table:
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


def _to_arrow(con: duckdb.DuckDBPyConnection, events: Any) -> tuple[pa.Table | str, bool]:
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
        return _pandas_to_arrow(events), False
    if isinstance(events, pa.Table):
        return events, False
    if isinstance(events, duckdb.DuckDBPyRelation):
        return events.to_arrow_table(), False
    raise ServiceError("field_invalid", "events must be a path, a DataFrame, a pyarrow Table or a relation")


def open_events(con: duckdb.DuckDBPyConnection, events: Any, view: str = VIEW) -> EventSource:
    """Register the events on `con` as the temporary view `view`; returns how to read their data."""
    table, csv = _to_arrow(con, events)
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
    if mode == "struct":
        struct = con.sql(f"SELECT data FROM {view} LIMIT 0").types[0]
        columns = {str(k): str(v) for k, v in struct.children}
    else:
        columns = {c: "JSON" if c in json_columns else str(types[c]) for c in others}
    return EventSource(con, view, mode, columns, csv=csv, origin=table, select=select)
