"""Binding an operation of the registry (`contract.operations`) to a handler: the shared steps of a handler
(authorise, read the Idempotency-Key and the page), the handler of an operation that only calls a service
function, and the OpenAPI extensions of every operation (`x-permission`, `x-idempotent`, `x-error-codes`, its
body, success response and query parameters), all read from the registry entry.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from rewards_lab.api import in_flight
from rewards_lab.api.context import database_of, json_body, principal_of, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.openapi_doc import (
    idempotency_header,
    model_of,
    query_parameters,
    responds_media,
    responds_model,
)
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.operations import Operation, operation
from rewards_lab.contract.pagination import CURSOR_KEY_LABEL, DEFAULT_LIMIT, PageRequest
from rewards_lab.contract.permissions import Permission
from rewards_lab.security import access

Endpoint = Callable[..., Awaitable[Response]]
# The headers of an operation's file answer (name -> what it says), documented on its success response.
FILE_HEADERS: dict[str, dict[str, str]] = {
    "export_events": {
        "X-Export-Until": "The end of the range this export reads (the request's until, else the time of the "
        "first answer): pass it as until when resuming",
        "X-Export-Next-After": "Present when more events follow: the external_event_id of this answer's last "
        "event, percent-encoded, to pass (decoded) as after",
        "X-Export-Rows": "How many events this answer holds",
    }
}
# Request models by name, for components.schemas (the handlers parse their bodies themselves).
REQUEST_MODELS: dict[str, type[BaseModel]] = {}


def openapi_extra(op: Operation) -> dict[str, Any]:
    """The OpenAPI extensions of an operation, merged by FastAPI into its entry of the document."""
    extra: dict[str, Any] = {}
    if op.public:
        extra["security"] = []  # no principal yet: the password (and second factor) make one
    if op.permission is not None:
        extra["x-permission"] = op.permission.value
    extra["x-idempotent"] = op.idempotency
    extra["x-error-codes"] = op.error_codes
    if op.idempotency != "none":
        extra["parameters"] = [idempotency_header(required=op.idempotency == "required")]
    if op.request is not None:
        REQUEST_MODELS[op.request.__name__] = op.request
        schema = {"$ref": f"#/components/schemas/{op.request.__name__}"}
        # A body whose every field has a default may be left out (parse_body reads no body as `{}`).
        required = any(field.is_required() for field in op.request.model_fields.values())
        extra["requestBody"] = {"required": required, "content": {"application/json": {"schema": schema}}}
    if op.response is not None:
        extra |= responds_model(op.status, op.response, op.response_shape)
    if op.media:
        extra |= responds_media(op.status, op.media, FILE_HEADERS.get(op.name, {}))
    if op.listing or op.filters:
        typed = {name: dict(schema) for name, schema in op.filter_schemas.items()}
        extra["parameters"] = query_parameters(*op.filters, listing=op.listing == "page", sorts=op.sorts, typed=typed)[
            "parameters"
        ]
    return extra


def authorised(request: Request, permission: Permission) -> access.Principal:
    principal = principal_of(request)
    principal.require(permission.value)
    return principal


def may_override(principal: access.Principal) -> bool:
    """Whether the caller may publish past a failed forecast guard and remove or loosen guards."""
    return Permission.REWARDS_GUARDS_OVERRIDE.value in principal.permissions


def idempotency_key(request: Request, *, required: bool) -> str | None:
    """The request's Idempotency-Key; a handler holds it (`in_flight.holding`) from before it reads the body."""
    key = request.headers.get("idempotency-key")
    if key is None and required:
        raise ServiceError("idempotency_key_required", field="Idempotency-Key")
    return key


MAX_LIMIT_TEXT_CHARS = 20  # a `limit` longer than this is no number the schema allows (1..100)
_INTEGRAL_RE = re.compile(r"[+-]?[0-9]+(\.0*)?")


def _limit(raw: str | None) -> int:
    """`limit` from the query: the document declares an integer, and JSON Schema counts `14.0` as the integer 14,
    so an integral decimal is accepted as well; range checks stay with `check_page_request`."""
    if raw is None:
        return DEFAULT_LIMIT
    if len(raw) > MAX_LIMIT_TEXT_CHARS or not _INTEGRAL_RE.fullmatch(raw):
        raise ServiceError("field_invalid", "limit must be a whole number", field="limit")
    return int(raw.partition(".")[0])


def page_of(request: Request) -> PageRequest:
    """Cursor pagination from the query: `limit` (default 25, max 100), `cursor` (an empty one is no cursor: the
    first page), `sort`, `direction`."""
    query = request.query_params
    limit = _limit(query.get("limit"))
    cursor = query.get("cursor") or None
    direction = query.get("direction", "asc")
    key = database_of(request).secret_box.derive_key(CURSOR_KEY_LABEL)  # cursors signed under the database's key
    if direction == "asc":
        return PageRequest(limit, cursor, query.get("sort"), "asc", key)
    if direction == "desc":
        return PageRequest(limit, cursor, query.get("sort"), "desc", key)
    raise ServiceError("field_invalid", "direction must be asc or desc", field="direction")


def listed(page: Any, request: Request) -> Response:
    return success(page.data, request_id_of(request), next_cursor=page.next_cursor, has_more=page.has_more)


def serve(name: str, service: Callable[..., Any]) -> tuple[str, Endpoint]:
    """The handler of an operation that is one service call: authorise, read the path parameters and the body,
    call `service(database, scope, *path, [body], [page], **filters, [idempotency_key])` off the event loop,
    wrap the envelope. The service's return annotation must be the registry's response."""
    op = operation(name)
    permission = op.permission
    assert permission is not None, name
    assert model_of(typing.get_type_hints(service)["return"]) == (op.response, op.response_shape), name
    path_params = op.path_parameters
    body, listing, filters, status = op.request, op.listing, op.filters, op.status
    keyed, key_required = op.idempotency != "none", op.idempotency == "required"
    # A service that loosens forecast guards when asked is told whether the caller may (issue 31).
    overrides = "may_override" in inspect.signature(service).parameters

    async def endpoint(request: Request, **path_values: str) -> Response:
        principal = authorised(request, permission)
        key = idempotency_key(request, required=key_required) if keyed else None
        with in_flight.holding(database_of(request), principal.scope, key):  # before the body: see api.in_flight
            args: list[Any] = [path_values[param] for param in path_params]
            if body is not None:
                args.append(await json_body(request, body))
            kwargs: dict[str, Any] = {f: request.query_params.get(f) for f in filters}
            if listing == "page":
                args.append(page_of(request))
            if keyed:
                kwargs["idempotency_key"] = key
            if overrides:
                kwargs["may_override"] = may_override(principal)
            result = await run_in_threadpool(service, database_of(request), principal.scope, *args, **kwargs)
        if listing == "page":
            return listed(result, request)
        return success(result, request_id_of(request), status)

    endpoint.__name__ = name
    parameters = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    parameters += [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=str) for p in path_params]
    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=Response)  # type: ignore[attr-defined]
    return name, endpoint
