"""Per-request context: the request id, the authenticated principal, and the parsed JSON body."""

from __future__ import annotations

import random
import re
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel

from rewards_lab.api.rate_limits import RateLimiter
from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limits import MAX_BODY_BYTES
from rewards_lab.contract.scope import EnvironmentName
from rewards_lab.contract.validation import validate
from rewards_lab.security import sessions
from rewards_lab.security.access import Principal, authenticate
from rewards_lab.store.api import Store

ModelT = TypeVar("ModelT", bound=BaseModel)
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def request_id_of(request: Request) -> str:
    """The client's X-Request-ID when it is a sane token, else one we make (`req_<uuid4 hex>`)."""
    existing: str | None = getattr(request.state, "request_id", None)
    if existing:
        return existing
    request.state.request_id = request_id_from(request.headers.get("x-request-id", ""))
    return str(request.state.request_id)


def request_id_from(supplied: str) -> str:
    """The rule of `request_id_of` on a raw header value."""
    if supplied and _REQUEST_ID_RE.fullmatch(supplied):
        return supplied
    # Not a secret, only unique: the Mersenne Twister (no system call; uuid4 reads os.urandom, which releases the
    # GIL on the event loop thread and then waits to get it back from the busy intake and worker threads).
    return f"req_{random.getrandbits(128):032x}"


def database_of(request: Request) -> Store:
    database: Store = request.app.state.database
    return database


def _environment(value: str | None) -> EnvironmentName:
    if value == "sandbox":
        return "sandbox"
    if value == "production":
        return "production"
    raise ServiceError("field_invalid", "X-Environment must be sandbox or production", field="X-Environment")


def principal_of(request: Request) -> Principal:
    """Authenticate the bearer key or session and check X-Organization-ID and X-Environment against it (never
    trusted). A session has no environment of its own: it acts in the one X-Environment names."""
    headers = request.headers
    return authorise(
        database_of(request),
        request.app.state.rate_limiter,
        request.scope.setdefault("state", {}),
        headers.get("authorization", ""),
        headers.get("x-organization-id"),
        headers.get("x-environment"),
    )


def authorise(
    database: Store,
    limiter: RateLimiter,
    state: dict[str, Any],
    authorization: str,
    organization: str | None,
    environment_header: str | None,
) -> Principal:
    """`principal_of` on raw header values (the POST /events hot path has no Request). Leaves the principal (for
    the request log) and the rate state (for the RateLimit headers) in the request's `state` as it goes, so an
    error raised half-way still shows what was known."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ServiceError("authentication_required", "send Authorization: Bearer <api key>", field="Authorization")
    if sessions.is_session_token(token.strip()):  # a person's session acts in the environment the request names
        principal = sessions.authenticate_session(database, token.strip(), _environment(environment_header))
    else:
        principal = authenticate(database, token.strip())
    state["principal"] = principal  # for the request log
    rate = limiter.charge(
        f"{principal.scope.organization_id}/{principal.scope.environment}", principal.rate_limit_per_minute
    )
    state["rate"] = rate
    if rate.exceeded:
        raise ServiceError("rate_limit_exceeded", retry_after_s=rate.reset_s, limit=rate.limit)
    if not organization:
        raise ServiceError("field_required", "X-Organization-ID is required", field="X-Organization-ID")
    if organization != principal.scope.organization_id:
        raise ServiceError("organization_mismatch", field="X-Organization-ID")
    environment = _environment(environment_header)
    if environment != principal.scope.environment:
        raise ServiceError(
            "environment_mismatch",
            f"this key acts in {principal.scope.environment}, not {environment}",
            field="X-Environment",
            key_environment=principal.scope.environment,
        )
    return principal


def parse_body(raw: bytes, model: type[ModelT]) -> ModelT:
    """`json_body` on bytes already read. The limit is enforced while reading (`body_limit.LimitedBody`); checked
    again here for callers that read bodies another way. Numbers out of range are refused by field (see
    `jsonutil.loads_request`)."""
    if len(raw) > MAX_BODY_BYTES:
        raise ServiceError("request_too_large", limit_bytes=MAX_BODY_BYTES)
    try:
        data: Any = jsonutil.loads_request(raw) if raw else {}
    except ValueError:  # not JSON, or not UTF-8
        raise ServiceError("request_malformed") from None
    except RecursionError:  # nested beyond the parser's reach (about 950 levels; the C parser checks its depth)
        raise ServiceError("request_malformed", "the request body nests deeper than the service reads") from None
    return validate(model, data)


async def json_body(request: Request, model: type[ModelT]) -> ModelT:
    """The body parsed exactly (numbers as Decimal) and validated; errors name the field."""
    return parse_body(await request.body(), model)
