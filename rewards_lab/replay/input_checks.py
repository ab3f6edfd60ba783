"""Replay inputs that would make a forecast silently wrong: refused, or warned about (issue 27).

Refused (a ServiceError, the CLI's error envelope): what cannot mean anything (a customers table without `id`,
a row without one, a column of a type no rule can read). Warned about: what may be meant but is almost always
a mistake, and whose forecast would be quietly wrong (zero, or missing whole rules): a customers table none of
whose ids names a customer of the history, no event of a type any rule is for, rules reading fields no event
has, an empty history, redemptions of which none was redeemed, refunds none of whose originals is in the
history. A warning is
- on the result (`warnings`, a tuple of messages), which the CLI prints in its summary and on stderr;
- a Python warning of the category ReplayInputWarning, shown every time (not once per line, the default for
  UserWarning: a notebook that replays a second time must see it again).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rewards_lab.contract.errors import ServiceError
from rewards_lab.replay.sql_values import FieldSource

if TYPE_CHECKING:
    from rewards_lab.replay.compiler import CompiledProgramme


class ReplayInputWarning(UserWarning):
    """A replay input that probably makes the forecast wrong (see the module docstring)."""


warnings.filterwarnings("always", category=ReplayInputWarning)

FIELD_LIST = 5  # fields named in one warning


def emit(messages: Iterable[str], stacklevel: int = 3) -> None:
    """Each message as a Python warning (ReplayInputWarning)."""
    for message in messages:
        warnings.warn(message, ReplayInputWarning, stacklevel=stacklevel)


# customers --------------------------------------------------------------------------------------------------
_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
_REFERENCE_TYPES: tuple[str, ...] = ("VARCHAR", *_INTEGERS, "HUGEINT", "UHUGEINT", "UUID")


def check_customer_types(types: Mapping[str, Any], readable: Any) -> None:
    """Refuse a customers table whose roles or attribute columns have a type rules cannot read: `id` and
    `external_id` text or whole numbers, `country` text; `readable(kind)`: whether an attribute column's DuckDB
    type is one conditions read (segments and attributes are checked where they are read, with their shapes)."""
    for role in ("id", "external_id", "country"):
        if role not in types:
            continue
        kind = types[role]
        upper, type_id = str(kind).upper(), getattr(kind, "id", "")
        allowed = ("VARCHAR",) if role == "country" else _REFERENCE_TYPES
        if upper not in allowed and upper != "JSON" and type_id != "enum":
            raise ServiceError(
                "field_invalid",
                f"customers: {role} must be {'text' if role == 'country' else 'text or a whole number'}, not {kind}",
                field=f"customers.{role}",
            )
    for column, kind in types.items():
        if column in ("id", "external_id", "country", "segments", "attributes"):
            continue
        if not readable(kind):
            raise ServiceError(
                "field_invalid",
                f"customers: the column {column!r} is of type {kind}, which no rule can read (attributes are "
                "text, numbers, booleans or lists): write it as text (a date as its ISO form) or a number",
                field=f"customers.{column}",
            )


def unnamed_rows_error(count: int) -> ServiceError:
    return ServiceError(
        "field_required",
        f"customers: {count} row(s) have no id (every customer needs one; no event or beneficiary could name them)",
        field="customers.id",
    )


def no_customer_matches(events: int, customers: int) -> str:
    return (
        f"customers: none of the {customers:,} customers' id or external_id is the customer_id of any of the "
        f"{events:,} events: every customer.* condition reads nothing and every beneficiary is not found (a table "
        "of another environment, or ids in another form?)"
    )


# events -----------------------------------------------------------------------------------------------------
def event_warnings(
    events: int, typed: int, plans: Sequence[CompiledProgramme], field: Any, event_types: Iterable[str]
) -> list[str]:
    """Warnings about the history: no events; none of a type the rules are for (`typed`: how many are); fields
    the rules read that no event can have (`field(name)`: its FieldSource)."""
    found: list[str] = []
    if events == 0:
        return ["events: the history has no events: the forecast issues nothing"]
    types = sorted(set(event_types))
    if types and typed == 0:
        found.append(
            f"events: none of the {events:,} events is of a type the rules are for ({', '.join(map(repr, types))}): "
            "the forecast issues nothing"
        )
    names = list(dict.fromkeys(name for plan in plans for name in plan.fields))
    sources: dict[str, FieldSource] = {name: field(name) for name in names}
    missing = [name for name, source in sources.items() if source.kind == "missing"]
    unreadable = [name for name, source in sources.items() if source.kind == "never"]
    if missing:
        found.append(
            f"events: the rules read {_listed(missing)}, which no event has (no such column or field): their "
            "conditions never hold and their amounts are nothing"
        )
    if unreadable:
        found.append(
            f"events: the rules read {_listed(unreadable)}, of a type no condition reads (a date, a time, bytes, "
            "a STRUCT or a MAP): their comparisons never hold"
        )
    return found


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:FIELD_LIST])
    return shown + (f" and {len(names) - FIELD_LIST} more" if len(names) > FIELD_LIST else "")


NO_REDEMPTIONS = "redemptions: the table has no rows: nothing was spent"


# outcomes ---------------------------------------------------------------------------------------------------
def outcome_warnings(totals: Mapping[str, Any], given_redemptions: int, reverses: bool) -> list[str]:
    """Warnings read from a replay's totals: redemptions given, none of them redeemed; a programme with reverse
    rules none of whose refunds took anything back, some because their original is not in the history."""
    found: list[str] = []
    if given_redemptions and not totals.get("redemptions"):
        found.append(
            f"redemptions: none of the {given_redemptions:,} redemptions was redeemed (their customers had no "
            "balance then: customer ids in another form, or times before the history?): nothing was spent"
        )
    not_found = int(totals.get("failed_by_code", {}).get("original_not_found", 0))
    if reverses and not_found and not totals.get("reversals"):
        found.append(
            f"events: no refund took anything back, and {not_found:,} name no event of the history as their "
            "original (original_not_found: external ids in another form, or a history that starts later?)"
        )
    return found
