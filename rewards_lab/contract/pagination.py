"""Cursor pagination: `limit` (default 25, max 100), an opaque `cursor`, `sort` and `direction`.

A cursor encodes the list it belongs to, its sort and the last row's sort key and id; a cursor from another
list, sort or direction, or one that was tampered with, is `cursor_invalid`.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal

from rewards_lab.contract.errors import ServiceError

DEFAULT_LIMIT = 25
MAX_LIMIT = 100
Direction = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    sort: str | None = None
    direction: Direction = "asc"


@dataclass(frozen=True, slots=True)
class CursorPosition:
    sort_value: Any
    last_id: str


def check_page_request(page: PageRequest, sort_fields: tuple[str, ...]) -> str:
    """Validate the request against the list's declared sort fields; returns the sort field to use."""
    if not isinstance(page.limit, int) or isinstance(page.limit, bool) or not 1 <= page.limit <= MAX_LIMIT:
        raise ServiceError("field_invalid", f"limit must be between 1 and {MAX_LIMIT}", field="limit")
    if page.direction not in ("asc", "desc"):
        raise ServiceError("field_invalid", "direction must be asc or desc", field="direction")
    sort = sort_fields[0] if page.sort is None else page.sort  # an empty `sort=` is an invalid value, not absent
    if sort not in sort_fields:
        raise ServiceError(
            "sort_field_invalid",
            f"sort must be one of {', '.join(sort_fields)}",
            field="sort",
            allowed=sort_fields,
        )
    return sort


def encode_cursor(list_name: str, sort: str, direction: str, position: CursorPosition) -> str:
    payload = json.dumps([list_name, sort, direction, position.sort_value, position.last_id], default=str)
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, list_name: str, sort: str, direction: str) -> CursorPosition:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        name, c_sort, c_direction, value, last_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError, UnicodeDecodeError):
        raise ServiceError("cursor_invalid", field="cursor") from None
    if (name, c_sort, c_direction) != (list_name, sort, direction) or not isinstance(last_id, str):
        raise ServiceError("cursor_invalid", "the cursor belongs to another list, sort or direction", field="cursor")
    return CursorPosition(value, last_id)
