"""The deprecated operations of /v1 and the headers they announce themselves with, on every answer.

The seed: a deprecated endpoint announces itself in the `Deprecation` and `Sunset` response headers. Each answer
of a deprecated path carries them, failures included (401, 422, 429, 500...), because `api.app.ResponseHeaders`
adds them to every response by path rather than leaving it to the handler:

- `Deprecation: @<epoch seconds>` (RFC 9745): when the deprecation took effect;
- `Sunset: <HTTP-date>` (RFC 8594): when the endpoint stops working;
- `Link`: `rel="deprecation"` to the operation's own entry in the OpenAPI document (a JSON pointer fragment;
  its description names the replacement), and `rel="successor-version"` to the replacement when that is a
  concrete URL (a replacement with a path parameter has none: a URL never carries a literal `{id}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

from rewards_lab.api.envelope import API_VERSION
from rewards_lab.contract.operations import OPERATIONS

PREFIX = f"/{API_VERSION}"
DEPRECATED_AT = datetime(2026, 11, 22, tzinfo=UTC)  # when the AI pair was deprecated (announced)
SUNSET_AT = datetime(2027, 2, 6, tzinfo=UTC)  # the seed's sunset date


def _pointer(path: str, method: str) -> str:
    """The JSON pointer of an operation in the OpenAPI document (RFC 6901: `~` as `~0`, `/` as `~1`)."""
    return f"/paths/{path.replace('~', '~0').replace('/', '~1')}/{method.lower()}"


@dataclass(frozen=True, slots=True)
class Deprecated:
    method: str
    path: str  # relative to /v1, as the OpenAPI document lists it
    replacement: str  # "POST /ai/knowledge/search", as a person reads it
    successor_url: str | None  # the replacement's URL under /v1 when it has no path parameter
    deprecated_at: datetime = DEPRECATED_AT
    sunset_at: datetime = SUNSET_AT

    @property
    def deprecation(self) -> str:
        return f"@{int(self.deprecated_at.timestamp())}"

    @property
    def sunset(self) -> str:
        return format_datetime(self.sunset_at, usegmt=True)

    @property
    def link(self) -> str:
        links = [f'<{PREFIX}/openapi.json#{_pointer(self.path, self.method)}>; rel="deprecation"']
        if self.successor_url is not None:
            links.append(f'<{PREFIX}{self.successor_url}>; rel="successor-version"')
        return ", ".join(links)

    def headers(self) -> dict[str, str]:
        return {"Deprecation": self.deprecation, "Sunset": self.sunset, "Link": self.link}

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        return [(name.lower().encode(), value.encode("latin-1")) for name, value in self.headers().items()]

    def description(self) -> str:
        return (
            f"Deprecated since {self.deprecated_at:%Y-%m-%d}; works until its sunset on {self.sunset_at:%Y-%m-%d}. "
            f"Use `{self.replacement}` instead. Every answer carries `Deprecation`, `Sunset` and `Link`."
        )


def _successor_url(replacement: str) -> str | None:
    """The replacement's path when it is a concrete URL (no path parameter)."""
    path = replacement.partition(" ")[2]
    return None if "{" in path else path


# The deprecated operations of the registry (contract.operations).
DEPRECATED: tuple[Deprecated, ...] = tuple(
    Deprecated(op.method, op.path, op.replacement, _successor_url(op.replacement))
    for op in OPERATIONS.values()
    if op.replacement is not None
)
# Full request path -> the raw header pairs of its every answer (ResponseHeaders looks them up per response).
RAW_HEADERS_BY_PATH: dict[str, list[tuple[bytes, bytes]]] = {PREFIX + d.path: d.raw_headers() for d in DEPRECATED}


def deprecated_operation(path: str, method: str) -> Deprecated | None:
    """The deprecation of an operation of the document (path relative to /v1), if it is deprecated."""
    return next((d for d in DEPRECATED if d.path == path and d.method.lower() == method.lower()), None)


def openapi_headers() -> dict[str, Any]:
    """The response headers of a deprecated operation, for the OpenAPI document."""
    return {
        "Deprecation": {
            "description": "RFC 9745: `@` and the Unix time (seconds) at which the operation was deprecated.",
            "required": True,
            "schema": {"type": "string", "pattern": r"^@[0-9]+$"},
        },
        "Sunset": {
            "description": "RFC 8594: the HTTP-date after which the operation stops working.",
            "required": True,
            "schema": {"type": "string", "pattern": r"^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9:]{8} GMT$"},
        },
        "Link": {
            "description": 'RFC 8288: `rel="deprecation"` (this operation in the document) and, where the '
            'replacement is a fixed URL, `rel="successor-version"`.',
            "required": True,
            "schema": {"type": "string"},
        },
    }
