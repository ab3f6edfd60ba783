"""Every SQL statement the live service runs on its store, read statically from the source (the approach of
reports/i32/sql_census.py): each `.execute(...)`, `.executemany`, `.sql`, `scalar`, `fetch_all`, `fetch_all_as`,
`fetch_one_as` and `paginate(select_sql=...)` call of the modules below, its SQL argument resolved from string
literals, f-strings, module constants and the enclosing function's local assignments (`sql = ...` then every
`sql += ...` in source order: optional clauses are all kept, which checks each of them). A piece that cannot be
resolved becomes the identifier `x_dyn` and the statement is marked unresolved. Statements kept in dictionaries
(the ledger's verification checks, retention's deletes) are listed from the dictionaries themselves."""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_NOT_SQL = {"__init__", "dialect", "schema"}  # the migrations are read from MIGRATIONS
MODULES = sorted(
    [f"rewards_lab.store.{p.stem}" for p in (ROOT / "rewards_lab/store").glob("*.py") if p.stem not in _NOT_SQL]
    + [
        "rewards_lab.service.event_export",
        "rewards_lab.service.programme_forecast",
        "rewards_lab.security.auth_audit",
        "rewards_lab.worker.audit_writer",
        "rewards_lab.cli.main",
    ]
)
CALLS = {"execute": 0, "executemany": 0, "sql": 0, "scalar": 1, "fetch_all": 1, "fetch_all_as": 2, "fetch_one_as": 2}
_SQL_WORD = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|BEGIN|COMMIT|ROLLBACK|ATTACH|DETACH|COPY|CHECKPOINT|"
    r"PRAGMA)\b",
    re.I,
)
DYNAMIC = "x_dyn"


@dataclass(frozen=True)
class Statement:
    module: str  # without "rewards_lab."
    function: str  # the enclosing function ("" at module level)
    line: int
    sql: str
    resolved: bool = True
    dropped: int = 0  # optional clauses left out (unresolvable): checked without them

    @property
    def site(self) -> str:
        return f"{self.module}.{self.function}" if self.function else self.module


class _Resolver:
    def __init__(self, module: Any, function: ast.AST | None) -> None:
        self.namespace = dict(vars(module))
        self.locals: dict[str, list[ast.expr]] = {}
        self.complete = True
        self.dropped = 0
        if function is not None:
            nodes = sorted(
                (n for n in ast.walk(function) if isinstance(n, ast.Assign | ast.AugAssign)),
                key=lambda n: (n.lineno, n.col_offset),
            )
            for node in nodes:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.locals.setdefault(node.targets[0].id, [node.value])
                elif (
                    isinstance(node, ast.AugAssign)
                    and isinstance(node.op, ast.Add)
                    and isinstance(node.target, ast.Name)
                    and node.target.id in self.locals
                ):
                    self.locals[node.target.id].append(node.value)

    def _clause(self, node: ast.expr, depth: int) -> str:
        """An optional clause (`sql += ...`): dropped, and counted, when it cannot be resolved (a loop's column
        name): the rest of the statement is still checked."""
        inner = _Resolver.__new__(_Resolver)
        inner.namespace, inner.locals, inner.complete, inner.dropped = self.namespace, self.locals, True, 0
        text = inner.text(node, depth)
        if inner.complete:
            return text
        self.dropped += 1
        return ""

    def text(self, node: ast.expr, depth: int = 0) -> str:
        if depth > 6:
            self.complete = False
            return DYNAMIC
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(
                self.text(v.value, depth + 1) if isinstance(v, ast.FormattedValue) else str(v.value)  # type: ignore[attr-defined]
                for v in node.values
            )
        if isinstance(node, ast.IfExp):  # `", x = ?" if flag else ""`: the clause is checked
            return self.text(node.body, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left, depth + 1) + self.text(node.right, depth + 1)
        if isinstance(node, ast.Name):
            value = self.namespace.get(node.id)
            if isinstance(value, str | int):
                return str(value)
            if node.id in self.locals:
                first, *added = self.locals[node.id]
                return self.text(first, depth + 1) + "".join(self._clause(piece, depth + 1) for piece in added)
        try:
            value = eval(compile(ast.Expression(node), "<sql>", "eval"), dict(self.namespace))  # noqa: S307
        except Exception:  # noqa: BLE001 - anything unresolvable is a dynamic piece
            value = None
        if isinstance(value, str | int):
            return str(value)
        self.complete = False
        return DYNAMIC


def _owners(tree: ast.Module) -> dict[int, ast.FunctionDef]:
    owner: dict[int, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for child in ast.walk(node):
                owner[id(child)] = node  # the innermost function wins: walk visits outer functions first
    return owner


def statements_of(module_name: str) -> list[Statement]:
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__ or "").read_text())
    owner = _owners(tree)
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
        function = owner.get(id(node))
        resolver = _Resolver(module, function)
        sql = resolver.text(arg)
        if _SQL_WORD.search(sql):  # else not SQL (a prepared query object, a pandas call)
            short = module_name.removeprefix("rewards_lab.")
            site = function.name if function else ""
            found.append(Statement(short, site, node.lineno, sql, resolver.complete, resolver.dropped))
    return found


def from_dictionaries() -> list[Statement]:
    from rewards_lab.store import retention, verification

    found = [Statement("store.verification", f"_CHECKS[{n!r}]", 0, sql) for n, sql in verification._CHECKS.items()]
    found += [
        Statement("store.retention", f"expired_sql({t!r})", 0, retention.expired_sql(t)) for t in retention._EXPIRED
    ]
    return found


def all_statements() -> list[Statement]:
    """Every statement once (the same text at two call sites is one statement, at its first site)."""
    unique: dict[str, Statement] = {}
    for statement in [s for name in MODULES for s in statements_of(name)] + from_dictionaries():
        unique.setdefault(statement.sql, statement)
    return list(unique.values())
