"""The canonical dialect of replay steps: DuckDB SQL parsed by SQLGlot, rendered for either engine, and linted.

The lint refuses what Spark would run with other rows and no error (design: reports/i30-replay-plan.md, section 3).

A step is written as DuckDB SQL; `:name` placeholders take SQLGlot trees (the compiled rules). `ReplaySpark` is
sqlglot's Spark with the hooks the design measured: `epoch_us` -> `UNIX_MICROS`, `timezone(z, t)` ->
`FROM_UTC_TIMESTAMP(t, z)`, HUGEINT -> DECIMAL(38, 0), and ISODOW fixed (sqlglot renders Sunday as 2). `arg_min`,
`arg_max` and `make_timestamp(us)` already render as `MIN_BY`, `MAX_BY`, `TIMESTAMP_MICROS`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.dialects.spark import Spark
from sqlglot.generators.duckdb import DuckDBGenerator
from sqlglot.generators.spark import SparkGenerator
from sqlglot.parsers.duckdb import DuckDBParser

Engine = Literal["duckdb", "spark"]

# Functions SQLGlot leaves anonymous that the Spark hooks below render.
ALLOWED_ANONYMOUS = frozenset({"EPOCH_US", "TIMEZONE"})
_WIDE_TYPES = (exp.DataType.Type.INT128, exp.DataType.Type.UINT128, exp.DataType.Type.INT256)
_LIST_FUNCTIONS = (exp.Lambda, exp.Transform, exp.ArrayFilter)


class WideDiv(exp.Expression, exp.Func):
    """`wide_div(a, b)`: integer division of wide (HUGEINT) values, truncated toward zero. DuckDB's `//` on a
    HUGEINT is exact; Spark's `DIV` returns a BIGINT (it overflows silently) and `FLOOR(a / b)` rounds the DECIMAL(38,
    6) quotient first (1999999999999999999 / 10^18 gives 2), so Spark divides the exact multiple `a - a % b`.
    Exact on both when |a| < 10^38 and |a / b| < 10^32 (Spark's quotient type is DECIMAL(38, 6))."""

    arg_types = {"this": True, "expression": True}


def _duckdb_wide_div(generator: Any, node: WideDiv) -> str:
    return f"(CAST({generator.sql(node, 'this')} AS HUGEINT) // ({generator.sql(node, 'expression')}))"


def _spark_wide_div(generator: Any, node: WideDiv) -> str:
    numerator = f"CAST({generator.sql(node, 'this')} AS DECIMAL(38, 0))"
    denominator = f"({generator.sql(node, 'expression')})"
    return f"CAST(({numerator} - {numerator} % {denominator}) / {denominator} AS DECIMAL(38, 0))"


def _spark_isodow(generator: Any, node: exp.DayOfWeekIso) -> str:
    # sqlglot renders ISODOW as (DAYOFWEEK(x) % 7) + 1; DAYOFWEEK is 1 on Sunday, so Monday must map to 1
    return f"(((DAYOFWEEK({generator.sql(node, 'this')}) + 5) % 7) + 1)"


class _DuckDBParser(DuckDBParser):
    FUNCTIONS = {**DuckDBParser.FUNCTIONS, "WIDE_DIV": WideDiv.from_arg_list}


class _DuckDBGenerator(DuckDBGenerator):
    TYPE_MAPPING = {**DuckDBGenerator.TYPE_MAPPING, exp.DataType.Type.INT128: "HUGEINT"}
    TRANSFORMS = {**DuckDBGenerator.TRANSFORMS, WideDiv: _duckdb_wide_div}


class _SparkGenerator(SparkGenerator):
    TYPE_MAPPING = {**SparkGenerator.TYPE_MAPPING, exp.DataType.Type.INT128: "DECIMAL(38, 0)"}
    TRANSFORMS = {**SparkGenerator.TRANSFORMS, exp.DayOfWeekIso: _spark_isodow, WideDiv: _spark_wide_div}

    def anonymous_sql(self, expression: exp.Anonymous) -> str:
        name = expression.name.upper()
        if name == "EPOCH_US":
            return str(self.func("UNIX_MICROS", *expression.expressions))
        if name == "TIMEZONE":
            zone, instant = expression.expressions
            return str(self.func("FROM_UTC_TIMESTAMP", instant, zone))
        return str(super().anonymous_sql(expression))


class ReplayDuckDB(DuckDB):
    """DuckDB as steps are written and run: `wide_div` parsed, HUGEINT spelled as such."""

    Parser = _DuckDBParser
    Generator = _DuckDBGenerator


class ReplaySpark(Spark):
    """Spark SQL as the replay renders it: sqlglot's Spark with the design's hooks."""

    Generator = _SparkGenerator


_DIALECTS: dict[Engine, type[sqlglot.Dialect]] = {"duckdb": ReplayDuckDB, "spark": ReplaySpark}


def parse(sql: str, **placeholders: exp.Expr) -> exp.Query:
    """A step's DuckDB SQL text as a tree, each `:name` replaced by the tree given for it (all must be given)."""
    tree = sqlglot.parse_one(sql, read=ReplayDuckDB)
    if not isinstance(tree, exp.Query):
        raise TypeError(f"a replay step is a query, not {type(tree).__name__}: {sql[:80]!r}")
    filled = exp.replace_placeholders(tree, **placeholders)
    missing = sorted({p.name or "?" for p in filled.find_all(exp.Placeholder)})
    if missing:
        raise ValueError(f"placeholders without a value: {', '.join(missing)}")
    assert isinstance(filled, exp.Query)
    return filled


_ATOMS = (exp.Case, exp.Paren, exp.Column, exp.Literal, exp.Boolean, exp.Null)  # need no parentheses
_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Text:
    """A step's query as written: canonical DuckDB text with `:name` placeholders and their trees (of the
    executor's engine). DuckDB runs the text itself, the trees rendered in (no parse: a replay's steps would
    otherwise spend tens of milliseconds in SQLGlot's parser); `tree()` is what Spark renders and the lint reads."""

    sql: str
    placeholders: Mapping[str, exp.Expr] = field(default_factory=dict)
    duckdb_sql: str | None = None  # the DuckDB text, when the step has it already (trees rendered once before)

    def tree(self) -> exp.Query:
        return parse(self.sql, **{name: node.copy() for name, node in self.placeholders.items()})

    def duckdb(self) -> str:
        if self.duckdb_sql is not None:
            return self.duckdb_sql

        def filled(match: re.Match[str]) -> str:
            node = self.placeholders.get(match.group(1))
            if node is None:
                raise ValueError(f"placeholder without a value: {match.group(1)}")
            text = node.sql(dialect=ReplayDuckDB)
            return text if isinstance(node, _ATOMS) else f"({text})"

        return _PLACEHOLDER.sub(filled, self.sql)

    def on(self, engine: Engine) -> str:
        """The query as `engine`'s SQL text."""
        return self.duckdb() if engine == "duckdb" else render(self.tree(), engine)


def render(query: exp.Query, engine: Engine) -> str:
    """The query as the engine's SQL text."""
    return query.sql(dialect=_DIALECTS[engine])


def wide_div(numerator: exp.Expr, denominator: exp.Expr) -> exp.Expr:
    """`numerator // denominator` on wide values, exact on both engines (see `WideDiv` for the bound)."""
    return WideDiv(this=numerator, expression=denominator)


def _is_wide(operand: exp.Expr, wide: Collection[str]) -> bool:
    for node in operand.walk():
        if isinstance(node, WideDiv) or (isinstance(node, exp.Column) and node.name in wide):
            return True
        if isinstance(node, exp.Cast):
            to = node.to
            if to.is_type(*_WIDE_TYPES):
                return True
            precision = to.expressions[0].this if to.is_type(exp.DataType.Type.DECIMAL) and to.expressions else None
            if isinstance(precision, exp.Literal) and int(precision.this) > 18:
                return True
    return False


def lint(query: exp.Query, *, wide: Collection[str] = ()) -> list[str]:
    """What in `query` renders for Spark without error but may give other rows than DuckDB (empty: portable).
    `wide` names columns holding HUGEINT values (a cast inside the operand is found without it)."""
    problems: list[str] = []
    for node in query.walk():
        if isinstance(node, _LIST_FUNCTIONS):
            problems.append(f"list function or lambda: {node.sql(ReplayDuckDB)[:60]}")
        elif isinstance(node, exp.Anonymous) and node.name.upper() not in ALLOWED_ANONYMOUS:
            kind = "list function" if node.name.upper().startswith("LIST_") else "function without a Spark hook"
            problems.append(f"{kind}: {node.name}")
        elif isinstance(node, exp.IntDiv) and (_is_wide(node.this, wide) or _is_wide(node.expression, wide)):
            problems.append(
                f"// on a wide value (Spark's DIV returns a BIGINT; use wide_div): {node.sql(ReplayDuckDB)[:60]}"
            )
        elif isinstance(node, exp.Join) and str(node.args.get("method") or "").upper() == "ASOF":
            problems.append("ASOF join (no Spark equivalent; use a running max over a union)")
        elif isinstance(node, exp.Select):
            unnests = [n for n in node.find_all(exp.Explode, exp.Unnest) if n.parent_select is node]
            if len(unnests) > 1:
                problems.append(f"{len(unnests)} unnests in one SELECT (DuckDB zips them, Spark crosses them)")
    return problems
