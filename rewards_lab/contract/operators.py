"""The condition operators, one entry each (`OPERATORS`): all the service, the replays and the lab know of one.

An entry (`OperatorEntry`) holds:
- `parse`: the validation of its value, as the request models run it (`contract/rule_requests.Condition`), giving
  the value the engines use; a refusal is a ServiceError naming the offending element;
- `test`: its evaluation, one function of the value read built once per condition (the live engine, simulation and
  the replays' Python fallback call it: `domain/conditions.tester`);
- `reason`: why it holds or not, as simulations, the lab and the replays' explanations say it;
- `describe` (from `symbol`): the condition as a person reads it, `amount >= 20`;
- `sql`: its SQLGlot form for both replay engines, made of the views of the field the replay compiler offers
  (`SqlField`: the field as a number, a string, a boolean, a list, present or not), TRUE exactly when it holds;
- `passing` and `probes`: a field value it holds for, and values around its edges (push verification);
- `hint` and `words`: the rule builder's placeholder for its value, and how a sweep's label reads it;
- `shape` and `kinds`: the form of its value (none, one, a list or a pair; numbers, strings, booleans), for tests
  that draw conditions.

The registry lives in the contract because the request models validate an operator's value and contract/ may
import nothing above it; what an operator means is part of what clients rely on (docs/rules.md), so evaluation,
reasons and hints sit beside the validation, as pure functions. SQLGlot is imported only inside the SQL builders,
so that importing the contract (the Python client does) stays light.
"""

from __future__ import annotations

import operator as python_operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rewards_lab.contract.amounts import parse_threshold
from rewards_lab.contract.condition_values import (
    fail,
    kind_of,
    list_contains,
    scalar,
    shown,
    text,
    value_kind,
    value_list,
    value_pair,
    why_not,
)
from rewards_lab.contract.errors import ServiceError

if TYPE_CHECKING:
    from sqlglot import exp

Relation = Literal["gte", "gt", "lte", "lt", "eq", "neq"]
Shape = Literal["none", "one", "list", "pair"]
ValueKind = Literal["number", "string", "boolean"]
Test = Callable[[Any], bool]
_PYTHON: dict[Relation, Callable[[Any, Any], bool]] = {
    "gte": python_operator.ge,
    "gt": python_operator.gt,
    "lte": python_operator.le,
    "lt": python_operator.lt,
    "eq": python_operator.eq,
    "neq": python_operator.ne,
}
_SQL_NAMES: dict[Relation, str] = {"gte": "GTE", "gt": "GT", "lte": "LTE", "lt": "LT", "eq": "EQ", "neq": "NEQ"}


class SqlField(Protocol):
    """What the replay compiler offers an operator's SQL form: the views of one field of the events, as SQLGlot
    expressions (NULL where the field is absent or of another kind), and its AND / OR (constants folded). The
    compiler notes the rows a view cannot decide exactly (evaluated in Python)."""

    def present(self) -> exp.Expr:
        """Whether the field is there (JSON null counts as absent); never NULL."""

    def text(self) -> exp.Expr:
        """The value when it is a string, else NULL (an `exp.Null` node when it never is)."""

    def boolean(self) -> exp.Expr:
        """The value when it is a boolean, else NULL (an `exp.Null` node when it never is)."""

    def number(self, relation: Relation, threshold: Decimal) -> exp.Expr:
        """The value is a number and `value <relation> threshold` holds (exactly)."""

    def number_in(self, members: tuple[Decimal, ...], inside: bool) -> exp.Expr:
        """The value is a number, equal to one of the members (`inside`) or to none of them."""

    def list_contains(self, wanted: Decimal | str) -> exp.Expr:
        """The value is a list with an element of the wanted value's kind equal to it."""

    def all(self, parts: list[exp.Expr]) -> exp.Expr:
        """The parts joined by AND."""

    def any(self, parts: list[exp.Expr]) -> exp.Expr:
        """The parts joined by OR."""


Sql = Callable[[SqlField, Any], "tuple[exp.Expr, bool]"]  # (expression, whether it may be NULL)


def _default_probes(value: Any) -> list[Any]:
    """Values around a value's edges: each number -1, -0.01, 0, +0.01, +1 and as a string; each string and the
    string with `~` after it; each boolean and its negation."""
    values: list[Any] = []
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, Decimal) and not isinstance(item, bool):
            values += [item + delta for delta in (Decimal(-1), Decimal("-0.01"), Decimal(0), Decimal("0.01"), 1)]
            values.append(str(item))
        elif item is not None:
            values += [item, f"{item}~"] if isinstance(item, str) else [item, not item]
    return values


@dataclass(frozen=True)
class OperatorEntry:
    """Everything about one operator (see the module)."""

    name: str
    symbol: str  # how `describe` writes it: `amount >= 20`, `channel not in ["web"]`
    words: str  # how a sweep's label reads it: `amount at least`
    hint: str  # the rule builder's placeholder for its value
    shape: Shape
    kinds: tuple[ValueKind, ...]
    parse: Callable[[object, str], Any]  # (the value as sent, where) -> the value as the engines use it
    test: Callable[[Any], Test]  # the value -> a test of the field's value as read
    reason: Callable[[str, Any, Any, bool], str]  # (field, value read, the value, verdict) -> why
    sql: Sql
    passing: Callable[[Any], Any]  # the value -> a field value it holds for (None: leave the field out)
    probes: Callable[[Any], list[Any]] = _default_probes

    @property
    def takes_value(self) -> bool:
        return self.shape != "none"

    def describe(self, field: str, value: Any) -> str:
        """The condition as a person reads it: `amount >= 20`, `channel in ["web", "app"]`, `vip exists`."""
        if not self.takes_value:
            return f"{field} {self.symbol}"
        if self.shape == "pair":
            low, high = value
            return f"{field} {self.symbol} {shown(low)} and {shown(high)}"
        return f"{field} {self.symbol} {shown(value)}"

    def value_of(self, raw: object, where: str = "value") -> Any:
        """The value as the engines use it (Decimal, str, bool; a tuple for lists and pairs; None without one).
        Raises ServiceError (`field_invalid` / `field_required`, `details.field` = `where` or an element of it)."""
        if not self.takes_value:
            if raw is not None:
                raise fail(f"{self.name} takes no value", where)
            return None
        if raw is None:
            raise ServiceError("field_required", f"{where} is required for {self.name}", field=where)
        return self.parse(raw, where)


# pieces shared by entries -------------------------------------------------------------------------------------------
def _typed(
    reason: Callable[[str, Any, Any, bool], str],
) -> Callable[[str, Any, Any, bool], str]:
    """A reason for an operator that holds only for values of its value's kind: a value of another kind (or none)
    is said so first."""

    def typed(name: str, value: Any, expected: Any, verdict: bool) -> str:
        if kind_of(value) != value_kind(expected):
            return why_not(name, expected, value)
        return reason(name, value, expected, verdict)

    return typed


def _binary(relation: Relation, left: exp.Expr, right: exp.Expr) -> exp.Expr:
    from sqlglot import exp

    if isinstance(left, exp.Null):
        return exp.false()
    node: exp.Expr = getattr(exp, _SQL_NAMES[relation])(this=left, expression=right)
    return node


def _literal(value: str) -> exp.Expr:
    from sqlglot import exp

    return exp.Literal.string(value)


def _truth(value: bool) -> exp.Expr:
    from sqlglot import exp

    return exp.true() if value else exp.false()


def _numeric_passing(relation: Relation) -> Callable[[Any], Any]:
    """A passing value of a comparison: the threshold itself, one above or one below; for eq / neq on strings and
    booleans the value, a string beside it, the other boolean."""

    def passing(value: Any) -> Any:
        if isinstance(value, Decimal):
            return {"gt": value + 1, "lt": value - 1, "neq": value + 1}.get(relation, value)
        if relation != "neq":
            return value
        return (not value) if isinstance(value, bool) else f"{value}~"

    return passing


# comparisons --------------------------------------------------------------------------------------------------------
def _comparison(relation: Relation, symbol: str, words: str, *, any_kind: bool) -> OperatorEntry:
    """gte, gt, lte, lt (numbers; a decimal string is its number) and eq, neq (`any_kind`: also strings and
    booleans)."""
    compare = _PYTHON[relation]

    def parse(raw: object, where: str) -> Any:
        if any_kind:
            return scalar(raw, where, decimal_text=True, booleans=True)
        return parse_threshold(raw, where)  # a string is ordered with `between` (dates, e.g.)

    def test(expected: Any) -> Test:
        kind = type(expected)
        return lambda value: type(value) is kind and compare(value, expected)

    def reason(name: str, value: Any, expected: Any, verdict: bool) -> str:
        relation_text = "holds" if verdict else "does not hold"
        return f"{name} = {shown(value)} {symbol} {shown(expected)} {relation_text}"

    def sql(field: SqlField, expected: Any) -> tuple[exp.Expr, bool]:
        if isinstance(expected, bool):
            return _binary(relation, field.boolean(), _truth(expected)), True
        if isinstance(expected, str):
            return _binary(relation, field.text(), _literal(expected)), True
        return field.number(relation, expected), True

    hint = '20, web, "20" or true' if any_kind else "a number: 20"
    kinds: tuple[ValueKind, ...] = ("number", "string", "boolean") if any_kind else ("number",)
    return OperatorEntry(
        relation, symbol, words, hint, "one", kinds, parse, test, _typed(reason), sql, _numeric_passing(relation)
    )


# in, not_in -----------------------------------------------------------------------------------------------------
def _membership(inside: bool) -> OperatorEntry:
    name = "in" if inside else "not_in"

    def test(expected: Any) -> Test:
        kind, members = type(expected[0]), frozenset(expected)
        if inside:
            return lambda value: type(value) is kind and value in members
        return lambda value: type(value) is kind and value not in members

    def reason(field: str, value: Any, expected: Any, verdict: bool) -> str:
        member = inside == verdict
        return f"{field} = {shown(value)} is {'' if member else 'not '}in {shown(expected)}"

    def sql(field: SqlField, expected: Any) -> tuple[exp.Expr, bool]:
        from sqlglot import exp

        if not isinstance(expected[0], str):
            return field.number_in(expected, inside), True
        text = field.text()
        if isinstance(text, exp.Null):
            return exp.false(), True
        listed: exp.Expr = exp.In(this=text, expressions=[_literal(item) for item in expected])
        return (listed if inside else exp.not_(listed)), True

    def passing(value: Any) -> Any:
        if inside:
            return value[0]
        if isinstance(value[0], str):
            outside = "~"
            while outside in value:
                outside += "~"
            return outside
        return Decimal(0) if Decimal(0) not in value else max(value) + 1

    return OperatorEntry(
        name,
        "in" if inside else "not in",
        "one of" if inside else "none of",
        '["web", "app"] or [1, 2]',
        "list",
        ("number", "string"),
        value_list,
        test,
        _typed(reason),
        sql,
        passing,
    )


# between --------------------------------------------------------------------------------------------------------
def _between_test(expected: Any) -> Test:
    low, high = expected
    kind = type(low)
    return lambda value: type(value) is kind and low <= value <= high


def _between_reason(field: str, value: Any, expected: Any, verdict: bool) -> str:
    low, high = expected
    inside = "is" if verdict else "is not"
    return f"{field} = {shown(value)} {inside} between {shown(low)} and {shown(high)}"


def _between_sql(field: SqlField, expected: Any) -> tuple[exp.Expr, bool]:
    from sqlglot import exp

    low, high = expected
    if not isinstance(low, str):
        return field.all([field.number("gte", low), field.number("lte", high)]), True
    text = field.text()
    if isinstance(text, exp.Null):
        return exp.false(), True
    return exp.Between(this=text, low=_literal(low), high=_literal(high)), True


BETWEEN = OperatorEntry(
    "between",
    "between",
    "between",
    '[10, 20] or ["2024-01-01", "2024-03-31"]',
    "pair",
    ("number", "string"),
    value_pair,
    _between_test,
    _typed(_between_reason),
    _between_sql,
    lambda value: value[0],
)


# exists, not_exists -------------------------------------------------------------------------------------------------
def _presence(present: bool) -> OperatorEntry:
    name = "exists" if present else "not_exists"

    def test(_expected: Any) -> Test:
        if present:
            return lambda value: value is not None
        return lambda value: value is None

    def reason(field: str, value: Any, _expected: Any, verdict: bool) -> str:
        if present:
            return f"{field} exists" if verdict else f"field '{field}' is missing"
        return f"field '{field}' is missing, as required" if verdict else f"{field} exists ({shown(value)})"

    def sql(field: SqlField, _expected: Any) -> tuple[exp.Expr, bool]:
        from sqlglot import exp

        test = field.present()
        return (test if present else exp.not_(test)), False

    def parse(_raw: object, _where: str) -> None:  # pragma: no cover - `value_of` refuses any value first
        return None

    return OperatorEntry(
        name,
        name.replace("_", " "),
        name,
        "(no value)",
        "none",
        (),
        parse,
        test,
        reason,
        sql,
        lambda _value: "x" if present else None,
        lambda _value: ["x", Decimal(1), None],  # null counts as absent
    )


# starts_with, ends_with, and contains on a string: text tests (by code point, case-sensitive) ----------------
def _text_probes(value: Any) -> list[Any]:
    """The text, with a character after it and before it, one character short, and a number."""
    return [value, f"{value}~", f"~{value}", value[:-1], Decimal(1)]


def _text_sql(node: str, field: SqlField, expected: str) -> exp.Expr:
    """A string function of SQLGlot's (`StartsWith`, `EndsWith`, `Contains`) on the field's text; FALSE when the
    field is never a string."""
    from sqlglot import exp

    text = field.text()
    if isinstance(text, exp.Null):
        return exp.false()
    test: exp.Expr = getattr(exp, node)(this=text, expression=_literal(expected))
    return test


def _text_operator(name: str, verb: str, negated: str, hint: str, holds: Callable[[str, str], bool]) -> OperatorEntry:
    """An operator on strings: it holds for a string field whose text `holds` for the value."""
    node = "".join(part.title() for part in name.split("_"))  # starts_with -> StartsWith

    def test(expected: Any) -> Test:
        return lambda value: type(value) is str and holds(value, expected)

    def reason(field: str, value: Any, expected: Any, verdict: bool) -> str:
        return f"{field} = {shown(value)} {verb if verdict else negated} {shown(expected)}"

    def sql(field: SqlField, expected: Any) -> tuple[exp.Expr, bool]:
        return _text_sql(node, field, expected), True

    return OperatorEntry(
        name, verb, verb, hint, "one", ("string",), text, test, _typed(reason), sql, lambda value: value, _text_probes
    )


STARTS_WITH = _text_operator("starts_with", "starts with", "does not start with", "a string: web", str.startswith)
ENDS_WITH = _text_operator("ends_with", "ends with", "does not end with", "a string: .com", str.endswith)


# contains: a list's element, or (a string value) part of a string --------------------------------------------
def _contains_test(expected: Any) -> Test:
    if isinstance(expected, str):
        return lambda value: (
            (type(value) is str and expected in value) or (isinstance(value, list) and list_contains(value, expected))
        )
    return lambda value: isinstance(value, list) and list_contains(value, expected)


def _contains_reason(field: str, value: Any, expected: Any, verdict: bool) -> str:
    if isinstance(value, list) or (isinstance(value, str) and isinstance(expected, str)):
        relation = "contains" if verdict else "does not contain"
        return f"{field} = {shown(value)} {relation} {shown(expected)}"
    if value is None:
        return f"field '{field}' is missing"
    return f"field '{field}' is {'neither a list nor a string' if isinstance(expected, str) else 'not a list'}"


def _contains_sql(field: SqlField, expected: Any) -> tuple[exp.Expr, bool]:
    listed = field.list_contains(expected)
    if not isinstance(expected, str):
        return listed, True
    return field.any([listed, _text_sql("Contains", field, expected)]), True


def _contains_probes(value: Any) -> list[Any]:
    return [*_text_probes(value), [value]] if isinstance(value, str) else _default_probes(value)


CONTAINS = OperatorEntry(
    "contains",
    "contains",
    "contains",
    'gold or "20" (in a list, or part of a string)',
    "one",
    ("number", "string"),
    lambda raw, where: scalar(raw, where, decimal_text=False),
    _contains_test,
    _contains_reason,
    _contains_sql,
    lambda value: [value],
    _contains_probes,
)


# the registry: the wire's order (the Operator enum and the OpenAPI document list them in it) -------------------
def _registry(entries: Sequence[OperatorEntry]) -> dict[str, OperatorEntry]:
    return {entry.name: entry for entry in entries}


OPERATORS: dict[str, OperatorEntry] = _registry(
    [
        _comparison("gte", ">=", "at least", any_kind=False),
        _comparison("gt", ">", "more than", any_kind=False),
        _comparison("lte", "<=", "at most", any_kind=False),
        _comparison("lt", "<", "less than", any_kind=False),
        _comparison("eq", "==", "equal to", any_kind=True),
        _comparison("neq", "!=", "not equal to", any_kind=True),
        _membership(True),
        _membership(False),
        BETWEEN,
        _presence(True),
        _presence(False),
        CONTAINS,
        STARTS_WITH,
        ENDS_WITH,
    ]
)
