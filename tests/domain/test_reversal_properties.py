"""Properties of reversals (`domain.reversals`): no sequence of partial refunds takes back more than the reward,
whole reversals take what remains, and each clawback policy gives what it promises."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.reversals import clawback_take, fraction_of, reversal_target
from rewards_lab.domain.rules import ReversalCall

fractions = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(1), places=6)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**15), st.lists(st.one_of(st.none(), fractions), max_size=12))
def test_partial_reversals_never_exceed_the_reward(issued: int, shares: list[Decimal | None]) -> None:
    reversed_so_far = 0
    for share in shares:
        target = reversal_target(issued, reversed_so_far, share)
        assert 0 <= target <= issued - reversed_so_far
        if share is None:
            assert target == issued - reversed_so_far
        else:
            assert target == min(issued - reversed_so_far, int(issued * share))  # floor: both are non-negative
        reversed_so_far += target
    assert reversed_so_far <= issued


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=-(10**12), max_value=10**12))
def test_clawback_policies(target: int, balance: int) -> None:
    available = clawback_take(target, balance, "available")
    assert available == max(0, min(target, balance))
    assert clawback_take(target, balance, "negative") == target
    assert clawback_take(target, balance, "none") == (target if balance >= target else 0)


def test_a_fraction_read_from_both_events_is_clamped_and_needs_a_positive_original() -> None:
    call = ReversalCall("o-1", numerator=Decimal("30"), of="amount")
    assert fraction_of(call, Decimal("120")) == Decimal("0.25")
    assert fraction_of(ReversalCall("o-1", numerator=Decimal("500"), of="amount"), Decimal("120")) == 1
    assert fraction_of(ReversalCall("o-1", fraction=Decimal("0.5")), None) == Decimal("0.5")
    assert fraction_of(ReversalCall("o-1"), None) is None
    for bad in (None, Decimal(0), Decimal(-3)):
        with pytest.raises(ValueError):
            fraction_of(call, bad)
