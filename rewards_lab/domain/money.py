"""Money: one way to make a number. Amounts travel as decimal strings and live as integer minor units.

`decimals` of an asset fixes its minor unit (10**-decimals). Nothing here ever touches a float.
The rounding rule of per-rate rewards (toward zero, to the asset's decimals) lives in `reward_minor` and is
mirrored in SQL by the replay engine; a test checks the two against each other.
"""

from __future__ import annotations

import re
from decimal import ROUND_DOWN, Context, Decimal, InvalidOperation, localcontext

from rewards_lab.contract.errors import ServiceError

MAX_DECIMALS = 8
# The largest single amount, in minor units; balances are summed in 128-bit integers.
MAX_AMOUNT_MINOR = 10**18 - 1
MAX_RATE_DECIMALS = 10
MAX_RATE = Decimal(10**8)
# A condition's threshold is below this in magnitude (15 integer digits, as MAX_SIGNIFICANT_DIGITS allows).
MAX_THRESHOLD = Decimal(10**15)
# Rates and thresholds are JSON numbers. With at most 15 significant digits a binary double reproduces their
# decimal text exactly (DBL_DIG), so a client that parses them as floats still reads the exact value back.
MAX_SIGNIFICANT_DIGITS = 15

# ASCII digits only, and the whole string (fullmatch): no trailing newline, no Arabic-Indic or full-width digits.
_AMOUNT_RE = re.compile(r"(?P<sign>-?)(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]+))?")
# A product whose magnitude reaches this many digits is far beyond any amount; it is not computed in full.
_MAX_PRODUCT_DIGITS = 40
_MAX_AMOUNT_DIGITS = len(str(MAX_AMOUNT_MINOR))


def parse_amount(text: object, decimals: int, field: str = "amount") -> int:
    """Parse a positive decimal string into minor units of an asset with `decimals` places.

    Errors carry `details.field`: `amount_invalid` (not a decimal string), `amount_not_positive`,
    `amount_too_many_decimals` (more places than the asset allows, trailing zeros included, as written),
    `amount_too_large`.
    """
    if not isinstance(text, str):
        raise ServiceError("amount_invalid", f'{field} must be a decimal string such as "12.50"', field=field)
    match = _AMOUNT_RE.fullmatch(text)
    if match is None:
        raise ServiceError("amount_invalid", f'{field} must be a decimal string such as "12.50"', field=field)
    frac = match.group("frac") or ""
    if len(frac) > decimals:
        raise ServiceError(
            "amount_too_many_decimals",
            f"{field} has {len(frac)} decimal places; the asset allows {decimals}",
            field=field,
            decimals=decimals,
        )
    digits = (match.group("int") + frac.ljust(decimals, "0")).lstrip("0")
    if match.group("sign") or not digits:
        raise ServiceError("amount_not_positive", f"{field} must be greater than zero", field=field)
    # Counted before `int()`, which refuses over 4,300 digits (ValueError) and is quadratic below that.
    if len(digits) > _MAX_AMOUNT_DIGITS or int(digits) > MAX_AMOUNT_MINOR:
        raise ServiceError("amount_too_large", f"{field} is larger than the ledger can hold", field=field)
    return int(digits)


def parse_ceiling(text: object, decimals: int, field: str = "supply_ceiling") -> int | None:
    """A supply ceiling is an amount, or None for no ceiling."""
    if text is None:
        return None
    return parse_amount(text, decimals, field)


def format_amount(minor: int, decimals: int) -> str:
    """Minor units as a decimal string with exactly `decimals` places: 1250, 2 -> "12.50"."""
    sign = "-" if minor < 0 else ""
    digits = str(abs(minor)).rjust(decimals + 1, "0")
    if decimals == 0:
        return sign + digits
    return f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"


def to_decimal(minor: int, decimals: int) -> Decimal:
    return Decimal(minor).scaleb(-decimals)


def reward_minor(value: Decimal, rate: Decimal, decimals: int) -> int:
    """Minor units issued by `{per, rate}` for a data value: value * rate rounded toward zero to `decimals`.

    Exact for any finite inputs: the product is computed with as many digits as it has. A negative product gives
    a negative number (callers treat anything below one minor unit as "nothing issued"). A product too large
    for any amount is returned as MAX_AMOUNT_MINOR + 1 (with its sign) rather than computed in full, so that a
    number such as 1E+999999999 in event data cannot exhaust memory; callers refuse it as `amount_too_large`.
    """
    if not value or not rate:
        return 0
    if value.adjusted() + rate.adjusted() + decimals >= _MAX_PRODUCT_DIGITS:
        return (MAX_AMOUNT_MINOR + 1) * (-1 if (value < 0) != (rate < 0) else 1)
    with localcontext(Context(prec=len(value.as_tuple().digits) + len(rate.as_tuple().digits) + 2)):
        scaled = (value * rate).scaleb(decimals)
        return int(scaled.to_integral_value(rounding=ROUND_DOWN))


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
            number = Decimal(value) if _AMOUNT_RE.fullmatch(value) else None
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
