"""The replay compiler: a programme's rules as SQLGlot expression trees with the live engine's semantics
(rewards_lab.domain.rules, rewards_lab.domain.conditions), rendered for DuckDB or Spark.

Every rule feature is compiled here once: operators as their entries write them (contract/operators.py, over the
views of a field this module offers, `_FieldViews`), any / all / not groups, field paths (through the engine's
FieldReader: data, customer facts) and time fields in the programme's timezone, the programme's window, priorities
with stop_processing, fixed and `{per, rate}` amounts as their action types' entries pick them (domain/actions.py,
over `_AmountForms`) and beneficiaries. The engines (rewards_lab.replay.engine on DuckDB,
rewards_lab.replay.spark_engine on Spark) only place the compiled expressions in their queries. No SQL text is
assembled from user-supplied parts: field names, event types, strings and numbers become SQLGlot nodes, which the
library quotes for each dialect.

A leaf is TRUE exactly when the condition holds, NULL or FALSE otherwise: WHERE and CASE WHEN read NULL as false,
and so do AND and OR. Only NOT needs a strict operand (NOT NULL is NULL, where a missing field must make
`not(x eq 1)` hold), so a NOT wraps its operand in `coalesce(..., FALSE)` unless that operand is never NULL; the
plain path (an AND of numeric leaves) is compiled exactly as before groups existed.

Every number stays exact: conditions compare integers, DECIMALs or doubles against the threshold written in the
same type (a double comparison is exact because thresholds have at most 15 significant digits and a double is
read as its shortest repr), and `{per, rate}` amounts are integer products truncated toward zero
(`V * N // D` with V the value scaled to an integer and N / D the rate times 10**decimals as a reduced fraction),
exactly `rewards_lab.domain.money.reward_minor`. Strings compare by code point: both engines compare UTF-8 bytes,
whose order is the code points'. Values an engine cannot read exactly in SQL (more than 10 decimal places, 18 or
more integer digits, JSON numbers DuckDB parses through a double, anything Spark reads only as text) mark their row
`exotic`: such rows are evaluated by the live engine's own Python functions (rewards_lab.replay.fallback).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from sqlglot import exp

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.operators import OPERATORS, Relation
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.contract.tier_requests import rule_tier_uses
from rewards_lab.domain.actions import ActionSpec, action_kind
from rewards_lab.domain.conditions import TIME_FIELDS, ConditionNode, ConditionSpec, source_of
from rewards_lab.domain.limits import caps_of
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.rules import RuleSpec, condition_node, in_order
from rewards_lab.replay.sql_values import (
    DUCKDB,
    SPARK,
    Dialect,
    FieldReader,
    FieldSource,
    boolean_of,
    call,
    cast,
    contains,
    finite,
    is_false,
    is_true,
    not_null,
    number,
    number_markers,
    numeric,
    places,
    plain,
    present,
    string,
    string_of,
    when,
)

__all__ = ["DUCKDB", "SPARK", "FieldReader", "FieldSource", "call", "cast", "number", "string"]

TOO_LARGE = -1  # the amount column's marker for an action refused as amount_too_large
BENEFICIARY_MISSING = -2  # ... refused as beneficiary_missing (its field holds no customer reference)
# An amount m refused as beneficiary_not_found is stored as NOT_FOUND_BASE - m (below -2), keeping the amount.
NOT_FOUND_BASE = -2
_EST_LIMIT = 1.5e18  # above this estimate the product is surely above MAX_AMOUNT_MINOR; below, V * N fits
_NUMBER_READERS = ("text", "json", "csv", "python")  # kinds whose number reading may mark a row exotic
_COMPARISONS: dict[Relation, type[exp.Binary]] = {
    "gte": exp.GTE,
    "gt": exp.GT,
    "lte": exp.LTE,
    "lt": exp.LT,
    "eq": exp.EQ,
    "neq": exp.NEQ,
}
RECIPIENT = "__r"  # column prefix of a beneficiary field's reference (and `{column}_id`, the resolved id)


def rule_specs(definition: ProgrammeDefinition) -> list[RuleSpec]:
    """The file's rules as the live engine's RuleSpecs (rule_id = the rule's index in the file), with their caps
    and reverse actions as `domain.rules.compile_rule` makes them."""
    decimals = definition.asset.decimals
    zone = definition.programme.zone
    specs = []
    for index, rule in enumerate(definition.rules):
        conditions = tuple(condition_node(condition_payload(c)) for c in rule.conditions)
        actions = []
        for number_, action in enumerate(rule.actions):
            stored = action.model_dump(mode="python")
            actions.append(action_kind(stored).build(stored, "asset", decimals, f"rules[{index}].actions[{number_}]"))
        caps = caps_of([limit.model_dump(mode="json") for limit in rule.limits], "rule", decimals)
        specs.append(
            RuleSpec(
                str(index), rule.event_type, conditions, tuple(actions), rule.priority, rule.stop_processing, zone, caps
            )
        )
    return specs


def referenced_fields(specs: list[RuleSpec]) -> list[str]:
    """The event data fields the rules read (time and customer fields are not data), and the originals' fields
    reverse actions divide by."""
    names = [name for spec in specs for name in spec.fields()]
    names += [action.fraction_of for spec in specs for action in spec.actions if action.fraction_of is not None]
    return list(dict.fromkeys(name for name in names if source_of(name) == "data"))


# nodes --------------------------------------------------------------------------------------------------------
def conjunction(parts: list[exp.Expr]) -> exp.Expr:
    """The parts joined by AND (each parenthesised); TRUE when there are none, FALSE when one is."""
    kept = [part for part in parts if not is_true(part)]
    if any(is_false(part) for part in kept):
        return exp.false()
    if not kept:
        return exp.true()
    if len(kept) == 1:
        return kept[0]
    return exp.and_(*(exp.Paren(this=part) for part in kept))


def disjunction(parts: list[exp.Expr]) -> exp.Expr:
    """The parts joined by OR (each parenthesised); FALSE when there are none, TRUE when one is."""
    kept = [part for part in parts if not is_false(part)]
    if any(is_true(part) for part in kept):
        return exp.true()
    if not kept:
        return exp.false()
    if len(kept) == 1:
        return kept[0]
    return exp.Paren(this=exp.or_(*(exp.Paren(this=part) for part in kept)))


def strict(node: exp.Expr) -> exp.Expr:
    """A condition that is never NULL: NULL (the condition does not hold) becomes FALSE."""
    if isinstance(node, exp.Boolean):
        return node
    return exp.Coalesce(this=node, expressions=[exp.false()])


def negation(node: exp.Expr, nullable: bool) -> exp.Expr:
    """NOT of a condition, TRUE where the condition is NULL (does not hold)."""
    if is_true(node):
        return exp.false()
    if is_false(node):
        return exp.true()
    return exp.not_(exp.Paren(this=strict(node) if nullable else node))


def _integral(value: Decimal) -> bool:
    return value == value.to_integral_value()


# conditions ---------------------------------------------------------------------------------------------------
def condition_test(operator: Relation, t: Decimal, source: FieldSource, dialect: Dialect) -> exp.Expr:
    """A comparison of a number field with a threshold: TRUE exactly when it holds, NULL or FALSE otherwise
    (for WHERE and CASE WHEN, where NULL counts as false: no coalesce for every condition on every event)."""
    value = source.value
    compare = _COMPARISONS[operator]
    if source.kind == "int":
        floor, ceil = math.floor(t), math.ceil(t)
        integral = floor == ceil
        forms: dict[Relation, exp.Expr] = {
            "gte": exp.GTE(this=value, expression=number(ceil)),
            "gt": exp.GT(this=value, expression=number(floor)),
            "lte": exp.LTE(this=value, expression=number(floor)),
            "lt": exp.LT(this=value, expression=number(ceil)),
            "eq": exp.EQ(this=value, expression=number(floor)) if integral else exp.false(),
            "neq": (exp.NEQ(this=value, expression=number(floor)) if integral else not_null(value)),
        }
        return forms[operator]
    if source.kind == "decimal":
        return compare(this=value, expression=_decimal_literal(t, source))
    if source.kind == "double":
        threshold = cast(string(repr(float(t))), "DOUBLE")
        return exp.Paren(this=exp.and_(finite(value, dialect), compare(this=value, expression=threshold)))
    if source.kind in ("text", "json", "csv"):
        read = numeric(source, dialect).value
        return compare(this=read, expression=cast(string(plain(t)), "DECIMAL(28, 10)"))
    return exp.false()  # python (the row is exotic where the value is present), and kinds that are no number


def _decimal_literal(t: Decimal, source: FieldSource) -> exp.Expr:
    p, s = source.precision, source.scale
    fits = places(t) <= s and abs(t) < Decimal(10) ** (p - s)
    return cast(string(plain(t)), f"DECIMAL({p}, {s})" if fits else "DECIMAL(38, 10)")


def membership_test(inside: bool, members: tuple[Decimal, ...], source: FieldSource, dialect: Dialect) -> exp.Expr:
    """`in` / `not_in` on numbers: the field is a number (equal to one of them / to none of them)."""
    value = source.value
    if source.kind == "int":
        listed = [number(int(t)) for t in dict.fromkeys(members) if _integral(t)]
    elif source.kind == "decimal":
        room = Decimal(10) ** (source.precision - source.scale)
        fitting = [t for t in members if places(t) <= source.scale and abs(t) < room]
        listed = [_decimal_literal(t, source) for t in fitting]
    elif source.kind == "double":
        listed = [cast(string(repr(float(t))), "DOUBLE") for t in members]
    elif source.kind in ("text", "json", "csv"):
        value = numeric(source, dialect).value
        listed = [cast(string(plain(t)), "DECIMAL(28, 10)") for t in members]
    else:
        return exp.false()
    if not listed:  # no member of the field's type: nothing is in, every number is not in
        return exp.false() if inside else not_null(value)
    test: exp.Expr = exp.In(this=value, expressions=listed)
    test = test if inside else exp.not_(test)
    if source.kind == "double":
        return exp.Paren(this=exp.and_(finite(value, dialect), test))
    return test


@dataclass
class _Conditions:
    """Compiles a rule's conditions against the engine's fields; collects the rows SQL cannot decide."""

    reader: FieldReader
    dialect: Dialect
    timezone: str
    exotic: list[exp.Expr] = field(default_factory=list)
    unsafe: list[exp.Expr] = field(default_factory=list)  # JSON rows DuckDB may read inexactly (tested last)

    def numbers_read(self, source: FieldSource) -> None:
        """Note that a number is read from the source (its exotic rows)."""
        exotic, unsafe = number_markers(source, self.dialect)
        self.exotic.append(exotic)
        if unsafe is not None:
            self.unsafe.append(unsafe)

    def source(self, name: str) -> FieldSource:
        if name in TIME_FIELDS:
            return time_source(name, self.timezone, self.dialect)
        return self.reader.field(name)

    def nodes(self, nodes: tuple[ConditionNode, ...]) -> tuple[exp.Expr, bool]:
        """The AND of the nodes, and whether it may be NULL."""
        compiled = [self.node(node) for node in nodes]
        return conjunction([c for c, _ in compiled]), any(nullable for _, nullable in compiled)

    def node(self, node: ConditionNode) -> tuple[exp.Expr, bool]:
        """A condition or a group as SQL, and whether it may be NULL (a NULL means: does not hold)."""
        if isinstance(node, ConditionSpec):
            return self.leaf(node)
        parts = [self.node(part) for part in node.parts]
        nullable = any(n for _, n in parts)
        if node.kind == "not":
            (inner, inner_nullable), *_ = parts
            return negation(inner, inner_nullable), False
        if node.kind == "all":
            return conjunction([p for p, _ in parts]), nullable
        return disjunction([p for p, _ in parts]), nullable

    def leaf(self, condition: ConditionSpec) -> tuple[exp.Expr, bool]:
        """A condition as its operator's entry writes it (contract/operators.py) over the field's views."""
        source = self.source(condition.field)
        if source.kind == "python":  # only Python reads it: rows where it is present are exotic
            self.exotic.append(not_null(source.value))
        return OPERATORS[condition.operator].sql(_FieldViews(self, source), condition.value)


@dataclass(frozen=True)
class _FieldViews:
    """One field of the events as an operator's SQL form reads it (contract.operators.SqlField), noting in the
    conditions the rows SQL cannot decide."""

    conditions: _Conditions
    source: FieldSource

    def present(self) -> exp.Expr:
        return present(self.source)

    def text(self) -> exp.Expr:
        return string_of(self.source)

    def boolean(self) -> exp.Expr:
        return boolean_of(self.source)

    def _numbers(self) -> None:
        if self.source.kind in _NUMBER_READERS:
            self.conditions.numbers_read(self.source)

    def number(self, relation: Relation, threshold: Decimal) -> exp.Expr:
        self._numbers()
        return condition_test(relation, threshold, self.source, self.conditions.dialect)

    def number_in(self, members: tuple[Decimal, ...], inside: bool) -> exp.Expr:
        self._numbers()
        return membership_test(inside, members, self.source, self.conditions.dialect)

    def list_contains(self, wanted: Decimal | str) -> exp.Expr:
        found = contains(self.source, wanted, self.conditions.dialect)
        self.conditions.exotic.append(found.exotic)
        if found.unsafe is not None:
            self.conditions.unsafe.append(found.unsafe)
        return found.test

    def all(self, parts: list[exp.Expr]) -> exp.Expr:
        return conjunction(parts)

    def any(self, parts: list[exp.Expr]) -> exp.Expr:
        return disjunction(parts)


def time_source(name: str, timezone: str, dialect: Dialect) -> FieldSource:
    """`occurred_at.weekday` / `.hour` (numbers) and `.date` ("YYYY-MM-DD") in the programme's timezone."""
    local = dialect.local_time(exp.column("occurred_at"), timezone)
    if name == "occurred_at.weekday":
        return FieldSource("int", cast(dialect.weekday(local), "INTEGER"), bound=8)
    if name == "occurred_at.hour":
        return FieldSource("int", cast(dialect.hour(local), "INTEGER"), bound=24)
    return FieldSource("string", dialect.day_text(local))


def window_test(definition: ProgrammeDefinition, dialect: Dialect) -> exp.Expr:
    """The programme's window, starts_at <= occurred_at < ends_at (TRUE without one)."""
    info = definition.programme
    parts: list[exp.Expr] = []
    for bound, compare in ((info.starts_at, exp.GTE), (info.ends_at, exp.LT)):
        if bound is not None:
            parts.append(compare(this=exp.column("occurred_at"), expression=instant(bound, dialect)))
    return conjunction(parts)


def instant(moment: datetime, dialect: Dialect) -> exp.Expr:
    """An instant as a literal of the engine's `occurred_at` type (written in UTC; the sessions run in UTC)."""
    utc = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return cast(string(utc + ("+00" if dialect.name == "duckdb" else "")), dialect.instant_type)


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


@dataclass(frozen=True)
class _AmountForms:
    """The amount forms of one action (domain.actions.AmountSql): its type's entry picks one."""

    action: ActionSpec
    source: FieldSource | None  # its `per` field's
    dialect: Dialect

    def fixed(self, minor: int) -> Amount:
        return Amount(exp.true(), number(minor), False, minor)

    def product(self, field: str, rate: Decimal) -> Amount:
        assert self.source is not None and field == self.action.per
        return product_amount(rate, self.action.decimals, self.source, self.dialect)

    def nothing(self) -> Amount:
        return Amount(exp.true(), exp.null(), False, 0)


def product_amount(rate: Decimal, decimals: int, source: FieldSource, dialect: Dialect) -> Amount:
    """A field's number times a rate in minor units, truncated toward zero (`domain.money.reward_minor`)."""
    read = numeric(source, dialect)
    if isinstance(read.value, exp.Null):
        return Amount(exp.true(), exp.null(), False, 0)
    n, d = _fraction(rate, decimals, read.scale)
    bound = read.bound
    scaled = read.value if read.scale == 0 else exp.Mul(this=read.value, expression=number(10**read.scale))
    guard = exp.GT(this=read.value, expression=number(0))
    if bound * n < 2**63:  # the product fits a BIGINT: no estimate needed
        minor = _bigint_product(scaled, n, d)
        if (bound - 1) * n // d <= MAX_AMOUNT_MINOR:  # no value of this column can give too large an amount
            return Amount(guard, minor, False, (bound - 1) * n // d)
        over = exp.GT(this=minor, expression=number(MAX_AMOUNT_MINOR))
        return Amount(guard, when(over, number(TOO_LARGE), minor.copy()), True, MAX_AMOUNT_MINOR)
    estimate = exp.Mul(this=cast(read.value, "DOUBLE"), expression=number(repr(float(rate) * 10**decimals)))
    beyond = exp.GTE(this=estimate, expression=number(repr(_EST_LIMIT)))
    wide = exp.Paren(this=when(beyond, number(0), cast(scaled, dialect.wide_int)))
    product = exp.Paren(this=exp.IntDiv(this=exp.Mul(this=wide, expression=number(n)), expression=number(d)))
    refused = exp.or_(beyond.copy(), exp.GT(this=product, expression=number(MAX_AMOUNT_MINOR)))
    body = when(refused, number(TOO_LARGE), cast(product.copy(), "BIGINT"))
    return Amount(guard, body, True, MAX_AMOUNT_MINOR)


# the programme ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipient:
    """An action's beneficiary: the reference its field holds (a column, NULL unless a non-empty string) and,
    with a customers table, the id it resolves to (a column, NULL when no customer has it)."""

    reference: exp.Expr
    resolved: exp.Expr | None

    def amount(self, inner: exp.Expr) -> exp.Expr:
        """The action's amount column with the beneficiary's refusals: an amount to issue (> 0) is refused as
        beneficiary_missing without a reference, as beneficiary_not_found (NOT_FOUND_BASE - amount) when the
        table has no such customer; a refusal as too large stays one (the live engine checks it first)."""
        issues = exp.GT(this=inner, expression=number(0))
        case = exp.Case().when(exp.and_(issues, exp.Is(this=self.reference, expression=exp.null())), number(-2))
        if self.resolved is not None:
            missing = exp.Is(this=self.resolved, expression=exp.null())
            case = case.when(
                exp.and_(issues.copy(), missing), exp.Sub(this=number(NOT_FOUND_BASE), expression=inner.copy())
            )
        return case.else_(inner.copy())

    @property
    def customer(self) -> exp.Expr:
        """The customer rewarded: the resolved id, else the reference itself (NULL: the event's customer)."""
        if self.resolved is None:
            return self.reference
        return exp.Coalesce(this=self.resolved, expressions=[self.reference])


@dataclass(frozen=True)
class CompiledReversal:
    """A reverse action: where it applies (`where`, with its event type), the original's external id its field
    holds (`reference`: NULL unless a non-empty string, which fails the action with `original_missing`) and, for
    a fraction read from both events, the refund's number as exact text (`numerator`: NULL when it is no number)
    and the original's field it is divided by (`of`). `fraction` is a constant fraction; neither: the whole.
    `any_customer`: a refund by another customer than the original event's takes back too."""

    rule_index: int
    action_index: int
    event_type: str
    where: exp.Expr
    reference: exp.Expr
    numerator: exp.Expr | None
    fraction: Decimal | None
    of: str | None
    any_customer: bool = False  # a refund by another customer than the original's takes back too


@dataclass(frozen=True)
class Divisor:
    """A field reverse actions divide by (`of`), read at the original: its exact text (`value`, NULL when SQL
    cannot read it) and whether the row needs Python to read it (`python`, never NULL)."""

    of: str
    value: exp.Expr
    python: exp.Expr


def divisor(of: str, source: FieldSource, dialect: Dialect) -> Divisor:
    exotic, unsafe = number_markers(source, dialect)
    flagged = exotic if unsafe is None else exp.or_(exotic, unsafe)
    value = cast(numeric(source, dialect).value, "VARCHAR")
    return Divisor(of, value, exp.Coalesce(this=flagged, expressions=[exp.false()]))


@dataclass(frozen=True)
class CompiledRule:
    index: int
    event_type: str
    where: exp.Expr  # conditions, window and earlier stop rules (not the event type); NULL means false
    parts: tuple[Amount, ...]  # one per action
    recipients: tuple[Recipient | None, ...] = ()  # one per action (None: the event's customer)

    def recipient(self, action: int) -> Recipient | None:
        return self.recipients[action] if self.recipients else None

    def slot(self, action: int) -> exp.Expr:
        """The action's amount when the rule applies, else 0 (the stored form's column)."""
        amount = self.parts[action].slot(self.where)
        recipient = self.recipient(action)
        nothing = isinstance(amount, exp.Literal) and amount.this == "0"
        return amount if recipient is None or nothing else recipient.amount(amount)

    def candidate(self, action: int) -> exp.Expr:
        """The action's amount for rows where the rule applies (`where` filters them): 0 or NULL when nothing."""
        amount = self.parts[action].value
        recipient = self.recipient(action)
        return amount if recipient is None or isinstance(amount, exp.Null) else recipient.amount(amount)


@dataclass(frozen=True)
class TypeSlots:
    """The rule actions of one event type, in processing order: their slot numbers and amount expressions
    (the amount when the rule's conditions hold, else 0), and the beneficiary each rewards (None: the event's
    customer)."""

    event_type: str
    slots: tuple[int, ...]
    amounts: tuple[exp.Expr, ...]
    recipients: tuple[exp.Expr | None, ...]


@dataclass(frozen=True)
class CompiledProgramme:
    specs: list[RuleSpec]
    rules: list[CompiledRule]
    fields: list[str]  # the event data fields the rules read
    exotic: exp.Expr  # the row must be evaluated in Python
    slots: int  # rules x actions, the width of one event's seq range
    first_slot: tuple[int, ...]  # slot number of each rule's first action
    by_type: tuple[TypeSlots, ...]  # event types that have rules, in order of their first rule
    dialect: Dialect
    # (column, SQL of its reference) per beneficiary field: the engine adds each column (and `{column}_id`,
    # the resolved id, with a customers table) to the events before the rules run
    beneficiaries: tuple[tuple[str, exp.Expr], ...] = ()
    reads_customers: bool = False  # some rule reads customer.* (the events need their customer's facts)
    reversals: tuple[CompiledReversal, ...] = ()  # reverse actions, in slot order (their slots issue nothing)
    divisors: tuple[Divisor, ...] = ()  # the fields reverse actions divide by (`of`), each once

    def render(self, node: exp.Expr) -> str:
        return self.dialect.render(node)

    @property
    def exotic_sql(self) -> str | None:
        """The exotic condition as SQL; None when no row can be exotic."""
        return None if is_false(self.exotic) else self.render(self.exotic)

    @property
    def joins_customers(self) -> bool:
        """Whether the events must be joined with a customers table (when one is given)."""
        return self.reads_customers or bool(self.beneficiaries)

    def rule_of(self, slot: int) -> tuple[int, int]:
        """(rule index, action index) of a slot."""
        for rule in self.rules:
            first = self.first_slot[rule.index]
            if first <= slot < first + len(rule.parts):
                return rule.index, slot - first
        raise KeyError(slot)


def recipient_column(reference: exp.Expr, dialect: Dialect) -> str:
    """The column holding a beneficiary's reference: named after its SQL, so that plans compiled over the same
    events (a sweep's points) share it, and never mean different things by one name."""
    return RECIPIENT + hashlib.sha1(dialect.render(reference).encode()).hexdigest()[:16]


def _reference(named: FieldSource, exotic_parts: list[exp.Expr]) -> exp.Expr:
    """A field naming a customer or an event: its value when it is a non-empty string, else NULL (a value only
    Python reads marks its row exotic)."""
    if named.kind == "python":
        exotic_parts.append(not_null(named.value))
    text = string_of(named)
    non_empty = exp.NEQ(this=text, expression=string(""))
    return exp.null() if isinstance(text, exp.Null) else exp.Paren(this=when(non_empty, text.copy()))


def refuse_tier_rules(definition: ProgrammeDefinition) -> None:
    """A rule that reads a tier or multiplies by one cannot be replayed until the replay computes tiers (issue 33):
    it would read every customer as having no tier, a silently wrong forecast. Refused (`field_invalid`, naming the
    element); a programme whose tiers no rule uses replays exactly."""
    for index, rule in enumerate(definition.rules):
        for where, what in rule_tier_uses(rule.conditions, rule.actions):
            message = f"the rule {what}: the replay does not compute tiers yet, so it would count no customer in one"
            raise ServiceError("field_invalid", message, field=f"rules[{index}].{where}")


def compile_programme(definition: ProgrammeDefinition, reader: FieldReader, dialect: Dialect) -> CompiledProgramme:
    refuse_tier_rules(definition)
    specs = rule_specs(definition)
    window = window_test(definition, dialect)
    exotic_parts: list[exp.Expr] = []
    unsafe_parts: list[exp.Expr] = []
    references: dict[str, tuple[str, exp.Expr]] = {}  # beneficiary field -> (column, reference)
    resolving = reader.resolves_customers
    stops: dict[str, list[tuple[exp.Expr, bool]]] = {}  # per type: conditions of the stop rules met so far
    compiled: dict[int, CompiledRule] = {}
    reversals: list[CompiledReversal] = []
    for spec in in_order(specs):  # processing order: a stop rule keeps the later rules of its type off
        conditions = _Conditions(reader, dialect, spec.timezone)
        where, nullable = conditions.nodes(spec.conditions)
        earlier = [negation(condition, may_be_null) for condition, may_be_null in stops.get(spec.event_type, [])]
        if spec.stop_processing:
            stops.setdefault(spec.event_type, []).append((where, nullable))
        amounts = []
        recipients: list[Recipient | None] = []
        reversing: list[tuple[int, ActionSpec, exp.Expr, exp.Expr | None]] = []
        numerator: exp.Expr | None
        for action_index, action in enumerate(spec.actions):
            source = conditions.source(action.per) if action.per else None
            amounts.append(action.entry.sql(action, _AmountForms(action, source, dialect)))  # a reversal: nothing
            if source is not None:
                conditions.numbers_read(source)
            if action.reverse_of is not None:  # what it takes back is decided in the replay's reversal pass
                reference = _reference(conditions.source(action.reverse_of), exotic_parts)
                numerator = None if source is None else cast(numeric(source, dialect).value, "VARCHAR")
                reversing.append((action_index, action, reference, numerator))
                recipients.append(None)
                continue
            if action.beneficiary is None:
                recipients.append(None)
                continue
            if action.beneficiary not in references:
                reference = _reference(conditions.source(action.beneficiary), exotic_parts)
                references[action.beneficiary] = (recipient_column(reference, dialect), reference)
            column = references[action.beneficiary][0]
            resolved = exp.column(f"{column}_id") if resolving else None
            recipients.append(Recipient(exp.column(column), resolved))
        exotic_parts += conditions.exotic
        unsafe_parts += conditions.unsafe
        rule_where = conjunction([window, where, *earlier])
        for action_index, action, reference, reversal_numerator in reversing:
            reversals.append(
                CompiledReversal(
                    int(spec.rule_id),
                    action_index,
                    spec.event_type,
                    rule_where.copy(),
                    reference,
                    reversal_numerator,
                    action.fraction,
                    action.fraction_of,
                    action.any_customer,
                )
            )
        has_recipient = any(r is not None for r in recipients)
        compiled[int(spec.rule_id)] = CompiledRule(
            int(spec.rule_id), spec.event_type, rule_where, tuple(amounts), tuple(recipients) if has_recipient else ()
        )
    rules = [compiled[index] for index in range(len(specs))]
    unique: dict[str, exp.Expr] = {}
    for marker in exotic_parts + unsafe_parts:
        if not is_false(marker):
            unique.setdefault(dialect.render(marker), marker)
    exotic: exp.Expr = (
        exp.Coalesce(this=exp.or_(*unique.values()), expressions=[exp.false()]) if unique else exp.false()
    )
    if unique and not is_true(window):  # outside the window nothing applies: SQL gives those rows nothing
        exotic = exp.and_(exp.Paren(this=exotic), exp.Paren(this=window.copy()))
    # Slots follow the order the rules apply in (priority, then file order), so that `seq` orders an event's
    # issuances as the live engine makes them.
    first_by_index: dict[int, int] = {}
    total = 0
    for spec in in_order(specs):
        first_by_index[int(spec.rule_id)] = total
        total += len(spec.actions)
    first = [first_by_index[index] for index in range(len(specs))]
    by_type: dict[str, list[tuple[int, exp.Expr, exp.Expr | None]]] = {}
    for rule in sorted(rules, key=lambda r: first[r.index]):
        for position in range(len(rule.parts)):
            recipient = rule.recipient(position)
            customer = None if recipient is None else recipient.customer
            if customer is not None and rule.parts[position].may_refuse:  # refused as too large: the event's own
                customer = when(exp.EQ(this=rule.slot(position), expression=number(TOO_LARGE)), exp.null(), customer)
            entry = (first[rule.index] + position, rule.slot(position), customer)
            by_type.setdefault(rule.event_type, []).append(entry)
    types = tuple(
        TypeSlots(t, tuple(e[0] for e in entries), tuple(e[1] for e in entries), tuple(e[2] for e in entries))
        for t, entries in by_type.items()
    )
    return CompiledProgramme(
        specs,
        rules,
        referenced_fields(specs),
        exotic,
        total,
        tuple(first),
        types,
        dialect,
        tuple(references.values()),
        any(spec.reads("customer") for spec in specs),
        tuple(sorted(reversals, key=lambda r: first[r.rule_index] + r.action_index)),
        tuple(divisor(of, reader.field(of), dialect) for of in dict.fromkeys(r.of for r in reversals if r.of)),
    )
