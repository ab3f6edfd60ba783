"""Exact JSON: numbers are parsed as Decimal and written back digit for digit (never through a float)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

import simplejson
from simplejson.encoder import encode_basestring_ascii

from rewards_lab.contract.limits import MAX_NUMBER_CHARS, number_in_range


def loads(text: str | bytes) -> Any:
    """JSON with numbers as exact Decimal (non-integers) or int, for text the service wrote or trusts (stored
    rows, the lab's files, a server's answers). Raises ValueError for text that is not JSON, for an integer of
    over 4,300 digits and for an exponent beyond what Decimal holds (about 10**18), never ArithmeticError."""
    return _DECODER.decode(text)  # type: ignore[arg-type]  # simplejson decodes bytes as UTF-8 (untyped in stubs)


def loads_request(text: str | bytes) -> Any:
    """`loads` for a client's body. A number the service cannot hold (over `limits.MAX_NUMBER_CHARS` characters,
    or a decimal exponent beyond +-`limits.MAX_NUMBER_EXPONENT`) is read as Decimal NaN instead of raised, so
    that the validators refuse it as `field_invalid` naming its field (every one refuses a non-finite number).
    Raises ValueError for text that is not JSON and RecursionError for nesting beyond the interpreter's stack."""
    return _REQUEST_DECODER.decode(text)  # type: ignore[arg-type]


def _exact_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except ArithmeticError:  # InvalidOperation: an exponent beyond Decimal's range (e.g. 1e99999999999999999999)
        raise ValueError("a number is out of range") from None


_OUT_OF_RANGE = Decimal("NaN")


def _bounded_decimal(text: str) -> Decimal:
    """A JSON number with a fraction or exponent, exactly, or NaN when out of range."""
    if len(text) > MAX_NUMBER_CHARS:
        return _OUT_OF_RANGE
    try:
        number = Decimal(text)
    except ArithmeticError:
        return _OUT_OF_RANGE
    return number if number_in_range(number) else _OUT_OF_RANGE


def _bounded_int(text: str) -> int | Decimal:
    """A JSON integer, or NaN beyond MAX_NUMBER_CHARS digits (`int()` refuses over 4,300, slowly)."""
    return int(text) if len(text) <= MAX_NUMBER_CHARS else _OUT_OF_RANGE


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return str(value)


_ascii: Callable[[str], str] = encode_basestring_ascii  # simplejson's C function for `ensure_ascii` strings


def string(text: str) -> str:
    """A str as `dumps` writes it (ASCII, escaped), without the encoder's per-call set-up."""
    return str(encode_basestring_ascii(text))


def raw(text: str) -> Any:
    """Text that is already JSON, written by `dumps` as it is (no parse and re-serialise)."""
    return simplejson.RawJSON(text)


# Made once: `simplejson.loads`/`dumps` with any non-default option build a new JSONDecoder/JSONEncoder per call,
# which cost more than the work itself on small documents (several calls per POST /events). Both are stateless
# between calls (each `encode` makes its own C encoder), so one of each is shared by every thread.
_DECODER = simplejson.JSONDecoder(parse_float=_exact_decimal)  # `simplejson.loads(text, use_decimal=True)`, safe
_REQUEST_DECODER = simplejson.JSONDecoder(parse_float=_bounded_decimal, parse_int=_bounded_int)
_ENCODER = simplejson.JSONEncoder(use_decimal=True, separators=(",", ":"), default=_default)
_CANONICAL_ENCODER = simplejson.JSONEncoder(use_decimal=True, sort_keys=True, separators=(",", ":"), default=str)


def dumps(value: Any) -> str:
    """JSON with Decimals as exact numbers and datetimes as ISO 8601 (UTC written with Z).

    Plain values (dict with string keys, list, str, int, finite Decimal, bool, None) are written directly; the
    encoder's per-call set-up costs more than the writing of a small document (an event's data, a provenance
    record, a webhook payload). Anything else takes the encoder.
    `tests/contract/test_jsonutil_canonical.py` holds the two equal on random values.
    """
    try:
        return _write_plain(value)
    except _NotPlain:
        return str(_ENCODER.encode(value))


def _write_plain(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return string(value)
    if kind is dict:
        parts = []
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            parts.append(f"{_ascii(k)}:{_ascii(v) if type(v) is str else _write_plain(v)}")
        return "{" + ",".join(parts) + "}"
    if kind is Decimal:
        if not value.is_finite():
            raise _NotPlain
        return str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is list:
        return "[" + ",".join([_write_plain(item) for item in value]) + "]"
    raise _NotPlain  # floats, tuples (named tuples are objects), datetimes, RawJSON, models: the encoder's


def _canonical_number(value: Decimal) -> str:
    """A number's value as text, equal for equal values (42 == 42.0 == 4.2E+1), whatever its exponent.

    Built from the digits, never by arithmetic, so 1E+999999999 costs nothing and cannot overflow.
    """
    if not value.is_finite():
        return f"number:{value}"
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0")
    if not text:
        return "number:0"
    stripped = text.rstrip("0")
    exponent += len(text) - len(stripped)
    return f"number:{'-' if sign else ''}{stripped}e{exponent}"


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Decimal | int):
        return _canonical_number(Decimal(value))
    if isinstance(value, float):
        return _canonical_number(Decimal(repr(value)))
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def canonical_hash(value: Any) -> str:
    """A hash equal for equal JSON values: keys sorted, numbers compared by value (42.50 == 42.5)."""
    return hashlib.sha256(canonical_text(value).encode()).hexdigest()


def canonical_text(value: Any) -> str:
    """The text `canonical_hash` hashes: `_canonical(value)` written by the canonical encoder.

    Written directly for the JSON values a request carries (dict with string keys, list, str, Decimal, int,
    float, bool, None): on a small event the encoder's per-call set-up and the intermediate copy cost more than
    the writing itself, and every POST /events hashes its event. Anything else takes the encoder. The output is the same
    text (`tests/contract/test_jsonutil_canonical.py` compares the two on random values): stored payload hashes decide
    whether a retried event is a duplicate, so they must never change.
    """
    try:
        return _write_canonical(value)
    except _NotPlain:
        return str(_CANONICAL_ENCODER.encode(_canonical(value)))


def _number_text(value: Decimal) -> str:
    """`_canonical_number`, read from the number's text instead of its digit tuple (no tuple of ints to build).

    A finite non-zero Decimal's text holds its coefficient's digits in order (with a sign, a point, an exponent
    after "E", and leading zeros in the 0.00x form), so its digits without zeros at either end, and the
    adjusted exponent, give the same canonical form.
    """
    if not value or not value.is_finite():
        return _canonical_number(value)
    digits = str(value).partition("E")[0].replace("-", "").replace(".", "").strip("0")
    return f"number:{'-' if value.is_signed() else ''}{digits}e{value.adjusted() - len(digits) + 1}"


class _NotPlain(Exception):
    """A value `_write_canonical` leaves to the encoder."""


def _write_canonical(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _ascii(value)
    if kind is Decimal:
        return f'"{_number_text(value)}"'
    if kind is int:
        return f'"{_number_text(Decimal(value))}"'
    if kind is dict:
        if any(type(k) is not str for k in value):  # `_canonical` turns such keys into strings (may merge)
            raise _NotPlain
        parts = []
        for k in sorted(value):
            item = value[k]
            parts.append(f"{_ascii(k)}:{_ascii(item) if type(item) is str else _write_canonical(item)}")
        return "{" + ",".join(parts) + "}"
    if kind is list or kind is tuple:
        return "[" + ",".join([_write_canonical(item) for item in value]) + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is float:
        return f'"{_canonical_number(Decimal(repr(value)))}"'
    raise _NotPlain
