"""The replay compiler: a programme's rules as SQLGlot expression trees with the live engine's semantics
(rewards_lab.domain.rules), rendered for DuckDB or Spark.

Every rule feature (operators, thresholds, fixed and `{per, rate}` amounts) is compiled here once; the engines
(rewards_lab.replay.engine on DuckDB, rewards_lab.replay.spark_engine on Spark) only place the compiled
expressions in their queries. No SQL text is assembled from user-supplied parts: field names, event types and
numbers become SQLGlot nodes, which the library quotes for each dialect.

Every number stays exact: conditions compare integers, DECIMALs or doubles against the threshold written in the
same type (a double comparison is exact because thresholds have at most 15 significant digits and a double is
read as its shortest repr), and `{per, rate}` amounts are integer products truncated toward zero
(`V * N // D` with V the value scaled to an integer and N / D the rate times 10**decimals as a reduced fraction),
exactly `rewards_lab.domain.money.reward_minor`. Values an engine cannot read exactly in SQL (more than 10
decimal places, 18 or more integer digits, JSON numbers DuckDB parses through a double, anything Spark reads
only as text) mark their row `exotic`: such rows are evaluated by the live engine's own Python functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from sqlglot import exp

from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.domain.conditions import ConditionSpec, source_of
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, parse_amount
from rewards_lab.domain.rules import ActionSpec, RuleSpec, condition_node, in_order

TOO_LARGE = -1  # the amount column's marker for an action refused as amount_too_large
_EST_LIMIT = 1.5e18  # above this estimate the product is surely above MAX_AMOUNT_MINOR; below, V * N fits
_LARGEST_DOUBLE = "1.7976931348623157e308"
# A JSON number, and the subset read exactly as DECIMAL(28, 10): at most 18 integer digits and 10 places.
NUMBER_RE = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"
SIMPLE_RE = r"-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,10})?"

DialectName = Literal["duckdb", "spark"]
# int, decimal and double are read in SQL; text is a number spelled as text (DuckDB only); python is a value only
# Python reads exactly (the row is exotic wherever it is present); never is a value that is never a number.
Kind = Literal["int", "decimal", "double", "text", "python", "never", "missing"]
_COMPARISONS: dict[str, type[exp.Binary]] = {
    "gte": exp.GTE,
    "gt": exp.GT,
    "lte": exp.LTE,
    "lt": exp.LT,
    "eq": exp.EQ,
    "neq": exp.NEQ,
}


@dataclass(frozen=True)
class Dialect:
    """What differs between the engines beyond SQLGlot's rendering: the wide integer type for products that
    overflow a BIGINT, and whether a double cast to text is its shortest repr (DuckDB's is; Java's is not
    always, so Spark reads double amounts in Python)."""

    name: DialectName
    wide_int: str
    shortest_double_text: bool

    def render(self, node: exp.Expr) -> str:
        return node.sql(dialect=self.name)


DUCKDB = Dialect("duckdb", "HUGEINT", True)
SPARK = Dialect("spark", "DECIMAL(38, 0)", False)


@dataclass(frozen=True)
class FieldSource:
    """How an engine reads one data field: `value` (NULL when absent) of the given kind."""

    kind: Kind
    value: exp.Expr = exp.Null()
    precision: int = 0  # DECIMAL columns
    scale: int = 0
    bound: int = 0  # integer columns: |value| < bound
    encoding: Literal["", "json", "csv"] = ""  # text kinds: how the text spells a value


class FieldReader:
    """An engine's view of the events: how each data field is read (rewards_lab.replay.inputs for DuckDB)."""

    def field(self, name: str) -> FieldSource:  # pragma: no cover - implemented by each engine's input
        raise NotImplementedError

    @property
    def unsafe(self) -> exp.Expr | None:
        """A condition marking rows the engine cannot read exactly whatever the fields (None: no such rows)."""
        return None


def rule_specs(definition: ProgrammeDefinition) -> list[RuleSpec]:
    """The file's rules as the live engine's RuleSpecs (rule_id = the rule's index in the file)."""
    decimals = definition.asset.decimals
    specs = []
    for index, rule in enumerate(definition.rules):
        conditions = tuple(condition_node(condition_payload(c)) for c in rule.conditions)
        actions = []
        for number, action in enumerate(rule.actions):
            amount = action.amount
            beneficiary = action.beneficiary.field if action.beneficiary else None
            if hasattr(amount, "fixed"):
                field = f"rules[{index}].actions[{number}].amount.fixed"
                minor = parse_amount(amount.fixed, decimals, field)
                actions.append(ActionSpec("asset", decimals, fixed_minor=minor, beneficiary=beneficiary))
            else:
                actions.append(ActionSpec("asset", decimals, per=amount.per, rate=amount.rate, beneficiary=beneficiary))
        specs.append(
            RuleSpec(str(index), rule.event_type, conditions, tuple(actions), rule.priority, rule.stop_processing)
        )
    return specs


def referenced_fields(specs: list[RuleSpec]) -> list[str]:
    return list(dict.fromkeys(name for spec in specs for name in spec.fields()))


def compiles_to_sql(spec: RuleSpec) -> bool:
    """Whether the rule is one the SQL expressions below compute: numeric comparisons on top-level data fields
    and amounts to the event's customer. The others are evaluated by the live engine's own functions (every
    event of their type is `exotic`) until the compiler learns them."""
    for node in spec.conditions:
        if not isinstance(node, ConditionSpec) or not _top_level(node.field):
            return False
        if node.operator not in _COMPARISONS or not isinstance(node.value, Decimal) or isinstance(node.value, bool):
            return False
    return not spec.stop_processing and all(
        a.beneficiary is None and (a.per is None or _top_level(a.per)) for a in spec.actions
    )


def _top_level(name: str) -> bool:
    return source_of(name) == "data" and "." not in name


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


def conjunction(parts: list[exp.Expr]) -> exp.Expr:
    """The parts joined by AND (each parenthesised); TRUE when there are none."""
    kept = [part for part in parts if not is_true(part)]
    if not kept:
        return exp.true()
    if len(kept) == 1:
        return kept[0]
    return exp.and_(*(exp.Paren(this=part) for part in kept))


def when(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr | None = None) -> exp.Case:
    case = exp.Case().when(condition, then)
    return case if otherwise is None else case.else_(otherwise)


def _finite(node: exp.Expr, dialect: Dialect) -> exp.Expr:
    """True for a finite double. NaN compares above every number in both engines, so `abs(x) <= max` is false
    for NaN and the infinities."""
    if dialect.name == "duckdb":
        return call("isfinite", node)
    return exp.LTE(this=exp.Abs(this=node), expression=cast(string(_LARGEST_DOUBLE), "DOUBLE"))


# values -------------------------------------------------------------------------------------------------------
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
        return Numeric(source, exp.null(), 0, 1, _finite(value, dialect))
    if source.kind in ("text", "double"):
        spelled = cast(value, "VARCHAR")
        simple = call("regexp_full_match", spelled, string(SIMPLE_RE))
        exact = cast(spelled, "DECIMAL(28, 10)")
        if source.kind == "double":
            finite = _finite(value, dialect)
            read = exp.Paren(this=when(exp.and_(finite, simple), exact))
            exotic: exp.Expr = exp.Paren(this=exp.and_(finite, exp.not_(simple)))
        else:
            read = exp.Paren(this=when(simple, exact))
            exotic = exp.Paren(
                this=exp.and_(call("regexp_full_match", spelled, string(NUMBER_RE)), exp.not_(simple.copy()))
            )
        return Numeric(source, read, 10, 10**28, exotic)
    if source.kind == "python":
        return Numeric(source, exp.null(), 0, 1, exp.not_(exp.Is(this=value, expression=exp.null())))
    return Numeric(source, exp.null(), 0, 1, exp.false())


def _plain(value: Decimal) -> str:
    return format(value, "f")


def _places(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)


def condition_test(condition: ConditionSpec, source: FieldSource, dialect: Dialect) -> exp.Expr:
    """True exactly when the condition holds, NULL or false otherwise: for WHERE and CASE WHEN, where NULL
    counts as false (no coalesce to evaluate for every condition of every rule on every event)."""
    op, t = condition.operator, condition.value
    value = source.value
    compare = _COMPARISONS[op]
    if source.kind == "int":
        floor, ceil = math.floor(t), math.ceil(t)
        integral = floor == ceil
        forms: dict[str, exp.Expr] = {
            "gte": exp.GTE(this=value, expression=number(ceil)),
            "gt": exp.GT(this=value, expression=number(floor)),
            "lte": exp.LTE(this=value, expression=number(floor)),
            "lt": exp.LT(this=value, expression=number(ceil)),
            "eq": exp.EQ(this=value, expression=number(floor)) if integral else exp.false(),
            "neq": (
                exp.NEQ(this=value, expression=number(floor))
                if integral
                else exp.not_(exp.Is(this=value, expression=exp.null()))
            ),
        }
        return forms[op]
    if source.kind == "decimal":
        p, s = source.precision, source.scale
        fits = _places(t) <= s and abs(t) < Decimal(10) ** (p - s)
        typed = cast(string(_plain(t)), f"DECIMAL({p}, {s})" if fits else "DECIMAL(38, 10)")
        return compare(this=value, expression=typed)
    if source.kind == "double":
        threshold = cast(string(repr(float(t))), "DOUBLE")
        return exp.Paren(this=exp.and_(_finite(value, dialect), compare(this=value, expression=threshold)))
    if source.kind == "text":
        return compare(this=numeric(source, dialect).value, expression=cast(string(_plain(t)), "DECIMAL(28, 10)"))
    return exp.false()  # python (the row is exotic where the value is present), never, missing


def _fraction(rate: Decimal, decimals: int, scale: int) -> tuple[int, int]:
    """(N, D) with value * rate * 10**decimals == V * N / D for V = value * 10**scale, reduced."""
    sign, digits, exponent = rate.as_tuple()
    assert isinstance(exponent, int) and not sign
    coefficient = int("".join(map(str, digits)))
    numerator, denominator = (
        coefficient * 10 ** max(exponent + decimals, 0),
        10 ** (scale + max(-exponent - decimals, 0)),
    )
    common = math.gcd(numerator, denominator)
    return numerator // common, denominator // common


@dataclass(frozen=True)
class Amount:
    """An action's amount: `body` (BIGINT minor units, or TOO_LARGE) wherever `guard` holds, else nothing.

    Splitting the guard out lets a slot be one `CASE WHEN conditions AND guard THEN body ELSE 0 END`: a CASE
    with an ELSE and no nested NULL-producing CASE is the form DuckDB evaluates quickest."""

    guard: exp.Expr  # TRUE: always
    body: exp.Expr  # NULL: the action never issues anything
    may_refuse: bool  # body can be TOO_LARGE
    largest: int  # no amount is above this

    @property
    def value(self) -> exp.Expr:
        """BIGINT minor units the action issues; TOO_LARGE when refused; NULL or 0 when it issues nothing."""
        return self.body if is_true(self.guard) else exp.Paren(this=when(self.guard, self.body))

    def slot(self, where: exp.Expr) -> exp.Expr:
        """The amount when the rule's conditions `where` hold, else 0 (0 means: nothing issued)."""
        if isinstance(self.body, exp.Null):
            return number(0)
        if is_true(self.guard):
            condition = where
        else:
            condition = self.guard if is_true(where) else exp.and_(where, self.guard)
        return self.body if is_true(condition) else when(condition, self.body, number(0))


def _bigint_product(scaled: exp.Expr, n: int, d: int) -> exp.Expr:
    product: exp.Expr = cast(scaled, "BIGINT")
    if n != 1:
        product = exp.Mul(this=product, expression=number(n))
    if n != 1 or d != 1:
        product = exp.IntDiv(this=product, expression=number(d))
    return product


def amount_parts(action: ActionSpec, source: FieldSource | None, dialect: Dialect) -> Amount:
    if action.fixed_minor is not None:
        return Amount(exp.true(), number(action.fixed_minor), False, action.fixed_minor)
    assert action.rate is not None and source is not None
    read = numeric(source, dialect)
    if isinstance(read.value, exp.Null):
        return Amount(exp.true(), exp.null(), False, 0)
    n, d = _fraction(action.rate, action.decimals, read.scale)
    bound = read.bound
    scaled = read.value if read.scale == 0 else exp.Mul(this=read.value, expression=number(10**read.scale))
    guard = exp.GT(this=read.value, expression=number(0))
    if bound * n < 2**63:  # the product fits a BIGINT: no estimate needed
        minor = _bigint_product(scaled, n, d)
        if (bound - 1) * n // d <= MAX_AMOUNT_MINOR:  # no value of this column can give too large an amount
            return Amount(guard, minor, False, (bound - 1) * n // d)
        over = exp.GT(this=minor, expression=number(MAX_AMOUNT_MINOR))
        return Amount(guard, when(over, number(TOO_LARGE), minor.copy()), True, MAX_AMOUNT_MINOR)
    estimate = exp.Mul(
        this=cast(read.value, "DOUBLE"), expression=number(repr(float(action.rate) * 10**action.decimals))
    )
    beyond = exp.GTE(this=estimate, expression=number(repr(_EST_LIMIT)))
    wide = exp.Paren(this=when(beyond, number(0), cast(scaled, dialect.wide_int)))
    product = exp.Paren(this=exp.IntDiv(this=exp.Mul(this=wide, expression=number(n)), expression=number(d)))
    refused = exp.or_(beyond.copy(), exp.GT(this=product, expression=number(MAX_AMOUNT_MINOR)))
    body = when(refused, number(TOO_LARGE), cast(product.copy(), "BIGINT"))
    return Amount(guard, body, True, MAX_AMOUNT_MINOR)


# the programme ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompiledRule:
    index: int
    event_type: str
    where: exp.Expr  # the rule's conditions (without the event type); NULL means false (WHERE, CASE WHEN)
    parts: tuple[Amount, ...]  # one per action


@dataclass(frozen=True)
class TypeSlots:
    """The rule actions of one event type, in processing order: their slot numbers and amount expressions
    (the amount when the rule's conditions hold, else 0)."""

    event_type: str
    slots: tuple[int, ...]
    amounts: tuple[exp.Expr, ...]


@dataclass(frozen=True)
class CompiledProgramme:
    specs: list[RuleSpec]
    rules: list[CompiledRule]
    fields: list[str]
    exotic: exp.Expr  # the row must be evaluated in Python
    slots: int  # rules x actions, the width of one event's seq range
    first_slot: tuple[int, ...]  # slot number of each rule's first action
    by_type: tuple[TypeSlots, ...]  # event types that have rules, in order of their first rule
    dialect: Dialect

    def render(self, node: exp.Expr) -> str:
        return self.dialect.render(node)

    @property
    def exotic_sql(self) -> str | None:
        """The exotic condition as SQL; None when no row can be exotic."""
        return None if is_false(self.exotic) else self.render(self.exotic)

    def rule_of(self, slot: int) -> tuple[int, int]:
        """(rule index, action index) of a slot."""
        for rule in self.rules:
            first = self.first_slot[rule.index]
            if first <= slot < first + len(rule.parts):
                return rule.index, slot - first
        raise KeyError(slot)


def compile_programme(definition: ProgrammeDefinition, reader: FieldReader, dialect: Dialect) -> CompiledProgramme:
    specs = rule_specs(definition)
    fields = referenced_fields(specs)
    compiled = []
    exotic_parts: list[exp.Expr] = []
    for spec in specs:
        if not compiles_to_sql(spec):
            compiled.append(CompiledRule(int(spec.rule_id), spec.event_type, exp.false(), ()))
            exotic_parts.append(exp.EQ(this=exp.column("type"), expression=string(spec.event_type)))
            continue
        leaves = [node for node in spec.conditions if isinstance(node, ConditionSpec)]
        where = conjunction([condition_test(c, reader.field(c.field), dialect) for c in leaves])
        amounts = tuple(amount_parts(a, reader.field(a.per) if a.per else None, dialect) for a in spec.actions)
        compiled.append(CompiledRule(int(spec.rule_id), spec.event_type, where, amounts))
        for c in leaves:
            source = reader.field(c.field)
            if source.kind in ("text", "python"):
                exotic_parts.append(numeric(source, dialect).exotic)
        for a in spec.actions:
            if a.per is not None:
                exotic_parts.append(numeric(reader.field(a.per), dialect).exotic)
    if reader.unsafe is not None:
        exotic_parts.append(reader.unsafe)
    unique: dict[str, exp.Expr] = {}
    for marker in exotic_parts:
        if not is_false(marker):
            unique.setdefault(dialect.render(marker), marker)
    exotic: exp.Expr = (
        exp.Coalesce(this=exp.or_(*unique.values()), expressions=[exp.false()]) if unique else exp.false()
    )
    # Slots follow the order the rules apply in (priority, then file order), so that `seq` orders an event's
    # issuances as the live engine makes them.
    first_by_index: dict[int, int] = {}
    total = 0
    for spec in in_order(specs):
        first_by_index[int(spec.rule_id)] = total
        total += len(spec.actions)
    first = [first_by_index[index] for index in range(len(specs))]
    by_type: dict[str, list[tuple[int, exp.Expr]]] = {}
    for rule in sorted(compiled, key=lambda r: first[r.index]):
        for action, part in enumerate(rule.parts):
            by_type.setdefault(rule.event_type, []).append((first[rule.index] + action, part.slot(rule.where)))
    types = tuple(
        TypeSlots(t, tuple(s for s, _ in entries), tuple(a for _, a in entries)) for t, entries in by_type.items()
    )
    return CompiledProgramme(specs, compiled, fields, exotic, total, tuple(first), types, dialect)
