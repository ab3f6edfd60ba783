"""The one list of time zone names the API and programme files accept, and the one validator for it.

The names are the tz database's (Python's zoneinfo) minus the files that are not zones: `localtime` (a link to
the host's own zone, so a programme's periods would depend on the machine that reads it, and the SQL engines
do not know the name), `posixrules` (a rule template) and `Factory` (a placeholder whose abbreviation is "-00").
A name is looked up in this list, never opened as a path.
"""

from __future__ import annotations

from functools import cache
from zoneinfo import available_timezones

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.validation import custom_error

NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@cache
def zone_names() -> frozenset[str]:
    """Every IANA time zone name this system's tz database knows."""
    return frozenset(available_timezones()) - NOT_ZONES


def check_zone_name(value: str) -> str:
    """`value` if it is an IANA time zone name, else `field_invalid` (for the field being validated)."""
    if value not in zone_names():
        raise custom_error(ServiceError("field_invalid", f"{value!r} is not an IANA time zone such as Europe/London"))
    return value
