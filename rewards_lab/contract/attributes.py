"""A customer's `attributes`: free-form facts about a customer (tier, signup channel, opt-ins) that rules can read.

The limits, in one place (docs/decisions.md, "Customers, wallets and assets"):

- keys match `ATTRIBUTE_KEY_RE` (a letter or `_`, then letters, digits, `_`; ASCII) and have 1 to
  `MAX_ATTRIBUTE_KEY_CHARS` characters: a key is a name a rule can write, never a path or an expression;
- at most `MAX_ATTRIBUTES` keys;
- a value is a string of at most `MAX_ATTRIBUTE_STRING_CHARS` characters, a boolean, or a JSON number held exactly
  (a Decimal, never a float) within a condition threshold's limits (`amounts.parse_threshold`: magnitude below
  10^15, at most 10 decimal places and 15 significant digits), so that any attribute can be compared with any
  threshold and a client that reads it as a double still gets the exact value back;
- nested objects, arrays and null are refused (null only means "remove this key" in a PATCH, RFC 7396);
- the attributes as stored (compact JSON, non-ASCII escaped as `\\uXXXX`: `jsonutil.dumps`) are at most
  `MAX_ATTRIBUTES_JSON_CHARS` characters; on a PATCH the count and size limits apply to the merged result.

Every refusal is `field_invalid` with `details.field` naming the offending path: `attributes.<key>` for a value,
`attributes` for a bad key, too many keys or too large a whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract.amounts import as_number, parse_threshold
from rewards_lab.contract.errors import ServiceError

MAX_ATTRIBUTES = 50
MAX_ATTRIBUTE_KEY_CHARS = 64
MAX_ATTRIBUTE_STRING_CHARS = 500
MAX_ATTRIBUTES_JSON_CHARS = 8_192  # 8 KiB of stored JSON
ATTRIBUTE_KEY_RE = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_ATTRIBUTE_KEY_CHARS - 1}}}")  # used with fullmatch
FIELD = "attributes"
_KEY_SHOWN_CHARS = 80  # a refused key is quoted in the message, cut to this length

AttributeValue = str | bool | Decimal
Attributes = dict[str, AttributeValue]


def _refuse(message: str, field: str = FIELD) -> ServiceError:
    return ServiceError("field_invalid", message, field=field)


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not ATTRIBUTE_KEY_RE.fullmatch(key):
        shown = str(key)[:_KEY_SHOWN_CHARS]
        raise _refuse(
            f"attribute keys have 1 to {MAX_ATTRIBUTE_KEY_CHARS} characters, a letter or _ first, then letters, "
            f"digits or _ (not {shown!r})"
        )
    return key


def _value(value: object, field: str) -> AttributeValue:
    """One attribute value, as stored: a str, a bool, or an exact Decimal (ints and floats become Decimals)."""
    if isinstance(value, bool):  # before numbers: a bool is an int to Python
        return value
    if isinstance(value, str):
        if len(value) > MAX_ATTRIBUTE_STRING_CHARS:
            raise _refuse(f"attribute strings have at most {MAX_ATTRIBUTE_STRING_CHARS} characters", field)
        return value
    if isinstance(value, int | float | Decimal):
        if as_number(value) is None:  # the request parser reads a number it cannot hold as NaN (loads_request)
            raise _refuse("attribute numbers are finite, below 10^15 in magnitude", field)
        return parse_threshold(value, field)
    if value is None:
        raise _refuse("attribute values cannot be null (a PATCH removes a key with null)", field)
    raise _refuse("attribute values are strings, numbers or booleans (no objects or arrays)", field)


def check_attributes(value: object) -> Attributes:
    """A creation's `attributes`, checked against every limit; numbers as exact Decimals."""
    if not isinstance(value, dict):
        raise _refuse("attributes must be an object")
    if len(value) > MAX_ATTRIBUTES:
        raise _refuse(f"at most {MAX_ATTRIBUTES} attributes")
    checked = {_check_key(key): _value(item, f"{FIELD}.{key}") for key, item in value.items()}
    check_size(checked)
    return checked


def check_patch(value: object) -> dict[str, AttributeValue | None]:
    """A PATCH's `attributes` (RFC 7396 merge patch): each key valid, each value valid or null (remove). The count
    and size limits wait for the merged result (`merge`)."""
    if not isinstance(value, dict):
        raise _refuse("attributes must be an object (or null to remove them all)")
    return {_check_key(key): None if item is None else _value(item, f"{FIELD}.{key}") for key, item in value.items()}


def merge(current: Mapping[str, AttributeValue], patch: Mapping[str, AttributeValue | None]) -> Attributes:
    """RFC 7396 on a flat object: a key set to null is removed, any other is set; the result within the limits."""
    merged = dict(current)
    for key, item in patch.items():
        if item is None:
            merged.pop(key, None)
        else:
            merged[key] = item
    if len(merged) > MAX_ATTRIBUTES:
        raise _refuse(f"at most {MAX_ATTRIBUTES} attributes (after the merge)")
    check_size(merged)
    return merged


def to_json(attributes: Mapping[str, AttributeValue]) -> str:
    """The stored text: compact JSON, numbers digit for digit."""
    return jsonutil.dumps(dict(attributes))


def from_json(text: str | None) -> Attributes:
    """Stored text back to attributes (numbers as exact Decimals); a row from before attributes reads as {}."""
    if not text:
        return {}
    loaded: dict[str, Any] = jsonutil.loads(text)
    return {key: Decimal(item) if type(item) is int else item for key, item in loaded.items()}


def check_size(attributes: Mapping[str, AttributeValue]) -> None:
    size = len(to_json(attributes))
    if size > MAX_ATTRIBUTES_JSON_CHARS:
        raise _refuse(f"attributes take at most {MAX_ATTRIBUTES_JSON_CHARS} characters of JSON (these take {size})")
