"""Money: one way to make a number. Amounts travel as decimal strings and live as integer minor units.

`decimals` of an asset fixes its minor unit (10**-decimals). Nothing here ever touches a float.
The rounding rule of per-rate rewards (toward zero, to the asset's decimals) lives in `reward_minor` and is
mirrored in SQL by the replay engine; a test checks the two against each other.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Context, Decimal, localcontext

from rewards_lab.contract.amounts import AMOUNT_RE
from rewards_lab.contract.errors import ServiceError

# The largest single amount, in minor units; balances are summed in 128-bit integers.
MAX_AMOUNT_MINOR = 10**18 - 1

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
    match = AMOUNT_RE.fullmatch(text)
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
