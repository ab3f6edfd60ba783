"""One exception class per error `type` of the seed's registry, each carrying what the envelope said."""

from __future__ import annotations

from typing import Any

import pydantic

from rewards_lab.contract.errors import ErrorType
from rewards_lab.contract.resources import ForecastResult, GuardCheckResult


class ApiError(Exception):
    """A failure envelope: `type`, `code`, `message`, `details`, the `request_id` and the HTTP status.

    Clients switch on the class (the seed's `type`) for behaviour and on `code` for the message.
    """

    error_type: str = "api_error"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        request_id: str | None = None,
        http_status: int | None = None,
        error_type: str | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.request_id = request_id
        self.http_status = http_status
        if error_type is not None:
            self.error_type = error_type
        super().__init__(f"{self.error_type} {code}: {message} (request {request_id})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.error_type,
            "code": self.code,
            "message": self.message,
            "details": self.details,
            "request_id": self.request_id,
            "http_status": self.http_status,
        }


class ValidationError(ApiError):
    error_type = ErrorType.VALIDATION.value


class AuthenticationError(ApiError):
    error_type = ErrorType.AUTHENTICATION.value


class AuthorizationError(ApiError):
    error_type = ErrorType.AUTHORIZATION.value


class NotFoundError(ApiError):
    error_type = ErrorType.NOT_FOUND.value


class MethodNotAllowedError(ApiError):
    """The path exists but not with this method (405); `details.allowed` lists the methods it has."""

    error_type = ErrorType.METHOD_NOT_ALLOWED.value


class ConflictError(ApiError):
    error_type = ErrorType.CONFLICT.value


class ForecastGuardFailed(ConflictError):
    """`forecast_guard_failed` (409): the server refused to publish a draft whose forecast guard fails on its
    stored events. `forecast` is the guard table the refusal's details carry, parsed as the forecast endpoint's
    answer (`ForecastResult`: the window, the events replayed and a row per guard: its limit, the draft's and the
    live version's figures, the figure judged and pass/fail); `checks` its rows, `failed` the failing ones.
    Publishing past it takes `guard_override` and a key with rewards.guards.override. `forecast` is None when
    the details do not hold a table (an older server): `details` still holds what came."""

    code_name = "forecast_guard_failed"

    def __init__(self, code: str, message: str, **kwargs: Any) -> None:
        super().__init__(code, message, **kwargs)
        try:
            self.forecast: ForecastResult | None = ForecastResult.model_validate(self.details)
        except pydantic.ValidationError:
            self.forecast = None

    @property
    def checks(self) -> list[GuardCheckResult]:
        return [] if self.forecast is None else list(self.forecast.checks)

    @property
    def failed(self) -> list[GuardCheckResult]:
        return [check for check in self.checks if not check.passed]


class IdempotencyError(ApiError):
    error_type = ErrorType.IDEMPOTENCY.value


class RateLimitError(ApiError):
    error_type = ErrorType.RATE_LIMIT.value


class ServerError(ApiError):
    error_type = ErrorType.SERVICE.value


class ApiConnectionError(ApiError):
    """No answer at all (refused, reset, timed out) after the retries the request allowed."""

    error_type = "connection_error"


class UnexpectedResponse(ApiError):
    """An answer that is not the seed's envelope, or whose `data` does not fit the contract's model."""

    error_type = "unexpected_response"


ERROR_CLASSES: dict[str, type[ApiError]] = {
    cls.error_type: cls
    for cls in (
        ValidationError,
        AuthenticationError,
        AuthorizationError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        IdempotencyError,
        RateLimitError,
        ServerError,
    )
}
assert set(ERROR_CLASSES) == {t.value for t in ErrorType}, "one exception class per error type"
# Codes with a class of their own (a subclass of their type's), for what their details carry.
CODE_CLASSES: dict[str, type[ApiError]] = {ForecastGuardFailed.code_name: ForecastGuardFailed}


def error_from_envelope(body: dict[str, Any], http_status: int, request_id: str | None) -> ApiError:
    """The exception for a failure envelope; an unknown `type` still raises (as the base class)."""
    error = body.get("error")
    if not isinstance(error, dict):
        return UnexpectedResponse("envelope_invalid", "the failure has no error object", http_status=http_status)
    meta = body.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("request_id"), str):
        request_id = meta["request_id"]
    error_type = str(error.get("type", "api_error"))
    details = error.get("details")
    code = str(error.get("code", "unknown"))
    cls = ERROR_CLASSES.get(error_type, ApiError)
    special = CODE_CLASSES.get(code)
    if special is not None and special.error_type == error_type:  # the code's class only under its own type
        cls = special
    return cls(
        code,
        str(error.get("message", "")),
        details=details if isinstance(details, dict) else {},
        request_id=request_id,
        http_status=http_status,
        error_type=error_type,
    )
