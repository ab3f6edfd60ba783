"""A programme's rules compiled to DuckDB SQL with the live engine's semantics (rewards_lab.domain.rules).

Every number stays exact: conditions compare integers, DECIMALs or doubles against the threshold written in the
same type (a double comparison is exact because thresholds have at most 15 significant digits and a double is
read as its shortest repr), and `{per, rate}` amounts are integer products truncated toward zero
(`V * N // D` with V the value scaled to an integer and N / D the rate times 10**decimals as a reduced fraction),
exactly `rewards_lab.domain.money.reward_minor`. Values SQL cannot read exactly (more than 10 decimal places,
18 or more integer digits, JSON numbers DuckDB parses through a double) mark their row `exotic`: such rows are
evaluated by the live engine's own Python functions instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, parse_amount
from rewards_lab.domain.rules import ActionSpec, ConditionSpec, RuleSpec
from rewards_lab.replay.inputs import NUMBER_RE, SIMPLE_RE, EventSource, FieldSource, literal

TOO_LARGE = -1  # the amount column's marker for an action refused as amount_too_large
_SQL_OPERATORS = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "=", "neq": "<>"}
_EST_LIMIT = 1.5e18  # above this estimate the product is surely above MAX_AMOUNT_MINOR; below, V * N fits HUGEINT


def rule_specs(definition: ProgrammeDefinition) -> list[RuleSpec]:
    """The file's rules as the live engine's RuleSpecs (rule_id = the rule's index in the file)."""
    decimals = definition.asset.decimals
    specs = []
    for index, rule in enumerate(definition.rules):
        conditions = tuple(ConditionSpec(c.field, c.operator.value, c.value) for c in rule.conditions)
        actions = []
        for number, action in enumerate(rule.actions):
            amount = action.amount
            if hasattr(amount, "fixed"):
                field = f"rules[{index}].actions[{number}].amount.fixed"
                actions.append(ActionSpec("asset", decimals, fixed_minor=parse_amount(amount.fixed, decimals, field)))
            else:
                actions.append(ActionSpec("asset", decimals, per=amount.per, rate=amount.rate))
        specs.append(RuleSpec(str(index), rule.event_type, conditions, tuple(actions)))
    return specs


def referenced_fields(specs: list[RuleSpec]) -> list[str]:
    names = [c.field for spec in specs for c in spec.conditions]
    names += [a.per for spec in specs for a in spec.actions if a.per is not None]
    return list(dict.fromkeys(names))


# values -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Numeric:
    """A field as an exact SQL number: `value` (NULL when absent or not a number), its scale and bound."""

    source: FieldSource
    value: str
    scale: int  # value * 10**scale is an integer
    bound: int  # |value * 10**scale| < bound wherever the row is not exotic
    exotic: str  # SQL: the value is a number SQL cannot read exactly


def numeric(source: FieldSource) -> Numeric:
    sql = source.sql
    if source.kind == "int":  # exact at any size: the HUGEINT path's estimate guards the product
        return Numeric(source, sql, 0, source.bound, "FALSE")
    if source.kind == "decimal":
        return Numeric(source, sql, source.scale, 10**source.precision, "FALSE")
    if source.kind in ("text", "double"):
        text = f"CAST({sql} AS VARCHAR)"
        simple = f"regexp_full_match({text}, {literal(SIMPLE_RE)})"
        if source.kind == "double":
            value = f"(CASE WHEN isfinite({sql}) AND {simple} THEN CAST({text} AS DECIMAL(28, 10)) END)"
            exotic = f"(isfinite({sql}) AND NOT {simple})"
        else:
            value = f"(CASE WHEN {simple} THEN CAST({text} AS DECIMAL(28, 10)) END)"
            exotic = f"(regexp_full_match({text}, {literal(NUMBER_RE)}) AND NOT {simple})"
        return Numeric(source, value, 10, 10**28, exotic)
    return Numeric(source, "NULL", 0, 1, "FALSE")


def _plain(value: Decimal) -> str:
    return format(value, "f")


def _places(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)


def condition_test(condition: ConditionSpec, source: FieldSource) -> str:
    """SQL true exactly when the condition holds, NULL or false otherwise: for WHERE and CASE WHEN, where NULL
    counts as false (no coalesce to evaluate for every condition of every rule on every event)."""
    op, t = condition.operator, condition.value
    sql = source.sql
    if source.kind == "int":
        floor, ceil = math.floor(t), math.ceil(t)
        integral = floor == ceil
        forms = {
            "gte": f"{sql} >= {ceil}",
            "gt": f"{sql} > {floor}",
            "lte": f"{sql} <= {floor}",
            "lt": f"{sql} < {ceil}",
            "eq": f"{sql} = {floor}" if integral else "FALSE",
            "neq": f"{sql} <> {floor}" if integral else f"{sql} IS NOT NULL",
        }
        return forms[op]
    if source.kind == "decimal":
        p, s = source.precision, source.scale
        fits = _places(t) <= s and abs(t) < Decimal(10) ** (p - s)
        typed = (
            f"CAST({literal(_plain(t))} AS DECIMAL({p}, {s}))"
            if fits
            else f"CAST({literal(_plain(t))} AS DECIMAL(38, 10))"
        )
        return f"{sql} {_SQL_OPERATORS[op]} {typed}"
    if source.kind == "double":
        return f"(isfinite({sql}) AND {sql} {_SQL_OPERATORS[op]} CAST({literal(repr(float(t)))} AS DOUBLE))"
    if source.kind == "text":
        value = numeric(source).value
        return f"{value} {_SQL_OPERATORS[op]} CAST({literal(_plain(t))} AS DECIMAL(28, 10))"
    return "FALSE"


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
    """An action's amount in SQL: `body` (BIGINT minor units, or TOO_LARGE) wherever `guard` holds, else nothing.

    Splitting the guard out lets a slot be one `CASE WHEN conditions AND guard THEN body ELSE 0 END`: a CASE
    with an ELSE and no nested NULL-producing CASE is the form DuckDB evaluates quickest."""

    guard: str  # SQL condition ("TRUE": always)
    body: str
    may_refuse: bool  # body can be TOO_LARGE
    largest: int  # no amount is above this

    @property
    def sql(self) -> str:
        """BIGINT minor units the action issues; TOO_LARGE when refused; NULL or 0 when it issues nothing."""
        return self.body if self.guard == "TRUE" else f"(CASE WHEN {self.guard} THEN {self.body} END)"

    def slot(self, where: str) -> str:
        """The amount when the rule's conditions `where` hold, else 0 (0 means: nothing issued)."""
        if self.body == "NULL":
            return "0"
        condition = where if self.guard == "TRUE" else f"{where} AND {self.guard}"
        return self.body if condition == "TRUE" else f"CASE WHEN {condition} THEN {self.body} ELSE 0 END"


def amount_parts(action: ActionSpec, source: FieldSource | None) -> Amount:
    if action.fixed_minor is not None:
        return Amount("TRUE", str(action.fixed_minor), False, action.fixed_minor)
    assert action.rate is not None and source is not None
    number = numeric(source)
    if number.value == "NULL":
        return Amount("TRUE", "NULL", False, 0)
    n, d = _fraction(action.rate, action.decimals, number.scale)
    bound = number.bound
    scaled = number.value if number.scale == 0 else f"{number.value} * {10**number.scale}"
    refuses, largest = True, MAX_AMOUNT_MINOR
    if bound * n < 2**63:  # the product fits a BIGINT: no estimate needed
        minor = f"CAST({scaled} AS BIGINT) * {n} // {d}" if n != 1 or d != 1 else f"CAST({scaled} AS BIGINT)"
        if (bound - 1) * n // d <= MAX_AMOUNT_MINOR:  # no value of this column can give too large an amount
            body, refuses, largest = minor, False, (bound - 1) * n // d
        else:
            body = f"CASE WHEN {minor} > {MAX_AMOUNT_MINOR} THEN {TOO_LARGE} ELSE {minor} END"
    else:
        estimate = f"CAST({number.value} AS DOUBLE) * {float(action.rate) * 10**action.decimals!r}"
        product = f"((CASE WHEN {estimate} >= {_EST_LIMIT!r} THEN 0 ELSE CAST({scaled} AS HUGEINT) END) * {n} // {d})"
        body = (
            f"CASE WHEN {estimate} >= {_EST_LIMIT!r} OR {product} > {MAX_AMOUNT_MINOR} THEN {TOO_LARGE} "
            f"ELSE CAST({product} AS BIGINT) END"
        )
    return Amount(f"{number.value} > 0", body, refuses, largest)


# the programme ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompiledRule:
    index: int
    event_type: str
    where: str  # the rule's conditions (without the event type); NULL means false: only for WHERE and CASE WHEN
    parts: tuple[Amount, ...]  # one per action

    @property
    def amounts(self) -> tuple[str, ...]:
        return tuple(part.sql for part in self.parts)


@dataclass(frozen=True)
class CompiledProgramme:
    specs: list[RuleSpec]
    rules: list[CompiledRule]
    fields: list[str]
    exotic: str  # SQL: the row must be evaluated in Python
    slots: int  # rules x actions, the width of one event's seq range
    first_slot: tuple[int, ...]  # slot number of each rule's first action


def compile_programme(definition: ProgrammeDefinition, source: EventSource) -> CompiledProgramme:
    specs = rule_specs(definition)
    fields = referenced_fields(specs)
    compiled = []
    exotic_parts: list[str] = []
    for spec in specs:
        where = " AND ".join(f"({condition_test(c, source.field(c.field))})" for c in spec.conditions) or "TRUE"
        amounts = tuple(amount_parts(a, source.field(a.per) if a.per else None) for a in spec.actions)
        compiled.append(CompiledRule(int(spec.rule_id), spec.event_type, where, amounts))
        for c in spec.conditions:
            field = source.field(c.field)
            if field.kind == "text":
                exotic_parts.append(numeric(field).exotic)
        for a in spec.actions:
            if a.per is not None:
                exotic_parts.append(numeric(source.field(a.per)).exotic)
    if source.unsafe_sql:
        exotic_parts.append(source.unsafe_sql)
    parts = [p for p in dict.fromkeys(exotic_parts) if p != "FALSE"]
    exotic = "coalesce(" + " OR ".join(parts) + ", FALSE)" if parts else "FALSE"
    first, total = [], 0
    for spec in specs:
        first.append(total)
        total += len(spec.actions)
    return CompiledProgramme(specs, compiled, fields, exotic, total, tuple(first))
