"""A replay's customers table (DuckDB): the facts rules read of an event's customer, and whom a beneficiary names.

The table (a .parquet, .csv or .jsonl path, a pandas DataFrame, an Arrow table or a DuckDB relation) has the columns
`id` (required), `external_id`, `country`, `segments` (a list of strings, or a JSON array as text) and `attributes`
(a JSON object as text, a STRUCT or a MAP); any other column is an attribute of its name, and wins over a key of
that name in `attributes`. A reference (an event's `customer_id`, a beneficiary's field) names the customer whose
`id` it is, else the one whose `external_id` it is, as the live engine resolves it (store.customers.resolve_many);
among customers sharing an external_id, the smallest id.

This module is how DuckDB reads the table's columns (their types, the facts' expressions, the fallback's
`FactsReader`); the lookup and the join with the events are the replay plan's steps, one definition for both
engines (rewards_lab.replay.plan.customers). An event whose customer is not in the table reads no customer field
(absent), as without a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import sqlglot
from sqlglot import exp

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.conditions import ATTRIBUTES_PREFIX
from rewards_lab.replay.compiler import CompiledProgramme
from rewards_lab.replay.fallback import FactsReader, Reading
from rewards_lab.replay.input_checks import check_customer_types, unnamed_rows_error
from rewards_lab.replay.inputs import JSON_TYPE, _is_json, literal, quote, typed_source, unsafe_json
from rewards_lab.replay.plan import schema
from rewards_lab.replay.plan.customers import FOUND as FOUND  # the featured paths' holders read it
from rewards_lab.replay.plan.customers import Lookup, facts_query, lookup_query
from rewards_lab.replay.plan.sql import ReplayDuckDB
from rewards_lab.replay.sql_values import DUCKDB, FieldSource, call, cast, string

ROLES = ("id", "external_id", "country", "segments", "attributes")


def _refuse(message: str) -> ServiceError:
    return ServiceError("field_invalid", f"customers: {message}", field="customers")


def customers_arrow(customers: Any) -> tuple[pa.Table, bool]:
    """The customers as an Arrow table, and whether its text columns are untyped CSV cells. Object columns of a
    pandas frame become JSON text (exact numbers), marked as JSON like the events' (inputs.pandas_to_arrow)."""
    if isinstance(customers, str | Path):
        path = Path(customers)
        if not path.exists():
            raise ServiceError("field_invalid", f"{path}: no such file", field="customers", file=str(path))
        suffix = path.suffix.lower()
        con = duckdb.connect()
        try:
            if suffix == ".parquet":
                return con.sql(f"SELECT * FROM read_parquet({literal(str(path))})").to_arrow_table(), False
            if suffix == ".csv":
                query = f"SELECT * FROM read_csv({literal(str(path))}, all_varchar = true, header = true)"
                return con.sql(query).to_arrow_table(), True
        except duckdb.Error as error:  # not Parquet, a bad CSV
            raise _refuse(f"{path} cannot be read: {str(error).strip().splitlines()[0]}") from None
        finally:
            con.close()
        if suffix in (".jsonl", ".ndjson", ".json"):
            return _json_lines(path), False
        raise ServiceError("field_invalid", f"{path}: customers must be .parquet, .csv or .jsonl", field="customers")
    if isinstance(customers, pd.DataFrame):
        return _pandas(customers), False
    if isinstance(customers, pa.Table):
        return customers, False
    if isinstance(customers, duckdb.DuckDBPyRelation):
        return customers.to_arrow_table(), False
    raise _refuse("must be a path (.parquet, .csv, .jsonl), a pandas DataFrame, a pyarrow Table or a relation")


def _pandas(frame: pd.DataFrame) -> pa.Table:
    columns: dict[str, Any] = {}
    json_columns = []
    for name in frame.columns:
        key, column = str(name), frame[name]
        if column.dtype == object:
            values = column.tolist()
            if key in ("id", "external_id", "country"):
                columns[key] = pa.array([None if _missing(v) else str(v) for v in values], pa.string())
            elif key in ("segments", "attributes"):  # text is JSON already; lists and dicts are written as JSON
                texts = [None if _missing(v) else v if isinstance(v, str) else jsonutil.dumps(v) for v in values]
                columns[key] = pa.array(texts, pa.string())
                json_columns.append(key)
            else:
                columns[key] = pa.array([None if _missing(v) else jsonutil.dumps(v) for v in values], pa.string())
                json_columns.append(key)
        else:
            columns[key] = pa.Array.from_pandas(column)
    table = pa.table(columns)
    return table.replace_schema_metadata({b"replay_json_columns": jsonutil.dumps(json_columns).encode()})


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _json_lines(path: Path) -> pa.Table:
    """One JSON object per line, read exactly (numbers as Decimals): the roles as columns, every other key an
    attribute (merged over `attributes`), segments and attributes as JSON text."""
    rows: dict[str, list[Any]] = {role: [] for role in ROLES}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            item = jsonutil.loads(line)
            if not isinstance(item, dict):
                raise _refuse(f"{path} line {number} is not a JSON object")
            extra = {k: v for k, v in item.items() if k not in ROLES}
            attributes = item.get("attributes")
            merged = {**(attributes if isinstance(attributes, dict) else {}), **extra}
            for role in ("id", "external_id", "country"):
                value = item.get(role)
                rows[role].append(None if value is None else str(value))
            segments = item.get("segments")
            rows["segments"].append(None if segments is None else jsonutil.dumps(segments))
            rows["attributes"].append(jsonutil.dumps(merged) if merged or attributes is not None else None)
    table = pa.table({role: pa.array(values, pa.string()) for role, values in rows.items()})
    return table.replace_schema_metadata({b"replay_json_columns": jsonutil.dumps(["segments", "attributes"]).encode()})


@dataclass
class CustomerTable:
    """The customers as DuckDB reads them; `field` gives the customer fields' sources (columns of the lookup,
    joined with the events by `joined`)."""

    con: duckdb.DuckDBPyConnection
    source: str  # the registered input
    types: dict[str, Any]  # column -> DuckDB type, or JSON_TYPE
    csv: bool
    lookup: str  # the lookup table's name
    wanted: dict[str, str] = field(default_factory=dict)  # attribute read -> its lookup column
    rows: int = 0  # customers in the table

    def check_shapes(self) -> None:
        """Refuse segments and attributes of a shape rules cannot read (before any rule reads them)."""
        self._segments_sql()
        if "attributes" in self.types:
            self._attribute_type("")

    def names_any(self, events: str) -> bool:
        """Whether some event's customer_id is a customer's id or external_id (the view `events`)."""
        external = (
            f" UNION ALL SELECT CAST(external_id AS VARCHAR) FROM {self.source}" if "external_id" in self.types else ""
        )
        references = f"SELECT CAST(id AS VARCHAR) FROM {self.source}{external}"
        query = f"SELECT 1 FROM {events} WHERE customer_id IN ({references}) LIMIT 1"
        return bool(self.con.sql(query).fetchall())

    def field(self, name: str) -> FieldSource:
        """customer.country, customer.segments, customer.attributes.<name> as lookup columns."""
        if name == "customer.country":
            return FieldSource("string", exp.column("__cc")) if "country" in self.types else FieldSource("missing")
        if name == "customer.segments":
            return FieldSource("list", exp.column("__cs"), element=FieldSource("string"))
        attribute = name.removeprefix(ATTRIBUTES_PREFIX)
        kind = self._attribute_type(attribute)
        if kind is None:
            return FieldSource("missing")
        column = self.wanted.setdefault(attribute, f"__ca{len(self.wanted)}")
        if kind == "json attributes":
            return FieldSource("json", exp.column(column), unsafe=exp.column("__cu"))
        return typed_source(exp.column(column), kind, self.csv)

    def _attribute_type(self, attribute: str) -> Any:
        """The type an attribute is read as (None: no customer has it); "json attributes" for a key of the JSON
        `attributes` column."""
        if attribute in self.types and attribute not in ROLES:
            return self.types[attribute]
        kind = self.types.get("attributes")
        if kind is None:
            return None
        if _is_json(kind) or str(kind).upper() == "VARCHAR":
            return "json attributes"
        type_id = getattr(kind, "id", "")
        if type_id == "struct":
            return dict(kind.children).get(attribute)
        if type_id == "map":
            return dict(kind.children)["value"]
        raise _refuse(f"attributes must be a JSON object as text, a STRUCT or a MAP, not {kind}")

    def _attribute_sql(self, attribute: str) -> str:
        if attribute in self.types and attribute not in ROLES:
            return quote(attribute)
        kind = self.types["attributes"]
        if _is_json(kind) or str(kind).upper() == "VARCHAR":
            extract = call("json_extract", cast(exp.column("attributes"), "JSON"), string(f'$."{attribute}"'))
            return DUCKDB.render(extract)
        if getattr(kind, "id", "") == "struct":
            return f"attributes.{quote(attribute)}"
        return DUCKDB.render(exp.Bracket(this=exp.column("attributes"), expressions=[string(attribute)]))

    def _segments_sql(self) -> str:
        kind = self.types.get("segments")
        if kind is None:
            return "CAST([] AS VARCHAR[])"
        if _is_json(kind) or str(kind).upper() == "VARCHAR":
            listed = "CASE WHEN json_valid(segments) THEN json_extract_string(segments, '$[*]') END"
        elif getattr(kind, "id", "") in ("list", "array"):
            listed = "CAST(segments AS VARCHAR[])"
        else:
            raise _refuse(f"segments must be a list of strings or a JSON array as text, not {kind}")
        return f"coalesce({listed}, CAST([] AS VARCHAR[]))"

    def _json_attributes(self) -> bool:
        """Whether some attribute read comes from the JSON `attributes` column."""
        return any(self._attribute_type(a) == "json attributes" for a in self.wanted)

    def lookup_spec(self, facts: bool) -> Lookup:
        """The lookup's facts columns as DuckDB reads them (none without `facts`)."""
        columns: list[tuple[str, str]] = []
        if facts:
            if "country" in self.types:
                columns.append(("__cc", "CAST(country AS VARCHAR)"))
            columns.append(("__cs", self._segments_sql()))
            if self._json_attributes():
                columns.append(("__cattr", "CAST(attributes AS VARCHAR)"))
                columns.append(("__cu", DUCKDB.render(unsafe_json(cast(exp.column("attributes"), "VARCHAR")))))
            columns += [(column, self._attribute_sql(a)) for a, column in self.wanted.items()]
        parsed = tuple((name, parse_expression(text), text) for name, text in columns)
        return Lookup(parsed, "external_id" in self.types)

    def build(self, facts: bool) -> None:
        """The lookup table (rewards_lab.replay.plan.customers: one row per reference, every customer under its id
        and its external_id), with the customer's facts the rules read when `facts`."""
        query = lookup_query(self.source, self.lookup_spec(facts)).on("duckdb")
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {self.lookup} AS {query}")

    @property
    def columns(self) -> list[str]:
        """The lookup's columns the events are joined with (built by `build` with facts)."""
        names = [FOUND, *(["__cc"] if "country" in self.types else []), "__cs"]
        names += ["__cattr", "__cu"] if self._json_attributes() else []
        return names + list(self.wanted.values())

    def reader(self) -> FactsReader:
        """How the fallback reads an event's customer facts from the joined columns."""
        attributes: list[tuple[str, str, Reading]] = []
        for attribute, column in self.wanted.items():
            kind = self._attribute_type(attribute)
            reading: Reading = "value"
            if kind == "json attributes":
                reading = "document"
            elif _is_json(kind):
                reading = "json"
            elif self.csv:
                reading = "csv"
            attributes.append((attribute, column, reading))
        document = "__cattr" if self._json_attributes() else None
        country = "__cc" if "country" in self.types else None
        return FactsReader(FOUND, country, "__cs", document, tuple(attributes))

    def resolve(self, references: list[str]) -> dict[str, str]:
        """reference -> customer id, for the references some customer has."""
        if not references:
            return {}
        self.con.register("__replay_refs", pa.table({"ref": pa.array(sorted(set(references)), pa.string())}))
        try:
            fetched = self.con.sql(
                f"SELECT __ref, {FOUND} FROM {self.lookup} WHERE __ref IN (SELECT ref FROM __replay_refs)"
            ).fetchall()
        finally:
            self.con.unregister("__replay_refs")
        return {str(ref): str(found) for ref, found in fetched}


def parse_expression(text: str) -> exp.Expr:
    """A lookup column's DuckDB expression as a tree (what the plan's lint and Spark's renderer read)."""
    return sqlglot.parse_one(text, read=ReplayDuckDB)


def open_customers(con: duckdb.DuckDBPyConnection, customers: Any, name: str) -> CustomerTable:
    """Register the customers on `con` as `{name}_customers_input` (the plan's `customers`); the lookup
    (`{name}_customers`) is built by `build` once the programme is compiled."""
    table, csv = customers_arrow(customers)
    metadata = table.schema.metadata or {}
    json_columns = (
        set(jsonutil.loads(metadata[b"replay_json_columns"])) if b"replay_json_columns" in metadata else set()
    )
    if "id" not in table.column_names or (table.num_rows and table.column("id").null_count == table.num_rows):
        raise ServiceError("field_required", "customers need an id column", field="customers.id")
    if table.column("id").null_count:
        raise unnamed_rows_error(table.column("id").null_count)
    source = schema.CUSTOMERS.on(name)
    con.register(source, table)
    described = con.sql(f"SELECT * FROM {source} LIMIT 0")
    types = {c: JSON_TYPE if c in json_columns else t for c, t in zip(described.columns, described.types, strict=True)}
    check_customer_types(types, lambda kind: typed_source(exp.null(), kind, csv).kind != "never")
    twice = con.sql(f"SELECT id FROM {source} WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1 LIMIT 1").fetchall()
    if twice:
        raise _refuse(f"the id {twice[0][0]!r} appears on more than one row")
    opened = CustomerTable(con, source, types, csv, schema.CUSTOMERS_LOOKUP.on(name), rows=int(table.num_rows))
    opened.check_shapes()
    return opened


def joined(
    con: duckdb.DuckDBPyConnection,
    name: str,
    from_sql: str,
    plans: Sequence[CompiledProgramme],
    customers: CustomerTable | None,
) -> str:
    """The events (`from_sql`) with what the compiled rules read beyond them, as the view `{name}_facts`
    (rewards_lab.replay.plan.customers.facts_query: the customer's facts, each beneficiary field's reference and,
    with a table, the customer id it resolves to); `from_sql` itself when they read nothing more. `plans`: the
    programmes that will read the events (a sweep's points)."""
    reads_customers = any(plan.reads_customers for plan in plans)
    beneficiaries = list(dict(item for plan in plans for item in plan.beneficiaries).items())
    if customers is not None and (reads_customers or beneficiaries):
        customers.build(reads_customers)
    facts = customers.columns if customers is not None and reads_customers else []
    if not facts and not beneficiaries:
        return from_sql
    events, view = schema.EVENTS.on(name), schema.FACTS.on(name)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {events} AS SELECT * FROM {from_sql}")
    query = facts_query(events, None if customers is None else customers.lookup, facts, beneficiaries)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {query.on('duckdb')}")
    return view
