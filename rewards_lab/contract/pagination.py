"""Cursor pagination: `limit` (default 25, max 100), an opaque `cursor`, `sort` and `direction`.

A cursor holds the list it belongs to, its sort and direction, the last row's sort value (typed) and id, and an
HMAC-SHA256 of all that under a server-side key (`PageRequest.cursor_key`: the API derives it from the database's
secret key, so cursors survive a restart; other callers get a per-process key). A cursor that is not one this
service signed, that belongs to another list, sort or direction, or whose value is not of the sort field's type is
`cursor_invalid`; nothing a client writes into a cursor reaches SQL unchecked. An empty `cursor=` means none.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limits import MAX_CURSOR_CHARS

DEFAULT_LIMIT = 25
MAX_LIMIT = 100
Direction = Literal["asc", "desc"]
CURSOR_KEY_LABEL = "pagination-cursor"  # the label of `SecretBox.derive_key` for cursor signatures
_PROCESS_KEY = secrets.token_bytes(32)  # for PageRequests made without a key (the lab, tests): this process only
_SIGNATURE_BYTES = 16

# The type of each sortable field's values, which a cursor's sort value must have (or be null).
SortKind = Literal["timestamp", "text", "integer"]
SORT_KINDS: dict[str, SortKind] = {
    "created_at": "timestamp",
    "received_at": "timestamp",
    "occurred_at": "timestamp",
    "name": "text",
    "symbol": "text",
    "external_id": "text",
    "amount_minor": "integer",
    "number": "integer",
    "at": "timestamp",  # a tier change's instant  # a programme version's number (NULL for the draft)
}
_TAG_OF_KIND = {"timestamp": "t", "text": "s", "integer": "i"}
_MAX_CURSOR_INT = 2**127


@dataclass(frozen=True, slots=True)
class PageRequest:
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    sort: str | None = None
    direction: Direction = "asc"
    cursor_key: bytes = field(default=_PROCESS_KEY, repr=False, compare=False)


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


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode("ascii"))


def _sign(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _tagged(value: Any) -> tuple[str, Any]:
    if value is None:
        return "n", None
    if isinstance(value, datetime):
        return "t", value.isoformat()
    if isinstance(value, int) and not isinstance(value, bool):
        return "i", value
    if isinstance(value, str):
        return "s", value
    raise TypeError(f"no cursor form for a sort value of type {type(value).__name__}")


def encode_cursor(list_name: str, sort: str, direction: str, position: CursorPosition, key: bytes) -> str:
    tag, value = _tagged(position.sort_value)
    payload = json.dumps([list_name, sort, direction, tag, value, position.last_id], separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_sign(key, payload))}"


def _invalid(message: str | None = None) -> ServiceError:
    return ServiceError("cursor_invalid", message, field="cursor")


def decode_cursor(cursor: str, list_name: str, sort: str, direction: str, key: bytes) -> CursorPosition:
    """The position a cursor names, once its signature, its list, sort and direction and its value's type hold."""
    payload_text, _, signature_text = cursor.partition(".")
    if len(cursor) > MAX_CURSOR_CHARS or not signature_text:
        raise _invalid()
    try:
        payload, signature = _unb64(payload_text), _unb64(signature_text)
    except (binascii.Error, ValueError):  # not base64, or not ASCII
        raise _invalid() from None
    if not hmac.compare_digest(signature, _sign(key, payload)):
        raise _invalid()
    try:
        name, c_sort, c_direction, tag, value, last_id = json.loads(payload)
    except (ValueError, TypeError):  # a signed payload always parses; kept for a key shared by mistake
        raise _invalid() from None
    if (name, c_sort, c_direction) != (list_name, sort, direction) or not isinstance(last_id, str):
        raise _invalid("the cursor belongs to another list, sort or direction")
    return CursorPosition(_typed(tag, value, SORT_KINDS.get(sort)), last_id)


def _typed(tag: object, value: object, kind: SortKind | None) -> Any:
    """The sort value as the type of its field (a datetime for timestamps), or `cursor_invalid`."""
    if tag == "n" and value is None:
        return None
    if kind is not None and tag != _TAG_OF_KIND[kind]:
        raise _invalid("the cursor's value is not of the sort field's type")
    if tag == "s" and isinstance(value, str):
        return value
    if tag == "i" and isinstance(value, int) and not isinstance(value, bool) and abs(value) < _MAX_CURSOR_INT:
        return value
    if tag == "t" and isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise _invalid() from None
    raise _invalid("the cursor's value is not of the sort field's type")
