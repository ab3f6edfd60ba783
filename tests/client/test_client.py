"""rewards_lab.client against a real `rewards-lab serve` process: headers, envelope, typed results, one exception
per error type, retries (unchanged, with the same Idempotency-Key), no retry on 4xx, 429 honouring
RateLimit-Reset, cursor iterators, deprecation warnings, and the async client."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from rewards_lab.client import (
    ERROR_CLASSES,
    SDK_VERSION,
    ApiConnectionError,
    ApiError,
    AsyncRewardsClient,
    AuthenticationError,
    AuthorizationError,
    ConflictError,
    DeprecatedEndpointWarning,
    IdempotencyError,
    NotFoundError,
    RateLimitError,
    RetryPolicy,
    RewardsClient,
    ValidationError,
)
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ErrorType
from tests.live_server import LiveServer, start_server

FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("client") / "client.duckdb", "Acme")
    yield server
    server.stop()


class Recorder:
    """Every request that left the client and every answer that came back (httpx event hooks)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.responses: list[httpx.Response] = []

    def http(self, transport: httpx.BaseTransport | None = None) -> httpx.Client:
        return httpx.Client(
            transport=transport,
            event_hooks={"request": [self.requests.append], "response": [self.responses.append]},
        )


class FlakyTransport(httpx.BaseTransport):
    """Forwards to the real server, then loses the answer of chosen attempts: the server did the work, the client
    saw a 502 (a proxy's) or no answer at all. Nothing is faked about what the server did."""

    def __init__(self, fail: Callable[[int], str | None]) -> None:
        self.inner = httpx.HTTPTransport()
        self.fail = fail
        self.count = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        response = self.inner.handle_request(request)
        response.read()
        mode = self.fail(self.count)
        if mode == "502":
            return httpx.Response(502, content=b"<html>bad gateway</html>", request=request)
        if mode == "drop":
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def client(live: LiveServer, environment: str = "sandbox", **kwargs: object) -> RewardsClient:
    return RewardsClient(live.base_url, live.keys[environment], live.organization_id, environment, **kwargs)  # type: ignore[arg-type]


def test_headers_of_the_authentication_section(live: LiveServer) -> None:
    recorder = Recorder()
    with client(live, http_client=recorder.http()) as api:
        customer = api.create_customer("hdr-1", email="hdr@example.com")
        api.get_customer(customer.id)
        asset = api.create_asset("Stars", "HDR", "points", 2)
        rule_programme = api.create_programme("Headers", api.activate_asset(asset.id).id)
        rule = api.create_rule(rule_programme.id, "order.completed", [{"type": "issue", "amount": {"fixed": "1"}}])
        api.simulate_rule(rule.id, {"type": "order.completed"})
    create, read, *_, simulate = recorder.requests
    for request in recorder.requests:
        assert request.headers["Authorization"] == f"Bearer {live.keys['sandbox']}"
        assert request.headers["X-Organization-ID"] == live.organization_id
        assert request.headers["X-Environment"] == "sandbox"
        assert request.headers["X-SDK-Version"] == SDK_VERSION
    request_ids = [request.headers["X-Request-ID"] for request in recorder.requests]
    assert len(set(request_ids)) == len(request_ids), "one X-Request-ID per request"
    assert [response.headers["X-Request-ID"] for response in recorder.responses] == request_ids  # echoed
    assert create.headers["Idempotency-Key"].startswith("idk_")
    assert "Idempotency-Key" not in read.headers  # a read
    assert "Idempotency-Key" not in simulate.headers  # the seed: no idempotency key is sent for simulate
    assert create.headers["Content-Type"] == "application/json"


def test_envelope_unwrapped_into_the_contract_models(live: LiveServer) -> None:
    with client(live) as api:
        customer = api.create_customer("typed-1", country="GB")
        wallet = api.create_wallet(customer.id)
        balances = api.wallet_balances(wallet.id)
        page = api.list_wallets(customer_id=customer.id)
    assert isinstance(customer, r.Customer) and customer.external_id == "typed-1" and customer.country == "GB"
    assert isinstance(wallet, r.Wallet) and wallet.customer_id == customer.id
    assert isinstance(balances, r.WalletBalances) and balances.balances == []
    assert [w.id for w in page.data] == [wallet.id] and page.has_more is False and page.next_cursor is None


def test_one_exception_class_per_error_type_with_code_details_and_request_id(live: LiveServer) -> None:
    assert set(ERROR_CLASSES) == {t.value for t in ErrorType}
    recorder = Recorder()
    with client(live, http_client=recorder.http()) as api:
        with pytest.raises(ValidationError) as invalid:
            api.create_customer("err-1", email="not-an-email")
        api.create_customer("err-2")
        with pytest.raises(ConflictError) as conflict:
            api.create_customer("err-2")
        with pytest.raises(NotFoundError) as missing:
            api.get_wallet("wal_nope")
        api.create_customer("err-3", idempotency_key="same-key")
        with pytest.raises(IdempotencyError) as reused:
            api.create_customer("err-4", idempotency_key="same-key")
    assert (invalid.value.code, invalid.value.details["field"], invalid.value.http_status) == (
        "customer_email_invalid",
        "email",
        422,
    )
    assert invalid.value.request_id == recorder.requests[0].headers["X-Request-ID"]
    assert (conflict.value.code, conflict.value.http_status) == ("customer_already_exists", 409)
    assert (missing.value.code, missing.value.error_type) == ("wallet_not_found", "not_found")
    assert (reused.value.code, reused.value.http_status) == ("idempotency_key_reused", 409)
    with RewardsClient(live.base_url, "rlk_sand_wrong", live.organization_id, "sandbox") as stranger:
        with pytest.raises(AuthenticationError) as unauthenticated:
            stranger.get_customer("cus_x")
    assert unauthenticated.value.code == "credentials_invalid"
    with RewardsClient(live.base_url, live.keys["sandbox"], "org_other", "sandbox") as wrong_org:
        with pytest.raises(AuthorizationError) as other_org:
            wrong_org.get_customer("cus_x")
    assert other_org.value.code == "organization_mismatch"
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "production") as wrong_env:
        with pytest.raises(AuthorizationError) as other_env:
            wrong_env.get_customer("cus_x")
    assert (other_env.value.code, other_env.value.details["field"]) == ("environment_mismatch", "X-Environment")


def test_no_retry_on_4xx(live: LiveServer) -> None:
    recorder = Recorder()
    slept: list[float] = []
    with client(live, http_client=recorder.http(), sleep=slept.append, retry=FAST) as api:
        for attempt in (lambda: api.get_customer("cus_missing"), lambda: api.create_customer("x", email="bad")):
            with pytest.raises(ApiError):
                attempt()
    assert len(recorder.requests) == 2 and slept == []


def test_a_lost_answer_is_retried_unchanged_and_the_server_deduplicates(live: LiveServer) -> None:
    """The first answer is a proxy's 502, the second attempt's connection drops after sending; the third gets
    through. Same bytes, same Idempotency-Key and X-Request-ID every time: exactly one customer exists."""
    transport = FlakyTransport(lambda n: {1: "502", 2: "drop"}.get(n))
    recorder = Recorder()
    slept: list[float] = []
    with client(live, http_client=recorder.http(transport), sleep=slept.append, retry=FAST) as api:
        customer = api.create_customer("retry-1", email="retry@example.com")
        assert [c.id for c in api.iter_customers(external_id="retry-1")] == [customer.id]
    sends = recorder.requests[:3]
    assert len({request.headers["Idempotency-Key"] for request in sends}) == 1
    assert len({request.headers["X-Request-ID"] for request in sends}) == 1
    assert len({request.content for request in sends}) == 1
    assert len(slept) == 2 and all(0 < delay <= FAST.max_delay_s for delay in slept)


def test_a_write_that_is_not_safe_to_resend_is_not_resent_without_an_answer(live: LiveServer) -> None:
    transport = FlakyTransport(lambda n: "drop")
    with client(live, http_client=httpx.Client(transport=transport), sleep=lambda s: None, retry=FAST) as api:
        with pytest.raises(ApiConnectionError):
            api.create_api_key("once", ["customers.view"])
    assert transport.count == 1  # a second key would have been made


def test_server_errors_are_retried_then_raised(live: LiveServer) -> None:
    transport = FlakyTransport(lambda n: "502")
    slept: list[float] = []
    with client(live, http_client=httpx.Client(transport=transport), sleep=slept.append, retry=FAST) as api:
        with pytest.raises(ApiError) as failure:
            api.get_customer("cus_any")
    assert failure.value.error_type == "service_error" and failure.value.http_status == 502
    assert transport.count == FAST.max_retries + 1 and len(slept) == FAST.max_retries


def test_pagination_iterator_follows_the_cursor(live: LiveServer) -> None:
    recorder = Recorder()
    with client(live, http_client=recorder.http()) as api:
        made = [api.create_customer(f"page-{i}").id for i in range(7)]
        before = len(recorder.requests)
        listed = [c.id for c in api.iter_customers(limit=2) if c.external_id.startswith("page-")]
    assert listed == made
    cursors = [request.url.params.get("cursor") for request in recorder.requests[before:]]
    assert cursors[0] is None and all(cursors[1:]) and len(set(cursors)) == len(cursors)


def test_deprecated_endpoints_raise_a_deprecation_warning(live: LiveServer) -> None:
    with client(live) as api:
        with pytest.warns(DeprecatedEndpointWarning) as caught:
            hits = api.deprecated_search("rate limit")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            successor = api.knowledge_search("rate limit")
    assert caught[0].filename == __file__  # points at the caller's line, not the client's
    warning = caught[0].message
    assert isinstance(warning, DeprecatedEndpointWarning) and issubclass(DeprecatedEndpointWarning, DeprecationWarning)
    assert warning.path == "/ai/search" and warning.sunset is not None and "2027" in warning.sunset
    assert warning.link is not None and "/ai/knowledge/search" in warning.link
    assert [h.source for h in hits.data] == [h.source for h in successor.data]


def test_async_client_shares_the_core(live: LiveServer) -> None:
    async def scenario() -> None:
        attempts = 0

        class FlakyAsync(httpx.AsyncBaseTransport):
            def __init__(self) -> None:
                self.inner = httpx.AsyncHTTPTransport()

            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                nonlocal attempts
                attempts += 1
                response = await self.inner.handle_async_request(request)
                await response.aread()
                if attempts == 1:
                    return httpx.Response(503, content=b"unavailable", request=request)
                return response

            async def aclose(self) -> None:
                await self.inner.aclose()

        async def no_wait(delay: float) -> None:
            assert delay > 0

        http = httpx.AsyncClient(transport=FlakyAsync())
        async with AsyncRewardsClient(
            live.base_url, live.keys["sandbox"], live.organization_id, "sandbox", http_client=http, sleep=no_wait
        ) as api:
            customer = await api.create_customer("async-1")
            assert isinstance(customer, r.Customer) and attempts == 2
            listed = [c.id async for c in api.iter_customers(external_id="async-1", limit=1)]
            assert listed == [customer.id]
            with pytest.raises(ConflictError) as conflict:
                await api.create_customer("async-1")
            assert conflict.value.code == "customer_already_exists" and attempts == 4

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    path: Path = tmp_path_factory.mktemp("limited") / "limited.duckdb"
    server = start_server(path, "Small", "--plan", "enterprise", "--rate-limit", "3")
    yield server
    server.stop()


def _exhaust(live: LiveServer, environment: str) -> None:
    """Spend the window's quota with a client that never retries (away from the window's edge, so that the
    test's next requests fall in the same one-minute window)."""
    to_edge_s = 60 - time.time() % 60
    if to_edge_s < 5:
        time.sleep(to_edge_s + 0.2)
    with client(live, environment, retry=RetryPolicy(max_retries=0)) as api, pytest.raises(RateLimitError):
        for _ in range(10):
            api.list_customers()


def test_rate_limit_waits_what_ratelimit_reset_says_then_gives_up(limited: LiveServer) -> None:
    slept: list[float] = []
    recorder = Recorder()
    policy = RetryPolicy(max_retries=2, base_delay_s=0.01)
    _exhaust(limited, "sandbox")
    with client(limited, http_client=recorder.http(), sleep=slept.append, retry=policy) as api:
        with pytest.raises(RateLimitError) as limit:
            api.create_customer("limited-1")
    assert limit.value.code == "rate_limit_exceeded" and limit.value.http_status == 429
    answers = recorder.responses
    assert [a.status_code for a in answers] == [429, 429, 429]
    assert slept == [float(a.headers["RateLimit-Reset"]) for a in answers[:2]]
    sent = recorder.requests
    assert len({(s.headers["Idempotency-Key"], s.content) for s in sent}) == 1  # retried unchanged


def test_rate_limit_longer_than_the_client_will_wait_fails_at_once(limited: LiveServer) -> None:
    _exhaust(limited, "sandbox")
    slept: list[float] = []
    policy = RetryPolicy(max_retries=3, max_rate_limit_wait_s=0.5)
    transport = FlakyTransport(lambda n: None)
    with client(limited, http_client=httpx.Client(transport=transport), sleep=slept.append, retry=policy) as api:
        with pytest.raises(RateLimitError) as limit:
            api.list_customers()
    assert transport.count == 1 and slept == [] and limit.value.details["retry_after_s"] >= 1


@pytest.mark.slow
def test_rate_limit_retry_succeeds_once_the_window_resets(limited: LiveServer) -> None:
    """Real waiting (up to one minute: the server's windows are wall-clock minutes)."""
    recorder = Recorder()
    _exhaust(limited, "production")
    with client(limited, "production", http_client=recorder.http(), retry=RetryPolicy(max_retries=2)) as api:
        started = time.monotonic()
        customer = api.create_customer("limited-2")
        waited = time.monotonic() - started
    first, *_, last = recorder.responses
    assert first.status_code == 429 and last.status_code == 201 and customer.external_id == "limited-2"
    assert waited >= float(first.headers["RateLimit-Reset"]) - 0.1
