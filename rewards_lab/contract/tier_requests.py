"""Tiers on the wire (issue 33; reports/i33-tiers-plan.md section 2): status levels a programme's customers earn,
keep and lose.

A programme may declare one `tiers` object, frozen into each version like its caps and guards:

- `levels`: 2..MAX_LEVELS ordered levels `{code, name, entry, retain, multiplier}`; the first is the base every
  customer is in (no `entry`, no `retain`); each later level has an `entry` threshold, strictly increasing, and
  an optional `retain` threshold (default: its `entry`) at most its `entry` and non-decreasing along the levels;
  `multiplier` (default 1) is what an issue action with `"multiply": "tier"` multiplies its amount by;
- `metric`: what qualifies: `{"type": "points"}` (net points of the programme's asset it issued to the customer),
  `{"type": "sum", "event_type", "field", "decimals", "conditions", "less"}` (an event field's number, e.g. spend;
  `less` counts negatively) or `{"type": "count", "event_type", "conditions"}`;
- `window`: over which days, in the programme's time zone: `{"type": "rolling", "days": N}`,
  `{"type": "calendar", "period": "month" | "quarter" | "year"}`, `{"type": "anniversary"}` (the membership
  year) or `{"type": "lifetime"}`;
- `review` (default `{"at": "window_end"}`, not written): when tiers are re-judged; `{"at": "calendar", "period":
  P}` with a rolling window (or a calendar window of the same period);
- `downgrade` (default `{"to": "earned", "grace_days": 0}`, not written): at a failed review, straight to the level
  earned or `one_level` down, after `grace_days` in which the customer may still retain.

Thresholds are decimal strings (or exact JSON numbers) in the metric's units: the asset's units for `points` (at
most its decimals: `check_threshold_places`, which needs the asset), `decimals` places for `sum`, whole numbers for
`count`. Refusals are `field_invalid` (a missing `entry`: `field_required`) naming the element, e.g.
`programme.tiers.levels[2].retain`. `rules_need_tiers` refuses rules that multiply by tier or read the tier fields
in a programme that defines none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.request_base import EventType, FieldName, RequestModel, whole_number
from rewards_lab.contract.rule_requests import (
    AllGroup,
    AnyGroup,
    Condition,
    Conditions,
    NotGroup,
    check_condition_tree,
)
from rewards_lab.contract.validation import custom_error

MIN_LEVELS = 2
MAX_LEVELS = 10
MAX_LEVEL_NAME = 60
MAX_ROLLING_DAYS = 1_096  # three years and a day
MAX_GRACE_DAYS = 365
MAX_SUM_DECIMALS = 8
DEFAULT_SUM_DECIMALS = 2
MAX_MULTIPLIER = Decimal(100)
MAX_MULTIPLIER_PLACES = 4
TIER_FIELDS = ("customer.tier", "customer.tier_rank", "customer.tier_progress")
PROGRESS_FIELD = "customer.tier_progress"
METRIC_TYPES = ("points", "sum", "count")
WINDOW_TYPES = ("rolling", "calendar", "anniversary", "lifetime")
CalendarPeriod = Literal["month", "quarter", "year"]

_CODE = r"^[a-z][a-z0-9_]{0,31}$"
_THRESHOLD_TEXT = re.compile(r"(?P<int>[0-9]{1,18})(\.(?P<frac>[0-9]{1,18}))?")
_MULTIPLIER_TEXT = re.compile(r"(?P<int>[0-9]{1,3})(\.(?P<frac>[0-9]{1,4}))?")


def _refusal(message: str, suffix: str, code: str = "field_invalid") -> PydanticCustomError:
    """A refusal of an element inside the tiers object, named relative to it (`levels[2].retain`)."""
    return PydanticCustomError(code, message.replace("{", "(").replace("}", ")"), {"service_suffix": suffix})


def _decimal_text(value: object) -> object:
    """Exact JSON numbers (Decimal, int) as their decimal string; strings as they are."""
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return format(value, "f") if isinstance(value, Decimal) else str(value)
    return value


def _threshold(value: object) -> str:
    text = _decimal_text(value)
    if not (isinstance(text, str) and _THRESHOLD_TEXT.fullmatch(text)):
        raise custom_error(ServiceError("field_invalid", 'must be a decimal string such as "500"'))
    if not Decimal(text):
        raise custom_error(ServiceError("field_invalid", "must be greater than zero"))
    return text


def _multiplier(value: object) -> str:
    text = _decimal_text(value)
    if isinstance(text, str) and _MULTIPLIER_TEXT.fullmatch(text) and 0 < Decimal(text) <= MAX_MULTIPLIER:
        return text
    message = f"must be a decimal string above 0 and at most {MAX_MULTIPLIER} with at most "
    raise custom_error(ServiceError("field_invalid", message + f'{MAX_MULTIPLIER_PLACES} places, such as "1.25"'))


def _level_name(value: object) -> object:
    if not isinstance(value, str):
        return value  # left for the str type to refuse
    trimmed = value.strip()
    if not trimmed or len(value) > MAX_LEVEL_NAME:
        message = f"a level's name has 1 to {MAX_LEVEL_NAME} characters, not only white space"
        raise custom_error(ServiceError("field_invalid", message))
    return trimmed


TierThreshold = Annotated[
    str,
    BeforeValidator(_threshold),
    WithJsonSchema({"type": "string", "pattern": r"^[0-9]{1,18}(\.[0-9]{1,18})?$", "examples": ["500"]}),
]
Multiplier = Annotated[
    str,
    BeforeValidator(_multiplier),
    WithJsonSchema({"type": "string", "pattern": r"^[0-9]{1,3}(\.[0-9]{1,4})?$", "examples": ["1.25"]}),
]
LevelCode = Annotated[str, Field(pattern=_CODE, strict=True)]
LevelName = Annotated[str, BeforeValidator(_level_name), Field(strict=True)]


RollingDays = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_ROLLING_DAYS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_ROLLING_DAYS}),
]
GraceDays = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=0, le=MAX_GRACE_DAYS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_GRACE_DAYS, "default": 0}),
]
SumDecimals = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=0, le=MAX_SUM_DECIMALS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_SUM_DECIMALS, "default": DEFAULT_SUM_DECIMALS}),
]


class TierLevel(RequestModel):
    """One level: the base (first) has only a code and a name."""

    code: LevelCode
    name: LevelName
    entry: TierThreshold | None = Field(default=None, exclude_if=lambda value: value is None)
    retain: TierThreshold | None = Field(default=None, exclude_if=lambda value: value is None)
    multiplier: Multiplier | None = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def kept_at(self) -> str | None:
        """The threshold a review judges it by: `retain`, else `entry` (None: the base)."""
        return self.retain if self.retain is not None else self.entry


# metrics --------------------------------------------------------------------------------------------------------
class PointsMetric(RequestModel):
    """Net points of the programme's asset the programme issued to the customer."""

    type: Literal["points"]


class SumLess(RequestModel):
    """Events whose field counts negatively (refunds), on their own day."""

    event_type: EventType
    field: FieldName
    conditions: Conditions = Field(default=[], exclude_if=lambda value: not value)


class SumMetric(RequestModel):
    """An event field's number, rounded toward zero to `decimals` places, summed over the window."""

    type: Literal["sum"]
    event_type: EventType
    field: FieldName
    decimals: SumDecimals = Field(default=DEFAULT_SUM_DECIMALS, exclude_if=lambda v: v == DEFAULT_SUM_DECIMALS)
    conditions: Conditions = Field(default=[], exclude_if=lambda value: not value)
    less: SumLess | None = Field(default=None, exclude_if=lambda value: value is None)


class CountMetric(RequestModel):
    """One per event of the type whose conditions hold."""

    type: Literal["count"]
    event_type: EventType
    conditions: Conditions = Field(default=[], exclude_if=lambda value: not value)


def _typed_shape(kinds: tuple[str, ...], suffix: str) -> Any:
    def shape(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return f"{kind}_{suffix}" if kind in kinds else None

    return shape


Metric = Annotated[
    Annotated[PointsMetric, Tag("points_metric")]
    | Annotated[SumMetric, Tag("sum_metric")]
    | Annotated[CountMetric, Tag("count_metric")],
    Discriminator(
        _typed_shape(METRIC_TYPES, "metric"),
        custom_error_type="field_invalid",
        custom_error_message="type must be one of points, sum, count",
    ),
]


# windows --------------------------------------------------------------------------------------------------------
class RollingWindow(RequestModel):
    """The trailing `days` local days."""

    type: Literal["rolling"]
    days: RollingDays


class CalendarWindow(RequestModel):
    """The calendar period holding the day."""

    type: Literal["calendar"]
    period: CalendarPeriod


class AnniversaryWindow(RequestModel):
    """The membership year holding the day (years counted from the customer's enrolment day)."""

    type: Literal["anniversary"]


class LifetimeWindow(RequestModel):
    """Every day since enrolment; never reviewed."""

    type: Literal["lifetime"]


Window = Annotated[
    Annotated[RollingWindow, Tag("rolling_window")]
    | Annotated[CalendarWindow, Tag("calendar_window")]
    | Annotated[AnniversaryWindow, Tag("anniversary_window")]
    | Annotated[LifetimeWindow, Tag("lifetime_window")],
    Discriminator(
        _typed_shape(WINDOW_TYPES, "window"),
        custom_error_type="field_invalid",
        custom_error_message="type must be one of rolling, calendar, anniversary, lifetime",
    ),
]


class Review(RequestModel):
    """When tiers are re-judged: at the window's end (default), or at each end of a calendar period."""

    at: Literal["window_end", "calendar"]
    period: CalendarPeriod | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _period(self) -> Review:
        if self.at == "calendar" and self.period is None:
            raise _refusal("a calendar review names its period", "period", "field_required")
        if self.at == "window_end" and self.period is not None:
            raise _refusal("a window_end review has no period", "period")
        return self


class Downgrade(RequestModel):
    """At a failed review: `earned` (straight to the level earned) or `one_level`; after `grace_days`."""

    to: Literal["earned", "one_level"] = "earned"
    grace_days: GraceDays = 0


DEFAULT_REVIEW = Review(at="window_end")
DEFAULT_DOWNGRADE = Downgrade()


# the tiers object -----------------------------------------------------------------------------------------------
class Tiers(RequestModel):
    metric: Metric
    window: Window
    review: Review | None = Field(default=None, exclude_if=lambda value: value is None or value == DEFAULT_REVIEW)
    downgrade: Downgrade | None = Field(
        default=None, exclude_if=lambda value: value is None or value == DEFAULT_DOWNGRADE
    )
    levels: Annotated[list[TierLevel], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS)]

    @model_validator(mode="after")
    def _consistent(self) -> Tiers:
        _check_levels(self.levels, _metric_places(self.metric))
        _check_schedule(self)
        _check_metric_conditions(self.metric)
        return self

    def codes(self) -> list[str]:
        return [level.code for level in self.levels]


def _metric_places(metric: PointsMetric | SumMetric | CountMetric) -> int | None:
    """The places a threshold may have (None: the asset's decimals, known only with the asset)."""
    if isinstance(metric, SumMetric):
        return metric.decimals
    return 0 if isinstance(metric, CountMetric) else None


def _places(text: str) -> int:
    match = _THRESHOLD_TEXT.fullmatch(text)
    assert match is not None
    return len(match.group("frac") or "")


def _check_levels(levels: Sequence[TierLevel], places: int | None) -> None:
    seen: dict[str, int] = {}
    for index, level in enumerate(levels):
        if level.code in seen:
            raise _refusal(f"code {level.code!r} is also level {seen[level.code]}'s", f"levels[{index}].code")
        seen[level.code] = index
    base = levels[0]
    for name in ("entry", "retain"):
        if getattr(base, name) is not None:
            raise _refusal(f"the first level is the base every customer is in: it has no {name}", f"levels[0].{name}")
    previous_entry, previous_kept = Decimal(0), Decimal(0)
    for index, level in enumerate(levels[1:], start=1):
        if level.entry is None:
            message = "every level after the first has an entry threshold"
            raise _refusal(message, f"levels[{index}].entry", "field_required")
        for name in ("entry", "retain"):
            text = getattr(level, name)
            if text is not None and places is not None and _places(text) > places:
                where = f"levels[{index}].{name}"
                raise _refusal(f"has {_places(text)} decimal places; the metric counts {places}", where)
        entry = Decimal(level.entry)
        if entry <= previous_entry:
            raise _refusal("entry thresholds increase strictly along the levels", f"levels[{index}].entry")
        kept = Decimal(level.kept_at or level.entry)
        if kept > entry:
            raise _refusal("retain is at most the level's entry", f"levels[{index}].retain")
        if kept < previous_kept:
            raise _refusal("retain thresholds do not decrease along the levels", f"levels[{index}].retain")
        previous_entry, previous_kept = entry, kept


def _check_schedule(tiers: Tiers) -> None:
    window, review = tiers.window, tiers.review
    if isinstance(window, LifetimeWindow):
        for name in ("review", "downgrade"):
            if getattr(tiers, name) is not None:
                raise _refusal(f"a lifetime window is never reviewed: it takes no {name}", name)
        return
    if review is None or review.at == "window_end":
        return
    same_period = isinstance(window, CalendarWindow) and window.period == review.period
    if not (isinstance(window, RollingWindow) or same_period):
        message = "a calendar review goes with a rolling window, or a calendar window of the same period"
        raise _refusal(message, "review.at")


def _condition_fields(items: Sequence[Any], path: str) -> Iterator[tuple[str, str]]:
    """(path, field) of every condition under the items, depth first."""
    for index, item in enumerate(items):
        here = f"{path}[{index}]"
        if isinstance(item, Condition):
            yield f"{here}.field", item.field
        elif isinstance(item, AnyGroup):
            yield from _condition_fields(item.any, f"{here}.any")
        elif isinstance(item, AllGroup):
            yield from _condition_fields(item.all, f"{here}.all")
        elif isinstance(item, NotGroup):
            yield from (
                (where.replace(f"{here}.not[0]", f"{here}.not"), name)
                for where, name in _condition_fields([item.not_], f"{here}.not")
            )


def _check_metric_conditions(metric: PointsMetric | SumMetric | CountMetric) -> None:
    if isinstance(metric, PointsMetric):
        return
    parts: list[tuple[str, list[Any]]] = [("metric.conditions", list(metric.conditions))]
    if isinstance(metric, SumMetric):
        if metric.field.startswith(("customer.", "occurred_at.")):
            raise _refusal("the metric sums a field of the event data", "metric.field")
        if metric.less is not None:
            parts.append(("metric.less.conditions", list(metric.less.conditions)))
            if metric.less.field.startswith(("customer.", "occurred_at.")):
                raise _refusal("the metric sums a field of the event data", "metric.less.field")
    for base, conditions in parts:
        try:
            check_condition_tree(conditions, base)
        except ServiceError as error:
            raise _refusal(error.message, str(error.details.get("field", base))) from None
        for where, name in _condition_fields(conditions, base):
            if name in TIER_FIELDS:
                raise _refusal(f"the metric's conditions cannot read {name} (the metric would depend on itself)", where)


def check_threshold_places(tiers: Tiers, decimals: int, field: str = "tiers") -> None:
    """A `points` metric's thresholds have at most the asset's `decimals` places (`amount_too_many_decimals`, as
    caps are refused); `field` names the tiers object (`programme.tiers`)."""
    if not isinstance(tiers.metric, PointsMetric):
        return
    for index, level in enumerate(tiers.levels):
        for name in ("entry", "retain"):
            text = getattr(level, name)
            if text is not None and _places(text) > decimals:
                where = f"{field}.levels[{index}].{name}"
                message = f"has {_places(text)} decimal places; the asset allows {decimals}"
                raise ServiceError("amount_too_many_decimals", message, field=where, decimals=decimals)


# rules that need tiers ------------------------------------------------------------------------------------------
def rule_tier_uses(conditions: Sequence[Any], actions: Sequence[Any]) -> Iterator[tuple[str, str]]:
    """(path relative to the rule, what) of every use a rule makes of tiers: an action's `multiply`, a condition
    reading a tier field."""
    for index, action in enumerate(actions):
        if getattr(action, "multiply", None) is not None:
            yield f"actions[{index}].multiply", "multiplies by the recipient's tier"
    for where, name in _condition_fields(conditions, "conditions"):
        if name in TIER_FIELDS:
            yield where, f"reads {name}"


def check_rule_tiers(
    conditions: Sequence[Any], actions: Sequence[Any], stop_processing: bool, *, has_tiers: bool, base: str = ""
) -> None:
    """Refuse (`field_invalid`, naming the element under `base`) a rule that uses tiers in a programme without
    them, and a `customer.tier_progress` condition the replay could not decide exactly: one inside a group, or in a
    rule that stops processing (reports/i33-tiers-plan.md section 2.1)."""
    prefix = f"{base}." if base else ""
    for where, what in rule_tier_uses(conditions, actions):
        if not has_tiers:
            message = f"the rule {what}, but the programme defines no tiers"
            raise ServiceError("field_invalid", message, field=f"{prefix}{where}")
    for where, name in _condition_fields(conditions, "conditions"):
        if name != PROGRESS_FIELD:
            continue
        nested = where.count("[") > 1
        if nested or stop_processing:
            why = "inside a group" if nested else "in a rule that stops processing"
            message = f"{PROGRESS_FIELD} may be read only by a top-level condition of a rule that does not stop " + (
                f"processing (this one is {why})"
            )
            raise ServiceError("field_invalid", message, field=f"{prefix}{where}")
