"""Issue 14 item 12: requests without valid credentials are refused per client address before authentication,
failed logins back off instead of locking the owner out, a flood of new keys resets no counter, and proxy
headers count only when the operator trusts the proxy. Real `rewards-lab serve` processes on 127.0.0.1; other
client addresses are other loopback addresses (127.0.0.0/8), as a proxy's X-Forwarded-For values are."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from rewards_lab.api.rate_limits import MAX_BUCKETS, UNAUTHENTICATED_LIMIT_PER_MINUTE, WINDOW_S, RateLimiter
from rewards_lab.cli import main as cli
from rewards_lab.security.client_address import client_key
from tests.live_server import LiveServer, start_server

EMAIL, PASSWORD = "owner@limits.test", "the owner's long passphrase"
MOST_REQUESTS = 2 * UNAUTHENTICATED_LIMIT_PER_MINUTE + 2  # a refusal comes within two windows' budgets


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("limits") / "limits.duckdb"
    live = start_server(db, "Limits", "--plan", "public", "--email", EMAIL, "--password", PASSWORD)
    yield live
    live.stop()


def _client(live: LiveServer, address: str) -> httpx.Client:
    """A client whose connections come from `address` (a loopback address) to the server on 127.0.0.1."""
    return httpx.Client(base_url=live.base_url, transport=httpx.HTTPTransport(local_address=address), timeout=10)


def _early_in_a_window() -> None:
    """Start where a window has time left, so that no window ends between a refusal and what is asserted next."""
    left_s = WINDOW_S - time.time() % WINDOW_S
    if left_s < 20:
        time.sleep(left_s + 0.2)


def _refused(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    body: dict[str, Any] = response.json()
    assert body["error"]["code"] == "rate_limit_exceeded" and body["error"]["type"] == "rate_limit_error"
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    assert int(response.headers["retry-after"]) >= 1
    assert {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"} <= set(response.headers)
    return body


def _spend(send: Any) -> int:
    """Send until the first 429 (bounded); how many were sent."""
    for sent in range(1, MOST_REQUESTS + 1):
        response = send()
        if response.status_code == 429:
            _refused(response)
            return sent
        assert response.status_code == 401, response.text
    raise AssertionError(f"no refusal in {MOST_REQUESTS} requests with wrong credentials")


def test_wrong_credentials_are_refused_per_address_before_authentication(server: LiveServer) -> None:
    _early_in_a_window()
    wrong = {"Authorization": "Bearer rlk_guessed", "X-Organization-ID": server.organization_id}
    with _client(server, "127.0.0.4") as guesser, _client(server, "127.0.0.5") as neighbour:
        sent = _spend(lambda: guesser.get("/customers", headers={**wrong, "X-Environment": "sandbox"}))
        assert sent == UNAUTHENTICATED_LIMIT_PER_MINUTE + 1
        # From now on the address is refused before its credentials are looked at: a valid key too, any path,
        # the hot POST /events included, and a login with the right password.
        refused = _refused(guesser.get("/customers", headers=server.headers()))
        assert refused["error"]["details"]["retry_after_s"] >= 1
        assert guesser.get("/customers", headers=server.headers()).headers["ratelimit-remaining"] == "0"
        _refused(guesser.post("/events", headers=server.headers(), json={"type": "x", "customer_id": "c"}))
        _refused(guesser.post("/auth/login", json={"email": EMAIL, "password": PASSWORD}))
        _refused(guesser.get("/nowhere"))
        # Another address is not held up by this one, and its tenant traffic is counted on its tenant.
        assert neighbour.get("/customers", headers={**wrong, "X-Environment": "sandbox"}).status_code == 401
        assert neighbour.get("/customers", headers=server.headers()).status_code == 200
        # The health probes have a budget of their own.
        assert guesser.get("/health").status_code == 200


def test_failed_logins_delay_the_owner_but_never_lock_the_account(server: LiveServer) -> None:
    email = EMAIL
    with _client(server, "127.0.0.6") as attacker, _client(server, "127.0.0.7") as owner:
        for _ in range(5):
            response = attacker.post("/auth/login", json={"email": email, "password": "a wrong guess at it"})
            assert response.status_code == 401 and response.json()["error"]["code"] == "credentials_invalid"
        # Backoff: the right password from the guessing address is refused like any other attempt, before it is
        # checked, so the answer tells nothing about it.
        right = {"email": email, "password": PASSWORD}
        first = _refused(attacker.post("/auth/login", json=right))
        assert first["error"]["details"]["retry_after_s"] == int(
            attacker.post("/auth/login", json=right).headers["retry-after"]
        )
        wrong_then = _refused(attacker.post("/auth/login", json={"email": email, "password": "another guess"}))
        assert wrong_then["error"] == {**first["error"], "details": wrong_then["error"]["details"]}
        # The owner, from another address, is not held up by the attacker's failures.
        assert owner.post("/auth/login", json=right).status_code == 201
        # After the wait the guessing address is checked again; each further failure doubles the wait.
        time.sleep(first["error"]["details"]["retry_after_s"] + 0.2)
        response = attacker.post("/auth/login", json={"email": email, "password": "a sixth guess"})
        assert response.status_code == 401
        doubled = _refused(attacker.post("/auth/login", json=right))
        assert doubled["error"]["details"]["retry_after_s"] == 2
        time.sleep(2.2)
        assert attacker.post("/auth/login", json=right).status_code == 201  # never locked for good


def test_a_flood_of_new_addresses_resets_no_counter() -> None:
    limiter = RateLimiter(clock=lambda: 6000.0)  # one window throughout
    for _ in range(UNAUTHENTICATED_LIMIT_PER_MINUTE + 1):
        state = limiter.charge("address/127.0.0.9", UNAUTHENTICATED_LIMIT_PER_MINUTE)
    assert state.exceeded
    for number in range(MAX_BUCKETS + 10):  # more new addresses than the limiter holds counters
        limiter.charge(f"address/10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}", 100)
    assert limiter.charge("address/127.0.0.9", UNAUTHENTICATED_LIMIT_PER_MINUTE).exceeded
    assert limiter.peek("address/127.0.0.9", UNAUTHENTICATED_LIMIT_PER_MINUTE).exceeded
    assert limiter.tracked() == MAX_BUCKETS  # the newcomers took one another's one-request counters


def test_new_keys_past_the_table_evict_one_request_counters_and_a_new_window_empties_it() -> None:
    now = [600.0]
    limiter = RateLimiter(max_buckets=3, clock=lambda: now[0], unauthenticated_limit_per_minute=2)
    for number in range(3):
        limiter.charge(f"address/127.0.1.{number}", 2)
    limiter.charge("address/127.0.1.0", 2)  # two requests: never evicted by newcomers
    assert not limiter.charge("address/127.0.2.1", 2).exceeded  # took 127.0.1.1's one-request counter
    assert limiter.charge("address/127.0.1.0", 2).exceeded  # kept its count
    assert not limiter.charge("address/127.0.2.2", 2).exceeded  # each newcomer is judged by its own counter
    assert not limiter.charge("address/127.0.2.3", 2).exceeded
    assert not limiter.charge("org_1/sandbox", 2).exceeded  # tenants are counted in a table of their own
    assert not limiter.charge("address/::1", 2).exceeded  # IPv6 per /64
    assert limiter.peek("address/127.0.1.0", 2).exceeded
    now[0] += WINDOW_S
    assert not limiter.peek("address/127.0.1.0", 2).exceeded  # a new window: every budget whole again
    assert limiter.tracked() == 0 and limiter.overflowed() == 0


def test_a_tenant_over_its_plan_is_told_when_to_retry(server: LiveServer) -> None:
    """(Last of the tests on the module's server: it spends the tenant's minute.)"""
    _early_in_a_window()
    with _client(server, "127.0.0.8") as http:
        for _ in range(MOST_REQUESTS):
            response = http.get("/customers", headers=server.headers())
            if response.status_code == 429:
                break
            assert response.status_code == 200, response.text
        refused = _refused(response)
        assert int(response.headers["retry-after"]) == refused["error"]["details"]["retry_after_s"]
        hot = http.post("/events", headers=server.headers(), json={"type": "x", "customer_id": "c"})
        assert int(_refused(hot)["error"]["details"]["retry_after_s"]) == int(hot.headers["retry-after"])


@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_counts_only_from_a_proxy_the_operator_trusts(
    tmp_path: Path, trusted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # uvicorn's own setting is not consulted: only the flag counts
    # The operator's budget per address (5 here) replaces the default.
    serve_args = ("--unauthenticated-limit-per-minute", "5")
    serve_args += ("--forwarded-allow-ips", "127.0.0.1") if trusted else ()
    live = start_server(tmp_path / "proxy.duckdb", "Proxy", serve_args=serve_args)
    try:
        _early_in_a_window()
        wrong = {"Authorization": "Bearer rlk_guessed"}
        with httpx.Client(base_url=live.base_url, timeout=10) as http:
            sent = _spend(lambda: http.get("/customers", headers={**wrong, "X-Forwarded-For": "127.0.0.20"}))
            assert 1 < sent <= 5 + 1  # (the start-up poll of the OpenAPI document counts too)
            other = http.get("/customers", headers={**wrong, "X-Forwarded-For": "127.0.0.21"})
            if trusted:  # behind a trusted proxy each client has its own budget
                assert other.status_code == 401, other.text
            else:  # a header anybody can send names nobody: the socket peer's budget is spent
                _refused(other)
    finally:
        live.stop()


def test_clients_are_counted_per_ipv4_address_and_per_ipv6_64() -> None:
    assert client_key("127.0.0.9") == "127.0.0.9"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:127.0.0.9") == "127.0.0.9" and client_key("unknown") == "unknown"


def test_serve_trusts_no_proxy_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: seen.append(options))
    db = str(tmp_path / "flags.duckdb")
    for flags in ([], ["--proxy-headers"], ["--forwarded-allow-ips", "10.0.0.5,10.1.0.0/16"]):
        assert cli.main(["serve", "--db", db, *flags]) == 0
    assert [(options["proxy_headers"], options["forwarded_allow_ips"]) for options in seen] == [
        (False, ""),
        (True, "127.0.0.1,::1"),
        (True, "10.0.0.5,10.1.0.0/16"),
    ]
