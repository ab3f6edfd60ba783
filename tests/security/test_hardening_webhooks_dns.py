"""One tenant's slow DNS stalls no one else's webhooks: name lookups hold a slot per organization (below the
resolver's size) until they really return, attempts that give up leave no queued lookup behind, one lookup runs
per name, and answers are cached for seconds. Names are answered by a monkeypatched resolver (no DNS); the only
network is 127.0.0.1, and every wait is bounded."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import organizations
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.store.database import Database
from rewards_lab.store.uow import reader
from rewards_lab.worker import safe_transport
from rewards_lab.worker.deliveries import DeliveryWorker
from rewards_lab.worker.name_resolver import NameNotResolved, Resolver, ResolveTimeout
from tests.webhook_receiver import Receiver, wait_until

SLOW_SUFFIX = ".slow.example"
BLOCK_MAX_S = 15.0  # a slow lookup never blocks longer than this, whatever happens in the test


class SlowDns:
    """Names ending in SLOW_SUFFIX block until released (then do not resolve); `fast.example` and the literal
    are 127.0.0.1."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.running = 0
        self.most_running = 0

    def __call__(self, host: str, port: int) -> list[tuple[int, Any]]:
        with self.lock:
            self.started.append(host)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if host.endswith(SLOW_SUFFIX):
                self.release.wait(BLOCK_MAX_S)
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            if host in ("fast.example", "127.0.0.1"):
                return [(socket.AF_INET, ipaddress.ip_address("127.0.0.1"))]
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        finally:
            with self.lock:
                self.running -= 1

    def slow_started(self) -> int:
        with self.lock:
            return sum(host.endswith(SLOW_SUFFIX) for host in self.started)


@pytest.fixture
def slow_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowDns]:
    dns = SlowDns()
    monkeypatch.setattr(safe_transport, "resolve", dns)
    yield dns
    dns.release.set()


def _endpoint(db: Database, scope: Scope, url: str) -> str:
    body = validate(rq.WebhookCreate, {"url": url, "events": ["reward.issued"]})
    return hooks.create_webhook(db, scope, body, allow_private=True).id


def _attempts(db: Database, scope: Scope, endpoint_id: str) -> list[dict[str, Any]]:
    store = reader(db).webhooks
    page = store.deliveries_page(scope, endpoint_id, PageRequest(limit=100), "created_at", None)
    return list(store.attempts_of([row.id for row in page.rows]))


def test_a_tenant_with_slow_dns_leaves_the_other_tenants_lookups_free(
    db: Database, scope: Scope, slow_dns: SlowDns
) -> None:
    """Organization A has six endpoints whose names hang; with 6 of 8 delivery slots its attempts would fill a
    resolver of 4 threads. Organization B's delivery (to 127.0.0.1, by name and by literal) still resolves at once
    and succeeds well within its deadline while A's attempts end as timeouts; A never has more than its slots of
    lookups running, and the attempts that gave up waiting for a slot leave no lookup behind."""
    other = Scope(organizations.create_organization(db, "Other organization").id, "sandbox")
    receiver = Receiver()
    settings = DeliverySettings(
        retry_delays_s=(600.0,),
        jitter=0.0,
        timeout_s=1.5,
        concurrency=8,
        per_tenant=6,
        per_endpoint=1,
        allow_private_targets=True,
    )
    worker = DeliveryWorker(db, settings)
    try:
        slow = [_endpoint(db, scope, f"http://hook-{n}{SLOW_SUFFIX}:{receiver.port}/h") for n in range(6)]
        for endpoint in slow:
            hooks.send_test(db, scope, endpoint)
        worker.start()
        wait_until(lambda: slow_dns.slow_started() >= 2, timeout_s=5)
        time.sleep(0.2)  # A's six attempts are all in flight, each waiting on a lookup or for a slot
        by_name = _endpoint(db, other, f"http://fast.example:{receiver.port}/hooks")
        by_literal = _endpoint(db, other, receiver.url)
        sent = [(endpoint, hooks.send_test(db, other, endpoint).id) for endpoint in (by_name, by_literal)]
        worker.notify()

        def delivered() -> list[Any] | None:
            found = [hooks.get_delivery(db, other, endpoint, delivery) for endpoint, delivery in sent]
            return found if all(d.attempts for d in found) else None

        for delivery in wait_until(delivered, timeout_s=10):
            assert delivery.status == "succeeded", delivery
            (attempt,) = delivery.attempts
            assert attempt.error is None and attempt.duration_ms < settings.timeout_s * 1000, attempt
        failed = wait_until(lambda: len(a := [x for e in slow for x in _attempts(db, scope, e)]) == 6 and a, 10)
        assert all(a.error == "timeout" and a.status_code is None for a in failed)
        assert slow_dns.most_running <= 2 + 1  # A's two slots, and at most B's one lookup beside them
        assert slow_dns.slow_started() == 2  # the other four attempts gave up waiting for a slot: no lookup ran
        time.sleep(0.3)
        assert slow_dns.slow_started() == 2
    finally:
        slow_dns.release.set()
        worker.stop(timeout_s=10)
        receiver.close()


# -- the resolver itself ------------------------------------------------------------------------------------
def test_one_lookup_per_name_and_a_short_cache_of_answers_and_failures() -> None:
    calls: list[str] = []
    gate = threading.Event()
    now = [0.0]

    def lookup(host: str, port: int) -> list[str]:
        calls.append(host)
        gate.wait(BLOCK_MAX_S)
        if host == "gone.example":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [f"{host}:{port}"]

    resolver: Resolver[list[str]] = Resolver(lookup, threads=4, positive_s=30.0, negative_s=5.0, clock=lambda: now[0])
    try:
        # two attempts time out on the same slow name: one lookup, not two
        for _ in range(2):
            with pytest.raises(ResolveTimeout):
                resolver.resolve("slow.example", 443, owner="org_a", timeout_s=0.1)
        assert calls == ["slow.example"]
        gate.set()  # the lookup ends after its attempts gave up: its answer is kept
        wait_until(lambda: resolver.running == 0, timeout_s=5)
        assert resolver.resolve("slow.example", 443, owner="org_a", timeout_s=0.1) == ["slow.example:443"]
        assert calls == ["slow.example"]
        with pytest.raises(socket.gaierror):
            resolver.resolve("gone.example", 443, owner="org_a", timeout_s=1.0)
        with pytest.raises(NameNotResolved):  # the failure is cached too, for less time
            resolver.resolve("gone.example", 443, owner="org_a", timeout_s=1.0)
        assert calls == ["slow.example", "gone.example"]
        now[0] = 5.0
        with pytest.raises(socket.gaierror):
            resolver.resolve("gone.example", 443, owner="org_a", timeout_s=1.0)
        assert resolver.resolve("slow.example", 443, owner="org_a", timeout_s=1.0) == ["slow.example:443"]
        now[0] = 30.0
        assert resolver.resolve("slow.example", 443, owner="org_a", timeout_s=1.0) == ["slow.example:443"]
        assert calls == ["slow.example", "gone.example", "gone.example", "slow.example"]
    finally:
        gate.set()
        resolver.close()


def test_the_cache_holds_a_bounded_number_of_names() -> None:
    calls: list[str] = []

    def lookup(host: str, port: int) -> str:
        calls.append(host)
        return host

    resolver: Resolver[str] = Resolver(lookup, max_names=3)
    try:
        for name in ["a", "b", "c", "d", "a"]:
            assert resolver.resolve(name, 80, owner="", timeout_s=1.0) == name
        assert calls == ["a", "b", "c", "d", "a"]  # "a" was the oldest of four: dropped
        assert resolver.resolve("d", 80, owner="", timeout_s=1.0) == "d" and len(calls) == 5
    finally:
        resolver.close()


def test_an_owner_never_holds_every_thread_and_a_waiting_attempt_leaves_no_lookup() -> None:
    gate = threading.Event()
    started: list[str] = []

    def lookup(host: str, port: int) -> str:
        started.append(host)
        if host.endswith(SLOW_SUFFIX):
            gate.wait(BLOCK_MAX_S)
        return host

    resolver: Resolver[str] = Resolver(lookup, threads=4, per_owner=2)
    try:
        for n in range(4):  # the first two take org_a's slots; the next two wait for one and give up
            with pytest.raises(ResolveTimeout):
                resolver.resolve(f"h{n}{SLOW_SUFFIX}", 443, owner="org_a", timeout_s=0.1)
        assert started == [f"h0{SLOW_SUFFIX}", f"h1{SLOW_SUFFIX}"] and resolver.running == 2
        started_at = time.monotonic()
        assert resolver.resolve("quick.example", 443, owner="org_b", timeout_s=1.0) == "quick.example"
        assert time.monotonic() - started_at < 0.5
        gate.set()
        wait_until(lambda: resolver.running == 0, timeout_s=5)
        assert started == [f"h0{SLOW_SUFFIX}", f"h1{SLOW_SUFFIX}", "quick.example"]
        with pytest.raises(ValueError):
            Resolver(lookup, threads=4, per_owner=4)
    finally:
        gate.set()
        resolver.close()
