"""Properties of `rewards_lab.domain.money`: the one parser, the one formatter and the one rounding rule.

`reward_minor` is checked against an independent computation with `fractions.Fraction`, and against a DuckDB
SQL formulation of the same rounding (the "one named rounding function mirrored in SQL" of the design brief).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction

import duckdb
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rewards_lab.contract.amounts import (
    MAX_DECIMALS,
    MAX_RATE,
    MAX_RATE_DECIMALS,
    MAX_SIGNIFICANT_DIGITS,
    as_number,
    parse_rate,
)
from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, format_amount, parse_amount, reward_minor

# The wire grammar of an amount: ASCII digits, an optional sign and an optional fraction. Nothing else.
ASCII_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")

decimals_st = st.integers(0, MAX_DECIMALS)
field_st = st.sampled_from(["amount", "supply_ceiling", "actions[0].amount.fixed"])
digits_st = st.text("0123456789", min_size=1, max_size=12)


def _error(call: object, *args: object) -> ServiceError:
    assert callable(call)
    with pytest.raises(ServiceError) as info:
        call(*args)
    return info.value


def _truncated(value: Fraction) -> int:
    """Toward zero, independently of Decimal: int() of a Fraction truncates."""
    return int(value)


# parse_amount / format_amount ------------------------------------------------------------------------------
@given(decimals=decimals_st, minor=st.integers(1, MAX_AMOUNT_MINOR))
def test_format_then_parse_round_trips(decimals: int, minor: int) -> None:
    text = format_amount(minor, decimals)
    assert parse_amount(text, decimals) == minor
    assert ASCII_DECIMAL.fullmatch(text)
    assert len(text.partition(".")[2]) == decimals
    assert Fraction(text) == Fraction(minor, 10**decimals)


@given(decimals=decimals_st, minor=st.integers(-(10**30), 10**30))
def test_format_writes_exactly_decimals_places_for_any_integer(decimals: int, minor: int) -> None:
    text = format_amount(minor, decimals)
    assert ASCII_DECIMAL.fullmatch(text)
    assert len(text.partition(".")[2]) == decimals
    assert Fraction(text) == Fraction(minor, 10**decimals)


@given(decimals=decimals_st, integer=digits_st, data=st.data())
def test_parse_accepts_every_written_form_up_to_decimals_places(
    decimals: int, integer: str, data: st.DataObject
) -> None:
    fraction = data.draw(st.text("0123456789", max_size=decimals), label="fraction")
    text = integer + ("." + fraction if fraction else "")
    expected = Fraction(text) * 10**decimals
    assert expected.denominator == 1
    if 0 < expected <= MAX_AMOUNT_MINOR:
        assert parse_amount(text, decimals) == expected
        assert parse_amount(format_amount(int(expected), decimals), decimals) == expected


@given(
    decimals=decimals_st,
    integer=st.integers(1, 10**12),
    extra=st.text("0123456789", min_size=1, max_size=6),
    field=field_st,
)
@example(decimals=2, integer=12, extra="0", field="amount")  # "12.500": trailing zeros count, as written
@example(decimals=0, integer=5, extra="0", field="amount")  # "5.0" for an asset without decimals
def test_parse_rejects_more_places_than_decimals(decimals: int, integer: int, extra: str, field: str) -> None:
    fraction = ("5" * decimals) + extra  # always more than `decimals` places, trailing zeros included
    error = _error(parse_amount, f"{integer}.{fraction}", decimals, field)
    assert error.code == "amount_too_many_decimals"
    assert error.details["field"] == field
    assert error.type.value == "validation_error"


@given(decimals=decimals_st, data=st.data(), field=field_st, negative=st.booleans())
def test_parse_rejects_zero_and_negative(decimals: int, data: st.DataObject, field: str, negative: bool) -> None:
    places = data.draw(st.integers(0, decimals), label="places")
    if negative:
        magnitude = data.draw(st.integers(0, 10**15), label="magnitude")
        text = "-" + format_amount(magnitude, places)
    else:
        text = format_amount(0, places)
    error = _error(parse_amount, text, decimals, field)
    assert error.code == "amount_not_positive"
    assert error.details["field"] == field


@given(
    value=st.one_of(
        st.integers(),
        st.floats(),
        st.decimals(),
        st.none(),
        st.booleans(),
        st.binary(),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    ),
    decimals=decimals_st,
    field=field_st,
)
def test_parse_rejects_non_strings(value: object, decimals: int, field: str) -> None:
    error = _error(parse_amount, value, decimals, field)
    assert error.code == "amount_invalid"
    assert error.details["field"] == field


@given(
    mantissa=st.from_regex(r"\A-?[0-9]{1,6}(\.[0-9]{1,4})?\Z"),
    marker=st.sampled_from(["e", "E"]),
    exponent=st.from_regex(r"\A[+-]?[0-9]{1,3}\Z"),
    decimals=decimals_st,
    field=field_st,
)
def test_parse_rejects_exponent_forms(mantissa: str, marker: str, exponent: str, decimals: int, field: str) -> None:
    error = _error(parse_amount, f"{mantissa}{marker}{exponent}", decimals, field)
    assert error.code == "amount_invalid"
    assert error.details["field"] == field


@given(text=st.text(max_size=12), decimals=decimals_st)
@example(text="12\n", decimals=2)  # `$` matches before a trailing newline
@example(text="1.5\n", decimals=2)
@example(text="\u0661\u0662", decimals=2)  # ARABIC-INDIC DIGITS ONE, TWO: `\d` is Unicode-aware
@example(text="\uff11\uff12", decimals=2)  # FULLWIDTH DIGITS ONE, TWO
@example(text=" 12", decimals=2)
@example(text="+12", decimals=2)
@example(text=".5", decimals=2)
@example(text="5.", decimals=2)
@example(text="NaN", decimals=2)
@example(text="Infinity", decimals=2)
@example(text="1_000", decimals=2)
def test_parse_accepts_only_the_ascii_decimal_grammar(text: str, decimals: int) -> None:
    """Amounts are ASCII decimal strings on the wire: any other string is `amount_invalid`."""
    if ASCII_DECIMAL.fullmatch(text):
        return  # covered by the tests above
    error = _error(parse_amount, text, decimals, "amount")
    assert error.code == "amount_invalid", f"{text!r} was not refused as amount_invalid but as {error.code}"
    assert error.details["field"] == "amount"


@pytest.mark.parametrize("text", ["12\n", "1.5\n", "0\n"])
def test_parse_rejects_a_string_with_a_trailing_newline(text: str) -> None:
    """`_AMOUNT_RE.match` with `$` accepts one trailing newline: "12\\n" parses as 12 (1200 minor units)."""
    assert _error(parse_amount, text, 2, "amount").code == "amount_invalid"


@pytest.mark.parametrize("text", ["\u0661\u0662", "\uff11\uff12", "\u0967.\u0665"])
def test_parse_rejects_non_ascii_digits(text: str) -> None:
    """`\\d` matches any Unicode digit and int() reads them, so "\\u0661\\u0662" (Arabic-Indic 1, 2) parses as 12."""
    assert _error(parse_amount, text, 2, "amount").code == "amount_invalid"


@given(decimals=decimals_st, minor=st.integers(MAX_AMOUNT_MINOR + 1, 10**40), field=field_st)
@example(decimals=0, minor=MAX_AMOUNT_MINOR + 1, field="amount")
def test_parse_rejects_amounts_above_the_maximum(decimals: int, minor: int, field: str) -> None:
    error = _error(parse_amount, format_amount(minor, decimals), decimals, field)
    assert error.code == "amount_too_large"
    assert error.details["field"] == field


@given(decimals=decimals_st)
def test_the_maximum_amount_itself_is_accepted(decimals: int) -> None:
    assert parse_amount(format_amount(MAX_AMOUNT_MINOR, decimals), decimals) == MAX_AMOUNT_MINOR


# reward_minor ----------------------------------------------------------------------------------------------
@st.composite
def decimals_with_places(draw: st.DrawFn, max_places: int, max_digits: int, signed: bool = True) -> Decimal:
    """A Decimal with at most `max_places` decimal places and `max_digits` significant digits."""
    places = draw(st.integers(0, max_places))
    coefficient = draw(st.integers(0 if signed else 1, 10**max_digits - 1))
    sign = draw(st.sampled_from([1, -1])) if signed else 1
    return Decimal(sign * coefficient).scaleb(-places)


@st.composite
def rates(draw: st.DrawFn) -> Decimal:
    """Rates as `parse_rate` accepts them: positive, below MAX_RATE, <= 10 places, <= 15 significant digits."""
    places = draw(st.integers(0, MAX_RATE_DECIMALS))
    top = min(10**MAX_SIGNIFICANT_DIGITS, int(MAX_RATE) * 10**places) - 1
    coefficient = draw(st.integers(1, top))
    return Decimal(coefficient).scaleb(-places)


@given(value=decimals_with_places(10, 30), rate=rates(), decimals=decimals_st)
@example(value=Decimal("0.29"), rate=Decimal("1"), decimals=2)
@example(value=Decimal("-0.29"), rate=Decimal("1"), decimals=2)
@example(value=Decimal("-12.3456789"), rate=Decimal("0.0000000001"), decimals=8)
@example(value=Decimal("1.830873499429409459383874270E+29"), rate=Decimal("10000"), decimals=7)
def test_reward_minor_is_the_exact_product_truncated_toward_zero(value: Decimal, rate: Decimal, decimals: int) -> None:
    assert parse_rate(rate) == rate  # the generated rates are ones the service accepts
    expected = _truncated(Fraction(value) * Fraction(rate) * 10**decimals)
    got = reward_minor(value, rate, decimals)
    if abs(expected) > MAX_AMOUNT_MINOR:  # refused as amount_too_large either way; may come back saturated
        assert abs(got) > MAX_AMOUNT_MINOR and (got > 0) == (expected > 0)
    else:
        assert got == expected


@given(
    value=st.builds(
        lambda coefficient, exponent: Decimal(coefficient).scaleb(exponent),
        st.integers(-(10**120), 10**120),
        st.integers(-130, 10),
    ),
    rate=rates(),
    decimals=decimals_st,
)
@example(value=Decimal("0." + "9" * 100), rate=Decimal(1), decimals=0)
def test_reward_minor_is_exact_for_any_json_number(value: Decimal, rate: Decimal, decimals: int) -> None:
    """Event data are JSON numbers of any length (parsed exactly with use_decimal): the product must stay exact
    (0.999...9 with 100 nines x 1 is 0 at 0 decimals, not 1). A product far beyond any amount (10**39 and up) is
    not computed in full: it comes back as MAX_AMOUNT_MINOR + 1 with its sign, which callers refuse."""
    expected = _truncated(Fraction(value) * Fraction(rate) * 10**decimals)
    got = reward_minor(value, rate, decimals)
    saturated = (MAX_AMOUNT_MINOR + 1) * (1 if expected > 0 else -1)
    assert got == expected or (abs(expected) >= 10**39 and got == saturated), (got, expected)
    if abs(expected) >= 10**41:
        assert got == saturated


@given(value=decimals_with_places(10, 20), rate=rates(), decimals=decimals_st)
def test_reward_minor_is_odd_in_the_value(value: Decimal, rate: Decimal, decimals: int) -> None:
    """Toward zero, not floor: the reward of -v is minus the reward of v."""
    assert reward_minor(-value, rate, decimals) == -reward_minor(value, rate, decimals)


# as_number -------------------------------------------------------------------------------------------------
@given(
    value=st.one_of(
        st.booleans(),
        st.none(),
        st.text(max_size=8),
        st.sampled_from(["12", "1.5", "-3"]),
        st.sampled_from([float("nan"), float("inf"), float("-inf"), -float("nan")]),
        st.sampled_from([Decimal("NaN"), Decimal("sNaN"), Decimal("Infinity"), Decimal("-Infinity")]),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        st.binary(max_size=4),
    )
)
def test_as_number_refuses_everything_but_finite_numbers(value: object) -> None:
    assert as_number(value) is None


@given(value=st.integers())
def test_as_number_reads_integers_exactly(value: int) -> None:
    number = as_number(value)
    assert isinstance(number, Decimal) and number == value


@given(value=st.decimals(allow_nan=False, allow_infinity=False))
def test_as_number_keeps_finite_decimals(value: Decimal) -> None:
    number = as_number(value)
    assert number is not None and number == value and str(number) == str(value)


@given(value=st.floats(allow_nan=False, allow_infinity=False))
@example(value=0.1)
@example(value=1e-7)
@example(value=2.675)
def test_as_number_reads_floats_through_their_shortest_repr(value: float) -> None:
    number = as_number(value)
    assert number == Decimal(repr(value))
    assert number is not None and float(number) == value


# the rounding rule mirrored in SQL -------------------------------------------------------------------------
SCALE = 10**MAX_RATE_DECIMALS  # values and rates have at most 10 places: exact as integers times 10**-10


def exact_reward_sql(decimals: int) -> str:
    """value * rate truncated toward zero to `decimals` places, in integers only (no DOUBLE, no rounding).

    Both operands become HUGEINTs scaled by 10**10 (exact, as they have at most 10 places), their product is
    the reward scaled by 10**20, and a truncating division by 10**(20 - decimals) gives minor units. The
    divisor is an integer literal (the engine knows each asset's decimals when it compiles the SQL). The sign is
    handled explicitly so that the result never depends on whether `//` floors or truncates.
    Domain: |value| < 10**8 and 0 < rate < 10**8, so the scaled product stays below 10**36 < 2**127.
    """
    divisor = 10 ** (2 * MAX_RATE_DECIMALS - decimals)
    return f"""
        SELECT sign(p) * (abs(p) // CAST({divisor} AS HUGEINT)) FROM (
            SELECT CAST(CAST($value AS DECIMAL(18, 10)) * {SCALE} AS HUGEINT)
                 * CAST(CAST($rate AS DECIMAL(18, 10)) * {SCALE} AS HUGEINT) AS p
        )"""


NAIVE_REWARD_SQL = "SELECT trunc(CAST($value AS DECIMAL(38, 10)) * CAST($rate AS DECIMAL(38, 10)) * 10 ^ $decimals)"


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    yield connection
    connection.close()


def _sql_reward(con: duckdb.DuckDBPyConnection, value: Decimal, rate: Decimal, decimals: int) -> int:
    params = {"value": f"{value:f}", "rate": f"{rate:f}"}  # positional notation: never "1E-10"
    row = con.execute(exact_reward_sql(decimals), params).fetchone()
    assert row is not None
    return int(row[0])


@st.composite
def sql_values(draw: st.DrawFn) -> Decimal:
    """Values the SQL mirror's domain covers: at most 10 places and |value| < 10**8 (a DECIMAL(18, 10))."""
    places = draw(st.integers(0, MAX_RATE_DECIMALS))
    coefficient = draw(st.integers(-(10 ** (8 + places)) + 1, 10 ** (8 + places) - 1))
    return Decimal(coefficient).scaleb(-places)


@settings(max_examples=300)
@given(value=sql_values(), rate=rates(), decimals=decimals_st)
@example(value=Decimal("0.29"), rate=Decimal("1"), decimals=2)
@example(value=Decimal("-0.29"), rate=Decimal("1"), decimals=2)
@example(value=Decimal("-0.0000000001"), rate=Decimal("0.0000000001"), decimals=8)
@example(value=Decimal("99999999.9999999999"), rate=Decimal("99999999.99999"), decimals=8)
@example(value=Decimal("-99999999.9999999999"), rate=Decimal("99999999.99999"), decimals=0)
def test_sql_mirror_of_the_rounding_agrees_with_reward_minor(
    con: duckdb.DuckDBPyConnection, value: Decimal, rate: Decimal, decimals: int
) -> None:
    assert _sql_reward(con, value, rate, decimals) == reward_minor(value, rate, decimals)


def test_naive_decimal_expression_loses_precision(con: duckdb.DuckDBPyConnection) -> None:
    """`10 ^ d` is a DOUBLE in DuckDB, so the whole naive expression is computed in binary floating point.

    0.29 x 1 at 2 places is 29 minor units; the naive expression computes 28.999999999999996 and truncates it
    to 28. This is why the SQL mirror above stays in integers.
    """
    row = con.execute(NAIVE_REWARD_SQL, {"value": "0.29", "rate": "1", "decimals": 2}).fetchone()
    assert row is not None
    assert reward_minor(Decimal("0.29"), Decimal("1"), 2) == 29
    assert int(row[0]) == 28
