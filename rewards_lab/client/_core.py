"""The request-building and response-parsing core shared by the sync and the async client.

Both clients do exactly this: `prepare` a call once (headers, body bytes, one X-Request-ID and, for writes that
declare idempotency, one Idempotency-Key), send it, and hand every answer or transport failure to `Attempts`,
which says: done (the parsed `data`), retry after N seconds (unchanged: same bytes, same headers), or fail.
"""

from __future__ import annotations

import os
import random
import re
import sys
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

import httpx

from rewards_lab.client._errors import (
    ApiConnectionError,
    ApiError,
    RateLimitError,
    ServerError,
    UnexpectedResponse,
    error_from_envelope,
)
from rewards_lab.contract import jsonutil

T = TypeVar("T")

SDK_VERSION = "rewards-lab-python/0.1.0"
ENVIRONMENTS = ("sandbox", "production")


class DeprecatedEndpointWarning(DeprecationWarning):
    """The service announced (`Deprecation`, `Sunset` headers) that the endpoint called will be removed.

    `sunset` and `link` are the headers as sent; `deprecated_at` (RFC 9745 `@<epoch>`), `sunset_at` (RFC 8594
    HTTP-date), `successor` (`rel="successor-version"`) and `deprecation_info` (`rel="deprecation"`) are read
    from them, None where absent or in another form (an older server sent `Deprecation: true`)."""

    def __init__(
        self, method: str, path: str, sunset: str | None, link: str | None, deprecation: str | None = None
    ) -> None:
        self.method, self.path, self.sunset, self.link = method, path, sunset, link
        self.deprecated_at = _epoch(deprecation)
        self.sunset_at = _http_date(sunset)
        links = _links(link)
        self.successor, self.deprecation_info = links.get("successor-version"), links.get("deprecation")
        when = f"{self.sunset_at:%Y-%m-%d}" if self.sunset_at else (sunset or "not announced")
        successor = f"; successor: {self.successor or link}" if link else ""
        super().__init__(f"{method} {path} is deprecated (sunset {when}){successor}")


def _epoch(value: str | None) -> datetime | None:
    """RFC 9745's `@<seconds since the epoch>`."""
    if value is None or not re.fullmatch(r"@-?[0-9]{1,12}", value.strip()):
        return None
    return datetime.fromtimestamp(int(value.strip()[1:]), UTC)


def _http_date(value: str | None) -> datetime | None:
    try:
        return parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None


def _links(value: str | None) -> dict[str, str]:
    """RFC 8288 `<target>; rel="name"` entries of a Link header by relation (targets never contain `>`)."""
    found: dict[str, str] = {}
    for target, params in re.findall(r"<([^>]*)>\s*((?:;[^,<]*)*)", value or ""):
        rel = re.search(r'rel\s*=\s*"?([^";]+)"?', params)
        for name in rel.group(1).split() if rel else ():
            found.setdefault(name.lower(), target)
    return found


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The seed's retry rules: unchanged, on rate_limit_exceeded and 5xx only (and on no answer at all when the
    request is safe to send twice). Backoff doubles from `base_delay_s` with jitter; a 429 waits RateLimit-Reset."""

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_rate_limit_wait_s: float = 65.0  # a window is a minute on our service; longer waits fail instead

    def backoff_s(self, attempt: int) -> float:
        delay: float = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return delay * (0.5 + random.random() / 2)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """One organization in one environment. `api_key` is an API key or a person's session token."""

    base_url: str
    api_key: str
    organization_id: str
    environment: str
    timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sdk_version: str = SDK_VERSION

    def __post_init__(self) -> None:
        if self.environment not in ENVIRONMENTS:
            raise ValueError(f"environment must be sandbox or production, not {self.environment!r}")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One operation: method, path, query, JSON body, how to parse `data`, and its idempotency.

    `idempotent` writes carry an Idempotency-Key (`idempotency_key`, or one made per call); `resendable` calls
    may be sent again when no answer came back (reads, keyed writes, deduplicated events, simulations)."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, Any] | None = None
    body: Any = None
    idempotent: bool = False
    idempotency_key: str | None = None
    resendable: bool = False
    listing: bool = False  # the envelope carries next_cursor and has_more beside data
    download: bool = False  # a success is a file (`Download`), not the envelope


@dataclass(frozen=True, slots=True)
class Download:
    """A success that is a file (GET /events/export): its bytes, media type and the answer's headers."""

    content: bytes
    media_type: str
    headers: Mapping[str, str]  # case-insensitive (httpx.Headers)


@dataclass(frozen=True, slots=True)
class Prepared:
    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    content: bytes | None

    @property
    def request_id(self) -> str:
        return self.headers["X-Request-ID"]

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get("Idempotency-Key")

    def build(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return client.build_request(
            self.method, self.url, params=self.params, headers=self.headers, content=self.content
        )


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def new_idempotency_key() -> str:
    return f"idk_{uuid.uuid4().hex}"


def _query(params: Mapping[str, Any] | None) -> dict[str, str]:
    return {name: str(value) for name, value in (params or {}).items() if value is not None}


def prepare(config: ClientConfig, call: Call[Any]) -> Prepared:
    """Everything sent, fixed once: retries resend these very bytes and headers."""
    headers = {
        "X-Organization-ID": config.organization_id,
        "X-Environment": config.environment,
        "X-Request-ID": new_request_id(),
        "X-SDK-Version": config.sdk_version,
        "Accept": "*/*" if call.download else "application/json",
    }
    if config.api_key:  # an API key or a session token; only a login is sent without one
        headers["Authorization"] = f"Bearer {config.api_key}"
    if call.idempotent:
        headers["Idempotency-Key"] = call.idempotency_key or new_idempotency_key()
    content = None
    if call.body is not None:
        content = jsonutil.dumps(call.body).encode()
        headers["Content-Type"] = "application/json"
    url = config.base_url.rstrip("/") + call.path
    return Prepared(call.method, url, _query(call.params), headers, content)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    data: list[T]
    next_cursor: str | None
    has_more: bool


def _reset_s(response: httpx.Response, error: ApiError) -> float | None:
    for value in (response.headers.get("RateLimit-Reset"), error.details.get("retry_after_s")):
        try:
            seconds = float(value) if value is not None else None
        except (TypeError, ValueError):
            continue
        if seconds is not None and seconds >= 0:
            return seconds
    return None


def _caller_level() -> int:
    """The stack level of the first frame outside this package, so that the warning points at the caller's line
    (sync or async, however deep the client's own frames are)."""
    package = os.path.dirname(__file__)
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == package:
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _warn_deprecation(prepared: Prepared, response: httpx.Response, path: str) -> None:
    """On every answer that announces a deprecation, failures included (the service sends the headers on all)."""
    headers = response.headers
    if "Deprecation" in headers or "Sunset" in headers:
        warning = DeprecatedEndpointWarning(
            prepared.method, path, headers.get("Sunset"), headers.get("Link"), headers.get("Deprecation")
        )
        warnings.warn(warning, stacklevel=_caller_level())


def parse_response(call: Call[T], prepared: Prepared, response: httpx.Response) -> T | ApiError:
    """The call's result from a success envelope, or the exception a failure envelope stands for."""
    request_id = response.headers.get("X-Request-ID", prepared.request_id)
    _warn_deprecation(prepared, response, call.path)
    media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
    if call.download and response.status_code < 400 and media_type != "application/json":
        return Download(response.content, media_type, response.headers)  # type: ignore[return-value]
    try:
        body = jsonutil.loads(response.content)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        kind = ServerError if response.status_code >= 500 else UnexpectedResponse
        return kind(
            "envelope_invalid",
            f"HTTP {response.status_code} without the envelope",
            request_id=request_id,
            http_status=response.status_code,
        )
    if response.status_code >= 400 or "error" in body:
        return error_from_envelope(body, response.status_code, request_id)
    if "data" not in body:
        return UnexpectedResponse(
            "envelope_invalid",
            "the success envelope has no data",
            request_id=request_id,
            http_status=response.status_code,
        )
    try:
        return call.parse(body if call.listing else body["data"])
    except (ValueError, TypeError) as error:  # pydantic's ValidationError is a ValueError
        return UnexpectedResponse(
            "data_invalid",
            f"data does not fit the contract: {error}",
            request_id=request_id,
            http_status=response.status_code,
        )


@dataclass
class Attempts(Generic[T]):
    """The retry state of one call: feed it each answer (or transport failure), act on what it returns."""

    call: Call[T]
    prepared: Prepared
    policy: RetryPolicy
    attempt: int = 0

    def on_response(self, response: httpx.Response) -> tuple[T | None, ApiError | None, float | None]:
        """(result, None, None) when done; (None, error, delay) to retry after `delay`; (None, error, None) to fail."""
        outcome = parse_response(self.call, self.prepared, response)
        if not isinstance(outcome, ApiError):
            return outcome, None, None
        return None, outcome, self._delay(outcome, response)

    def on_transport_error(self, error: httpx.TransportError) -> tuple[ApiError, float | None]:
        failure = ApiConnectionError(
            "connection_failed",
            f"{self.prepared.method} {self.prepared.url}: {type(error).__name__}: {error}",
            request_id=self.prepared.request_id,
        )
        if not self.call.resendable or self.attempt >= self.policy.max_retries:
            return failure, None
        return failure, self._next(self.policy.backoff_s(self.attempt))

    def _delay(self, error: ApiError, response: httpx.Response) -> float | None:
        if self.attempt >= self.policy.max_retries:
            return None
        if isinstance(error, RateLimitError) or response.status_code == 429:
            reset = _reset_s(response, error)
            if reset is None:
                return self._next(self.policy.backoff_s(self.attempt))
            return self._next(reset) if reset <= self.policy.max_rate_limit_wait_s else None
        if response.status_code >= 500:
            return self._next(self.policy.backoff_s(self.attempt))
        return None  # every other error fails the same way again

    def _next(self, delay_s: float) -> float:
        self.attempt += 1
        return delay_s
