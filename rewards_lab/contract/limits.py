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

A programme version's rules and a simulation's explanation have their limits in `contract/programme_limits.py`.

A customer's `attributes` have their own, tighter limits, beside their checks in `contract/attributes.py`.
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


class _Refused(Exception):
    """A limit broken somewhere below: the path is collected as the walk unwinds (built only on failure)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.parts: list[str] = []


def check_data(value: Any, path: str, long_string_code: str = "field_invalid") -> None:
    """Refuse free-form JSON beyond the limits above, naming the first offending field (`data.a.b[2].c`).

    Recursive, but never deeper than MAX_DATA_DEPTH + 1 calls: a value nested deeper is refused at the limit.
    Accepts what `jsonutil.loads` produces (dict, list, str, int, Decimal, bool, None) and Python floats. A
    string over MAX_DATA_STRING_CHARS is `long_string_code` (an event's data: `event_payload_too_large`, the code
    its total size has always had). On the hot path: scalars are checked by `_fits` in their container's loop
    and no path text is made unless a limit is broken.
    """
    try:
        _leaf(value, 0, long_string_code)
    except _Refused as refused:
        field = path + "".join(reversed(refused.parts))
        details = {"limit_chars": MAX_DATA_STRING_CHARS} if refused.code != "field_invalid" else {}
        raise ServiceError(refused.code, refused.message, field=field, **details) from None


def _leaf(value: Any, depth: int, long_string_code: str) -> None:
    kind = type(value)
    if kind is str:
        if len(value) > MAX_DATA_STRING_CHARS:
            raise _Refused(long_string_code, f"strings are limited to {MAX_DATA_STRING_CHARS} characters")
    elif kind is dict:
        if depth >= MAX_DATA_DEPTH:
            raise _Refused("field_invalid", f"objects and arrays nest at most {MAX_DATA_DEPTH} levels deep")
        if len(value) > MAX_DATA_KEYS:
            raise _Refused("field_invalid", f"at most {MAX_DATA_KEYS} keys")
        for key, item in value.items():
            if type(key) is not str or len(key) > MAX_DATA_KEY_CHARS:
                raise _Refused("field_invalid", f"keys are strings of at most {MAX_DATA_KEY_CHARS} characters")
            if _fits(item):
                continue
            try:
                _leaf(item, depth + 1, long_string_code)
            except _Refused as refused:
                refused.parts.append(f".{key}")
                raise
    elif kind is list:
        if depth >= MAX_DATA_DEPTH:
            raise _Refused("field_invalid", f"objects and arrays nest at most {MAX_DATA_DEPTH} levels deep")
        if len(value) > MAX_DATA_ITEMS:
            raise _Refused("field_invalid", f"at most {MAX_DATA_ITEMS} items")
        for index, item in enumerate(value):
            if _fits(item):
                continue
            try:
                _leaf(item, depth + 1, long_string_code)
            except _Refused as refused:
                refused.parts.append(f"[{index}]")
                raise
    elif kind is Decimal:  # the parser's (NaN when out of range or over MAX_NUMBER_CHARS) or a Python caller's
        if not number_in_range(value):
            raise _Refused("field_invalid", _NUMBER_RULE)
    elif kind is int:
        if not -_MAX_INT < value < _MAX_INT:
            raise _Refused("field_invalid", _NUMBER_RULE)
    elif kind is float:
        if not number_in_range(Decimal(repr(value))):  # nan, inf: refused; never an exception
            raise _Refused("field_invalid", _NUMBER_RULE)
    elif value is not None and kind is not bool:
        raise _Refused("field_invalid", "must be a JSON value")


def _fits(item: Any) -> bool:
    """True for a scalar within its limits (the common case, checked in one small call: this runs on the hot
    path); False for containers and for anything `_leaf` must look at closer (and refuse with its reason)."""
    kind = type(item)
    if kind is str:
        return len(item) <= MAX_DATA_STRING_CHARS
    if kind is int:
        return bool(-_MAX_INT < item < _MAX_INT)
    if kind is Decimal:
        return number_in_range(item)
    return item is None or kind is bool
