"""Caps, budgets, clawback and reversals on the wire (issue 18; docs/rules.md "Caps, budgets and reversals").

All of it is optional and additive: a rule or programme written without these fields means what it meant.

- A **cap** (`limits` on a rule or on a programme) bounds what one customer receives in a calendar period:
  `{"per": "customer", "period": "month", "max_amount": "500"}` or `{..., "max_count": 3}`.
- A **budget** (`budget` on a programme) bounds what the programme issues in a period across all customers.
- A **reverse** action takes back what an original event issued; `clawback` on the programme says what happens
  when the customer has already spent it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    PlainSerializer,
    StrictBool,
    Tag,
    WithJsonSchema,
)

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.request_base import DecimalString, FieldName, RequestModel, whole_number
from rewards_lab.contract.validation import custom_error

Period = Literal["day", "week", "month", "year", "lifetime"]
Clawback = Literal["available", "negative", "none"]
DEFAULT_CLAWBACK: Clawback = "available"
MAX_LIMITS = 5  # caps on one rule, or on one programme
MAX_COUNT = 1_000_000


Count = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_COUNT, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_COUNT}),
]


class AmountLimit(RequestModel):
    """A cap on what one customer (the recipient of a reward) may receive in a calendar period of the
    programme's timezone, as an amount of the programme's asset: a reward is cut to what remains."""

    per: Literal["customer"] = "customer"
    period: Period
    max_amount: DecimalString


class CountLimit(RequestModel):
    """A cap on how many rewards one customer may receive in a calendar period: once reached, rewards are
    skipped."""

    per: Literal["customer"] = "customer"
    period: Period
    max_count: Count


def _limit_shape(value: Any) -> str:
    if isinstance(value, AmountLimit | CountLimit):
        return "count_limit" if isinstance(value, CountLimit) else "amount_limit"
    if isinstance(value, dict) and "max_count" in value and "max_amount" not in value:
        return "count_limit"
    return "amount_limit"


# A cap: `max_amount` or `max_count` (exactly one: with both, the second is an unknown field).
Limit = Annotated[
    Annotated[AmountLimit, Tag("amount_limit")] | Annotated[CountLimit, Tag("count_limit")],
    Discriminator(_limit_shape),
]


Limits = Annotated[list[Limit], Field(max_length=MAX_LIMITS)]


class Budget(RequestModel):
    """What the programme may issue in a calendar period across all customers, in processing order."""

    period: Period
    max_amount: DecimalString


class Original(RequestModel):
    """Where a reverse action finds its original: the event whose external_event_id this field of the refund's
    data holds."""

    field: FieldName


class FractionOf(RequestModel):
    """A fraction read from both events: the refund's `field` over the original's `of` (e.g. refund_amount over
    amount), clamped to [0, 1]."""

    field: FieldName
    of: FieldName


def _fraction_shape(value: Any) -> str:
    return "fraction_of" if isinstance(value, dict | FractionOf) else "fraction_constant"


MAX_FRACTION_PLACES = 6
_FRACTION_TEXT = re.compile(r"0\.[0-9]+|1(\.0+)?")


def _fraction(value: object) -> Decimal:
    """A constant fraction: a decimal string or a JSON number with 0 < f <= 1 and at most 6 places."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise custom_error(ServiceError("field_invalid", 'must be a fraction such as "0.5" (0 < fraction <= 1)'))
    text = str(value)
    number = Decimal(text) if not isinstance(value, str) or _FRACTION_TEXT.fullmatch(text) else Decimal("NaN")
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or not Decimal(0) < number <= 1 or -exponent > MAX_FRACTION_PLACES:
        message = f"must be a fraction above 0 and at most 1, with at most {MAX_FRACTION_PLACES} decimal places"
        raise custom_error(ServiceError("field_invalid", message))
    return number.normalize() if number != 1 else Decimal(1)


FractionConstant = Annotated[
    Decimal,
    BeforeValidator(_fraction),
    PlainSerializer(lambda value: str(value)),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                {"type": "string", "pattern": r"^(0\.[0-9]*[1-9][0-9]*|1(\.0+)?)$"},
            ],
            "description": "0 < fraction <= 1",
        }
    ),
]
Fraction = Annotated[
    Annotated[FractionConstant, Tag("fraction_constant")] | Annotated[FractionOf, Tag("fraction_of")],
    Discriminator(_fraction_shape),
]


class ReverseAction(RequestModel):
    """Takes back what the original event (named by `original.field` of this event's data) issued through this
    programme, across all its rewards: the whole of what remains, or `fraction` of each reward (a constant, or
    `{"field": "refund_amount", "of": "amount"}`). Never more than was issued, over any number of refunds.

    Only a refund by the original event's customer takes anything back: one by another customer fails with
    `original_customer_mismatch`, unless `any_customer` is true (marketplaces, where a seller may refund a
    buyer's order); the reversal is recorded under the original event's customer either way."""

    type: Literal["reverse"]
    original: Original
    fraction: Fraction | None = Field(default=None, exclude_if=lambda value: value is None)
    any_customer: StrictBool = Field(  # only true or false: an opt-out of a safeguard is never guessed from "yes"
        default=False,
        exclude_if=lambda value: not value,
        description="Take back even when the refund's customer is not the original event's (default false).",
    )
