"""Tiers (issue 33; reports/i33-tiers-plan.md section 3), pure: windows and review instants in the programme's time
zone, the hold rule, upgrades, reviews, grace, and multiplied amounts. No I/O: the live engine's book, the tier
worker and the replay's pass all call these, so they agree by construction.

Instants are naive UTC datetimes (as the store keeps them); days are local dates of the programme's time zone; an
instant "at day D" is the first instant of D there (`day_start`: local midnight, or the end of a DST gap that
swallows it). Levels are ranked 1 (the base) .. K; thresholds and the metric are integers in the metric's minor
units (`metric_minor`). The metric over a window is given as a function `(first_day, last_day) -> int` (both
inclusive): what the caller has counted so far (its contributions, section 3.1).

- **Upgrade** (`after_event`), after an event that added to the customer's metric: to the highest level whose
  `entry` the upgrade window's metric reaches (`upgrade_window`), skipping levels; the tier's anchor is the event's
  day and its first review follows the hold rule (`first_review_day`: one full cycle). During a grace period an
  event that reaches the current level's `retain` keeps the tier instead.
- **Review** (`apply_due`), at each due instant up to a clock: the window just ended (`review_window`) is judged;
  the level earned is the highest at or below the current whose `retain` it reaches; kept, else the target
  (`earned`, or one level down), at once or at the end of `grace_days`. The next review is one cycle later,
  whatever the review decided (`next_review_day`); the base is never reviewed. A grace end and a review due at
  the same instant: the grace end first. A review during grace re-decides the target; the grace keeps its end.
- **Multipliers**: `multiplied_per` is one exact product `value x rate x M` rounded once toward zero
  (`domain.money.reward_minor` with the exact rate x M), `multiplied_fixed` `floor(fixed_minor x M)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, localcontext
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo

from rewards_lab.domain.conditions import TierFacts
from rewards_lab.domain.money import reward_minor, to_decimal
from rewards_lab.domain.settings import Tiers

Metric = Callable[[date, date], int]  # the metric over local days [first, last], in its minor units
ChangeKind = Literal["upgraded", "retained", "grace_started", "downgraded"]
ONE = Decimal(1)
_PERIOD_MONTHS = {"month": 1, "quarter": 3, "year": 12}


@dataclass(frozen=True, slots=True)
class Level:
    """A level ranked `rank` (1: the base): thresholds in the metric's minor units (0 for the base)."""

    rank: int
    code: str
    name: str
    entry: int
    keep: int  # its retain threshold (its entry when not written)
    multiplier: Decimal


@dataclass(frozen=True, slots=True)
class TierModel:
    """A version's tiers as the engines apply them (`tier_model` builds it from `domain.settings.Tiers`)."""

    levels: tuple[Level, ...]
    window: Literal["rolling", "calendar", "anniversary", "lifetime"]
    days: int | None = None  # a rolling window's days
    period: str | None = None  # a calendar window's period
    review_period: str | None = None  # reviews at each end of this calendar period (None: at the window's end)
    downgrade_to: Literal["earned", "one_level"] = "earned"
    grace_days: int = 0
    timezone: str = "UTC"
    decimals: int = 0  # the metric's places

    def level(self, rank: int) -> Level:
        return self.levels[rank - 1]

    def multiplier(self, rank: int) -> Decimal:
        return self.level(rank).multiplier

    @property
    def reviews(self) -> bool:
        return self.window != "lifetime"


def metric_minor(text: str, decimals: int) -> int:
    """A threshold (a validated decimal string with at most `decimals` places) in the metric's minor units."""
    return int(Decimal(text).scaleb(decimals))


def tier_model(tiers: Tiers, asset_decimals: int, timezone: str = "UTC") -> TierModel:
    """The model of a version's tiers, for an asset of `asset_decimals` in the programme's time zone."""
    places = tiers.metric_decimals(asset_decimals)
    levels = []
    for rank, level in enumerate(tiers.levels, start=1):
        entry = 0 if level.entry is None else metric_minor(level.entry, places)
        keep = entry if level.retain is None else metric_minor(level.retain, places)
        multiplier = ONE if level.multiplier is None else Decimal(level.multiplier)
        levels.append(Level(rank, level.code, level.name, entry, keep, multiplier))
    window = tiers.window
    kind = window["type"]
    return TierModel(
        tuple(levels),
        kind,
        int(window["days"]) if kind == "rolling" else None,
        str(window["period"]) if kind == "calendar" else None,
        tiers.review_period if tiers.review_period != window.get("period") else None,
        tiers.downgrade_to,
        tiers.grace_days,
        timezone,
        places,
    )


# days and instants ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def local_day(instant: datetime, timezone: str) -> date:
    """The local date of a naive UTC instant."""
    return instant.replace(tzinfo=UTC).astimezone(_zone(timezone)).date()


def day_start(day: date, timezone: str) -> datetime:
    """The first instant (naive UTC) of a local day: its midnight, or, when a DST gap swallows midnight, the instant
    the clocks jump (the first whose local date is `day`)."""
    zone = _zone(timezone)
    midnight = datetime(day.year, day.month, day.day)
    earlier = midnight.replace(tzinfo=zone).astimezone(UTC)  # fold 0: the earlier of an ambiguous midnight
    if earlier.astimezone(zone).replace(tzinfo=None) == midnight:
        return earlier.replace(tzinfo=None)
    # In a gap: fold 1 reads midnight with the offset after the jump, an instant before it; search between.
    low, high = midnight.replace(tzinfo=zone, fold=1).astimezone(UTC), earlier
    low, high = min(low, high), max(low, high)
    while high - low > timedelta(microseconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).date() >= day:
            high = middle
        else:
            low = middle
    return (low if low.astimezone(zone).date() >= day else high).replace(tzinfo=None)


def period_start(day: date, period: str) -> date:
    """The first day of the calendar period (month, quarter, year) holding `day`."""
    months = _PERIOD_MONTHS[period]
    return date(day.year, (day.month - 1) // months * months + 1, 1)


def add_periods(start: date, period: str, count: int) -> date:
    """The first day of the period `count` periods after the one starting `start` (OverflowError past 9999)."""
    index = start.year * 12 + start.month - 1 + _PERIOD_MONTHS[period] * count
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise OverflowError("past the calendar")
    return date(year, month + 1, 1)


def add_years(day: date, years: int) -> date:
    """The same day `years` later; 29 February is the last day of February in other years."""
    year = day.year + years
    if not 1 <= year <= 9999:
        raise OverflowError("past the calendar")
    if day.month == 2 and day.day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
        return date(year, 2, 28)
    return date(year, day.month, day.day)


def membership_year(enrolled: date, day: date) -> int:
    """Which membership year (0: the first) holds `day` (on or after the enrolment day)."""
    years = max(day.year - enrolled.year, 0)
    while years > 0 and add_years(enrolled, years) > day:
        years -= 1
    return years


def _days_before(day: date, days: int) -> date:
    """`days` days before `day`, or the calendar's first day."""
    return date.fromordinal(max(day.toordinal() - days, 1))


# windows --------------------------------------------------------------------------------------------------------
def upgrade_window(model: TierModel, day: date, enrolled: date) -> tuple[date, date]:
    """The days an event on `day` qualifies over (section 3.2)."""
    if model.window == "rolling":
        assert model.days is not None
        return _days_before(day, model.days - 1), day
    if model.window == "calendar":
        assert model.period is not None
        return period_start(day, model.period), day
    if model.window == "anniversary":
        return add_years(enrolled, membership_year(enrolled, day)), day
    return date.min, day  # lifetime: every day (a late event dated before the enrolment counts too)


def review_window(model: TierModel, review_day: date, enrolled: date) -> tuple[date, date]:
    """The days a review at the start of `review_day` judges: the N days before it (rolling), the period just
    ended (calendar), the membership year just ended (anniversary)."""
    last = review_day - timedelta(days=1)
    if model.window == "rolling":
        assert model.days is not None
        return _days_before(review_day, model.days), last
    if model.window == "calendar":
        assert model.period is not None
        return period_start(last, model.period), last
    if model.window == "anniversary":
        return add_years(enrolled, membership_year(enrolled, last)), last
    return enrolled, last


def _cycle_period(model: TierModel) -> str | None:
    """The calendar period reviews fall at the end of (None: rolling tier anniversaries, or anniversaries)."""
    return model.review_period or model.period


def first_review_day(model: TierModel, entered: date, enrolled: date) -> date | None:
    """The hold rule: a tier entered by upgrade on `entered` is first reviewed one full cycle later: N days on
    (rolling), at the end of the period after the one it was entered in (calendar reviews), at the anniversary
    after next (anniversary). None: never (lifetime, or past the calendar)."""
    try:
        period = _cycle_period(model)
        if not model.reviews:
            return None
        if period is not None:
            return add_periods(period_start(entered, period), period, 2)
        if model.window == "rolling":
            assert model.days is not None
            return entered + timedelta(days=model.days)
        return add_years(enrolled, membership_year(enrolled, entered) + 2)
    except OverflowError:
        return None


def next_review_day(model: TierModel, review_day: date, enrolled: date) -> date | None:
    """The review one cycle after a review on `review_day` (None: past the calendar)."""
    try:
        period = _cycle_period(model)
        if period is not None:
            return add_periods(period_start(review_day, period), period, 1)
        if model.window == "rolling":
            assert model.days is not None
            return review_day + timedelta(days=model.days)
        return add_years(enrolled, membership_year(enrolled, review_day) + 1)
    except OverflowError:
        return None


def _instant(model: TierModel, day: date | None) -> datetime | None:
    return None if day is None else day_start(day, model.timezone)


# state and transitions ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TierState:
    """One customer's tier in one programme: its level, when it entered it, the day its cycles count from, its
    next review (None at the base), and a pending downgrade's grace."""

    enrolled: date
    rank: int = 1
    since: datetime | None = None
    anchor: date | None = None
    review_at: datetime | None = None
    grace_until: datetime | None = None
    grace_target: int | None = None

    @property
    def in_grace(self) -> bool:
        return self.grace_until is not None


@dataclass(frozen=True, slots=True)
class TierChange:
    """A step of a customer's tier history: the metric and window it was decided on (None: a grace end)."""

    kind: ChangeKind
    at: datetime
    from_rank: int
    to_rank: int
    metric: int | None = None
    window: tuple[date, date] | None = None
    reason: Literal["event", "review", "grace_ended"] = "event"


def enrol(model: TierModel, at: datetime) -> TierState:
    """A customer the programme meets for the first time, at the base from the day of `at`."""
    return TierState(local_day(at, model.timezone))


def qualified_rank(model: TierModel, metric: int) -> int:
    """The highest level whose entry the metric reaches (the base: always, even below zero after refunds)."""
    return max((level.rank for level in model.levels[1:] if level.entry <= metric), default=1)


def earned_rank(model: TierModel, current: int, metric: int) -> int:
    """The highest level at or below `current` whose retain threshold the metric reaches (the base: always)."""
    return max((level.rank for level in model.levels[1:current] if level.keep <= metric), default=1)


def review_target(model: TierModel, current: int, earned: int) -> int:
    """Where a failed review takes the customer: the level earned, or one level down at most."""
    return earned if model.downgrade_to == "earned" else max(earned, current - 1)


def progress(model: TierModel, state: TierState, at: datetime, metric: Metric) -> int:
    """The upgrade window's metric at `at` (what `customer.tier_progress` reads)."""
    first, last = upgrade_window(model, local_day(at, model.timezone), state.enrolled)
    return metric(first, last)


def tier_facts(model: TierModel, state: TierState, progress_minor: int) -> TierFacts:
    """What conditions read of a customer's tier (`customer.tier`, `.tier_rank`, `.tier_progress`)."""
    return TierFacts(model.level(state.rank).code, state.rank, to_decimal(progress_minor, model.decimals))


def due_at(state: TierState) -> datetime | None:
    """The next instant something is due for the customer (a grace end or a review), or None."""
    moments = [moment for moment in (state.grace_until, state.review_at) if moment is not None]
    return min(moments) if moments else None


def apply_due(
    model: TierModel, state: TierState, clock: datetime, metric: Metric
) -> tuple[TierState, list[TierChange]]:
    """Every grace end and review due at or before `clock`, in order (a grace end before a review at the same
    instant): the state after them and what changed."""
    changes: list[TierChange] = []
    while (moment := due_at(state)) is not None and moment <= clock:
        if state.rank == 1 and not state.in_grace:  # the base is never reviewed (a state written otherwise is mended)
            state = replace(state, review_at=None)
        elif state.grace_until is not None and state.grace_until == moment:
            state, change = _grace_end(model, state)
            changes.append(change)
        else:
            state, change = _review(model, state, metric)
            changes.append(change)
    return state, changes


def _grace_end(model: TierModel, state: TierState) -> tuple[TierState, TierChange]:
    assert state.grace_until is not None and state.grace_target is not None
    at, target = state.grace_until, state.grace_target
    review_at = state.review_at if target > 1 else None
    after = replace(state, rank=target, since=at, review_at=review_at, grace_until=None, grace_target=None)
    return after, TierChange("downgraded", at, state.rank, target, reason="grace_ended")


def _review(model: TierModel, state: TierState, metric: Metric) -> tuple[TierState, TierChange]:
    assert state.review_at is not None
    at = state.review_at
    day = local_day(at, model.timezone)
    window = review_window(model, day, state.enrolled)
    judged = metric(*window)
    earned = earned_rank(model, state.rank, judged)
    following = _instant(model, next_review_day(model, day, state.enrolled))
    if earned == state.rank:
        after = replace(state, review_at=following, grace_until=None, grace_target=None)
        return after, TierChange("retained", at, state.rank, state.rank, judged, window, "review")
    target = review_target(model, state.rank, earned)
    if model.grace_days == 0:
        after = replace(state, rank=target, since=at, review_at=following if target > 1 else None)
        return after, TierChange("downgraded", at, state.rank, target, judged, window, "review")
    grace_until = state.grace_until or _instant(model, day + timedelta(days=model.grace_days))
    after = replace(state, review_at=following, grace_until=grace_until, grace_target=target)
    return after, TierChange("grace_started", at, state.rank, target, judged, window, "review")


def after_event(
    model: TierModel, state: TierState, at: datetime, metric: Metric, contribution: int
) -> tuple[TierState, list[TierChange]]:
    """After an event at `at` whose contributions (`contribution` to this customer, in all) are counted: an upgrade
    when the upgrade window's metric reaches a higher entry, else, in grace, retention when it reaches the current
    level's retain. An event that added nothing changes nothing (the metric did not rise)."""
    if contribution <= 0:
        return state, []
    day = local_day(at, model.timezone)
    window = upgrade_window(model, day, state.enrolled)
    reached = metric(*window)
    target = qualified_rank(model, reached)
    if target > state.rank:
        review_at = _instant(model, first_review_day(model, day, state.enrolled))
        after = TierState(state.enrolled, target, at, day, review_at)
        return after, [TierChange("upgraded", at, state.rank, target, reached, window)]
    if state.in_grace and reached >= model.level(state.rank).keep:
        after = replace(state, grace_until=None, grace_target=None)
        return after, [TierChange("retained", at, state.rank, state.rank, reached, window)]
    return state, []


def sum_contribution(value: Decimal, decimals: int, *, less: bool = False) -> int:
    """What an event adds to a `sum` metric: its field's number rounded toward zero to the metric's places, in its
    minor units (negative for a `less` event); the engines count a missing or non-number field as nothing."""
    minor = reward_minor(value, ONE, decimals)
    return -minor if less else minor


# multiplied amounts ---------------------------------------------------------------------------------------------
def exact_product(a: Decimal, b: Decimal) -> Decimal:
    """a x b with every digit it has (no rounding)."""
    with localcontext(Context(prec=len(a.as_tuple().digits) + len(b.as_tuple().digits) + 2)):
        return a * b


def multiplied_per(value: Decimal, rate: Decimal, multiplier: Decimal, decimals: int) -> int:
    """Minor units of a `{per, rate}` amount multiplied by a tier's multiplier: value x (rate x M), one rounding
    toward zero (a rounded amount is never multiplied again)."""
    return reward_minor(value, exact_product(rate, multiplier), decimals)


def multiplied_fixed(fixed_minor: int, multiplier: Decimal) -> int:
    """A fixed amount multiplied: floor(fixed_minor x M), exact (M has at most a few places)."""
    numerator, denominator = multiplier.as_integer_ratio()
    product = fixed_minor * numerator
    return product // denominator if product >= 0 else -(-product // denominator)
