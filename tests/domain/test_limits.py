"""Caps, budgets and their periods (rewards_lab.domain.limits): period boundaries as day numbers, the formula the
replay renders for a week's Monday, what a counter key is, and a refused grant counting nowhere."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from rewards_lab.domain.limits import (
    EPOCH_WEEKDAY,
    LIFETIME_START,
    PERIODS,
    Allowance,
    Cap,
    checks_for,
    day_number,
    day_of,
    per_customer,
    period_start,
    week_start,
)

days = st.integers(-719_000, 2_900_000)  # year 1 ... 9909 as day numbers


@given(days)
def test_day_numbers_and_weeks(number: int) -> None:
    day = day_of(number)
    assert day_number(day) == number
    monday = day_of(week_start(number))
    assert monday.weekday() == 0 and monday <= day < monday + timedelta(days=7)


def test_the_constants_the_replay_reads() -> None:
    assert LIFETIME_START == date(1970, 1, 1) and EPOCH_WEEKDAY == 3  # a Thursday
    assert PERIODS == ("day", "week", "month", "year", "lifetime")


@given(st.integers(-(10**16), 4 * 10**15), st.sampled_from(["UTC", "Europe/Paris", "Pacific/Chatham"]))
def test_period_starts_are_first_local_days(at_us: int, zone: str) -> None:
    from zoneinfo import ZoneInfo

    local = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=at_us)).astimezone(ZoneInfo(zone)).date()
    assert period_start("day", at_us, zone) == local
    assert period_start("week", at_us, zone) == local - timedelta(days=local.weekday())
    assert period_start("month", at_us, zone) == local.replace(day=1)
    assert period_start("year", at_us, zone) == local.replace(month=1, day=1)
    assert period_start("lifetime", at_us, zone) == LIFETIME_START


def test_counter_keys_are_per_customer_except_a_budget() -> None:
    start = date(2026, 3, 2)
    cap, rule_cap, budget = Cap("programme", "week", 500), Cap("rule", "day", None, 3), Cap("budget", "month", 9)
    assert per_customer("rule") and per_customer("programme") and not per_customer("budget")
    assert cap.key("p", "0", "c1", start) == ("p", "programme:week", "c1", "2026-03-02")
    assert rule_cap.key("p", "4", "c1", start) == ("p", "rule:4:day", "c1", "2026-03-02")
    assert budget.key("p", "4", "c1", start) == ("p", "budget:month", "", "2026-03-02")


def test_a_refused_grant_counts_nowhere() -> None:
    checks = checks_for("p", "0", "c1", 0, "UTC", (Cap("rule", "day", 100, 5),), (Cap("budget", "day", 1_000),))
    allowance = Allowance()
    first = allowance.grant(60, checks)
    assert first.amount_minor == 60 and len(first.keys) == 2
    counted = dict(allowance.usage)
    second = allowance.grant(70, checks)  # cut to the 40 the rule's cap leaves
    assert second.amount_minor == 40 and second.cut is not None and second.cut.cut_minor == 30
    refused = allowance.refused(second)
    assert refused.keys == () and refused.amount_minor == 40
    assert allowance.usage == counted
