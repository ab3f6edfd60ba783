"""What every request body model is built from: the base model, exact numbers, names and identifiers."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from rewards_lab.contract.amounts import MAX_RATE, parse_rate, parse_threshold
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.validation import custom_error

_DECIMAL_STRING_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?")  # used with fullmatch: ASCII digits, nothing after


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


def _number_field(parse: Any) -> Any:
    def check(value: object) -> Decimal:
        try:
            number: Decimal = parse(value)
        except ServiceError as error:
            raise custom_error(error) from None
        return number

    return check


def json_number(value: Decimal) -> int | float:
    # Exact: validated numbers have at most 15 significant digits, which a double reproduces as written.
    return int(value) if value == value.to_integral_value() else float(value)


# A JSON number, or the same value as a decimal string (the parser takes both; the document says so). Rates are
# above zero and below MAX_RATE; both allow MAX_RATE_DECIMALS places and 15 significant digits (not a schema rule).
_POSITIVE_DECIMAL_TEXT = r"^([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)$"
Rate = Annotated[
    Decimal,
    BeforeValidator(_number_field(lambda v: parse_rate(v, "rate"))),
    PlainSerializer(json_number),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": int(MAX_RATE)},
                {"type": "string", "pattern": _POSITIVE_DECIMAL_TEXT},
            ]
        }
    ),
]
Threshold = Annotated[
    Decimal,
    BeforeValidator(_number_field(lambda v: parse_threshold(v, "value"))),
    PlainSerializer(json_number),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}]}),
]


def _decimal_string(value: object) -> str:
    if not isinstance(value, str) or not _DECIMAL_STRING_RE.fullmatch(value):
        raise custom_error(ServiceError("amount_invalid", 'must be a decimal string such as "12.50"'))
    return value


DecimalString = Annotated[
    str,
    BeforeValidator(_decimal_string),
    # Every use is an amount, which must be above zero (`amount_not_positive`), so the document says so.
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)$",
            "examples": ["12.50"],
        }
    ),
]

Identifier = Annotated[str, Field(min_length=1, max_length=255)]
FieldName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
EventType = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")]


def whole_number(value: object) -> object:
    """3.0 is 3, as JSON Schema's integer says (exact JSON numbers arrive as Decimal); strings, booleans,
    fractions and non-finite numbers are left for the strict integer after it to refuse."""
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)
    return value
