"""The condition language: what a rule's conditions read and when they hold.

A condition is a leaf (`ConditionSpec`: one field, one operator, one value) or a group (`GroupSpec`: `all`, `any`
or `not` of further conditions). A leaf reads one field (`read_value`) as a typed value: a number (exact Decimal),
a string, a boolean, a list, an object, or None when the field is missing or JSON null. It holds only when that
value has the kind of the condition's value; any other kind makes it false, exactly like a missing field (so
`not_exists` is the way to test absence).

Fields are paths:
- `a.b.c` reads the event data: a top-level key spelled `a.b.c` first (what the field meant before paths existed),
  else `data["a"]["b"]["c"]`;
- `occurred_at.weekday` (1 = Monday ... 7), `occurred_at.hour` (0-23) and `occurred_at.date` ("YYYY-MM-DD") read the
  event's time in the programme's timezone;
- `customer.attributes.<name>`, `customer.country` and `customer.segments` (a list of segment codes) read the
  event's customer as the engine knows it (`CustomerFacts`).

The replay compiler (`rewards_lab.replay.compiler`) is the only other implementation of these semantics; the
differential tests hold the two equal.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo

from rewards_lab.contract.amounts import as_number
from rewards_lab.contract.rule_requests import MEMBERSHIP, PRESENCE

SYMBOLS = {"gte": ">=", "gt": ">", "lte": "<=", "lt": "<", "eq": "==", "neq": "!="}
TIME_FIELDS = ("occurred_at.weekday", "occurred_at.hour", "occurred_at.date")
CUSTOMER_FIELDS = ("customer.country", "customer.segments")
ATTRIBUTES_PREFIX = "customer.attributes."
GroupKind = Literal["all", "any", "not"]
Kind = Literal["number", "string", "boolean", "list", "object", "other"]


def kind_of(value: Any) -> Kind | None:
    """The kind of a value as `read_value` returns it (None: absent)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return "other"


def normalise(raw: Any) -> Any:
    """A JSON value as conditions read it: numbers (ints, Decimals, finite floats by their shortest repr) become
    exact Decimals; NaN and infinities stay as they are (they exist, and are no number); the rest is unchanged."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, str):
        return raw
    number = as_number(raw)
    if number is not None:
        return number
    if isinstance(raw, Decimal):  # NaN or an infinity: exists, and is no number (a float is neither a Decimal)
        return float(raw)
    if isinstance(raw, tuple):
        return list(raw)
    return raw


@dataclass(frozen=True, slots=True)
class CustomerFacts:
    """The event's customer as the rules may read it: attributes (normalised values), country, segment codes."""

    attributes: Mapping[str, Any] = field(default_factory=dict)
    country: str | None = None
    segments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EventFacts:
    """What a rule may read beyond the event data: its time (aware) and its customer."""

    occurred_at: datetime | None = None
    customer: CustomerFacts | None = None


NO_FACTS = EventFacts()


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def time_value(occurred_at: datetime | None, part: str, timezone: str) -> Any:
    """`occurred_at.<part>` in the timezone: weekday (1 = Monday) and hour as numbers, date as "YYYY-MM-DD"."""
    if occurred_at is None:
        return None
    aware = occurred_at if occurred_at.tzinfo is not None else occurred_at.replace(tzinfo=UTC)
    local = aware.astimezone(zone(timezone))
    if part == "weekday":
        return Decimal(local.isoweekday())
    if part == "hour":
        return Decimal(local.hour)
    return local.date().isoformat()


def data_value(data: Mapping[str, Any], path: str) -> Any:
    """A field of the event data by path: the key spelled `path` first, else the dotted walk (raw JSON value)."""
    if path in data:
        return data[path]
    if "." not in path:
        return None
    current: Any = data
    for segment in path.split("."):
        if not isinstance(current, Mapping) or segment not in current:
            return None
        current = current[segment]
    return current


def customer_value(customer: CustomerFacts | None, path: str) -> Any:
    if customer is None:
        return None
    if path == "customer.country":
        return customer.country
    if path == "customer.segments":
        return list(customer.segments)
    return normalise(customer.attributes.get(path.removeprefix(ATTRIBUTES_PREFIX)))


def source_of(path: str) -> Literal["time", "customer", "data"]:
    """Where a field path reads from."""
    if path in TIME_FIELDS:
        return "time"
    if path in CUSTOMER_FIELDS or (path.startswith(ATTRIBUTES_PREFIX) and len(path) > len(ATTRIBUTES_PREFIX)):
        return "customer"
    return "data"


def read_value(data: Mapping[str, Any], facts: EventFacts, path: str, timezone: str = "UTC") -> Any:
    """The value of a field path as conditions read it (normalised; None when absent)."""
    source = source_of(path)
    if source == "time":
        return time_value(facts.occurred_at, path.removeprefix("occurred_at."), timezone)
    if source == "customer":
        return customer_value(facts.customer, path)
    return normalise(data_value(data, path))


def recorded(value: Any) -> Any:
    """A value as the provenance records it: numbers as exact decimal strings (NaN and infinities as "NaN",
    "Infinity": JSON has no such numbers), the rest as read."""
    if isinstance(value, float):
        return str(Decimal(value))
    return str(value) if isinstance(value, Decimal) else value


def value_kind(value: Any) -> Kind | None:
    """The kind of a condition's value (a list's: its elements'; None for exists / not_exists)."""
    if isinstance(value, tuple):
        return kind_of(value[0]) if value else None
    return kind_of(value)


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A leaf: `field` `operator` `value`. Values: a Decimal, str or bool; a tuple for in / not_in (numbers or
    strings) and between ((low, high), same kind); None for exists / not_exists."""

    field: str
    operator: str
    value: Any = None

    def holds(self, value: Any) -> bool:
        """Whether the condition holds for the field's value as `read_value` returns it."""
        return tester(self)(value)

    def describe(self) -> str:
        """The condition as a person reads it: `amount >= 20`, `channel in ["web", "app"]`."""
        if self.operator in PRESENCE:
            return f"{self.field} {self.operator.replace('_', ' ')}"
        if self.operator == "between":
            low, high = self.value
            return f"{self.field} between {shown(low)} and {shown(high)}"
        symbol = SYMBOLS.get(self.operator, self.operator.replace("_", " "))
        return f"{self.field} {symbol} {shown(self.value)}"


def tester(condition: ConditionSpec) -> Callable[[Any], bool]:
    """The condition's test as one function of the value read: the kind check and the comparison together, built
    once per condition (the event worker calls it for every event a rule sees)."""
    return _tester(condition.operator, _typed(condition.value), condition.value)


def _typed(value: Any) -> Any:
    """A condition's value with the type of each part: the cache's key. `eq false` and `eq 0` are equal values
    with equal hashes (so are `eq true` and `eq 1`), and must not share a test."""
    if isinstance(value, tuple):
        return tuple(_typed(item) for item in value)
    return (type(value), value)


@lru_cache(maxsize=4096)
def _tester(op: str, _key: Any, expected: Any) -> Callable[[Any], bool]:
    if op == "exists":
        return lambda value: value is not None
    if op == "not_exists":
        return lambda value: value is None
    if op == "contains":
        return lambda value: isinstance(value, list) and _list_contains(value, expected)
    kind = type(expected[0] if isinstance(expected, tuple) else expected)  # Decimal, str or bool
    if op == "in":
        members = frozenset(expected)
        return lambda value: type(value) is kind and value in members
    if op == "not_in":
        members = frozenset(expected)
        return lambda value: type(value) is kind and value not in members
    if op == "between":
        low, high = expected
        return lambda value: type(value) is kind and low <= value <= high
    compare = _COMPARE[op]
    return lambda value: type(value) is kind and compare(value, expected)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "gte": operator.ge,
    "gt": operator.gt,
    "lte": operator.le,
    "lt": operator.lt,
    "eq": operator.eq,
    "neq": operator.ne,
}


def _list_contains(items: list[Any], wanted: Any) -> bool:
    kind = kind_of(wanted)
    return any(kind_of(item) == kind and item == wanted for item in map(normalise, items))


def shown(value: Any) -> str:
    """A value as reasons show it: numbers as written, strings quoted, lists bracketed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if value is None:
        return "null"
    return str(value)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """`all` (every part holds), `any` (at least one holds) or `not` (its one part does not hold)."""

    kind: GroupKind
    parts: tuple[ConditionNode, ...]


ConditionNode = ConditionSpec | GroupSpec


def leaves(nodes: Sequence[ConditionNode]) -> list[ConditionSpec]:
    """Every leaf under the nodes, depth first."""
    found: list[ConditionSpec] = []
    for node in nodes:
        if isinstance(node, ConditionSpec):
            found.append(node)
        else:
            found.extend(leaves(node.parts))
    return found


def describe_node(node: ConditionNode) -> str:
    """A condition or group as a person reads it: `amount >= 20`, `any(channel == "web", not(vip exists))`."""
    if isinstance(node, ConditionSpec):
        return node.describe()
    return f"{node.kind}(" + ", ".join(describe_node(part) for part in node.parts) + ")"


def node_holds(node: ConditionNode, test: Callable[[ConditionSpec], bool]) -> bool:
    """Whether a node holds, given how to test a leaf."""
    if isinstance(node, ConditionSpec):
        return test(node)
    if node.kind == "all":
        return all(node_holds(part, test) for part in node.parts)
    if node.kind == "any":
        return any(node_holds(part, test) for part in node.parts)
    return not node_holds(node.parts[0], test)


def why_not(condition: ConditionSpec, value: Any) -> str:
    """Why a leaf does not hold for a value of the wrong kind or an absent one."""
    if value is None:
        return f"field '{condition.field}' is missing"
    expected = value_kind(condition.value)
    if expected == "number":
        return f"field '{condition.field}' is not a number ({type(value).__name__})"
    return f"field '{condition.field}' is {_article(kind_of(value))}, not {_article(expected)}"


def _article(kind: str | None) -> str:
    if kind is None:
        return "absent"
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def leaf_reason(condition: ConditionSpec, value: Any, verdict: bool) -> str:
    """The reason of a leaf's verdict for the value read."""
    op, name = condition.operator, condition.field
    if op == "exists":
        return f"{name} exists" if verdict else f"field '{name}' is missing"
    if op == "not_exists":
        return f"field '{name}' is missing, as required" if verdict else f"{name} exists ({shown(value)})"
    if op == "contains":
        if not isinstance(value, list):
            return f"field '{name}' is missing" if value is None else f"field '{name}' is not a list"
        relation = "contains" if verdict else "does not contain"
        return f"{name} = {shown(value)} {relation} {shown(condition.value)}"
    if kind_of(value) != value_kind(condition.value):
        return why_not(condition, value)
    if op in MEMBERSHIP:
        member = (op == "in") == verdict
        return f"{name} = {shown(value)} is {'' if member else 'not '}in {shown(condition.value)}"
    if op == "between":
        low, high = condition.value
        inside = "is" if verdict else "is not"
        return f"{name} = {shown(value)} {inside} between {shown(low)} and {shown(high)}"
    relation = "holds" if verdict else "does not hold"
    return f"{name} = {shown(value)} {SYMBOLS[op]} {shown(condition.value)} {relation}"
