"""Slow receivers stall no one (issue 14, item 9): one total deadline per attempt (a receiver dripping its answer
is cut at the deadline, not kept alive by each byte), a cap per organization on the requests in flight, and a
circuit breaker per endpoint. Receivers are real, slow on purpose, on 127.0.0.1 (private targets allowed for these
tests), and every wait is bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import deliveries, organizations
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.store.database import Database
from rewards_lab.store.uow import reader
from rewards_lab.worker.circuit_breaker import CircuitBreakers
from rewards_lab.worker.deliveries import DeliveryWorker
from tests.live_server import LiveServer, start_server
from tests.webhook_receiver import Dripper, Receiver, ok, wait_until


@pytest.fixture(scope="module")
def deadline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("slow") / "service.duckdb"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REWARDS_LAB_WEBHOOK_TIMEOUT_S", "1")
        env.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", "60")
        env.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")
        live = start_server(db, "Acme")
    yield live
    live.stop()


def test_a_dripping_receiver_is_cut_at_the_attempts_deadline(deadline_server: LiveServer) -> None:
    """One byte every 0.3 s never trips a per-read timeout of 1 s; the attempt's total deadline of 1 s does."""
    dripper = Dripper(drip_s=0.3, max_s=20.0)
    try:
        with httpx.Client(base_url=deadline_server.base_url, headers=deadline_server.headers(), timeout=10) as http:
            hook = ok(http.post("/webhooks", json={"url": dripper.url, "events": ["reward.issued"]}), 201)
            ok(http.post(f"/webhooks/{hook['id']}/test"), 202)

            def attempted() -> dict[str, Any] | None:
                (delivery,) = ok(http.get(f"/webhooks/{hook['id']}/deliveries"))
                return delivery if delivery["attempts"] else None

            delivery = wait_until(attempted, timeout_s=15)
        (attempt,) = delivery["attempts"]
        assert attempt["error"] == "timeout" and attempt["status_code"] is None
        assert 900 <= attempt["duration_ms"] < 2500, attempt
        assert delivery["status"] == "pending"  # retried later, like any failure
    finally:
        dripper.close()


def _endpoint(db: Database, scope: Scope, url: str) -> str:
    body = validate(rq.WebhookCreate, {"url": url, "events": ["reward.issued"]})
    return hooks.create_webhook(db, scope, body, allow_private=True).id


def _attempts(db: Database, scope: Scope, endpoint_id: str) -> list[dict[str, Any]]:
    store = reader(db).webhooks
    page = store.deliveries_page(scope, endpoint_id, PageRequest(limit=100), "created_at", None)
    return list(store.attempts_of([row.id for row in page.rows]))


def test_two_dripping_receivers_hold_neither_every_slot_nor_their_tenants_other_deliveries(
    db: Database, scope: Scope
) -> None:
    """Organization A has two dripping endpoints with a backlog; organization B one quick endpoint whose delivery is
    the newest of all. With 4 slots and 2 per endpoint, A's endpoints alone would fill every slot; the cap of 2 per
    organization leaves B's delivery free to go at once, before any of A's attempts ends. After 2 consecutive
    failures each of A's circuits opens: their deliveries wait, pending, with no further attempt (at most
    failures + per_endpoint - 1 attempts in all, as the last ones may already be in flight)."""
    other = Scope(organizations.create_organization(db, "Other organization").id, "sandbox")
    drippers = [Dripper(drip_s=0.3, max_s=10.0), Dripper(drip_s=0.3, max_s=10.0)]
    quick = Receiver()
    settings = DeliverySettings(
        retry_delays_s=(0.0,) * 20,  # without the breaker every failure would be retried at once
        jitter=0.0,
        timeout_s=2.0,
        concurrency=4,
        per_tenant=2,
        per_endpoint=2,
        breaker_failures=2,
        breaker_cool_down_s=600.0,
        allow_private_targets=True,
    )
    worker = DeliveryWorker(db, settings)
    try:
        slow = [_endpoint(db, scope, dripper.url) for dripper in drippers]
        for _ in range(4):
            for endpoint in slow:  # interleaved: the oldest deliveries alternate between the two endpoints
                hooks.send_test(db, scope, endpoint)
        fast = _endpoint(db, other, quick.url)
        newest = hooks.send_test(db, other, fast)
        worker.start()

        def delivered() -> Any:
            return (d := hooks.get_delivery(db, other, fast, newest.id)).status == "succeeded" and d

        done = wait_until(delivered, timeout_s=10)
        (quick_attempt,) = done.attempts
        slow_attempts = wait_until(lambda: [a for e in slow for a in _attempts(db, scope, e)], timeout_s=10)
        first_slow_end = min(
            a.attempted_at.timestamp() + a.duration_ms / 1000 for a in slow_attempts
        )  # naive UTC on both sides
        assert quick_attempt.attempted_at.replace(tzinfo=None).timestamp() < first_slow_end

        # both circuits open after 2 failures each; then nothing more is attempted while the cool-down runs
        def opened() -> bool:
            recorded = all(len(_attempts(db, scope, e)) >= 2 for e in slow)
            return recorded and all(worker.breakers.is_open(e) for e in slow)

        wait_until(opened, timeout_s=15)
        time.sleep(2.5)  # longer than one attempt's deadline: what was in flight when a circuit opened has ended
        settled = {e: len(_attempts(db, scope, e)) for e in slow}
        # 2 failures open a circuit; with 2 in flight per endpoint, one more may have been sent just before
        assert all(2 <= count <= 3 for count in settled.values()), settled
        time.sleep(2.5)  # a closed circuit would have tried again by now (no retry delay)
        assert {e: len(_attempts(db, scope, e)) for e in slow} == settled
        assert all(a.error == "timeout" for e in slow for a in _attempts(db, scope, e))
        for endpoint in slow:
            pending = (
                reader(db).webhooks.deliveries_page(scope, endpoint, PageRequest(limit=100), "created_at", None).rows
            )
            assert len(pending) == 4 and all(row.status == "pending" for row in pending)
    finally:
        worker.stop(timeout_s=10)
        quick.close()
        for dripper in drippers:
            dripper.close()


def test_a_circuit_opens_after_consecutive_failures_and_half_opens_for_one_probe() -> None:
    now = [0.0]
    breakers = CircuitBreakers(failures=3, cool_down_s=60.0, clock=lambda: now[0])
    for _ in range(2):
        breakers.record("whk_a", succeeded=False)
    breakers.record("whk_a", succeeded=True)  # a success resets the count
    for _ in range(2):
        breakers.record("whk_a", succeeded=False)
    assert breakers.blocked() == ([], []) and not breakers.is_open("whk_a")
    breakers.record("whk_a", succeeded=False)  # the third in a row
    assert breakers.blocked() == (["whk_a"], []) and breakers.is_open("whk_a")
    now[0] = 59.9
    assert breakers.blocked() == (["whk_a"], [])
    now[0] = 60.0
    assert breakers.blocked() == ([], ["whk_a"])  # half-open: one probe may go
    breakers.started("whk_a")
    assert breakers.blocked() == (["whk_a"], [])  # while the probe is in flight, nothing else goes
    breakers.record("whk_a", succeeded=False)  # the probe failed: open for another cool-down
    assert breakers.blocked() == (["whk_a"], [])
    now[0] = 120.0
    assert breakers.blocked() == ([], ["whk_a"])
    breakers.started("whk_a")
    breakers.record("whk_a", succeeded=True)  # the probe succeeded: closed
    assert breakers.blocked() == ([], []) and not breakers.is_open("whk_a")
    with pytest.raises(ValueError):
        CircuitBreakers(failures=0, cool_down_s=1.0)


def test_due_deliveries_are_capped_per_organization(db: Database, scope: Scope) -> None:
    other = Scope(organizations.create_organization(db, "Other organization").id, "sandbox")
    mine = [_endpoint(db, scope, f"http://127.0.0.1:9/{n}") for n in range(3)]
    theirs = _endpoint(db, other, "http://127.0.0.1:9/other")
    for endpoint in mine:
        for _ in range(3):
            hooks.send_test(db, scope, endpoint)
    hooks.send_test(db, other, theirs)
    rows = deliveries.due(db, 100, [], per_endpoint=2, per_tenant=3)
    assert sum(row.organization_id == scope.organization_id for row in rows) == 3
    assert sum(row.endpoint_id == theirs for row in rows) == 1
    skipped = deliveries.due(db, 100, [], per_endpoint=2, per_tenant=10, exclude_endpoints=mine[:2])
    assert {row.endpoint_id for row in skipped} == {mine[2], theirs}
    hooks.disable_webhook(db, scope, mine[0])  # a disabled endpoint's deliveries still come, to end failed unsent
    skipped = deliveries.due(db, 100, [], per_endpoint=2, per_tenant=10, exclude_endpoints=mine[:2])
    assert {row.endpoint_id for row in skipped} == {mine[0], mine[2], theirs}
