"""Properties of caps and budgets (`domain.limits`): whatever the order and sizes of rewards, no counter passes its
bound, a reward is never raised, and an amount cap gives exactly what a plain running sum would."""

from __future__ import annotations

from datetime import UTC, date, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.limits import Allowance, Cap, check_rank, checks_for, period_start
from rewards_lab.domain.schedule import epoch_us

CUSTOMERS = ["c1", "c2", "c3"]
rewards = st.lists(
    st.tuples(st.sampled_from(CUSTOMERS), st.integers(min_value=0, max_value=400), st.integers(0, 40)),
    max_size=60,
)


def _at(day: int) -> int:
    return epoch_us(datetime(2026, 12, 1, 12, tzinfo=UTC)) + day * 86_400_000_000


@settings(max_examples=150, deadline=None)
@given(
    rewards,
    st.integers(min_value=1, max_value=900),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=1, max_value=2_000),
)
def test_no_counter_passes_its_bound_and_no_reward_grows(
    stream: list[tuple[str, int, int]], cap_amount: int, cap_count: int, budget: int
) -> None:
    rule_caps = (Cap("rule", "month", max_amount_minor=cap_amount), Cap("rule", "week", max_count=cap_count))
    programme_caps = (Cap("budget", "day", max_amount_minor=budget),)
    allowance = Allowance()
    for customer, requested, day in stream:
        checks = checks_for("p", "r", customer, _at(day), "Europe/Paris", rule_caps, programme_caps)
        before = {check.key: allowance.used(check.key) for check in checks}
        grant = allowance.grant(requested, checks)
        assert 0 <= grant.amount_minor <= requested
        assert (grant.cut is None) == (grant.amount_minor == requested)
        if grant.cut is not None:
            assert grant.cut.cut_minor == requested - grant.amount_minor
        for check in checks:
            amount, count = allowance.used(check.key)
            if check.cap.max_amount_minor is not None:
                assert amount <= max(check.cap.max_amount_minor, before[check.key][0])
            if check.cap.max_count is not None:
                assert count <= max(check.cap.max_count, before[check.key][1])
        if grant.amount_minor == 0:
            assert all(allowance.used(check.key) == before[check.key] for check in checks)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=300), max_size=40), st.integers(min_value=1, max_value=2_000))
def test_one_amount_cap_gives_what_the_capped_running_sum_gives(amounts: list[int], maximum: int) -> None:
    """With one amount cap, reward i gives min(S_i, max) - min(S_(i-1), max) over the requested running sum S:
    the closed form the replay engines compute with a window function."""
    cap = (Cap("rule", "lifetime", max_amount_minor=maximum),)
    allowance = Allowance()
    running = 0
    for requested in amounts:
        checks = checks_for("p", "r", "c", 0, "UTC", cap, ())
        expected = min(running + requested, maximum) - min(running, maximum)
        running += requested
        assert allowance.grant(requested, checks).amount_minor == expected


@given(st.integers(min_value=0, max_value=4_000_000_000_000_000))
def test_periods_start_on_their_first_local_day(at_us: int) -> None:
    for period in ("day", "week", "month", "year"):
        start = period_start(period, at_us, "America/New_York")
        day = period_start("day", at_us, "America/New_York")
        assert start <= day
        assert (day - start).days < {"day": 1, "week": 7, "month": 31, "year": 366}[period]
    assert period_start("week", at_us, "UTC").isoweekday() == 1
    assert period_start("month", at_us, "UTC").day == 1
    assert period_start("lifetime", at_us, "UTC") == date(1970, 1, 1)


def test_a_reversal_gives_back_the_amount_and_a_whole_reward() -> None:
    allowance = Allowance()
    checks = checks_for("p", "r", "c", 0, "UTC", (Cap("rule", "day", max_amount_minor=100, max_count=None),), ())
    counted = Cap("rule", "day", max_count=2)
    both = checks + checks_for("p", "r", "c", 0, "UTC", (counted,), ())
    first = allowance.grant(80, both)
    assert first.amount_minor == 80 and len(first.keys) == 1  # the two caps of one period share a counter
    assert allowance.grant(80, both).amount_minor == 20
    assert allowance.grant(5, both).amount_minor == 0  # two rewards: the count cap is reached
    allowance.give_back(first.keys, 80, whole=True)
    assert allowance.used(first.keys[0]) == (20, 1)
    assert allowance.grant(100, both).amount_minor == 80


def test_a_reward_is_checked_against_its_rules_caps_then_its_programmes_then_the_budget() -> None:
    """The order names the binding cap when several leave the same room: the rule's cap, declared first, wins."""
    budget = Cap("budget", "month", max_amount_minor=100)
    programme = Cap("programme", "day", max_amount_minor=100)
    rule = Cap("rule", "week", max_amount_minor=100)
    at_us = epoch_us(datetime(2026, 3, 4, 12, tzinfo=UTC))
    checks = checks_for("p", "r", "c", at_us, "UTC", [rule], [budget, programme])
    assert [check.cap for check in checks] == [rule, programme, budget]
    assert sorted([budget, programme, rule], key=check_rank) == [rule, programme, budget]
    grant = Allowance().grant(500, checks)
    assert (
        grant.amount_minor == 100 and grant.cut is not None and (grant.cut.scope, grant.cut.period) == ("rule", "week")
    )
