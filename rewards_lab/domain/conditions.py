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
  event's customer as the engine knows it (`CustomerFacts`);
- `customer.tier` (a level code), `customer.tier_rank` (1: the base) and `customer.tier_progress` (the upgrade
  window's metric, in its units) read the customer's tier in the rule's programme at the event's entry
  (`TierFacts`, issue 33; `domain.tiers`); missing in a programme without tiers and for an engine that does not
  know tiers yet.

What each operator means (its evaluation and its reasons) is its entry in the operator registry
(`rewards_lab.contract.operators`); the replay compiler (`rewards_lab.replay.compiler`) writes the same entries' SQL
forms, and the differential tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo

from rewards_lab.contract.condition_values import normalise
from rewards_lab.contract.operators import OPERATORS
from rewards_lab.contract.tier_requests import TIER_FIELDS

TIME_FIELDS = ("occurred_at.weekday", "occurred_at.hour", "occurred_at.date")
CUSTOMER_FIELDS = ("customer.country", "customer.segments", *TIER_FIELDS)
ATTRIBUTES_PREFIX = "customer.attributes."
GroupKind = Literal["all", "any", "not"]


@dataclass(frozen=True, slots=True)
class TierFacts:
    """The customer's tier in the rule's programme at the event's entry: its level's code and rank (1: the base),
    and the upgrade window's metric in the metric's units."""

    code: str
    rank: int
    progress: Decimal


@dataclass(frozen=True, slots=True)
class CustomerFacts:
    """The event's customer as the rules may read it: attributes (normalised values), country, segment codes, and
    its tier (None: the programme has none, or the engine does not know it)."""

    attributes: Mapping[str, Any] = field(default_factory=dict)
    country: str | None = None
    segments: tuple[str, ...] = ()
    tier: TierFacts | None = None


Multipliers = Callable[[Any], Decimal]  # a recipient (None: the event's customer, else a beneficiary's reference)
# -> its tier multiplier in the rule's programme


@dataclass(frozen=True, slots=True)
class EventFacts:
    """What a rule may read beyond the event data: its time (aware) and its customer; and, for actions that multiply
    by tier (issue 33), each recipient's multiplier (None: the engine knows no tiers, and such an action is
    refused rather than paid unmultiplied)."""

    occurred_at: datetime | None = None
    customer: CustomerFacts | None = None
    multipliers: Multipliers | None = field(default=None, compare=False)

    def multiplier(self, recipient: Any) -> Decimal | None:
        return None if self.multipliers is None else self.multipliers(recipient)


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
    if path in TIER_FIELDS:
        return tier_value(customer.tier, path)
    return normalise(customer.attributes.get(path.removeprefix(ATTRIBUTES_PREFIX)))


def tier_value(tier: TierFacts | None, path: str) -> Any:
    """`customer.tier` (the code), `customer.tier_rank` and `customer.tier_progress` (numbers); None without."""
    if tier is None:
        return None
    if path == "customer.tier":
        return tier.code
    return Decimal(tier.rank) if path == "customer.tier_rank" else tier.progress


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
        return OPERATORS[self.operator].describe(self.field, self.value)


def tester(condition: ConditionSpec) -> Callable[[Any], bool]:
    """The condition's test as one function of the value read: the kind check and the comparison together, built
    once per condition by its operator's entry (the event worker calls it for every event a rule sees)."""
    return _tester(condition.operator, _typed(condition.value), condition.value)


def _typed(value: Any) -> Any:
    """A condition's value with the type of each part: the cache's key. `eq false` and `eq 0` are equal values
    with equal hashes (so are `eq true` and `eq 1`), and must not share a test."""
    if isinstance(value, tuple):
        return tuple(_typed(item) for item in value)
    return (type(value), value)


@lru_cache(maxsize=4096)
def _tester(operator: str, _key: Any, value: Any) -> Callable[[Any], bool]:
    return OPERATORS[operator].test(value)


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


def leaf_reason(condition: ConditionSpec, value: Any, verdict: bool) -> str:
    """The reason of a leaf's verdict for the value read (its operator's entry says it)."""
    return OPERATORS[condition.operator].reason(condition.field, value, condition.value, verdict)
