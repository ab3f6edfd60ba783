"""An httpx client of the seed's /v1 API, sync and async, relying on the seed's contract alone.

Headers of the seed's Authentication section on every request, the envelope unwrapped into the contract's
models, one exception class per error type, the seed's retry rules, cursor iterators, deprecation warnings.
"""

from rewards_lab.client._clients import AsyncRewardsClient, RewardsClient
from rewards_lab.client._core import (
    SDK_VERSION,
    Call,
    ClientConfig,
    DeprecatedEndpointWarning,
    Download,
    Page,
    RetryPolicy,
)
from rewards_lab.client._errors import (
    CODE_CLASSES,
    ERROR_CLASSES,
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    AuthorizationError,
    ConflictError,
    ForecastGuardFailed,
    IdempotencyError,
    MethodNotAllowedError,
    NotFoundError,
    RateLimitError,
    ServerError,
    UnexpectedResponse,
    ValidationError,
)

__all__ = [
    "CODE_CLASSES",
    "ERROR_CLASSES",
    "SDK_VERSION",
    "ApiConnectionError",
    "ApiError",
    "AsyncRewardsClient",
    "AuthenticationError",
    "AuthorizationError",
    "Call",
    "ClientConfig",
    "ConflictError",
    "DeprecatedEndpointWarning",
    "Download",
    "ForecastGuardFailed",
    "IdempotencyError",
    "MethodNotAllowedError",
    "NotFoundError",
    "Page",
    "RateLimitError",
    "RetryPolicy",
    "RewardsClient",
    "ServerError",
    "UnexpectedResponse",
    "ValidationError",
]
