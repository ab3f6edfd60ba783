"""The values conditions work with, as every operator of `contract/operators.py` reads, tests and shows them.

A condition's value on the wire is a number, a string, a boolean, a list or absent; the engines use it as a Decimal,
a str, a bool, a tuple or None (`scalar`, `value_list`, `value_pair` parse it; a refusal is a ServiceError
`field_invalid` naming the offending element). A field read from an event (`normalise`) is a Decimal, a str, a bool,
a list, an object or None; its `kind_of` decides whether a condition can hold at all. Reasons show values with
`shown` (numbers as written, strings quoted).

Limits (docs/rules.md): lists of at most MAX_CONDITION_LIST values, strings of at most MAX_CONDITION_STRING
characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from rewards_lab.contract.amounts import as_number, parse_threshold
from rewards_lab.contract.errors import ServiceError

MAX_CONDITION_LIST = 100  # values of an `in` / `not_in` list
MAX_CONDITION_STRING = 200  # characters of a string value
_DECIMAL_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?")
Kind = Literal["number", "string", "boolean", "list", "object", "other"]


# values read from events ----------------------------------------------------------------------------------------
def kind_of(value: Any) -> Kind | None:
    """The kind of a value as conditions read it (None: absent)."""
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


def value_kind(value: Any) -> Kind | None:
    """The kind of a condition's value (a list's: its elements'; None for exists / not_exists)."""
    if isinstance(value, tuple):
        return kind_of(value[0]) if value else None
    return kind_of(value)


def list_contains(items: list[Any], wanted: Any) -> bool:
    """Whether a list read from an event holds an element of the wanted value's kind equal to it."""
    kind = kind_of(wanted)
    return any(kind_of(item) == kind and item == wanted for item in map(normalise, items))


# reasons ----------------------------------------------------------------------------------------------------------
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


def why_not(name: str, expected: Any, value: Any) -> str:
    """Why a condition on the field `name` with the value `expected` does not hold for a value of the wrong kind
    or an absent one."""
    if value is None:
        return f"field '{name}' is missing"
    kind = value_kind(expected)
    if kind == "number":
        return f"field '{name}' is not a number ({type(value).__name__})"
    return f"field '{name}' is {_article(kind_of(value))}, not {_article(kind)}"


def _article(kind: str | None) -> str:
    if kind is None:
        return "absent"
    return ("an " if kind[0] in "aeiou" else "a ") + kind


# values written in conditions -------------------------------------------------------------------------------------
def fail(message: str, where: str) -> ServiceError:
    """A refusal of a condition's value (or an element of it) at `where`."""
    return ServiceError("field_invalid", message, field=where)


def scalar(raw: object, where: str, *, decimal_text: bool, booleans: bool = False) -> Decimal | str | bool:
    """One value: a number (at most 15 significant digits and 10 places, like every threshold), a string, or with
    `booleans` a boolean. With `decimal_text`, a decimal string is the number it spells (the seed's reading)."""
    if isinstance(raw, bool):
        if booleans:
            return raw
        raise fail(f"{where} must be a number or a string", where)
    if as_number(raw) is not None or (decimal_text and isinstance(raw, str) and _DECIMAL_TEXT.fullmatch(raw)):
        return parse_threshold(raw, where)
    if isinstance(raw, str):
        return text(raw, where)
    kinds = "a number, a string or a boolean" if booleans else "a number or a string"
    raise fail(f"{where} must be {kinds}", where)


def text(raw: object, where: str) -> str:
    """A string value (at most MAX_CONDITION_STRING characters)."""
    if not isinstance(raw, str):
        raise fail(f"{where} must be a string", where)
    if len(raw) > MAX_CONDITION_STRING:
        raise fail(f"{where} must be at most {MAX_CONDITION_STRING} characters", where)
    return raw


def _kind(value: Decimal | str | bool) -> str:
    return "boolean" if isinstance(value, bool) else "number" if isinstance(value, Decimal) else "string"


def value_list(raw: object, where: str) -> tuple[Decimal | str | bool, ...]:
    """1 to MAX_CONDITION_LIST values, all numbers or all strings (taken literally: "20" is a string here)."""
    if not isinstance(raw, list | tuple):
        raise fail(f"{where} must be a list of numbers or strings", where)
    if not raw or len(raw) > MAX_CONDITION_LIST:
        raise fail(f"{where} must hold 1 to {MAX_CONDITION_LIST} values", where)
    items = tuple(scalar(item, f"{where}[{i}]", decimal_text=False) for i, item in enumerate(raw))
    first = _kind(items[0])
    for i, item in enumerate(items):
        if _kind(item) != first:
            raise fail(f"{where}: every value must be a {first}, like the first", f"{where}[{i}]")
    return items


def value_pair(raw: object, where: str) -> tuple[Decimal | str, Decimal | str]:
    """`[low, high]`: two numbers (a decimal string is its number) or two strings, low <= high."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise fail(f"{where} must be [low, high]", where)
    low, high = (scalar(item, f"{where}[{i}]", decimal_text=True) for i, item in enumerate(raw))
    if _kind(low) != _kind(high):
        raise fail(f"{where}: low and high must both be numbers or both strings", f"{where}[1]")
    if high < low:  # type: ignore[operator]
        raise fail(f"{where}: high must not be below low", f"{where}[1]")
    return (low, high)  # type: ignore[return-value]
