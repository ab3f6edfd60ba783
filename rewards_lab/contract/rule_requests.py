"""Rule request bodies: the rule language on the wire (conditions, groups, actions, beneficiaries, priority).

Everything added after the seed is optional: a rule written with the seed's numeric conditions means what it
meant. A condition's value keeps one reading from then: with an ordering or equality operator (and `between`), a
decimal string such as "20" is the number 20, as it always was. Ordering operators (gte, gt, lte, lt) compare numbers
only; eq, neq, in, not_in and between also take strings (between orders them by code point, so ISO dates order by
date), eq and neq also booleans. Lists (`in`,
`not_in`) and `contains` take JSON values literally, so `{"operator": "in", "value": ["20"]}` tests the string "20".

Limits (docs/rules.md): at most MAX_RULES_CONDITIONS top-level conditions, MAX_CONDITION_NODES conditions and groups
in all, groups nested at most MAX_CONDITION_DEPTH deep, lists of at most MAX_CONDITION_LIST values, strings of at
most MAX_CONDITION_STRING characters. A refusal names the offending element: `conditions[2].any[0].value`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Tag,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from rewards_lab.contract.condition_values import MAX_CONDITION_LIST as MAX_CONDITION_LIST
from rewards_lab.contract.condition_values import MAX_CONDITION_STRING as MAX_CONDITION_STRING
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limit_requests import Limits, ReverseAction
from rewards_lab.contract.operators import OPERATORS
from rewards_lab.contract.request_base import (
    DecimalString,
    EventType,
    FieldName,
    Identifier,
    Rate,
    RequestModel,
    json_number,
)
from rewards_lab.contract.validation import custom_error

MAX_RULES_CONDITIONS = 20  # top-level conditions of a rule (the seed's list)
MAX_RULE_ACTIONS = 10
MAX_CONDITION_NODES = 50  # conditions and groups of a rule, at every depth
MAX_CONDITION_DEPTH = 5  # a top-level condition is at depth 1; each group adds one
MAX_PRIORITY = 1_000_000  # |priority|
MAX_RULE_NAME = 120  # characters of a rule's name, as sent

# The operators on the wire, in the registry's order (contract/operators.py: one entry per operator).
Operator = StrEnum("Operator", [(name.upper(), name) for name in OPERATORS], module=__name__)  # type: ignore[misc]


def condition_value(operator: str, raw: object, where: str = "value") -> Any:
    """A condition's value as the engines use it (Decimal, str, bool; a tuple for in / not_in / between; None for
    exists / not_exists). Raises ServiceError (`field_invalid`, `details.field` = `where` or an element of it)."""
    return OPERATORS[operator].value_of(raw, where)


def _wire(value: Any) -> Any:
    """A condition value as JSON (numbers exact, as the seed's thresholds were returned)."""
    if isinstance(value, tuple):
        return [_wire(item) for item in value]
    if isinstance(value, Decimal):
        return json_number(value)
    return value


def _suffix_error(error: ServiceError) -> PydanticCustomError:
    """A refusal inside a model, naming its element relative to the model (`value[2]`, `any[0].value`)."""
    message = error.message.replace("{", "(").replace("}", ")")
    return PydanticCustomError(error.code, message, {"service_suffix": str(error.details.get("field", ""))})


_VALUE_SCHEMA = {
    "description": "A number (or decimal string, read as that number), a string or a boolean; a list for in, "
    "not_in and between; absent for exists and not_exists.",
    "anyOf": [
        {"type": "number"},
        {"type": "string", "maxLength": MAX_CONDITION_STRING},
        {"type": "boolean"},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_CONDITION_LIST,
            "items": {"anyOf": [{"type": "number"}, {"type": "string", "maxLength": MAX_CONDITION_STRING}]},
        },
        {"type": "null"},
    ],
}


class Condition(RequestModel):
    """A condition on one field: `{field, operator, value}`."""

    field: FieldName
    operator: Operator
    value: Annotated[Any, PlainSerializer(_wire), WithJsonSchema(_VALUE_SCHEMA)] = Field(
        default=None, exclude_if=lambda value: value is None
    )

    @model_validator(mode="after")
    def _typed_value(self) -> Condition:
        try:
            self.value = condition_value(self.operator.value, self.value)
        except ServiceError as error:
            raise _suffix_error(error) from None
        return self

    def payload(self) -> dict[str, Any]:
        """The stored and returned form."""
        body: dict[str, Any] = self.model_dump(mode="json")
        return body


def _condition_shape(value: Any) -> str:
    """Which shape an element of `conditions` is, so that errors speak of that shape only."""
    if isinstance(value, RequestModel):
        shapes: dict[type, str] = {AnyGroup: "any_group", AllGroup: "all_group", NotGroup: "not_group"}
        return shapes.get(type(value), "condition")
    if isinstance(value, dict):
        for key in ("any", "all", "not"):
            if key in value and "field" not in value:
                return f"{key}_group"
    return "condition"


class AnyGroup(RequestModel):
    """Holds when at least one of its conditions holds."""

    any: Annotated[list[ConditionItem], Field(min_length=1, max_length=MAX_RULES_CONDITIONS)]


class AllGroup(RequestModel):
    """Holds when every one of its conditions holds."""

    all: Annotated[list[ConditionItem], Field(min_length=1, max_length=MAX_RULES_CONDITIONS)]


class NotGroup(RequestModel):
    """Holds when its one condition does not hold."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    not_: Annotated[ConditionItem, Field(alias="not")]


ConditionItem = Annotated[
    Annotated[Condition, Tag("condition")]
    | Annotated[AnyGroup, Tag("any_group")]
    | Annotated[AllGroup, Tag("all_group")]
    | Annotated[NotGroup, Tag("not_group")],
    Discriminator(_condition_shape),
]


ConditionGroup = AnyGroup | AllGroup | NotGroup
AnyGroup.model_rebuild()
AllGroup.model_rebuild()
NotGroup.model_rebuild()


def condition_payload(item: Condition | ConditionGroup) -> dict[str, Any]:
    """An element of `conditions` as stored and returned (JSON-ready, exact numbers)."""
    if isinstance(item, Condition):
        return item.payload()
    if isinstance(item, AnyGroup):
        return {"any": [condition_payload(part) for part in item.any]}
    if isinstance(item, AllGroup):
        return {"all": [condition_payload(part) for part in item.all]}
    return {"not": condition_payload(item.not_)}


def _walk(items: list[Any], path: str, depth: int) -> Iterator[tuple[str, int]]:
    """(path, depth) of every condition and group, depth first."""
    for index, item in enumerate(items):
        here = f"{path}[{index}]"
        yield here, depth
        if isinstance(item, AnyGroup):
            yield from _walk(item.any, f"{here}.any", depth + 1)
        elif isinstance(item, AllGroup):
            yield from _walk(item.all, f"{here}.all", depth + 1)
        elif isinstance(item, NotGroup):
            yield from _walk([item.not_], f"{here}.not", depth + 1)


def _not_paths(path: str) -> str:
    return path.replace(".not[0]", ".not")


def check_condition_tree(items: list[Any], base: str = "conditions") -> None:
    """The depth and size limits of a rule's conditions; the refusal names the first element beyond them."""
    for count, (path, depth) in enumerate(_walk(items, base, 1), start=1):
        if depth > MAX_CONDITION_DEPTH:
            message = f"conditions nest at most {MAX_CONDITION_DEPTH} deep"
            raise ServiceError("field_invalid", message, field=_not_paths(path))
        if count > MAX_CONDITION_NODES:
            message = f"a rule has at most {MAX_CONDITION_NODES} conditions and groups in all"
            raise ServiceError("field_invalid", message, field=_not_paths(path))


class FixedAmount(RequestModel):
    fixed: DecimalString


class PerRateAmount(RequestModel):
    per: FieldName
    rate: Rate


def _amount_shape(value: Any) -> str:
    """Which of the two shapes an amount is, so that errors speak of that shape only."""
    if isinstance(value, FixedAmount | PerRateAmount):
        return "fixed_amount" if isinstance(value, FixedAmount) else "per_rate_amount"
    if isinstance(value, dict) and ("per" in value or "rate" in value) and "fixed" not in value:
        return "per_rate_amount"
    return "fixed_amount"


Amount = Annotated[
    Annotated[FixedAmount, Tag("fixed_amount")] | Annotated[PerRateAmount, Tag("per_rate_amount")],
    Discriminator(_amount_shape),
]


class Beneficiary(RequestModel):
    """Who receives an action's reward instead of the event's customer: the customer (id or external_id) named
    by a field of the event, e.g. `{"field": "referrer_id"}`."""

    field: FieldName


# `"multiply": "tier"` (issue 33): the amount is multiplied by the recipient's tier multiplier
# (contract.tier_requests); absent, not multiplied, and not written, so every rule without it hashes as before.
Multiply = Literal["tier"]


class Action(RequestModel):
    """An issue action (the seed's)."""

    type: Literal["issue"]
    asset_id: Identifier | None = None  # the programme's asset when absent
    amount: Amount
    # the event's customer when absent (and then not written: the rule reads as it did before beneficiaries)
    beneficiary: Beneficiary | None = Field(default=None, exclude_if=lambda value: value is None)
    # `"tier"`: multiplied by the recipient's tier multiplier (issue 33); only in a programme with tiers. Not written
    # when absent, so a rule without it reads and fingerprints as before.
    multiply: Multiply | None = Field(default=None, exclude_if=lambda value: value is None)


def _priority(value: object) -> object:
    """14.0 is 14, as JSON Schema's integer says; strings, booleans and fractions stay refused."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return value


Priority = Annotated[
    int,
    BeforeValidator(_priority),
    Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY, strict=True),
    WithJsonSchema({"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY}),
]


def action_shape(value: Any) -> str:
    """A reverse action when it says so; anything else is read (and refused) as an issue action, as before."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "reverse_action" if kind == "reverse" else "issue_action"


# An action: `issue` (the seed's) or `reverse` (issue 18: takes back what an original event issued).
RuleAction = Annotated[
    Annotated[Action, Tag("issue_action")] | Annotated[ReverseAction, Tag("reverse_action")],
    Discriminator(action_shape),
]
Conditions = Annotated[list[ConditionItem], Field(max_length=MAX_RULES_CONDITIONS)]
Actions = Annotated[list[RuleAction], Field(min_length=1, max_length=MAX_RULE_ACTIONS)]


# ECMA-262's `\s` (the set the OpenAPI document's pattern is read with), spelled out so that Python reads it alike.
_NAME_SPACE = r"\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_NAME_EDGES = re.compile(f"^[{_NAME_SPACE}]+|[{_NAME_SPACE}]+$")
_NAME_TEXT = re.compile(f"[^{_NAME_SPACE}]")


def _rule_name(value: object) -> object:
    """A rule's name as stored: trimmed of white space at both ends; at most MAX_RULE_NAME characters as sent,
    with at least one that is not white space (the document's maxLength and pattern say the same)."""
    if not isinstance(value, str):
        return value  # left for the str type to refuse
    if len(value) > MAX_RULE_NAME:
        raise custom_error(ServiceError("field_invalid", f"a rule's name has at most {MAX_RULE_NAME} characters"))
    if not _NAME_TEXT.search(value):
        raise custom_error(ServiceError("field_invalid", "a rule's name must not be empty or only white space"))
    return _NAME_EDGES.sub("", value)


# A short human name, shown wherever the rule is listed (the lab's tables, plots and widgets, simulation reasons).
RuleName = Annotated[
    str,
    BeforeValidator(_rule_name),
    Field(strict=True),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_RULE_NAME,
            "pattern": f"[^{_NAME_SPACE}]",
            "description": "A short human name, trimmed; shown wherever the rule is listed.",
            "examples": ["Double points on large orders"],
        }
    ),
]


def _unset(value: object) -> bool:
    return value is None


class RuleFields(RequestModel):
    """What every rule body checks of its conditions as a whole."""

    @model_validator(mode="after")
    def _tree_limits(self) -> RuleFields:
        conditions = getattr(self, "conditions", None)
        if conditions:
            try:
                check_condition_tree(conditions)
            except ServiceError as error:
                raise _suffix_error(error) from None
        return self


class RuleCreate(RuleFields):
    program_id: Identifier
    # Optional (issue 28); absent: the rule has no name (and the request reads, and hashes, as before names).
    name: RuleName | None = Field(default=None, exclude_if=_unset)
    event_type: EventType
    conditions: Conditions = []
    actions: Actions
    priority: Priority = 0  # lower applies first; ties by creation order
    stop_processing: bool = False  # when the rule matches, the programme's later rules do not apply
    limits: Limits = []  # caps on what this rule gives one customer per period (issue 18)


class RuleUpdate(RuleFields):
    """Edits a rule of the draft version; absent fields stay as they are, and `name: null` clears the name."""

    name: RuleName | None = Field(default=None, exclude_if=_unset)
    event_type: EventType | None = None
    conditions: Conditions | None = None
    actions: Actions | None = None
    priority: Priority | None = None
    stop_processing: bool | None = None
    limits: Limits | None = None
