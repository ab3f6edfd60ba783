"""The store's SQL, written once in DuckDB's text: rendered for PostgreSQL (`render`), linted for what would not port.

Issue 32; design: reports/i32-postgres-plan.md, section 2, measured by reports/i32/sql_census.py and
semantic_checks.py. SQLGlot parses the DuckDB text and renders it for PostgreSQL with these hooks:

- HUGEINT -> NUMERIC(38, 0) (the posting policy bounds every amount by 10^38 - 1: the same bound, exact);
- epoch_us(t) -> CAST(EXTRACT(EPOCH FROM t) * 1000000 AS BIGINT) (EXTRACT is NUMERIC since PostgreSQL 14: exact);
- contains(a, b) -> STRPOS(a, b) > 0; sha256(text) hashes CONVERT_TO(text, 'UTF8') (PostgreSQL's takes bytea);
- x IN (SELECT unnest(?)) -> x = ANY(?): psycopg sends a Python list as an array whose type PostgreSQL takes from
  `x`, where `unnest(?)` alone is ambiguous (`unnest(unknown)`); ANY also uses x's index;
- GROUP BY ALL -> GROUP BY the select list's expressions that aggregate nothing;
- INSERT OR REPLACE INTO t -> INSERT INTO t ... ON CONFLICT (t's primary key) DO UPDATE SET every other column (the
  key and the columns come from the DuckDB schema the migrations make: `table_keys`);
- VARCHAR renders as TEXT (SQLGlot's own: one type in PostgreSQL); SEMI and ANTI joins (as EXISTS) and
  `starts_with` need no hook;
- `DELETE FROM t WHERE rowid IN (SELECT rowid FROM t ... LIMIT ?)` -> the same with `ctid` (only that shape);
- a derived table without an alias gets one; parameters become psycopg's (`%s`, `%(name)s`) and a literal `%` is
  doubled.

`lint` names what the hooks do not render, or render into other rows without an error: such a statement is
rewritten portably in the DuckDB text, or kept as per-store code (`NotPortable`). tests/store/test_sql_portability.py
holds every statement the store runs to it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.generators.postgres import PostgresGenerator

# Functions SQLGlot leaves anonymous that the hooks below render.
ALLOWED_ANONYMOUS = frozenset({"EPOCH_US"})
_LIST_FUNCTIONS = (exp.Lambda, exp.Transform, exp.ArrayFilter, exp.Struct, exp.ArrayAgg)
# What renders as a PostgreSQL statement (SQLGlot reads `CHECKPOINT` as a column, `DETACH x` as exp.Detach).
_STATEMENTS = (
    exp.Query, exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter,
    exp.Transaction, exp.Commit, exp.Rollback,
)  # fmt: skip
_MARK = "\x00"  # brackets a parameter while `%` is escaped (no SQL text holds a NUL)

Keys = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # table -> (primary key columns, all columns in order)


class NotPortable(ValueError):
    """A statement the hooks cannot render for PostgreSQL (the message names why)."""


class _Generator(PostgresGenerator):
    TYPE_MAPPING = {**PostgresGenerator.TYPE_MAPPING, exp.DataType.Type.INT128: "NUMERIC(38, 0)"}

    def anonymous_sql(self, expression: exp.Anonymous) -> str:
        if expression.name.upper() == "EPOCH_US":
            (instant,) = expression.expressions
            return f"CAST(EXTRACT(EPOCH FROM {self.sql(instant)}) * 1000000 AS BIGINT)"
        return str(super().anonymous_sql(expression))

    def placeholder_sql(self, expression: exp.Placeholder) -> str:
        return f"{_MARK}{expression.name if expression.this else ''}{_MARK}"


class StorePostgres(Postgres):
    """PostgreSQL as the store renders it: SQLGlot's with the hooks above."""

    Generator = _Generator


def _is_list_parameter(node: exp.Expr) -> bool:
    """`unnest(?)` (DuckDB's unnest in a SELECT list parses as Explode) over a bare parameter."""
    if isinstance(node, exp.Explode):
        return isinstance(node.this, exp.Placeholder)
    if isinstance(node, exp.Unnest):
        return len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Placeholder)
    return False


def _in_list(node: exp.In) -> exp.Expr | None:
    """The `unnest(?)` of `x IN (SELECT unnest(?))`, the one shape a bare list parameter may take."""
    query = node.args.get("query")
    select = query.this if isinstance(query, exp.Subquery) else query
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or select.args.get("from_"):
        return None
    only = select.expressions[0]
    return only if _is_list_parameter(only) else None


def _in_list_parameter(node: exp.In) -> exp.Placeholder | None:
    only = _in_list(node)
    if only is None:
        return None
    found = only.this if isinstance(only, exp.Explode) else only.expressions[0]
    return found if isinstance(found, exp.Placeholder) else None


def _is_rowid(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == "rowid" and not node.table


def _row_address_delete(tree: exp.Expr) -> list[exp.Expr]:
    """The two `rowid`s of `DELETE FROM t WHERE rowid IN (SELECT rowid FROM t WHERE ... LIMIT ?)`, the one shape
    `rowid` may take: a bounded delete, both addresses read by one statement on one table. PostgreSQL's `ctid` means
    the same there (a row updated meanwhile by another transaction is skipped: a chunk deletes fewer, the next one
    takes it); it is the fast form on both engines (measured: store.retention.expired_sql), where the key without an
    index is a scan of the whole table per chunk."""
    where = tree.args.get("where") if isinstance(tree, exp.Delete) else None
    condition = where.this if isinstance(where, exp.Where) else None
    if not isinstance(condition, exp.In) or not _is_rowid(condition.this):
        return []
    query = condition.args.get("query")
    select = query.this if isinstance(query, exp.Subquery) else query
    if not isinstance(select, exp.Select) or len(select.expressions) != 1 or not _is_rowid(select.expressions[0]):
        return []
    source = select.args.get("from_")
    target, inner = tree.this, source.this if isinstance(source, exp.From) else None
    same = isinstance(target, exp.Table) and isinstance(inner, exp.Table) and target.name == inner.name
    return [condition.this, select.expressions[0]] if same and not select.args.get("joins") else []


def lint(tree: exp.Expr) -> list[str]:
    """What in the DuckDB statement `tree` PostgreSQL would refuse, or run with other rows (empty: portable)."""
    if isinstance(tree, exp.Command | exp.Attach | exp.Detach) or not isinstance(tree, _STATEMENTS):
        word = tree.name if isinstance(tree, exp.Command) else tree.sql("duckdb").split(" ")[0]
        return [f"DuckDB command {word.upper()} (per-store code)"]
    problems: list[str] = []
    allowed_lists = {id(_in_list(n)) for n in tree.find_all(exp.In) if _in_list(n) is not None}
    allowed_rowids = {id(n) for n in _row_address_delete(tree)}
    for node in tree.walk():
        if isinstance(node, exp.Select):
            if node.args.get("qualify"):
                problems.append(
                    "QUALIFY (SQLGlot's rewrite applies a LIMIT before the filter: other rows, no error); "
                    "filter a row_number() subquery"
                )
            stars = [e for e in node.expressions if isinstance(e, exp.Star)]
            if any(star.args.get("except_") or star.args.get("except") for star in stars):
                problems.append("SELECT * EXCLUDE (DuckDB's); name the columns")
        elif isinstance(node, exp.Column) and node.name.lower() == "rowid" and id(node) not in allowed_rowids:
            problems.append(
                "rowid outside `DELETE FROM t WHERE rowid IN (SELECT rowid FROM t ...)` (PostgreSQL's ctid moves "
                "with every update: not an address across statements); use the key"
            )
        elif _is_list_parameter(node) and id(node) not in allowed_lists:
            problems.append(
                "list parameter unnest(?) outside `x IN (SELECT unnest(?))` (psycopg's list is untyped: "
                "unnest(unknown) is ambiguous); write unnest(CAST(? AS T[]))"
            )
        elif isinstance(node, exp.Anonymous) and node.name.upper() not in ALLOWED_ANONYMOUS:
            problems.append(f"function without a PostgreSQL hook: {node.name}")
        elif isinstance(node, _LIST_FUNCTIONS):
            problems.append(f"list or struct function: {node.sql('duckdb')[:60]}")
        elif isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "ASOF":
            problems.append("ASOF join (no PostgreSQL equivalent)")
    return problems


def _rewrite(node: exp.Expr) -> exp.Expr:
    if _is_rowid(node):  # `lint` let it through: the bounded delete's row address
        return exp.column("ctid")
    if isinstance(node, exp.Contains):
        return exp.GT(
            this=exp.Anonymous(this="STRPOS", expressions=[node.this, node.expression]),
            expression=exp.Literal.number(0),
        )
    if isinstance(node, exp.SHA2):
        node.set("this", exp.Anonymous(this="CONVERT_TO", expressions=[node.this, exp.Literal.string("UTF8")]))
        return node
    if isinstance(node, exp.In):
        parameter = _in_list_parameter(node)
        if parameter is not None:
            return exp.EQ(this=node.this, expression=exp.Any(this=exp.Paren(this=parameter.copy())))
    if isinstance(node, exp.Select):
        group = node.args.get("group")
        if group is not None and group.args.get("all"):
            plain = [e.unalias() if isinstance(e, exp.Alias) else e for e in node.expressions]
            node.set("group", exp.Group(expressions=[e.copy() for e in plain if not e.find(exp.AggFunc)]))
    if isinstance(node, exp.Subquery) and not node.alias and isinstance(node.parent, exp.From | exp.Join):
        node.set("alias", exp.TableAlias(this=exp.to_identifier("_derived")))
    return node


@lru_cache(maxsize=1)
def table_keys() -> Keys:
    """Each table's primary key and columns in order, as the migrations leave them (read once from an in-memory
    DuckDB migrated for the purpose: the schema is the migrations' history, not one statement)."""
    from rewards_lab.store.schema import steps

    con = duckdb.connect()
    try:
        for step in steps("duckdb", ()):
            for statement in step.statements:
                con.execute(statement)
        columns: dict[str, list[str]] = {}
        for table, column in con.execute(
            "SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall():
            columns.setdefault(table, []).append(column)
        keys = dict(
            con.execute(
                "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
                "WHERE constraint_type = 'PRIMARY KEY'"
            ).fetchall()
        )
    finally:
        con.close()
    return {table: (tuple(keys.get(table, ())), tuple(names)) for table, names in columns.items()}


def _on_conflict(tree: exp.Insert, keys: Keys) -> str:
    target = tree.this
    table = target.this.name if isinstance(target, exp.Schema) else target.name
    key, columns = keys.get(table, ((), ()))
    if not key:
        raise NotPortable(f"INSERT OR REPLACE INTO {table}: the table has no primary key")
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key)
    return f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"


def _psycopg(text: str) -> str:
    """Parameters as psycopg's, every literal `%` doubled (psycopg reads `%` as the start of a parameter)."""
    pieces = text.replace("%", "%%").split(_MARK)
    # odd pieces are parameter names ('' for a positional one)
    return "".join(p if i % 2 == 0 else (f"%({p})s" if p else "%s") for i, p in enumerate(pieces))


def to_postgres(sql: str, keys: Keys | None = None) -> str:
    """`sql` (DuckDB's text) as PostgreSQL's, for psycopg; `NotPortable` names what `lint` refuses."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError as error:
        raise NotPortable(f"SQLGlot cannot parse it: {str(error).splitlines()[0]}") from error
    problems = lint(tree)
    if problems:
        raise NotPortable("; ".join(dict.fromkeys(problems)))
    replace = isinstance(tree, exp.Insert) and tree.args.get("alternative") == "REPLACE"
    tree = tree.transform(_rewrite)
    suffix = ""
    if replace:
        assert isinstance(tree, exp.Insert)
        tree.set("alternative", None)
        suffix = _on_conflict(tree, table_keys() if keys is None else keys)
    rendered: Any = tree.sql(dialect=StorePostgres)
    return _psycopg(f"{rendered}{suffix}")


@lru_cache(maxsize=4096)
def render(sql: str) -> str:
    """`to_postgres` once per text and process (rendering costs milliseconds; the texts are a few hundred)."""
    return to_postgres(sql)
