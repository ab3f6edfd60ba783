"""Reversals (rewards_lab.domain.reversals): in which order a reverse action fails, what it may take and when a
reward stops counting; the posting policy's clawback and balance rules read the same functions."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from rewards_lab.domain.posting_policy import REVERSAL_KIND_OF, REVERSAL_KINDS, covers
from rewards_lab.domain.reversals import (
    CUSTOMER_MISMATCH,
    ORIGINAL_NOT_FOUND,
    all_taken_back,
    clawback_take,
    refusal,
    reversal_target,
)


def test_a_reverse_action_fails_on_its_original_before_its_customer() -> None:
    assert refusal(found=False, same_customer=False) == ORIGINAL_NOT_FOUND
    assert refusal(found=False, same_customer=True) == ORIGINAL_NOT_FOUND
    assert refusal(found=True, same_customer=False) == CUSTOMER_MISMATCH
    assert refusal(found=True, same_customer=True) is None


@given(
    st.integers(1, 10**6),
    st.lists(st.one_of(st.none(), st.decimals(0, 1, places=3)), max_size=8),
    st.integers(-100, 10**6),
    st.sampled_from(["available", "negative", "none"]),
)
def test_reversals_take_at_most_the_reward_and_the_wallet_at_most_the_target(
    issued: int, fractions: list[Decimal | None], balance: int, policy: str
) -> None:
    """Targets add up to at most the reward; what each takes is within its target, and within the balance unless
    the policy is `negative`; the reward stops counting once all of it has been taken."""
    targeted, taken_back = 0, 0
    for fraction in fractions:
        target = reversal_target(issued, targeted, fraction)
        assert 0 <= target <= issued - targeted
        targeted += target
        taken = clawback_take(target, balance, policy)
        assert 0 <= taken <= target
        if policy != "negative":
            assert taken <= max(balance, 0)
        balance -= taken
        taken_back += taken
        assert all_taken_back(taken_back, issued) == (taken_back == issued)
    assert targeted <= issued


def test_the_posting_policy_names_each_clawback() -> None:
    assert {REVERSAL_KINDS[kind]: kind for kind in REVERSAL_KINDS} == REVERSAL_KIND_OF
    assert set(REVERSAL_KIND_OF) == {"available", "negative", "none"}
    assert covers(5, 5) and not covers(4, 5) and covers(0, 0)
