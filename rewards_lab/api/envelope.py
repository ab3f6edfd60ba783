"""The seed's response envelope, on every response: `data` or `error`, and `meta.request_id`, `meta.version`."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError

API_VERSION = "v1"
_META_SCHEMA = {
    "type": "object",
    "required": ["request_id", "version"],
    "properties": {"request_id": {"type": "string"}, "version": {"type": "string", "const": API_VERSION}},
}
ERROR_ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "meta"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "code", "message", "details"],
            "properties": {
                "type": {"type": "string"},
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        },
        "meta": _META_SCHEMA,
    },
}


def _meta(request_id: str) -> dict[str, str]:
    return {"request_id": request_id, "version": API_VERSION}


def _dump(value: Any) -> Any:
    """Python mode, so that Decimals inside free-form data (event data) are written as the JSON numbers the
    client sent, digit for digit; `jsonutil.dumps` writes datetimes as ISO 8601."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if isinstance(value, list):
        return [_dump(item) for item in value]
    return value


def success(data: Any, request_id: str, status_code: int = 200, **extra: Any) -> Response:
    """`extra` carries the list fields (`next_cursor`, `has_more`) beside `data`."""
    body = {"data": _dump(data), **extra, "meta": _meta(request_id)}
    return Response(jsonutil.dumps(body), status_code=status_code, media_type="application/json")


def failure_text(error: ServiceError, request_id: str) -> str:
    """The body of `failure` (the POST /events hot path sends it without a Response object)."""
    return jsonutil.dumps({"error": error.to_dict(), "meta": _meta(request_id)})


def failure(error: ServiceError, request_id: str) -> Response:
    return Response(failure_text(error, request_id), status_code=error.http_status, media_type="application/json")
