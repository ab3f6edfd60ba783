"""Expiry on the wire (issue 19; docs/rules.md "Expiry"): when the points of an asset, or of a programme's rewards,
stop being spendable.

Optional and additive: an asset or programme without `expiry` issues points that never expire.

- `{"after_days": 365}`: each issuance (a lot) expires 365 days after it was issued, to the microsecond;
- `{"at_end_of": "quarter", "after": 1}`: at the end of the calendar quarter after the one it was issued in
  (`after: 0`, the default: at the end of its own quarter), in the programme's timezone (UTC for an asset's own).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, WithJsonSchema

from rewards_lab.contract.request_base import RequestModel, whole_number

MAX_DAYS = 36_600  # a hundred years
MAX_PERIODS = 100
CalendarPeriod = Literal["month", "quarter", "year"]


Days = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_DAYS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_DAYS}),
]
Periods = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=0, le=MAX_PERIODS, strict=True),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_PERIODS, "default": 0}),
]


class ExpiryAfterDays(RequestModel):
    """Each lot expires a fixed number of days after it was issued."""

    after_days: Days


class ExpiryAtEndOf(RequestModel):
    """Each lot expires at the end of a calendar period: its own (`after` 0) or the `after`-th one after it."""

    at_end_of: CalendarPeriod
    after: Periods = 0


def _expiry_shape(value: Any) -> str | None:
    """Which shape a payload means: the one whose key it carries (neither: refused naming both)."""
    if isinstance(value, dict):
        return "at_end_of" if "at_end_of" in value else "after_days"
    if isinstance(value, ExpiryAtEndOf):
        return "at_end_of"
    return "after_days"


Expiry = Annotated[
    Annotated[ExpiryAfterDays, Tag("after_days")] | Annotated[ExpiryAtEndOf, Tag("at_end_of")],
    Discriminator(_expiry_shape),
]
