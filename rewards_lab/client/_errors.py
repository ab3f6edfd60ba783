"""One exception class per error `type` of the seed's registry, each carrying what the envelope said."""

from __future__ import annotations

from typing import Any

from rewards_lab.contract.errors import ErrorType


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
    return ERROR_CLASSES.get(error_type, ApiError)(
        str(error.get("code", "unknown")),
        str(error.get("message", "")),
        details=details if isinstance(details, dict) else {},
        request_id=request_id,
        http_status=http_status,
        error_type=error_type,
    )
