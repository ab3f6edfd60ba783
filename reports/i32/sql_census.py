"""Issue 32: every SQL statement the live service runs on DuckDB, counted by dialect feature, transpiled by sqlglot
(read="duckdb", write="postgres") and checked on a throwaway PostgreSQL 15 (tests/pg_cluster.py).

A statement is found statically: each `.execute(...)`, `.sql(...)`, `scalar`, `fetch_all`, `fetch_all_as`,
`fetch_one_as` and `paginate(select_sql=...)` call in the modules below, its SQL argument resolved from string
literals, f-strings, module constants and the function's own local assignments (a local that cannot be resolved
becomes the identifier `x_dyn`); the migrations come from `store.schema.MIGRATIONS` itself.

The check on PostgreSQL: the migrations, transpiled, are applied in order (a failing statement is recorded and
applied again with the hand-written fix the plan proposes, so that the schema exists for the rest); the tables
DuckDB reads from Arrow (replacement scans and `con.register`) are created as TEMP tables with the Arrow schema's
columns; then each other statement is `PREPARE`d (parsed, analysed and planned against the schema, not run): a
statement PostgreSQL accepts is counted "prepares". Accepting is necessary, not sufficient: section 3 of the plan
lists the semantic differences checked by hand (`semantic_checks.py`).

Run: PYTHONPATH=. python reports/i32/sql_census.py [--json out.json]
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import sqlglot

from reports.i32.store_dialect import NotPortable, to_postgres
from tests.pg_cluster import PgCluster

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(
    [f"rewards_lab.store.{p.stem}" for p in (ROOT / "rewards_lab/store").glob("*.py") if p.stem != "__init__"]
    + [
        "rewards_lab.service.event_export",
        "rewards_lab.service.programme_forecast",
        "rewards_lab.security.auth_audit",
        "rewards_lab.worker.audit_writer",
        "rewards_lab.cli.main",
    ]
)
CALLS = {"execute": 0, "executemany": 0, "sql": 0, "scalar": 1, "fetch_all": 1, "fetch_all_as": 2, "fetch_one_as": 2}

# DuckDB-specific (or differently spelled) constructs, by regular expression over the statement's text.
FEATURES = {
    "list parameter: unnest(?)": r"unnest\(\s*(\?|\$\w+)",
    "IN (SELECT unnest(?))": r"IN\s*\(\s*SELECT\s+unnest",
    "named $param": r"\$[a-z_]+",
    "HUGEINT": r"HUGEINT",
    "INSERT OR REPLACE": r"INSERT\s+OR\s+REPLACE",
    "INSERT OR IGNORE": r"INSERT\s+OR\s+IGNORE",
    "ON CONFLICT": r"ON\s+CONFLICT",
    "ANTI/SEMI JOIN": r"\b(ANTI|SEMI)\s+JOIN",
    "SELECT * EXCLUDE": r"EXCLUDE\s*\(",
    "epoch_us/epoch_ms": r"epoch_(us|ms)\(",
    "starts_with": r"starts_with\(",
    "contains()": r"\bcontains\(",
    ":: cast": r"::",
    "QUALIFY": r"\bQUALIFY\b",
    "GROUP BY ALL": r"GROUP\s+BY\s+ALL",
    "list/struct functions": r"\b(list_\w+|struct_\w+|array_agg)\(",
    "string_agg": r"string_agg\(",
    "arg_min/arg_max": r"\barg_(min|max)\(",
    "RETURNING": r"\bRETURNING\b",
    "ORDER BY .. DESC": r"\bDESC\b",
    "NULLS FIRST/LAST": r"NULLS\s+(FIRST|LAST)",
    "date_trunc/date_diff": r"date_(trunc|diff)\(",
    "json functions": r"\bjson\w*\(",
    "DuckDB-only commands": r"\b(ATTACH|DETACH|CHECKPOINT|PRAGMA)\b|COPY\s+FROM\s+DATABASE",
    "transaction control": r"^\s*(BEGIN|COMMIT|ROLLBACK)",
}
# What the statements read from Arrow: the table name and the module attribute holding its schema.
ARROW_TABLES = {
    "txn_batch": ("rewards_lab.store.ledger", "_TXN_SCHEMA"),
    "balance_deltas": ("rewards_lab.store.ledger", "_WIDE_DELTA_SCHEMA"),
    "lots_taken": ("rewards_lab.store.lots", "_TAKEN_SCHEMA"),
    "lots_made": ("rewards_lab.store.lots", "_NEW_SCHEMA"),
    "execution_batch": ("rewards_lab.store.executions", "_SCHEMA"),
    "request_log_batch": ("rewards_lab.store.request_log", "_ARROW_SCHEMA"),
    "auth_audit_batch": ("rewards_lab.store.auth_audit", "_SCHEMA"),
    "event_outcomes": ("rewards_lab.store.events", "_OUTCOME_SCHEMA"),
}
ARROW_COLUMNS = {  # built in place with pa.table({...}): the columns as the code names them
    "outbox_batch": ["id", "kind", "resource_id", "payload"],
    "delivery_batch": ["id", "organization_id", "environment", "endpoint_id", "outbox_id", "kind", "body"],
}
# The hand-written PostgreSQL forms the plan proposes for what sqlglot renders wrongly in the migrations.
SCHEMA_FIXES = [
    (r"\bINT128\b", "NUMERIC(38, 0)"),
    (
        r"CAST\(\('0x' \|\| SUBSTRING\(id FROM 5 FOR 12\)\) AS BIGINT\)",
        "('x' || lpad(substr(id, 5, 12), 16, '0'))::bit(64)::bigint",
    ),
    (r"\bCONTAINS\(permissions, ('[^']*')\)", r"(strpos(permissions, \1) > 0)"),
]


@dataclass
class Statement:
    module: str
    line: int
    kind: str  # migration | dml
    duckdb: str
    resolved: bool = True
    features: list[str] = field(default_factory=list)
    postgres: str | None = None
    transpile_error: str | None = None
    pg_ok: bool | None = None
    pg_error: str | None = None
    fixed_ok: bool | None = None  # migrations: with SCHEMA_FIXES
    typed_ok: bool | None = None  # refused for an untyped list parameter: accepted with the cast in the text
    hooked: str | None = None  # rendered by store_dialect.to_postgres (the hooks)
    hooked_refused: str | None = None  # NotPortable: written by hand
    hooked_ok: bool | None = None
    hooked_error: str | None = None


def _module_strings(module: Any) -> dict[str, Any]:
    return dict(vars(module))


class _Resolver:
    def __init__(self, module: Any, function: ast.AST | None) -> None:
        self.namespace = _module_strings(module)
        self.locals: dict[str, ast.expr] = {}
        self.complete = True
        if function is not None:
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.locals.setdefault(node.targets[0].id, node.value)

    def text(self, node: ast.expr, depth: int = 0) -> str:
        if depth > 6:
            self.complete = False
            return "x_dyn"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(
                self.text(v.value, depth + 1) if isinstance(v, ast.FormattedValue) else str(v.value)  # type: ignore[attr-defined]
                for v in node.values
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left, depth + 1) + self.text(node.right, depth + 1)
        if isinstance(node, ast.Name):
            value = self.namespace.get(node.id)
            if isinstance(value, str | int):
                return str(value)
            if node.id in self.locals:
                return self.text(self.locals[node.id], depth + 1)
        try:
            value = eval(compile(ast.Expression(node), "<sql>", "eval"), dict(self.namespace))  # noqa: S307
            if isinstance(value, str | int):
                return str(value)
        except Exception:  # noqa: BLE001 - anything unresolvable is a dynamic piece
            pass
        self.complete = False
        return "x_dyn"


def _enclosing_functions(tree: ast.Module) -> dict[int, ast.AST]:
    owner: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for child in ast.walk(node):
                owner[id(child)] = node
    return owner


def statements_of(module_name: str) -> list[Statement]:
    module = importlib.import_module(module_name)
    path = Path(module.__file__ or "")
    tree = ast.parse(path.read_text())
    owner = _enclosing_functions(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        arg: ast.expr | None = None
        if name in CALLS and len(node.args) > CALLS[name]:
            arg = node.args[CALLS[name]]
        elif name == "paginate":
            arg = next((k.value for k in node.keywords if k.arg == "select_sql"), None)
        if arg is None:
            continue
        resolver = _Resolver(module, owner.get(id(node)))
        sql = resolver.text(arg)
        if not re.search(
            r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|BEGIN|COMMIT|ROLLBACK|ATTACH|DETACH|COPY|CHECKPOINT|PRAGMA)\b",
            sql,
            re.I,
        ):
            continue  # not SQL (e.g. a variable holding a prepared query object)
        found.append(Statement(module_name.removeprefix("rewards_lab."), node.lineno, "dml", sql, resolver.complete))
    return found


def dictionary_statements() -> list[Statement]:
    """The statements kept in dictionaries (the static pass sees them as dynamic): the ledger's verification checks
    and retention's deletes, one per table."""
    from rewards_lab.store import retention, verification

    found = [Statement("store.verification", 0, "dml", sql) for sql in verification._CHECKS.values()]
    found += [Statement("store.retention", 0, "dml", retention.expired_sql(t)) for t in retention._EXPIRED]
    return found


def migrations() -> list[Statement]:
    from rewards_lab.store.schema import MIGRATIONS

    return [
        Statement("store.schema", version, "migration", sql)
        for version, _, statements, *_ in sorted(MIGRATIONS)
        for sql in statements
    ]


def transpile(statement: Statement) -> None:
    statement.features = [name for name, pattern in FEATURES.items() if re.search(pattern, statement.duckdb, re.I)]
    try:
        statement.postgres = sqlglot.transpile(statement.duckdb, read="duckdb", write="postgres")[0]
    except Exception as error:  # noqa: BLE001
        statement.transpile_error = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"


def _numbered(sql: str) -> str:
    """psycopg placeholders (%s, %(name)s) as PREPARE's $n."""
    names: dict[str, int] = {}
    counter = [0]

    def named(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in names:
            counter[0] += 1
            names[key] = counter[0]
        return f"${names[key]}"

    def positional(_: re.Match[str]) -> str:
        counter[0] += 1
        return f"${counter[0]}"

    sql = re.sub(r"%\((\w+)\)s", named, sql)
    return re.sub(r"%s", positional, sql)


def _pg_type(arrow: pa.DataType) -> str:
    if pa.types.is_string(arrow):
        return "TEXT"
    if pa.types.is_int32(arrow):
        return "INTEGER"
    if pa.types.is_int64(arrow):
        return "BIGINT"
    if pa.types.is_decimal(arrow):
        return "NUMERIC(38, 0)"
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMP"
    if pa.types.is_floating(arrow):
        return "DOUBLE PRECISION"
    return "TEXT"


def arrow_tables(con: psycopg.Connection[Any]) -> None:
    for table, (module_name, attribute) in ARROW_TABLES.items():
        schema = getattr(importlib.import_module(module_name), attribute)
        columns = ", ".join(f"{f.name} {_pg_type(f.type)}" for f in schema)
        con.execute(f"CREATE TEMP TABLE {table} ({columns})")
    for table, names in ARROW_COLUMNS.items():
        con.execute(f"CREATE TEMP TABLE {table} ({', '.join(f'{n} TEXT' for n in names)})")


def _fixed(sql: str) -> str:
    for pattern, replacement in SCHEMA_FIXES:
        sql = re.sub(pattern, replacement, sql)
    return sql


def check_on_postgres(dsn: str, schema: list[Statement], dml: list[Statement]) -> None:
    with psycopg.connect(dsn, autocommit=True) as con:
        for st in schema:
            if st.postgres is None:
                continue
            try:
                con.execute(st.postgres)
                st.pg_ok = True
            except psycopg.Error as error:
                st.pg_ok, st.pg_error = False, str(error).splitlines()[0][:200]
                try:
                    con.execute(_fixed(st.postgres))
                    st.fixed_ok = True
                except psycopg.Error as again:
                    st.fixed_ok = False
                    st.pg_error += f" | with the fixes: {str(again).splitlines()[0][:120]}"
        arrow_tables(con)
        for i, st in enumerate(dml):
            if st.postgres is None:
                continue
            if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK)", st.postgres, re.I):
                st.pg_ok = True  # the same words on PostgreSQL (psycopg's transaction() is the idiom)
                continue
            try:
                con.execute(f"PREPARE census_{i} AS {_numbered(st.postgres)}")
                con.execute(f"DEALLOCATE census_{i}")
                st.pg_ok = True
            except psycopg.Error as error:
                st.pg_ok, st.pg_error = False, str(error).splitlines()[0][:200]
                if "unnest(unknown)" in st.pg_error:
                    # psycopg sends a list[str] as an array of unknown type: the text must cast it (DuckDB accepts
                    # `?::VARCHAR[]` too): the canonical dialect's rule, checked here as text[]
                    typed = re.sub(r"UNNEST\((%s|%\(\w+\)s)\)", r"UNNEST(CAST(\1 AS TEXT[]))", st.postgres)
                    try:
                        con.execute(f"PREPARE census_t{i} AS {_numbered(typed)}")
                        con.execute(f"DEALLOCATE census_t{i}")
                        st.typed_ok = True
                    except psycopg.Error as again:
                        st.typed_ok = False
                        st.pg_error += f" | typed: {str(again).splitlines()[0][:120]}"


def table_keys(con: psycopg.Connection[Any]) -> dict[str, tuple[list[str], list[str]]]:
    """Each table's primary key and columns in order, as the migrated schema has them."""
    keys: dict[str, tuple[list[str], list[str]]] = {}
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"):
        columns = [
            c
            for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
                [table],
            )
        ]
        key = [
            c
            for (c,) in con.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
                [table],
            )
        ]
        keys[table] = (key, columns)
    return keys


def check_hooked(dsn: str, dml: list[Statement]) -> None:
    """Each statement rendered with the hooks, PREPAREd on the migrated schema (list parameters left untyped:
    `= ANY($n)` takes its array type from the other side)."""
    with psycopg.connect(dsn, autocommit=True) as con:
        keys = table_keys(con)
        arrow_tables(con)
        for i, st in enumerate(dml):
            try:
                st.hooked = to_postgres(st.duckdb, keys)
            except NotPortable as refused:
                st.hooked_refused = str(refused)
                continue
            except Exception as error:  # noqa: BLE001
                st.hooked_refused = f"{type(error).__name__}"
                continue
            if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK)", st.hooked, re.I):
                st.hooked_ok = True
                continue
            # the canonical rule: a list parameter is cast to its element type in the text (here text[]: an
            # integer list then fails with "bigint + text", which the rule's ?::BIGINT[] would not)
            typed = re.sub(r"UNNEST\((%s|%\(\w+\)s)\)", r"UNNEST(CAST(\1 AS TEXT[]))", st.hooked)
            try:
                con.execute(f"PREPARE hooked_{i} AS {_numbered(typed)}")
                con.execute(f"DEALLOCATE hooked_{i}")
                st.hooked_ok = True
            except psycopg.Error as error:
                st.hooked_ok, st.hooked_error = False, str(error).splitlines()[0][:200]


def classify(error: str | None) -> str:
    if error is None:
        return "-"
    rules = [
        ("INT128", "type INT128 (HUGEINT)"),
        ("could not determine polymorphic type", "unnest(untyped list parameter)"),
        ("function epoch_us", "epoch_us"),
        ("function epoch_ms", "epoch_ms"),
        ("function contains", "contains()"),
        ('"OR"', "INSERT OR REPLACE"),
        ("EXCEPT", "SELECT * EXCLUDE"),
        ("0x", "hex literal cast"),
        ("ATTACH", "DuckDB command"),
        ("CHECKPOINT", "DuckDB command"),
        ("DETACH", "DuckDB command"),
        ("DATABASE", "DuckDB command"),
        ("current_database", "DuckDB command"),
        ("does not exist", "missing table/column/function"),
        ("operator does not exist", "operator/type mismatch"),
        ("syntax error", "syntax"),
    ]
    for needle, label in rules:
        if needle in error:
            return label
    return error[:60]


def main() -> None:
    dml = [st for name in MODULES for st in statements_of(name)]
    schema = migrations()
    # the same text at two call sites is one statement
    unique: dict[str, Statement] = {}
    for st in dml:
        unique.setdefault(st.duckdb, st)
    dml = list(unique.values()) + dictionary_statements()
    for st in schema + dml:
        transpile(st)
    cluster = PgCluster.start()
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE census TEMPLATE template0")
        check_on_postgres(cluster.dsn("census"), schema, dml)
        check_hooked(cluster.dsn("census"), dml)
    finally:
        cluster.stop()

    def summary(rows: list[Statement], label: str) -> None:
        print(f"\n== {label}: {len(rows)} statements ==")
        print(f"unresolved pieces: {sum(not r.resolved for r in rows)}")
        print(f"sqlglot parse/render errors: {sum(r.transpile_error is not None for r in rows)}")
        print(f"PostgreSQL accepts the transpiled text: {sum(bool(r.pg_ok) for r in rows)}")
        print(
            "... and with list parameters cast to text[] in the text (psycopg sends a list[str] untyped): "
            f"{sum(bool(r.pg_ok or r.typed_ok) for r in rows)}"
        )
        still = [classify((r.pg_error or "").split(" | typed: ")[-1]) for r in rows if r.typed_ok is False]
        print("   refused even typed:", dict(Counter(still)))
        if label == "migrations":
            print(f"... after the hand fixes: {sum(bool(r.pg_ok or r.fixed_ok) for r in rows)}")
        if label == "statements":
            print(
                f"with the hooks (store_dialect.py): {sum(bool(r.hooked_ok) for r in rows)} prepare; "
                f"refused by design: {dict(Counter(r.hooked_refused for r in rows if r.hooked_refused))}; "
                "hooked but refused by PostgreSQL: "
                f"{dict(Counter(classify(r.hooked_error) for r in rows if r.hooked_ok is False))}"
            )
        print("features:", dict(Counter(f for r in rows for f in r.features).most_common()))
        print(
            "PostgreSQL refusals:", dict(Counter(classify(r.pg_error) for r in rows if r.pg_ok is False).most_common())
        )
        print("by module (statements, accepted):")
        per: dict[str, list[int]] = {}
        for r in rows:
            per.setdefault(r.module, [0, 0])
            per[r.module][0] += 1
            per[r.module][1] += bool(r.pg_ok)
        for module, (n, ok) in sorted(per.items()):
            print(f"  {module:32s} {n:3d} {ok:3d}")

    summary(schema, "migrations")
    summary(dml, "statements")
    if "--json" in sys.argv:
        out = Path(sys.argv[sys.argv.index("--json") + 1])
        out.write_text(json.dumps([asdict(st) for st in schema + dml], indent=1))


if __name__ == "__main__":
    main()
