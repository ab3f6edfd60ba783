"""How SQL reads a field's value, with the live engine's reading (rewards_lab.domain.conditions.read_value).

A `FieldSource` says where an engine finds a field (a typed column, a STRUCT field, a JSON value, a CSV cell) and
of which kind it is; the views below are what the condition compiler (rewards_lab.replay.compiler) takes of it:
- `numeric`: the value as an exact SQL number, NULL when it is no number (a string "20" is no number, a number is
  no string), and the rows whose number SQL cannot read exactly (`exotic`: evaluated in Python);
- `string_of`, `boolean_of`: the value when it is a string / a boolean, else NULL;
- `present`: whether the field is there (JSON null counts as absent), never NULL;
- `contains`: whether a list holds a number or a string of the same kind.

Kinds: int, decimal and double columns are numbers; text is a number spelled as text (HUGEINT and wide DECIMALs);
string and boolean columns are strings and booleans; list columns are lists of elements of one kind; json is a JSON
value whose kind is decided per row (DuckDB); csv is an untyped CSV cell read as a JSON scalar; python is a value
only Python reads exactly (the row is exotic wherever it is present); never is any other value (a STRUCT, a MAP,
a date), present but no number, string, boolean or list; missing is a field no row has.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from sqlglot import exp

DialectName = Literal["duckdb", "spark"]
Kind = Literal[
    "int", "decimal", "double", "text", "string", "boolean", "list", "json", "csv", "python", "never", "missing"
]
# A JSON number, and the subset read exactly as DECIMAL(28, 10): at most 18 integer digits and 10 places.
NUMBER_RE = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"
SIMPLE_RE = r"-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,10})?"
# JSON text that DuckDB may read inexactly: 16 or more digits in a row, or an exponent.
UNSAFE_JSON_RE = r"[0-9.]{16}|[0-9][eE]"
_LARGEST_DOUBLE = "1.7976931348623157e308"
_JSON_NUMBERS = ("BIGINT", "UBIGINT", "DOUBLE")


@dataclass(frozen=True)
class Dialect:
    """What differs between the engines beyond SQLGlot's rendering: the wide integer type for products that
    overflow a BIGINT, whether a double cast to text is its shortest repr (DuckDB's is; Java's is not always, so
    Spark reads double amounts in Python), and the spelling of time zone conversions and timestamps."""

    name: DialectName
    wide_int: str
    shortest_double_text: bool

    def render(self, node: exp.Expr) -> str:
        return node.sql(dialect=self.name)

    @property
    def instant_type(self) -> str:
        """The type of `occurred_at` in the engine's view (an instant)."""
        return "TIMESTAMPTZ" if self.name == "duckdb" else "TIMESTAMP"

    def local_time(self, instant: exp.Expr, zone: str) -> exp.Expr:
        """The wall-clock time of an instant in an IANA zone (a timestamp without zone)."""
        if self.name == "duckdb":
            return call("timezone", string(zone), instant)
        return call("from_utc_timestamp", instant, string(zone))

    def weekday(self, local: exp.Expr) -> exp.Expr:
        """ISO day of the week, 1 = Monday ... 7 = Sunday."""
        if self.name == "duckdb":
            return call("isodow", local)
        return exp.Add(this=call("weekday", local), expression=number(1))

    def hour(self, local: exp.Expr) -> exp.Expr:
        return call("hour", local)

    def day_text(self, local: exp.Expr) -> exp.Expr:
        """The date as "YYYY-MM-DD"."""
        if self.name == "duckdb":
            return cast(cast(local, "DATE"), "VARCHAR")
        return call("date_format", local, string("yyyy-MM-dd"))


DUCKDB = Dialect("duckdb", "HUGEINT", True)
SPARK = Dialect("spark", "DECIMAL(38, 0)", False)


@dataclass(frozen=True)
class FieldSource:
    """How an engine reads one field: `value` (NULL when absent) of the given kind."""

    kind: Kind
    value: exp.Expr = exp.Null()
    precision: int = 0  # DECIMAL columns (and DECIMAL list elements)
    scale: int = 0
    bound: int = 0  # integer columns: |value| < bound
    element: FieldSource | None = None  # list: how its elements read (their kind; `value` unused)
    text: exp.Expr | None = None  # json: the value's own text, when SQL has it (a JSON column's, not re-written)
    unsafe: exp.Expr | None = None  # json: rows whose numbers DuckDB's JSON reader may change (through a double)


class FieldReader:
    """An engine's view of the events: how each data (and customer) field is read (rewards_lab.replay.inputs for
    DuckDB, rewards_lab.replay.spark_inputs for Spark)."""

    @property
    def resolves_customers(self) -> bool:
        """Whether a customers table is given: beneficiaries resolve to its ids."""
        return False

    def field(self, name: str) -> FieldSource:  # pragma: no cover - implemented by each engine's input
        raise NotImplementedError


# nodes --------------------------------------------------------------------------------------------------------
def number(value: int | float | str) -> exp.Expr:
    return exp.Literal.number(value)


def string(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def cast(node: exp.Expr, to: str) -> exp.Cast:
    return exp.cast(node, exp.DataType.build(to))


def call(name: str, *args: exp.Expr) -> exp.Anonymous:
    """A function SQLGlot does not model, spelled as the engine spells it."""
    return exp.Anonymous(this=name, expressions=list(args))


def is_true(node: exp.Expr) -> bool:
    return isinstance(node, exp.Boolean) and node.this is True


def is_false(node: exp.Expr) -> bool:
    return isinstance(node, exp.Boolean) and node.this is False


def when(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr | None = None) -> exp.Case:
    case = exp.Case().when(condition, then)
    return case if otherwise is None else case.else_(otherwise)


def is_null(node: exp.Expr) -> exp.Is:
    return exp.Is(this=node, expression=exp.null())


def not_null(node: exp.Expr) -> exp.Expr:
    return exp.not_(is_null(node))


def finite(node: exp.Expr, dialect: Dialect) -> exp.Expr:
    """True for a finite double. NaN compares above every number in both engines, so `abs(x) <= max` is false
    for NaN and the infinities."""
    if dialect.name == "duckdb":
        return call("isfinite", node)
    return exp.LTE(this=exp.Abs(this=node), expression=cast(string(_LARGEST_DOUBLE), "DOUBLE"))


def _full_match(text: exp.Expr, pattern: str) -> exp.Expr:
    return call("regexp_full_match", text, string(pattern))


def _json_type(value: exp.Expr) -> exp.Expr:
    return call("json_type", value)


def _json_elements(value: exp.Expr) -> exp.Expr:
    """A JSON value's array elements as a list of JSON (empty for any other value; NULL when absent)."""
    return call("json_extract", value, string("$[*]"))


def _any_element(elements: exp.Expr, test: exp.Expr) -> exp.Expr:
    """Whether some element `e` of a DuckDB list passes `test` (a lambda body over the column `e`)."""
    kept = exp.ArrayFilter(this=elements, expression=exp.Lambda(this=test, expressions=[exp.to_identifier("e")]))
    return exp.GT(this=exp.ArraySize(this=kept), expression=number(0))


# views --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Numeric:
    """A field as an exact SQL number: `value` (NULL when absent or not a number), its scale and bound."""

    source: FieldSource
    value: exp.Expr
    scale: int  # value * 10**scale is an integer
    bound: int  # |value * 10**scale| < bound wherever the row is not exotic
    exotic: exp.Expr  # the value is a number SQL cannot read exactly


def numeric(source: FieldSource, dialect: Dialect) -> Numeric:
    value = source.value
    if source.kind == "int":  # exact at any size: the wide path's estimate guards the product
        return Numeric(source, value, 0, source.bound, exp.false())
    if source.kind == "decimal":
        return Numeric(source, value, source.scale, 10**source.precision, exp.false())
    if source.kind == "double" and not dialect.shortest_double_text:
        return Numeric(source, exp.null(), 0, 1, finite(value, dialect))
    if source.kind in ("text", "double", "json", "csv"):
        spelled = cast(value, "VARCHAR") if source.text is None else source.text
        simple = _full_match(spelled, SIMPLE_RE)
        exact = cast(spelled, "DECIMAL(28, 10)")
        if source.kind == "double":
            is_finite = finite(value, dialect)
            read = exp.Paren(this=when(exp.and_(is_finite, simple), exact))
            exotic: exp.Expr = exp.Paren(this=exp.and_(is_finite, exp.not_(simple)))
        else:
            read = exp.Paren(this=when(simple, exact))
            exotic = exp.Paren(this=exp.and_(_full_match(spelled, NUMBER_RE), exp.not_(simple.copy())))
        return Numeric(source, read, 10, 10**28, exotic)
    if source.kind == "python":
        return Numeric(source, exp.null(), 0, 1, not_null(value))
    return Numeric(source, exp.null(), 0, 1, exp.false())


def number_markers(source: FieldSource, dialect: Dialect) -> tuple[exp.Expr, exp.Expr | None]:
    """The rows where reading the field as a number needs Python: its exotic values; and for JSON re-written by
    DuckDB's reader (not its own text) the rows whose text that reader may change (one test per row, shared by
    every field of the same JSON), else None."""
    unsafe = source.unsafe if source.kind == "json" and source.text is None else None
    return numeric(source, dialect).exotic, unsafe


def string_of(source: FieldSource) -> exp.Expr:
    """The value when it is a string, else NULL."""
    value = source.value
    if source.kind == "string":
        return value
    if source.kind == "json":
        return exp.Paren(
            this=when(
                exp.EQ(this=_json_type(value), expression=string("VARCHAR")),
                call("json_extract_string", value, string("$")),
            )
        )
    if source.kind == "csv":
        scalar = exp.or_(
            _full_match(value, NUMBER_RE), exp.In(this=value, expressions=[string("true"), string("false")])
        )
        return exp.Paren(this=when(exp.not_(scalar), value))
    return exp.null()


def boolean_of(source: FieldSource) -> exp.Expr:
    """The value when it is a boolean, else NULL."""
    value = source.value
    if source.kind == "boolean":
        return value
    if source.kind == "json":
        is_boolean = exp.EQ(this=_json_type(value), expression=string("BOOLEAN"))
        return exp.Paren(this=when(is_boolean, exp.EQ(this=cast(value, "VARCHAR"), expression=string("true"))))
    if source.kind == "csv":
        case = exp.Case(this=value).when(string("true"), exp.true()).when(string("false"), exp.false())
        return exp.Paren(this=case)
    return exp.null()


def present(source: FieldSource) -> exp.Expr:
    """Whether the field is there (not missing, not JSON null); never NULL."""
    if source.kind in ("missing", "python"):  # python: a present value makes the row exotic
        return exp.false()
    if source.kind == "json":
        not_json_null = exp.NEQ(this=_json_type(source.value), expression=string("NULL"))
        return exp.Paren(this=exp.and_(not_null(source.value), not_json_null))
    return not_null(source.value)


@dataclass(frozen=True)
class Contains:
    """A list holding a value: `test` (NULL or false when not), and the rows SQL cannot decide exactly."""

    test: exp.Expr
    exotic: exp.Expr = exp.false()
    unsafe: exp.Expr | None = None  # the JSON's rows DuckDB's reader may change


def contains(source: FieldSource, wanted: object, dialect: Dialect) -> Contains:
    """Whether the field is a list with an element of the wanted value's kind equal to it (a number or a
    string; rewards_lab.domain.conditions._list_contains)."""
    if source.kind == "python":
        return Contains(exp.false(), not_null(source.value))
    if source.kind == "json":
        elements = _json_elements(source.value)
        is_array = exp.EQ(this=_json_type(source.value), expression=string("ARRAY"))
        e = exp.column("e")
        if isinstance(wanted, str):
            test = exp.and_(
                exp.EQ(this=_json_type(e), expression=string("VARCHAR")),
                exp.EQ(this=call("json_extract_string", e, string("$")), expression=string(wanted)),
            )
            return Contains(exp.Paren(this=exp.and_(is_array, _any_element(elements, test))))
        assert isinstance(wanted, Decimal)
        is_number = exp.In(this=_json_type(e), expressions=[string(t) for t in _JSON_NUMBERS])
        simple = _full_match(cast(e, "VARCHAR"), SIMPLE_RE)
        read = exp.Paren(this=when(simple, cast(cast(e.copy(), "VARCHAR"), "DECIMAL(28, 10)")))
        test = exp.and_(is_number, exp.EQ(this=read, expression=cast(string(format(wanted, "f")), "DECIMAL(28, 10)")))
        inexact = exp.and_(is_number.copy(), exp.not_(simple.copy()))
        exotic = exp.Paren(this=exp.and_(is_array.copy(), _any_element(elements.copy(), inexact)))
        return Contains(exp.Paren(this=exp.and_(is_array, _any_element(elements, test))), exotic, source.unsafe)
    element = source.element
    if source.kind != "list" or element is None:
        return Contains(exp.false())
    member = element_literal(element, wanted)
    if member is None:
        return Contains(exp.false())
    return Contains(exp.ArrayContains(this=source.value, expression=member))


def element_literal(element: FieldSource, wanted: object) -> exp.Expr | None:
    """The wanted value as a literal of a list's element type, or None when no element can equal it."""
    if isinstance(wanted, str):
        return string(wanted) if element.kind == "string" else None
    if not isinstance(wanted, Decimal) or isinstance(wanted, bool):
        return None
    if element.kind == "int":
        integral = wanted == wanted.to_integral_value()
        return cast(number(int(wanted)), "BIGINT") if integral and abs(wanted) < element.bound else None
    if element.kind == "decimal":
        p, s = element.precision, element.scale
        if places(wanted) > s or abs(wanted) >= Decimal(10) ** (p - s):
            return None
        return cast(string(plain(wanted)), f"DECIMAL({p}, {s})")
    if element.kind == "double":
        return cast(string(repr(float(wanted))), "DOUBLE")
    return None


def plain(value: Decimal) -> str:
    """A Decimal written without exponent."""
    return format(value, "f")


def places(value: Decimal) -> int:
    """Decimal places of a Decimal (trailing zeros ignored)."""
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)
