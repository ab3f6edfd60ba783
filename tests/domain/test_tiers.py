"""domain/tiers (issue 33, T1): the plan's worked example step by step (reports/i33-tiers-plan.md 3.6), days and
review instants across DST, the hold rule, transitions (monotone, one level at a time, grace), multiplied amounts
exact, and the tier fields conditions read."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from rewards_lab.contract.errors import ServiceError
from rewards_lab.domain import tiers as t
from rewards_lab.domain.actions import ACTIONS
from rewards_lab.domain.conditions import CustomerFacts, EventFacts, TierFacts, read_value, source_of
from rewards_lab.domain.settings import Tiers
from tests.contract.test_tier_requests import tiered, tiers_of

ZONES = ("Europe/London", "America/New_York", "America/Sao_Paulo", "America/Santiago", "Asia/Beirut",
         "America/Havana", "Australia/Lord_Howe", "Pacific/Apia", "UTC")  # fmt: skip
LONDON = "Europe/London"


def settings_of(**changes: Any) -> Tiers:
    stored: dict[str, Any] = tiers_of(tiered())  # the plan's example (reports/i33-tiers-plan.md 2.1)
    stored.update(changes)
    tiers = Tiers.of({k: v for k, v in stored.items() if v is not None})
    assert tiers is not None
    return tiers


def model(timezone: str = LONDON, **changes: Any) -> t.TierModel:
    return t.tier_model(settings_of(**changes), 0, timezone)


def utc(local: str, timezone: str = LONDON) -> datetime:
    """A local wall time as the naive UTC instant the store keeps."""
    return datetime.fromisoformat(local).replace(tzinfo=ZoneInfo(timezone)).astimezone(UTC).replace(tzinfo=None)


class Ledger:
    """Contributions per local day, as the engines will keep them (`tier_days`)."""

    def __init__(self) -> None:
        self.days: dict[date, int] = defaultdict(int)

    def add(self, day: date, amount: int) -> None:
        self.days[day] += amount

    def __call__(self, first: date, last: date) -> int:
        return sum(amount for day, amount in self.days.items() if first <= day <= last)


# the worked example ---------------------------------------------------------------------------------------------
def test_the_plans_worked_example() -> None:
    m = model()
    per = ACTIONS["per"].build({"amount": {"per": "amount", "rate": 1}, "multiply": "tier"}, "BEAN", 0, "a")
    book = Ledger()

    def order(state: t.TierState, local: str, amount: str) -> tuple[t.TierState, list[t.TierChange], int]:
        at = utc(local)
        state, due = t.apply_due(m, state, at, book)
        issued = per.outcome(0, Decimal(amount), None, m.multiplier(state.rank)).amount_minor
        book.add(t.local_day(at, LONDON), issued)
        state, changes = t.after_event(m, state, at, book, issued)
        return state, due + changes, issued

    state = t.enrol(m, utc("2026-02-10T12:00"))
    state, changes, issued = order(state, "2026-02-10T12:00", "480")
    assert (issued, state.rank, changes) == (480, 1, [])
    state, changes, issued = order(state, "2026-03-01T12:00", "40")
    assert (issued, state.rank, [c.kind for c in changes]) == (40, 2, ["upgraded"])
    assert state.review_at == utc("2028-01-01T00:00")  # held: the end of the year after 2026
    assert changes[0].metric == 520 and changes[0].window == (date(2025, 3, 2), date(2026, 3, 1))
    state, changes, issued = order(state, "2026-03-05T12:00", "1200")
    assert (issued, state.rank, state.review_at) == (1500, 3, utc("2028-01-01T00:00"))
    state, changes, issued = order(state, "2026-03-06T12:00", "100")
    assert (issued, state.rank, changes) == (150, 3, [])
    book.add(date(2026, 3, 5), -1500)  # the refund's target, on the original's day
    state, changes = t.after_event(m, state, utc("2026-04-01T12:00"), book, -1500)
    assert (state.rank, changes) == (3, [])  # no downgrade outside a review
    assert t.progress(m, state, utc("2026-04-01T12:00"), book) == 670
    book.add(date(2027, 6, 1), 800)  # 2027's orders, at gold
    state, changes = t.apply_due(m, state, utc("2027-12-31T23:59"), book)
    assert changes == []
    state, changes = t.apply_due(m, state, utc("2028-01-01T00:00"), book)
    [review] = changes
    assert (review.kind, review.from_rank, review.to_rank, review.metric) == ("grace_started", 3, 2, 800)
    assert review.window == (date(2027, 1, 1), date(2027, 12, 31))
    assert (state.rank, state.grace_until, state.review_at) == (3, utc("2028-01-31T00:00"), utc("2029-01-01T00:00"))
    retained_case = state
    state, changes, issued = order(state, "2028-01-20T12:00", "400")
    assert (issued, state.rank, changes) == (600, 3, [])  # 1,400 in the trailing 365 days: still in grace
    state, changes = t.apply_due(m, state, utc("2028-01-31T00:00"), book)
    assert [(c.kind, c.reason, c.to_rank) for c in changes] == [("downgraded", "grace_ended", 2)]
    assert (state.rank, state.since, state.review_at, state.in_grace) == (
        2,
        utc("2028-01-31T00:00"),
        utc("2029-01-01T00:00"),
        False,
    )
    # Had the order brought the window to 1,500, the tier would have been kept.
    book.add(date(2028, 1, 20), -600)
    state, changes, issued = order(retained_case, "2028-01-20T12:00", "467")
    assert issued == 700 and [(c.kind, c.to_rank, c.metric) for c in changes] == [("retained", 3, 1500)]
    assert (state.rank, state.in_grace, state.review_at) == (3, False, utc("2029-01-01T00:00"))


# days and instants ----------------------------------------------------------------------------------------------
days_st = st.dates(min_value=date(1990, 1, 1), max_value=date(2037, 12, 31))


@settings(max_examples=300, deadline=None)
@given(day=days_st, zone=st.sampled_from(ZONES))
def test_a_day_starts_at_its_first_instant_across_dst(day: date, zone: str) -> None:
    start = t.day_start(day, zone)
    assert t.local_day(start, zone) >= day  # a day a zone skipped (Apia, 2011-12-30) starts the next
    assert t.local_day(start - timedelta(microseconds=1), zone) < day
    local = start.replace(tzinfo=UTC).astimezone(ZoneInfo(zone))
    if local.date() == day and (local.hour, local.minute) != (0, 0):  # midnight did not exist there
        midnight = datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(zone))
        assert midnight.astimezone(UTC).astimezone(ZoneInfo(zone)).replace(tzinfo=None) != midnight.replace(tzinfo=None)


@pytest.mark.parametrize(
    ("zone", "day", "expected"),
    [
        (LONDON, date(2026, 3, 29), datetime(2026, 3, 29, 0, 0)),  # the spring change is at 01:00, after midnight
        (LONDON, date(2026, 10, 25), datetime(2026, 10, 24, 23, 0)),
        ("America/Sao_Paulo", date(2018, 11, 4), datetime(2018, 11, 4, 3, 0)),  # midnight skipped: 01:00 local
        ("America/Santiago", date(2026, 9, 6), datetime(2026, 9, 6, 4, 0)),
        ("Asia/Beirut", date(2026, 3, 29), datetime(2026, 3, 28, 22, 0)),
    ],
)
def test_day_starts_on_change_days(zone: str, day: date, expected: datetime) -> None:
    assert t.day_start(day, zone) == expected


def test_periods_and_anniversaries() -> None:
    assert t.period_start(date(2026, 8, 17), "quarter") == date(2026, 7, 1)
    assert t.add_periods(date(2026, 7, 1), "quarter", 2) == date(2027, 1, 1)
    assert t.add_years(date(2024, 2, 29), 1) == date(2025, 2, 28)
    assert t.add_years(date(2024, 2, 29), 4) == date(2028, 2, 29)
    assert t.membership_year(date(2024, 2, 29), date(2025, 2, 27)) == 0
    assert t.membership_year(date(2024, 2, 29), date(2025, 2, 28)) == 1
    with pytest.raises(OverflowError):
        t.add_periods(date(9999, 12, 1), "month", 1)


WINDOWS: list[dict[str, Any]] = [
    {"window": {"type": "rolling", "days": 30}, "review": None},
    {"window": {"type": "rolling", "days": 30}, "review": {"at": "calendar", "period": "month"}},
    {"window": {"type": "rolling", "days": 7}, "review": {"at": "calendar", "period": "quarter"}},
    {"window": {"type": "calendar", "period": "month"}, "review": None},
    {"window": {"type": "calendar", "period": "quarter"}, "review": {"at": "calendar", "period": "quarter"}},
    {"window": {"type": "calendar", "period": "year"}, "review": None},
    {"window": {"type": "anniversary"}, "review": None},
]


@settings(max_examples=300, deadline=None)
@given(
    shape=st.sampled_from(WINDOWS),
    zone=st.sampled_from(ZONES),
    enrolled=days_st,
    after=st.integers(0, 1500),
    idle=st.integers(0, 1500),
)
def test_the_hold_rule_and_review_cycles(
    shape: dict[str, Any], zone: str, enrolled: date, after: int, idle: int
) -> None:
    m = model(zone, **shape)
    entered = enrolled + timedelta(days=after)
    first = t.first_review_day(m, entered, enrolled)
    assert first is not None and first > entered
    judged = t.review_window(m, first, enrolled)
    assert judged[1] == first - timedelta(days=1)
    if m.window == "rolling" and m.review_period is None:
        assert first - entered == timedelta(days=30)  # one full window: the tier anniversary
    else:  # a whole cycle after the one it was entered in: the period (or year) just ended never holds the entry
        following = t.next_review_day(m, entered, enrolled)
        assert following is not None and entered < following < first
        assert t.next_review_day(m, following, enrolled) == first
        if m.window != "rolling":
            assert judged[0] > entered
    # each later review is one cycle on, at the first instant of its day, whatever the zone
    review = first
    for _ in range(3):
        following = t.next_review_day(m, review, enrolled)
        assert following is not None and following > review
        instant = t.day_start(following, zone)
        assert t.local_day(instant, zone) >= following
        review = following
    day = entered + timedelta(days=idle)
    low, high = t.upgrade_window(m, day, enrolled)
    assert low <= high == day
    if m.window == "rolling":
        assert (high - low).days == 29 if shape["window"]["days"] == 30 else (high - low).days == 6


def test_an_anniversary_window_follows_the_membership_year() -> None:
    m = model(window={"type": "anniversary"}, review=None)
    enrolled = date(2024, 2, 29)
    assert t.upgrade_window(m, date(2025, 3, 1), enrolled) == (date(2025, 2, 28), date(2025, 3, 1))
    assert t.first_review_day(m, date(2025, 3, 1), enrolled) == date(2027, 2, 28)  # the anniversary after next
    assert t.review_window(m, date(2027, 2, 28), enrolled) == (date(2026, 2, 28), date(2027, 2, 27))
    assert t.next_review_day(m, date(2027, 2, 28), enrolled) == date(2028, 2, 29)


def test_a_review_at_midnight_on_a_dst_change_day() -> None:
    """A tier anniversary on 29 March 2026 (London's clocks go forward at 01:00 GMT that night): the review is at
    that midnight, judges the 30 days before, and the next is 30 days on at midnight BST."""
    m = model(window={"type": "rolling", "days": 30}, review=None)
    book = Ledger()
    state = t.enrol(m, utc("2026-02-27T10:00"))
    book.add(date(2026, 2, 27), 600)
    state, _ = t.after_event(m, state, utc("2026-02-27T10:00"), book, 600)
    assert state.review_at == datetime(2026, 3, 29, 0, 0)
    book.add(date(2026, 3, 28), 400)
    state, changes = t.apply_due(m, state, datetime(2026, 3, 29, 0, 0), book)
    assert [(c.kind, c.metric, c.window) for c in changes] == [
        ("retained", 1000, (date(2026, 2, 27), date(2026, 3, 28)))
    ]
    assert state.review_at == utc("2026-04-28T00:00") == datetime(2026, 4, 27, 23, 0)


# transitions ----------------------------------------------------------------------------------------------------
LADDERS = [
    [{"code": "base", "name": "Base"}, {"code": "a", "name": "A", "entry": "10"}],
    [
        {"code": "base", "name": "Base"},
        {"code": "a", "name": "A", "entry": "10", "retain": "5"},
        {"code": "b", "name": "B", "entry": "30", "retain": "20"},
        {"code": "c", "name": "C", "entry": "60", "retain": "20"},
    ],
]
events_st = st.lists(st.tuples(st.integers(0, 40), st.integers(-15, 40)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    shape=st.sampled_from(WINDOWS + [{"window": {"type": "lifetime"}, "review": None, "downgrade": None}]),
    levels=st.sampled_from(LADDERS),
    to=st.sampled_from(["earned", "one_level"]),
    grace=st.sampled_from([0, 0, 1, 3, 10]),
    zone=st.sampled_from(ZONES),
    events=events_st,
)
def test_transitions_are_monotone_and_keep_the_state_sound(
    shape: dict[str, Any], levels: list[dict[str, Any]], to: str, grace: int, zone: str, events: list[tuple[int, int]]
) -> None:
    downgrade = None if shape.get("downgrade", True) is None else {"to": to, "grace_days": grace}
    m = model(zone, levels=levels, **{"downgrade": downgrade, **shape})
    book = Ledger()
    clock = utc("2026-03-20T09:30", zone)
    state = t.enrol(m, clock)
    for gap, amount in events:
        clock += timedelta(days=gap, hours=gap % 5)
        before = state.rank
        state, due = t.apply_due(m, state, clock, book)
        for change in due:
            event(f"{change.kind} ({change.reason})")
            assert change.at <= clock and change.kind != "upgraded"
            assert change.to_rank <= change.from_rank
            if change.kind == "downgraded" and m.downgrade_to == "one_level":
                assert change.from_rank - change.to_rank == 1
        assert state.rank <= before and (state.review_at is None or state.review_at > clock)
        assert state.grace_until is None or state.grace_until > clock
        book.add(t.local_day(clock, zone), amount)
        middle = state.rank
        state, changes = t.after_event(m, state, clock, book, amount)
        assert state.rank >= middle
        for change in changes:
            event(f"{change.kind} ({change.reason})")
            reached = t.progress(m, state, clock, book)
            assert change.metric == reached
            if change.kind == "upgraded":
                assert change.to_rank == t.qualified_rank(m, reached) > change.from_rank
                assert state.since == clock and state.grace_until is None
        if state.rank == 1:
            assert state.review_at is None and not state.in_grace
        elif m.reviews:
            assert state.review_at is not None and state.review_at > clock
        else:
            assert state.review_at is None
        assert state.in_grace == (state.grace_target is not None)
        if state.grace_target is not None:
            assert state.grace_target < state.rank


@given(levels=st.sampled_from(LADDERS), low=st.integers(-50, 100), more=st.integers(0, 100))
def test_qualifying_and_earning_are_monotone_in_the_metric(levels: list[dict[str, Any]], low: int, more: int) -> None:
    m = model(levels=levels)
    assert t.qualified_rank(m, low) <= t.qualified_rank(m, low + more)
    for current in range(1, len(levels) + 1):
        assert t.earned_rank(m, current, low) <= t.earned_rank(m, current, low + more) <= current
        for earned in range(1, current + 1):
            target = t.review_target(m, current, earned)
            assert earned <= target <= current


def test_one_level_at_a_time_and_straight_to_the_level_earned() -> None:
    for to, expected in (("one_level", [4, 3, 2, 1]), ("earned", [4, 1])):
        m = model(
            "UTC",
            window={"type": "calendar", "period": "month"},
            review=None,
            downgrade={"to": to, "grace_days": 0},
            levels=LADDERS[1],
        )
        book = Ledger()
        book.add(date(2026, 1, 5), 60)
        state = t.enrol(m, utc("2026-01-05T10:00", "UTC"))
        state, _ = t.after_event(m, state, utc("2026-01-05T10:00", "UTC"), book, 60)
        assert (state.rank, state.review_at) == (4, datetime(2026, 3, 1))
        state, changes = t.apply_due(m, state, datetime(2027, 1, 1), book)  # idle: one review a month
        assert state.rank == 1
        assert [changes[0].from_rank] + [c.to_rank for c in changes if c.kind == "downgraded"] == expected
        assert state.review_at is None


def test_a_review_in_grace_re_decides_the_target_and_keeps_the_grace_end() -> None:
    m = model("UTC", window={"type": "rolling", "days": 10}, review=None, downgrade={"to": "earned", "grace_days": 15},
              levels=LADDERS[1])  # fmt: skip
    book = Ledger()
    start = datetime(2026, 5, 1, 12)
    book.add(date(2026, 5, 1), 30)
    state, _ = t.after_event(m, t.enrol(m, start), start, book, 30)
    assert (state.rank, state.review_at) == (3, datetime(2026, 5, 11))
    book.add(date(2026, 5, 10), -10)  # 20 in the judged window: B kept
    book.add(date(2026, 5, 15), 6)  # 6 in the second: A earned
    state, changes = t.apply_due(m, state, datetime(2026, 5, 21, 1), book)
    assert [(c.kind, c.to_rank) for c in changes] == [("retained", 3), ("grace_started", 2)]
    assert state.grace_until == datetime(2026, 6, 5)
    state, changes = t.apply_due(m, state, datetime(2026, 5, 31), book)  # nothing in the third window
    assert [(c.kind, c.to_rank) for c in changes] == [("grace_started", 1)] and state.grace_until == datetime(
        2026, 6, 5
    )
    state, changes = t.apply_due(m, state, datetime(2026, 6, 5), book)
    assert [(c.kind, c.to_rank, c.reason) for c in changes] == [("downgraded", 1, "grace_ended")]
    assert (state.rank, state.review_at, state.grace_until) == (1, None, None)


def test_an_event_that_adds_nothing_changes_nothing() -> None:
    m = model("UTC", levels=LADDERS[0], window={"type": "lifetime"}, review=None, downgrade=None)
    book = Ledger()
    book.add(date(2026, 1, 1), 50)
    state = t.enrol(m, datetime(2026, 1, 1))
    assert t.after_event(m, state, datetime(2026, 1, 2), book, 0) == (state, [])
    upgraded, [change] = t.after_event(m, state, datetime(2026, 1, 2), book, 1)
    assert (upgraded.rank, upgraded.review_at, change.window) == (2, None, (date.min, date(2026, 1, 2)))
    mended, changes = t.apply_due(
        m, t.TierState(date(2026, 1, 1), review_at=datetime(2026, 2, 1)), datetime(2027, 1, 1), book
    )
    assert (mended.review_at, changes) == (None, [])  # the base is never reviewed


# multiplied amounts ---------------------------------------------------------------------------------------------
decimals_st = st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e9"), places=4, allow_nan=False)
rates_st = st.decimals(min_value=Decimal("0.000001"), max_value=Decimal("1000"), places=6, allow_nan=False)
multipliers_st = st.decimals(min_value=Decimal("0.0001"), max_value=Decimal(100), places=4, allow_nan=False)


def toward_zero(value: Fraction) -> int:
    return int(value)  # int() of a Fraction truncates toward zero


@given(value=decimals_st, decimals=st.integers(0, 8))
def test_a_sum_metric_counts_the_field_rounded_toward_zero(value: Decimal, decimals: int) -> None:
    expected = toward_zero(Fraction(value) * 10**decimals)
    assert t.sum_contribution(value, decimals) == expected == -t.sum_contribution(value, decimals, less=True)


@given(value=decimals_st, rate=rates_st, multiplier=multipliers_st, decimals=st.integers(0, 8))
def test_a_multiplied_per_amount_is_one_exact_product_rounded_once(
    value: Decimal, rate: Decimal, multiplier: Decimal, decimals: int
) -> None:
    expected = toward_zero(Fraction(value) * Fraction(rate) * Fraction(multiplier) * 10**decimals)
    assert t.multiplied_per(value, rate, multiplier, decimals) == expected
    action = ACTIONS["per"].build(
        {"amount": {"per": "amount", "rate": str(rate)}, "multiply": "tier"}, "A", decimals, "a"
    )
    outcome = action.outcome(0, value, None, multiplier)
    assert outcome.multiplier == multiplier
    assert outcome.amount_minor == (max(expected, 0) if outcome.error_code is None else 0)


@given(fixed=st.integers(1, 10**18 - 1), multiplier=multipliers_st)
def test_a_multiplied_fixed_amount_is_floored_exactly(fixed: int, multiplier: Decimal) -> None:
    expected = toward_zero(Fraction(fixed) * Fraction(multiplier))
    assert t.multiplied_fixed(fixed, multiplier) == expected
    action = ACTIONS["fixed"].build({"amount": {"fixed": str(fixed)}, "multiply": "tier"}, "A", 0, "a")
    outcome = action.outcome(0, None, None, multiplier)
    if expected > 10**18 - 1:
        assert (outcome.error_code, outcome.amount_minor) == ("amount_too_large", 0)
    else:
        assert (outcome.error_code, outcome.amount_minor) == (None, expected)


def test_multiplied_reasons_and_the_refusal_without_a_tier() -> None:
    per = ACTIONS["per"].build({"amount": {"per": "amount", "rate": 1}, "multiply": "tier"}, "A", 0, "a")
    outcome = per.outcome(0, Decimal("42.50"), None, Decimal("1.25"))
    assert outcome.amount_minor == 53
    assert ACTIONS["per"].reason(per, outcome, Decimal("42.50"), None) == (
        "amount = 42.50 x rate 1 x tier 1.25 = 53 (rounded toward zero)"
    )
    fixed = ACTIONS["fixed"].build({"amount": {"fixed": "20"}, "multiply": "tier", "beneficiary": {"field": "ref"}},
                                   "A", 0, "a")  # fmt: skip
    outcome = fixed.outcome(0, None, "cus_1", Decimal("1.5"))
    assert (outcome.amount_minor, outcome.beneficiary, outcome.multiplier) == (30, "cus_1", Decimal("1.5"))
    assert ACTIONS["fixed"].reason(fixed, outcome, None, "cus_1") == (
        "fixed 20 x tier 1.5 = 30 (rounded toward zero), to the beneficiary ref = 'cus_1'"
    )
    assert ACTIONS["fixed"].describe({"amount": {"fixed": "20"}, "multiply": "tier"}) == "20 x tier"
    plain = ACTIONS["per"].build({"amount": {"per": "amount", "rate": 1}}, "A", 0, "a")
    assert plain.outcome(0, Decimal(7), None, Decimal(3)) == plain.outcome(0, Decimal(7))  # not multiplied
    assert plain.outcome(0, Decimal(7)).multiplier is None
    for action in (per, fixed):
        with pytest.raises(ServiceError) as caught:
            action.outcome(0, Decimal(1), "cus_1")
        assert caught.value.details["field"] == "multiply"
        with pytest.raises(ServiceError):
            action.entry.sql(action, _Amounts())


class _Amounts:
    def fixed(self, minor: int) -> Any:
        return minor

    def product(self, field: str, rate: Decimal) -> Any:
        return (field, rate)

    def nothing(self) -> Any:
        return None


# conditions -----------------------------------------------------------------------------------------------------
def test_conditions_read_the_tier_fields_of_the_customer() -> None:
    m = model()
    state = t.TierState(date(2026, 1, 1), rank=2)
    facts = EventFacts(customer=CustomerFacts(tier=t.tier_facts(m, state, 1180)))
    assert facts.customer is not None and facts.customer.tier == TierFacts("silver", 2, Decimal(1180))
    assert read_value({}, facts, "customer.tier") == "silver"
    assert read_value({}, facts, "customer.tier_rank") == Decimal(2)
    assert read_value({}, facts, "customer.tier_progress") == Decimal(1180)
    cents = t.tier_model(settings_of(), 2, LONDON)
    assert t.tier_facts(cents, state, 1180).progress == Decimal("11.80")
    assert cents.level(2).entry == 50000
    untiered = EventFacts(customer=CustomerFacts())
    for name in ("customer.tier", "customer.tier_rank", "customer.tier_progress"):
        assert source_of(name) == "customer"
        assert read_value({"customer": {"tier": "gold"}}, untiered, name) is None  # never the event's data
