"""The limits on what a client may send, in one place, and the check of free-form JSON against them.

Every limit is checked before any work is done with the input, and every refusal is a registered 4xx code that
names the offending field (`docs/security.md`, "Bad input", lists them with their reasons):

- a request body: at most `MAX_BODY_BYTES`, refused on `Content-Length` before it is read and cut while it is
  read (chunked bodies) by `api/body_limit.py` (`request_too_large`, HTTP 413);
- a JSON number anywhere in a body: at most `MAX_NUMBER_CHARS` characters and a decimal exponent within
  +-`MAX_NUMBER_EXPONENT` (the largest `1E+999999999` that event data has always accepted and returns as sent,
  docs/decisions.md; `Decimal` itself cannot even read 1e99999999999999999999); the request parser
  (`jsonutil.loads_request`) reads any other number as NaN, which every validator refuses by field. Fields
  with a meaning have tighter limits (amounts, rates, thresholds: `domain/money.py`);
- free-form JSON (an event's `data`, a simulation's `event`): at most `MAX_DATA_DEPTH` levels of objects and
  arrays, `MAX_DATA_KEYS` keys per object, `MAX_DATA_ITEMS` items per array, `MAX_DATA_KEY_CHARS` characters per
  key and `MAX_DATA_STRING_CHARS` per string (`field_invalid`, `details.field` such as `data.a.b.c`); an
  event's data also has a total size (`contract.requests.MAX_EVENT_DATA_BYTES`, `event_payload_too_large`);
- a pagination cursor: at most `MAX_CURSOR_CHARS` characters (`cursor_invalid`).

Amounts (decimal strings) are bounded by `domain.money.MAX_AMOUNT_MINOR`, rates by `MAX_RATE` and condition
thresholds by `MAX_THRESHOLD`, with their digit limits; those live beside their parsers in `domain/money.py`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rewards_lab.contract.errors import ServiceError

MAX_BODY_BYTES = 1_048_576
MAX_NUMBER_CHARS = 100
MAX_NUMBER_EXPONENT = 999_999_999
MAX_DATA_DEPTH = 16
MAX_DATA_KEYS = 1_000
MAX_DATA_ITEMS = 10_000
MAX_DATA_KEY_CHARS = 255
MAX_DATA_STRING_CHARS = 16_384  # = an event's whole data (requests.MAX_EVENT_DATA_BYTES): no longer string fits it
MAX_CURSOR_CHARS = 1_024
_MAX_INT = 10**MAX_NUMBER_CHARS  # an int at or beyond this has more digits than a number may have characters


def number_in_range(value: Decimal) -> bool:
    """A finite Decimal whose adjusted exponent is within +-MAX_NUMBER_EXPONENT (zero included: 0E+99999 is not)."""
    return value.is_finite() and -MAX_NUMBER_EXPONENT <= value.adjusted() <= MAX_NUMBER_EXPONENT


_NUMBER_RULE = (
    f"numbers are finite, at most {MAX_NUMBER_CHARS} characters, with a decimal exponent within +-{MAX_NUMBER_EXPONENT}"
)


def _refuse(path: str, message: str) -> ServiceError:
    return ServiceError("field_invalid", message, field=path)


def check_data(value: Any, path: str, long_string_code: str = "field_invalid") -> None:
    """Refuse free-form JSON beyond the limits above, naming the first offending field (`data.a.b[2].c`).

    Recursive, but never deeper than MAX_DATA_DEPTH + 1 calls: a value nested deeper is refused at the limit.
    Accepts what `jsonutil.loads` produces (dict, list, str, int, Decimal, bool, None) and Python floats. A
    string over MAX_DATA_STRING_CHARS is `long_string_code` (an event's data: `event_payload_too_large`, the code
    its total size has always had).
    """
    _check(value, path, 0, long_string_code)


def _check(value: Any, path: str, depth: int, long_string_code: str) -> None:
    kind = type(value)
    if kind is str:
        if len(value) > MAX_DATA_STRING_CHARS:
            message = f"strings are limited to {MAX_DATA_STRING_CHARS} characters"
            raise ServiceError(long_string_code, message, field=path, limit_chars=MAX_DATA_STRING_CHARS)
    elif kind is dict:
        _check_container(value, path, depth, MAX_DATA_KEYS, "keys")
        for key, item in value.items():
            if type(key) is not str or len(key) > MAX_DATA_KEY_CHARS:
                raise _refuse(path, f"keys are strings of at most {MAX_DATA_KEY_CHARS} characters")
            _check(item, f"{path}.{key}", depth + 1, long_string_code)
    elif kind is list:
        _check_container(value, path, depth, MAX_DATA_ITEMS, "items")
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1, long_string_code)
    elif kind is Decimal:  # from the parser (NaN when out of range) or a Python caller (any Decimal)
        if not number_in_range(value) or len(value.as_tuple().digits) > MAX_NUMBER_CHARS:
            raise _refuse(path, _NUMBER_RULE)
    elif kind is int:
        if not -_MAX_INT < value < _MAX_INT:
            raise _refuse(path, _NUMBER_RULE)
    elif kind is float:
        if not number_in_range(Decimal(repr(value))):  # nan, inf: refused; never an exception
            raise _refuse(path, _NUMBER_RULE)
    elif value is not None and kind is not bool:
        raise _refuse(path, "must be a JSON value")


def _check_container(value: dict[Any, Any] | list[Any], path: str, depth: int, most: int, what: str) -> None:
    if depth >= MAX_DATA_DEPTH:
        raise _refuse(path, f"objects and arrays nest at most {MAX_DATA_DEPTH} levels deep")
    if len(value) > most:
        raise _refuse(path, f"at most {most} {what}")
