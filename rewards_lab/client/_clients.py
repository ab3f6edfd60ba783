"""`RewardsClient` (sync) and `AsyncRewardsClient` on httpx: the transport and retry loop of each. Their methods,
one per operation, are `_generated.Operations` (built from the registry): on the sync client a method returns
the result, on the async one an awaitable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import httpx

from rewards_lab.client._core import Attempts, Call, ClientConfig, Page, RetryPolicy, prepare
from rewards_lab.client._generated import Operations

T = TypeVar("T")


def _with_cursor(call: Call[Page[T]], cursor: str) -> Call[Page[T]]:
    params = {**(call.params or {}), "cursor": cursor}
    return Call(
        call.method, call.path, call.parse, params=params, body=call.body, resendable=call.resendable, listing=True
    )


def _config(
    base_url: str,
    api_key: str,
    organization_id: str,
    environment: str,
    timeout_s: float,
    retry: RetryPolicy | None,
) -> ClientConfig:
    return ClientConfig(base_url, api_key, organization_id, environment, timeout_s, retry or RetryPolicy())


class RewardsClient(Operations):
    """A synchronous client of one organization in one environment.

    `http_client` lets the caller supply its own httpx.Client (a transport, event hooks); `sleep` is what waits
    between retries (time.sleep by default)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        organization_id: str,
        environment: str,
        *,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = _config(base_url, api_key, organization_id, environment, timeout_s, retry)
        self._http = http_client or httpx.Client(timeout=timeout_s)
        self._sleep = sleep

    def call(self, call: Call[T]) -> T:
        prepared = prepare(self.config, call)
        attempts = Attempts(call, prepared, self.config.retry)
        while True:
            try:
                response = self._http.send(prepared.build(self._http))
            except httpx.TransportError as transport_error:
                error, delay = attempts.on_transport_error(transport_error)
                if delay is None:
                    raise error from transport_error
            else:
                result, failure, delay = attempts.on_response(response)
                if failure is None:
                    return result  # type: ignore[return-value]  # None only with a failure
                if delay is None:
                    raise failure
            self._sleep(delay)

    def iterate(self, call: Call[Page[T]]) -> Iterator[T]:
        while True:
            page = self.call(call)
            yield from page.data
            if not page.has_more or not page.next_cursor:
                return
            call = _with_cursor(call, page.next_cursor)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RewardsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _async_sleep(delay_s: float) -> None:
    await asyncio.sleep(delay_s)


class AsyncRewardsClient(Operations):
    """The same operations, awaited, on httpx.AsyncClient."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        organization_id: str,
        environment: str,
        *,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = _async_sleep,
    ) -> None:
        self.config = _config(base_url, api_key, organization_id, environment, timeout_s, retry)
        self._http = http_client or httpx.AsyncClient(timeout=timeout_s)
        self._sleep = sleep

    async def call(self, call: Call[T]) -> T:
        prepared = prepare(self.config, call)
        attempts = Attempts(call, prepared, self.config.retry)
        while True:
            try:
                response = await self._http.send(prepared.build(self._http))
            except httpx.TransportError as transport_error:
                error, delay = attempts.on_transport_error(transport_error)
                if delay is None:
                    raise error from transport_error
            else:
                result, failure, delay = attempts.on_response(response)
                if failure is None:
                    return result  # type: ignore[return-value]  # None only with a failure
                if delay is None:
                    raise failure
            await self._sleep(delay)

    async def iterate(self, call: Call[Page[T]]) -> AsyncIterator[T]:
        while True:
            page = await self.call(call)
            for item in page.data:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            call = _with_cursor(call, page.next_cursor)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRewardsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
