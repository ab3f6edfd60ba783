"""Numbers as the contract accepts them: the limits and parsing of JSON numbers in requests (rates, condition
thresholds), shared by request validation (`contract/requests.py`) and the domain (`domain/money.py`).

Nothing here ever touches a float beyond reading one exactly: a float is read through its shortest repr.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rewards_lab.contract.errors import ServiceError

MAX_DECIMALS = 8
MAX_RATE_DECIMALS = 10
MAX_RATE = Decimal(10**8)
# A condition's threshold is below this in magnitude (15 integer digits, as MAX_SIGNIFICANT_DIGITS allows).
MAX_THRESHOLD = Decimal(10**15)
# Rates and thresholds are JSON numbers. With at most 15 significant digits a binary double reproduces their
# decimal text exactly (DBL_DIG), so a client that parses them as floats still reads the exact value back.
MAX_SIGNIFICANT_DIGITS = 15

# ASCII digits only, and the whole string (fullmatch): no trailing newline, no Arabic-Indic or full-width digits.
AMOUNT_RE = re.compile(r"(?P<sign>-?)(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]+))?")


def as_number(value: object) -> Decimal | None:
    """The exact numeric value of a JSON number, or None for anything else (strings, booleans, null, objects).

    Floats (from a caller that parsed JSON without parse_float=Decimal) are read through their shortest repr,
    which is the decimal text that produced them.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return Decimal(repr(value))
    return None


def parse_rate(value: object, field: str = "rate") -> Decimal:
    """A `{per, rate}` rate: a positive number with at most MAX_RATE_DECIMALS places, below MAX_RATE."""
    number = _parse_number(value, field)
    if number <= 0:
        raise ServiceError("field_invalid", f"{field} must be greater than zero", field=field)
    if number >= MAX_RATE:
        raise ServiceError("field_invalid", f"{field} must be below {MAX_RATE}", field=field)
    _check_digits(number, field)
    return number


def parse_threshold(value: object, field: str = "value") -> Decimal:
    """A condition's threshold: a number below MAX_THRESHOLD in magnitude, with at most MAX_RATE_DECIMALS places
    and 15 significant digits."""
    number = _parse_number(value, field)
    if number.copy_abs() >= MAX_THRESHOLD:  # compared, never computed (abs() rounds: Overflow for 1e1000000)
        raise ServiceError(
            "field_invalid", f"{field} must be between -{MAX_THRESHOLD} and {MAX_THRESHOLD}", field=field
        )
    _check_digits(number, field)
    return number


def _parse_number(value: object, field: str) -> Decimal:
    number = as_number(value)
    if number is None and isinstance(value, str):
        try:
            number = Decimal(value) if AMOUNT_RE.fullmatch(value) else None
        except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
            number = None
    if number is None:
        raise ServiceError("field_invalid", f"{field} must be a number", field=field)
    return number


def _check_digits(number: Decimal, field: str) -> None:
    places, digits = _shape(number)
    if places > MAX_RATE_DECIMALS or max(digits, places) > MAX_SIGNIFICANT_DIGITS:
        raise ServiceError(
            "field_invalid",
            f"{field} allows at most {MAX_RATE_DECIMALS} decimal places "
            f"and {MAX_SIGNIFICANT_DIGITS} significant digits",
            field=field,
        )


def _shape(number: Decimal) -> tuple[int, int]:
    """(decimal places, significant digits) of a finite number, trailing zeros dropped (1.50 -> (1, 2)).

    Read from the digit tuple, never by arithmetic: `normalize()` raises Overflow for 1e1000000 and rounds
    1e-1000000 to zero (no places) under the default context."""
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite: `_parse_number` refuses NaN and infinities
    significant = len("".join(map(str, digits)).rstrip("0"))
    if significant == 0:
        return 0, 0
    exponent += len(digits) - significant
    return max(0, -exponent), significant
