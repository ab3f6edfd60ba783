"""Full tables never refuse the innocent, and a client that goes away is no server error.

- The rate limiter's tables full of live counters: an address (or tenant) with no counter of its own is never
  refused because of a shared overflow counter; a flood of new addresses resets no counter that counted more
  than one request, and a spent address stays refused.
- The login guard's table full of keys: an owner from a new address, or whose email has no failures, is never
  held by the attacker's failures; a key that waits keeps waiting.
- A client that disconnects mid-body is logged as 499, with no stack trace and nothing sent, on the POST /events
  hot path and on the ordinary routes.

The HTTP tests run the real application in process (httpx's ASGI transport, a real DuckDB file): the limiter's
table size is not a `serve` setting, and a disconnect mid-body needs a hand-made `receive`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from rewards_lab.api.app import create_app
from rewards_lab.api.rate_limits import UNAUTHENTICATED_LIMIT_PER_MINUTE, RateLimiter
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.security import access
from rewards_lab.security.login_guard import Backoff, LoginGuard
from rewards_lab.service.request_log import LogRecord
from rewards_lab.store.database import Database

LIMIT = UNAUTHENTICATED_LIMIT_PER_MINUTE
_EVENT = {"type": "order.completed", "external_event_id": "e-1", "customer_id": "c1"}


class _Clock:
    def __init__(self, now: float = 6000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _fill(limiter: RateLimiter, first: int, count: int, times: int = 1) -> None:
    for number in range(first, first + count):
        for _ in range(times):
            limiter.charge(f"address/10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}", LIMIT)


def test_an_untracked_address_is_never_refused_by_a_full_table() -> None:
    """The reviewer's repro: three counters, then a hundred more addresses; a new address is not refused."""
    limiter = RateLimiter(max_buckets=3, clock=_Clock())
    _fill(limiter, 0, 3)
    _fill(limiter, 3, 100)
    assert not limiter.peek("address/192.0.2.7", LIMIT).exceeded
    assert not limiter.charge("address/192.0.2.7", LIMIT).exceeded
    # A table full of counters that counted more than one request each: the newcomer has no counter, and is
    # still not refused (neither by `peek`, the pre-authentication check, nor by `charge`).
    busy = RateLimiter(max_buckets=3, clock=_Clock())
    _fill(busy, 0, 3, times=2)
    for _ in range(LIMIT + 5):
        assert not busy.charge("address/198.51.100.1", LIMIT).exceeded
    assert not busy.peek("address/198.51.100.1", LIMIT).exceeded
    assert not busy.charge("org_new/sandbox", 1).exceeded  # a tenant without a counter: its plan, not a share
    assert busy.tracked() == 3 + 1


def test_a_flood_of_new_addresses_keeps_every_busy_counter_and_a_spent_address_stays_refused() -> None:
    clock = _Clock()
    limiter = RateLimiter(max_buckets=50, clock=clock)
    for _ in range(LIMIT):
        limiter.charge("address/127.0.0.9", LIMIT)  # spent
    for _ in range(3):
        limiter.charge("address/127.0.0.10", LIMIT)  # three counted
    _fill(limiter, 0, 5_000)  # far more new addresses than the table holds
    assert limiter.peek("address/127.0.0.9", LIMIT).exceeded
    assert limiter.charge("address/127.0.0.9", LIMIT).exceeded
    assert limiter.peek("address/127.0.0.10", LIMIT).remaining == LIMIT - 3
    assert limiter.tracked() <= 50
    clock.now += 60.0  # a new window: every budget is whole again
    assert not limiter.peek("address/127.0.0.9", LIMIT).exceeded


def _serve(app: Any, address: str, work: Any) -> None:
    async def main() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(address, 40_000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await work(client)

    app.state.intake.start()
    try:
        asyncio.run(main())
    finally:
        app.state.intake.stop()


@pytest.mark.parametrize("hot", [True, False])
def test_a_valid_key_from_an_untracked_address_is_served_when_the_table_is_full(
    db: Database, scope: Scope, hot: bool
) -> None:
    key = access.create_api_key(db, scope, "k", ["events.write", "customers.view"]).secret
    app = create_app(db, run_worker=False)
    if not hot:
        app.hot_path = None  # type: ignore[attr-defined]
    limiter = RateLimiter(max_buckets=3)
    app.state.rate_limiter = limiter
    _fill(limiter, 0, 103)  # every counter live, and a hundred newcomers past the table
    headers = {"Authorization": f"Bearer {key}", "X-Organization-ID": scope.organization_id, "X-Environment": "sandbox"}
    statuses: list[int] = []

    async def work(client: httpx.AsyncClient) -> None:
        statuses.append((await client.post("/v1/events", headers=headers, json=_EVENT)).status_code)
        statuses.append((await client.get("/v1/customers", headers=headers)).status_code)

    _serve(app, "192.0.2.7", work)
    assert statuses == [202, 200]


def test_an_owner_is_never_held_by_an_attackers_flood_of_new_keys() -> None:
    """The reviewer's repro: one failure a second from new emails and IPv6 /64s for 3,000 s, six keys tracked."""
    clock = _Clock(0.0)
    guard = LoginGuard(max_tracked=6, clock=clock)
    for second in range(3_000):
        guard.admit(f"victim{second}@corp.test", f"2001:db8:{second >> 16 & 0xFFFF:x}:{second & 0xFFFF:x}::1")
        guard.failed(f"victim{second}@corp.test", f"2001:db8:{second >> 16 & 0xFFFF:x}:{second & 0xFFFF:x}::1")
        clock.now += 1.0
    guard.admit("owner@corp.test", "198.51.100.9")  # a new address, an email without failures: admitted
    guard.succeeded("owner@corp.test", "198.51.100.9")
    assert guard.tracked() <= 6


def test_a_full_table_of_waiting_keys_holds_them_and_judges_no_newcomer_by_them() -> None:
    clock = _Clock(0.0)
    one_free = Backoff(1, 600.0)
    guard = LoginGuard(
        per_account_address=one_free, per_address=one_free, per_account=one_free, max_tracked=6, clock=clock
    )
    guard.admit("attacker@x.test", "10.0.0.1")  # three keys, each waiting after its one free failure
    guard.admit("other@x.test", "10.0.0.2")  # three more: the table is full of waiting keys
    for email, address in (("attacker@x.test", "10.0.0.1"), ("attacker@x.test", "10.0.0.9"), ("x@x.test", "10.0.0.2")):
        with pytest.raises(ServiceError) as refused:
            guard.admit(email, address)  # every waiting key still waits: none was evicted
        assert refused.value.code == "rate_limit_exceeded"
    for number in range(20):  # newcomers find no room and no evictable key: not tracked, never refused
        guard.admit(f"new{number}@x.test", f"10.1.0.{number}")
    with pytest.raises(ServiceError):
        guard.admit("attacker@x.test", "10.0.0.1")
    assert guard.tracked() == 6


def _disconnecting_request(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """Send `path` a POST whose client goes away after the first chunk of its body; what the app sent."""
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": b'{"external_id": ', "more_body": True}, {"type": "http.disconnect"}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if len(messages) > 1 else messages[0]

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    request = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}
    request |= {"root_path": "", "client": ("127.0.0.1", 1), "server": ("t", 80), "scheme": "http"}
    request |= {"http_version": "1.1", "raw_path": path.encode()}

    async def main() -> None:
        await app(request, receive, send)  # returns: nothing escapes to the server

    app.state.intake.start()
    try:
        asyncio.run(main())
    finally:
        app.state.intake.stop()
    return sent


@pytest.mark.parametrize(("path", "hot"), [("/v1/events", True), ("/v1/events", False), ("/v1/customers", False)])
def test_a_client_that_disconnects_mid_body_is_logged_as_499_without_a_stack_trace(
    db: Database, scope: Scope, path: str, hot: bool, caplog: pytest.LogCaptureFixture
) -> None:
    key = access.create_api_key(db, scope, "k", ["events.write", "customers.create"]).secret
    app = create_app(db, run_worker=False)
    if not hot:
        app.hot_path = None  # type: ignore[attr-defined]
    records: list[LogRecord] = []
    app.state.request_log.record = records.append
    headers = [
        (b"authorization", f"Bearer {key}".encode()),
        (b"x-organization-id", scope.organization_id.encode()),
        (b"x-environment", b"sandbox"),
        (b"content-type", b"application/json"),
    ]
    with caplog.at_level(logging.INFO):
        sent = _disconnecting_request(app, path, headers)
    assert sent == []  # nobody is listening: nothing is sent
    assert [(record.path, record.status) for record in records] == [(path, 499)]
    assert records[0].organization_id == scope.organization_id  # it authenticated before it went away
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
