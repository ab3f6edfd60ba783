"""`RewardsClient` (sync) and `AsyncRewardsClient` on httpx. Each operation is declared once, in `_Operations`,
as a descriptor over a `Call` builder: on the sync client it returns the result, on the async one an awaitable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx

from rewards_lab.client import _operations as ops
from rewards_lab.client._core import Attempts, Call, ClientConfig, Page, RetryPolicy, prepare

P = ParamSpec("P")
T = TypeVar("T")


class _Operation(Generic[P, T]):
    """`client.create_customer(...)`: builds the Call and sends it with the client's retry loop."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: RewardsClient, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncRewardsClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        build = self.build

        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.call(build(*args, **kwargs))

        method.__doc__ = build.__doc__
        return method


class _Pages(Generic[P, T]):
    """`client.iter_events(...)`: every item of a cursor-paginated list, page after page."""

    def __init__(self, build: Callable[P, Call[Page[T]]]) -> None:
        self.build = build

    @overload
    def __get__(self, client: RewardsClient, owner: type[Any]) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, client: AsyncRewardsClient, owner: type[Any]) -> Callable[P, AsyncIterator[T]]: ...

    def __get__(self, client: Any, owner: type[Any]) -> Any:
        build = self.build

        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.iterate(build(*args, **kwargs))

        return method


def _with_cursor(call: Call[Page[T]], cursor: str) -> Call[Page[T]]:
    params = {**(call.params or {}), "cursor": cursor}
    return Call(
        call.method, call.path, call.parse, params=params, body=call.body, resendable=call.resendable, listing=True
    )


class _Operations:
    """The seed's operations, shared by both clients."""

    create_customer = _Operation(ops.create_customer)
    get_customer = _Operation(ops.get_customer)
    update_customer = _Operation(ops.update_customer)
    list_customers = _Operation(ops.list_customers)
    iter_customers = _Pages(ops.list_customers)
    customer_segments = _Operation(ops.customer_segments)
    create_wallet = _Operation(ops.create_wallet)
    get_wallet = _Operation(ops.get_wallet)
    list_wallets = _Operation(ops.list_wallets)
    iter_wallets = _Pages(ops.list_wallets)
    wallet_balances = _Operation(ops.wallet_balances)
    list_wallet_lots = _Operation(ops.list_wallet_lots)
    iter_wallet_lots = _Pages(ops.list_wallet_lots)
    freeze_wallet = _Operation(ops.freeze_wallet)
    unfreeze_wallet = _Operation(ops.unfreeze_wallet)
    create_asset = _Operation(ops.create_asset)
    get_asset = _Operation(ops.get_asset)
    list_assets = _Operation(ops.list_assets)
    iter_assets = _Pages(ops.list_assets)
    activate_asset = _Operation(ops.activate_asset)
    pause_asset = _Operation(ops.pause_asset)
    resume_asset = _Operation(ops.resume_asset)
    issue = _Operation(ops.issue)
    redeem = _Operation(ops.redeem)
    transfer = _Operation(ops.transfer)
    list_transactions = _Operation(ops.list_transactions)
    iter_transactions = _Pages(ops.list_transactions)
    get_transaction = _Operation(ops.get_transaction)
    create_programme = _Operation(ops.create_programme)
    get_programme = _Operation(ops.get_programme)
    list_programmes = _Operation(ops.list_programmes)
    iter_programmes = _Pages(ops.list_programmes)
    update_programme = _Operation(ops.update_programme)
    deactivate_programme = _Operation(ops.deactivate_programme)
    activate_programme = _Operation(ops.activate_programme)
    list_versions = _Operation(ops.list_versions)
    publish = _Operation(ops.publish)
    restore_version = _Operation(ops.restore_version)
    create_rule = _Operation(ops.create_rule)
    get_rule = _Operation(ops.get_rule)
    update_rule = _Operation(ops.update_rule)
    delete_rule = _Operation(ops.delete_rule)
    simulate_rule = _Operation(ops.simulate_rule)
    simulate_programme = _Operation(ops.simulate_programme)
    submit_event = _Operation(ops.submit_event)
    get_event = _Operation(ops.get_event)
    list_events = _Operation(ops.list_events)
    iter_events = _Pages(ops.list_events)
    replay_event = _Operation(ops.replay_event)
    list_executions = _Operation(ops.list_executions)
    iter_executions = _Pages(ops.list_executions)
    create_webhook = _Operation(ops.create_webhook)
    get_webhook = _Operation(ops.get_webhook)
    list_webhooks = _Operation(ops.list_webhooks)
    iter_webhooks = _Pages(ops.list_webhooks)
    disable_webhook = _Operation(ops.disable_webhook)
    rotate_webhook_secret = _Operation(ops.rotate_webhook_secret)
    test_webhook = _Operation(ops.test_webhook)
    list_webhook_deliveries = _Operation(ops.list_webhook_deliveries)
    get_webhook_delivery = _Operation(ops.get_webhook_delivery)
    replay_webhook_delivery = _Operation(ops.replay_webhook_delivery)
    create_api_key = _Operation(ops.create_api_key)
    revoke_api_key = _Operation(ops.revoke_api_key)
    list_logs = _Operation(ops.list_logs)
    iter_logs = _Pages(ops.list_logs)
    list_auth_audit = _Operation(ops.list_auth_audit)
    iter_auth_audit = _Pages(ops.list_auth_audit)
    usage = _Operation(ops.usage)
    login = _Operation(ops.login)
    logout = _Operation(ops.logout)
    knowledge_search = _Operation(ops.knowledge_search)
    conversation_message = _Operation(ops.conversation_message)
    deprecated_search = _Operation(ops.deprecated_search)
    deprecated_message = _Operation(ops.deprecated_message)


def _config(
    base_url: str,
    api_key: str,
    organization_id: str,
    environment: str,
    timeout_s: float,
    retry: RetryPolicy | None,
) -> ClientConfig:
    return ClientConfig(base_url, api_key, organization_id, environment, timeout_s, retry or RetryPolicy())


class RewardsClient(_Operations):
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


class AsyncRewardsClient(_Operations):
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
