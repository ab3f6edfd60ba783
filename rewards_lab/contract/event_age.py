"""How old and how far ahead an event's `occurred_at` may be (issue 27; docs/decisions.md, "Events and the worker").

- At intake, an `occurred_at` more than `MAX_FUTURE_SKEW` after the service's clock is refused (`field_invalid`
  naming `occurred_at`): a clock a little ahead is tolerated, a date in the future is not.
- A programme's `max_event_age_days` bounds how old a live event may be when it is received: an event whose
  `occurred_at` is more than that many days before its receipt is processed without rewards from the programme
  (its executions say `event_too_old`). `null` puts no bound (backfills). Optional and additive: a programme
  created without it gets `DEFAULT_MAX_EVENT_AGE_DAYS`; a programme stored before it existed has no bound.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

from rewards_lab.contract.request_base import whole_number

MAX_FUTURE_SKEW = timedelta(minutes=5)
DEFAULT_MAX_EVENT_AGE_DAYS = 30
MAX_EVENT_AGE_DAYS = 36_600  # a hundred years (as expiry's days)
EVENT_TOO_OLD = "event_too_old"

MaxEventAgeDays = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(ge=1, le=MAX_EVENT_AGE_DAYS, strict=True),
    WithJsonSchema(
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_EVENT_AGE_DAYS,
            "description": "How many days before its receipt a live event may have occurred and still be rewarded "
            "by the programme (null: no bound, for backfills).",
        }
    ),
]
