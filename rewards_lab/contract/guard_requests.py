"""Forecast guards on the wire (issue 19; README "Forecast gate"): limits on what a replay of recent history
through a draft may show before the draft may be published.

A programme (its draft, frozen into each version like its caps) may declare `guards`:

- `{"metric": "issued", "period": "day" | "week" | "month" | "year", "max": "120000"}`: the largest total the
  draft issues in one calendar period of the history (the programme's timezone) may not exceed `max`;
- `{"metric": "liability_delta", "max": "50000"}`: the draft's projected liability at the end of the forecast
  minus the published version's may not exceed `max` (negative: the draft must lower it);
- `{"metric": "ceiling_exhausted_within_days", "min": 90}`: the asset's supply ceiling may not run out within
  `min` days of the end of the history.

The server enforces them (issue 31): `POST /reward-programs/{id}/publish` replays the tenant's own stored events
of the last `guard_window_days` (1..365, default 90; frozen into each version like the guards) through the draft
and the live version with the replay engine (`service.programme_forecast`, the same `forecasting.gate` the lab
runs) and refuses a failing draft with `forecast_guard_failed` (409, the guard table in `details.checks`).
`POST /reward-programs/{id}/forecast` returns the same table without publishing. Publishing despite a failed
guard takes `guard_override` (a reason) AND the permission `rewards.guards.override`; the override is recorded
on the published version (reason, who gave it, when) and in the audit trail. Removing or loosening guards
(a guard removed, an `issued`/`liability_delta` max raised, a ceiling `min` lowered, the window shortened) takes
the same permission. The lab's gate (`rewards-lab push --history`, `Lab.publish(history=...)`, notebook 05)
still evaluates them on a file before pushing.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, WithJsonSchema

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.request_base import RequestModel, whole_number
from rewards_lab.contract.validation import custom_error

MAX_GUARDS = 10
MAX_GUARD_DAYS = 36_500  # a hundred years: beyond any forecast's horizon
MAX_OVERRIDE_REASON = 500
DEFAULT_GUARD_WINDOW_DAYS = 90  # the days of stored events the server replays to check the guards
MAX_GUARD_WINDOW_DAYS = 365
GuardPeriod = Literal["day", "week", "month", "year"]
METRICS = ("issued", "liability_delta", "ceiling_exhausted_within_days")

_LIMIT_TEXT = re.compile(r"-?[0-9]{1,20}(\.[0-9]{1,18})?")  # the JSON Schema patterns below say the same


def _limit(value: object, *, signed: bool) -> str:
    """A decimal string (or an exact JSON number) of the asset's units; only a liability delta may be negative."""
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        value = str(value)
    text = value if isinstance(value, str) else ""
    if not _LIMIT_TEXT.fullmatch(text) or (text.startswith("-") and not signed):
        sign = "" if signed else "non-negative "
        raise custom_error(ServiceError("field_invalid", f'must be a {sign}decimal string such as "120000"'))
    return text


UnsignedLimit = Annotated[
    str,
    BeforeValidator(lambda value: _limit(value, signed=False)),
    WithJsonSchema({"type": "string", "pattern": r"^[0-9]{1,20}(\.[0-9]{1,18})?$", "examples": ["120000"]}),
]
SignedLimit = Annotated[
    str,
    BeforeValidator(lambda value: _limit(value, signed=True)),
    WithJsonSchema({"type": "string", "pattern": r"^-?[0-9]{1,20}(\.[0-9]{1,18})?$", "examples": ["50000"]}),
]


Days = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_GUARD_DAYS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_GUARD_DAYS}),
]


GuardWindowDays = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_GUARD_WINDOW_DAYS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_GUARD_WINDOW_DAYS, "default": 90}),
]


class IssuedGuard(RequestModel):
    """The largest total the draft issues in one calendar period of the history may not exceed `max`."""

    metric: Literal["issued"]
    period: GuardPeriod
    max: UnsignedLimit


class LiabilityDeltaGuard(RequestModel):
    """Draft minus published projected liability at the end of the forecast may not exceed `max`."""

    metric: Literal["liability_delta"]
    max: SignedLimit


class CeilingGuard(RequestModel):
    """The supply ceiling may not run out within `min` days of the end of the history."""

    metric: Literal["ceiling_exhausted_within_days"]
    min: Days


def _guard_shape(value: Any) -> str | None:
    metric = value.get("metric") if isinstance(value, dict) else getattr(value, "metric", None)
    return f"{metric}_guard" if metric in METRICS else None


Guard = Annotated[
    Annotated[IssuedGuard, Tag("issued_guard")]
    | Annotated[LiabilityDeltaGuard, Tag("liability_delta_guard")]
    | Annotated[CeilingGuard, Tag("ceiling_exhausted_within_days_guard")],
    Discriminator(
        _guard_shape,
        custom_error_type="field_invalid",
        custom_error_message="metric must be one of issued, liability_delta, ceiling_exhausted_within_days",
    ),
]
Guards = Annotated[list[Guard], Field(max_length=MAX_GUARDS)]


class GuardOverride(RequestModel):
    """Why the draft is published although a guard failed (recorded with the version)."""

    reason: Annotated[str, Field(min_length=1, max_length=MAX_OVERRIDE_REASON)]


class PublishRequest(RequestModel):
    """An optional body of publish: without it, publishing means what it always meant."""

    guard_override: GuardOverride | None = None
