"""The experiment's "StorePostgres": sqlglot's postgres output with the hooks the plan proposes (section 3).

Each hook is a rewrite of the parsed DuckDB tree before sqlglot renders it for PostgreSQL:

- HUGEINT (sqlglot's INT128) -> NUMERIC(38, 0);
- epoch_us(t) -> CAST(EXTRACT(EPOCH FROM t) * 1000000 AS BIGINT) (EXTRACT returns NUMERIC since PostgreSQL 14: exact);
- contains(a, b) -> STRPOS(a, b) > 0;
- sha256(x) -> the digest of CONVERT_TO(x, 'UTF8') (PostgreSQL's sha256 takes bytea);
- x IN (SELECT unnest(?)) -> x = ANY(?) (psycopg sends a Python list as a typed array; ANY uses the index);
- GROUP BY ALL -> GROUP BY the select list's expressions that aggregate nothing;
- INSERT OR REPLACE INTO t -> INSERT INTO t ... ON CONFLICT (t's key) DO UPDATE SET every other column (the key and the
  column order come from the caller: `keys`);
- rowid -> ctid;
- a derived table without an alias gets one.

What is NOT hooked, on purpose (the plan writes these by hand per store): QUALIFY (sqlglot's rewrite moves the
LIMIT inside, before the filter: a different result, no error), SELECT * EXCLUDE, DuckDB's commands (ATTACH,
COPY FROM DATABASE, CHECKPOINT), the Arrow replacement scans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

Keys = Mapping[str, tuple[Sequence[str], Sequence[str]]]  # table -> (key columns, all columns in order)


class NotPortable(ValueError):
    """A construct the hooks refuse to render (written by hand for PostgreSQL)."""


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("NUMERIC(38, 0)", dialect="postgres")
    if isinstance(node, exp.Anonymous) and node.name.upper() == "EPOCH_US":
        inner = node.expressions[0]
        return exp.cast(
            exp.Mul(this=exp.Extract(this=exp.var("EPOCH"), expression=inner), expression=exp.Literal.number(1000000)),
            "BIGINT",
        )
    if isinstance(node, exp.Contains):
        return exp.GT(
            this=exp.Anonymous(this="STRPOS", expressions=[node.this, node.expression]),
            expression=exp.Literal.number(0),
        )
    if isinstance(node, exp.SHA2):
        node.set("this", exp.Anonymous(this="CONVERT_TO", expressions=[node.this, exp.Literal.string("UTF8")]))
        return node
    if isinstance(node, exp.In) and isinstance(node.args.get("query"), exp.Subquery | exp.Select):
        query = node.args["query"]
        select = query.this if isinstance(query, exp.Subquery) else query
        if isinstance(select, exp.Select) and len(select.expressions) == 1 and not select.args.get("from_"):
            only = select.expressions[0]  # DuckDB's unnest in a SELECT list parses as Explode
            if isinstance(only, exp.Explode) and isinstance(only.this, exp.Placeholder):
                return exp.EQ(this=node.this, expression=exp.Any(this=exp.Paren(this=only.this)))
            if isinstance(only, exp.Unnest) and len(only.expressions) == 1:
                return exp.EQ(this=node.this, expression=exp.Any(this=only.expressions[0]))
    if isinstance(node, exp.Column) and node.name.lower() == "rowid" and not node.table:
        return exp.column("ctid")
    if isinstance(node, exp.Select):
        if node.args.get("qualify"):
            raise NotPortable("QUALIFY")
        if any(isinstance(star, exp.Star) and star.args.get("except") for star in node.expressions):
            raise NotPortable("SELECT * EXCLUDE")
        group = node.args.get("group")
        if group is not None and group.args.get("all"):
            plain = [e.unalias() if isinstance(e, exp.Alias) else e for e in node.expressions]
            keys = [e.copy() for e in plain if not e.find(exp.AggFunc)]
            node.set("group", exp.Group(expressions=keys))
    if isinstance(node, exp.Subquery) and not node.alias and isinstance(node.parent, exp.From | exp.Join):
        node.set("alias", exp.TableAlias(this=exp.to_identifier("_derived")))
    return node


def to_postgres(sql: str, keys: Keys | None = None) -> str:
    """`sql` (DuckDB) rendered for PostgreSQL with the hooks; NotPortable for what is written by hand."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    if isinstance(tree, exp.Command):
        raise NotPortable(f"DuckDB command {tree.name}")
    replace = isinstance(tree, exp.Insert) and tree.args.get("alternative") == "REPLACE"
    tree = tree.transform(_rewrite)
    if replace:
        tree.set("alternative", None)
    rendered = tree.sql(dialect="postgres")
    if replace:
        table = tree.this.name if isinstance(tree.this, exp.Table) else tree.this.this.name
        if keys is None or table not in keys:
            raise NotPortable(f"INSERT OR REPLACE INTO {table} without its key")
        key, columns = keys[table]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c not in key)
        rendered += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    return rendered
