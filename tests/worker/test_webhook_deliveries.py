"""The delivery path in-process over a real DuckDB file: fan-out (who receives what, once), the retry schedule
with jitter, the moves of a delivery after each attempt, and the queue depths operators see."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.service import customers, deliveries, event_intake
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import AttemptOutcome, DeliverySettings
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.uow import reader
from tests.conftest import World


def _endpoint(db: Database, scope: Scope, kinds: list[str], url: str = "http://127.0.0.1:9/h") -> str:
    body = validate(rq.WebhookCreate, {"url": url, "events": kinds})
    return hooks.create_webhook(db, scope, body, allow_private=True).id  # nothing is sent here


def _order(db: Database, scope: Scope, external_id: str, customer: str) -> None:
    body = {
        "type": "order.completed",
        "external_event_id": external_id,
        "customer_id": customer,
        "data": {"amount": 40},
    }
    event_intake.submit_event(db, scope, validate(rq.EventCreate, body))


def _kinds(db: Database, scope: Scope, endpoint_id: str) -> list[str]:
    return [d.kind for d in reader(db).webhooks.deliveries_page(scope, endpoint_id, _page(), "created_at", None).rows]


def _page() -> PageRequest:
    return PageRequest(limit=100)


def test_fan_out_gives_each_subscribed_endpoint_of_the_tenant_one_delivery(world: World) -> None:
    db, scope = world.db, world.scope
    production = Scope(scope.organization_id, "production")
    star = world.asset()
    world.per_rate_programme(star, rate="0.1")
    customer = world.customer("ada")
    wallet = world.wallet(customer)
    rewards_and_freezes = _endpoint(db, scope, ["reward.issued", "wallet.frozen"])
    pauses = _endpoint(db, scope, ["asset.paused"])
    elsewhere = _endpoint(db, production, ["reward.issued", "wallet.frozen"], "https://hooks.example.com/h")

    _order(db, scope, "o-1", "ada")
    _order(db, scope, "o-2", "ada")
    assert deliveries.queue_depths(db) == {"event_queue_depth": 2, "outbox_undispatched": 0, "pending_deliveries": 0}
    event_processing.process_all(db)
    customers.freeze_wallet(db, scope, wallet.id)
    assert deliveries.queue_depths(db) == {"event_queue_depth": 0, "outbox_undispatched": 3, "pending_deliveries": 0}

    late = _endpoint(db, scope, ["reward.issued", "wallet.frozen"])  # registered after the changes
    assert deliveries.fan_out(db) == 3
    assert deliveries.fan_out(db) == 0  # nothing is fanned out twice
    assert _kinds(db, scope, rewards_and_freezes) == ["reward.issued", "reward.issued", "wallet.frozen"]
    assert _kinds(db, scope, pauses) == [] and _kinds(db, production, elsewhere) == [] and _kinds(db, scope, late) == []
    assert deliveries.queue_depths(db) == {"event_queue_depth": 0, "outbox_undispatched": 0, "pending_deliveries": 3}

    customers.unfreeze_wallet(db, scope, wallet.id)
    _order(db, scope, "o-3", "ada")
    event_processing.process_all(db)
    assert deliveries.fan_out(db) == 1
    assert _kinds(db, scope, late) == ["reward.issued"]
    page = hooks.list_deliveries(db, scope, rewards_and_freezes, _page())
    bodies = [d.body for d in page.data]
    assert all(f'"id":"{d.id}"' in d.body and d.status == "pending" and d.attempts == [] for d in page.data)
    assert len(set(bodies)) == 4


def test_the_retry_schedule_has_jitter_and_an_end() -> None:
    settings = DeliverySettings(retry_delays_s=(10, 60), jitter=0.2)
    first = [settings.next_delay_s(1) for _ in range(200)]
    assert all(d is not None and 8 <= d <= 12 for d in first) and len(set(first)) > 100
    second = settings.next_delay_s(2)
    assert second is not None and 48 <= second <= 72
    assert settings.next_delay_s(3) is None
    parsed = DeliverySettings.from_env(
        {"REWARDS_LAB_WEBHOOK_RETRY_DELAYS": "0.5, 2", "REWARDS_LAB_WEBHOOK_TIMEOUT_S": "3"}
    )
    assert parsed.retry_delays_s == (0.5, 2.0) and parsed.timeout_s == 3.0
    assert parsed.lease_s == 3.0 + deliveries.LEASE_MARGIN_S
    assert DeliverySettings.from_env({}).retry_delays_s == deliveries.DEFAULT_RETRY_DELAYS_S
    short = DeliverySettings.from_env({"REWARDS_LAB_WEBHOOK_TIMEOUT_S": "2", "REWARDS_LAB_WEBHOOK_LEASE_MARGIN_S": "3"})
    assert (short.lease_margin_s, short.lease_s) == (3.0, 5.0)
    for refused in ({"REWARDS_LAB_WEBHOOK_RETRY_DELAYS": "-1"}, {"REWARDS_LAB_WEBHOOK_LEASE_MARGIN_S": "0"}):
        with pytest.raises(ValueError):
            DeliverySettings.from_env(refused)


def _attempt(db: Database, settings: DeliverySettings, status_code: int | None) -> str:
    (due,) = deliveries.due(db, 10, [])
    outcome = AttemptOutcome(utcnow(), 5, status_code, None if status_code == 200 else "refused")
    return deliveries.record_outcome(db, settings, due, outcome)


def test_a_delivery_retries_on_schedule_then_fails_and_a_replay_starts_the_schedule_again(world: World) -> None:
    db, scope = world.db, world.scope
    endpoint = _endpoint(db, scope, ["reward.issued"])
    test = hooks.send_test(db, scope, endpoint)
    settings = DeliverySettings(retry_delays_s=(0, 3600), jitter=0.0)

    assert _attempt(db, settings, 503) == "pending"  # due again at once (delay 0)
    assert _attempt(db, settings, None) == "pending"  # due in an hour
    assert deliveries.due(db, 10, []) == []
    stored = reader(db).webhooks.delivery(scope, test.id)
    assert stored is not None and stored.next_attempt_at - utcnow() > timedelta(minutes=59)

    with db.transaction() as con:  # fast-forward the clock of this delivery
        con.execute("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?", [utcnow(), test.id])
    assert _attempt(db, settings, 500) == "failed"
    assert deliveries.due(db, 10, []) == []
    failed = hooks.get_delivery(db, scope, endpoint, test.id)
    assert failed.status == "failed" and [a.number for a in failed.attempts] == [1, 2, 3]
    assert [a.status_code for a in failed.attempts] == [503, None, 500] and failed.next_attempt_at is None

    replayed = hooks.replay_delivery(db, scope, endpoint, test.id)
    assert replayed.status == "pending" and replayed.attempt_count == 3
    assert _attempt(db, settings, 500) == "pending"  # the schedule starts again
    assert _attempt(db, settings, 200) == "succeeded"
    done = hooks.get_delivery(db, scope, endpoint, test.id)
    assert [a.succeeded for a in done.attempts] == [False, False, False, False, True]
    assert done.completed_at is not None and deliveries.due(db, 10, []) == []


def test_pending_deliveries_of_a_disabled_endpoint_end_failed_unsent(world: World) -> None:
    db, scope = world.db, world.scope
    endpoint = _endpoint(db, scope, ["reward.issued"])
    hooks.send_test(db, scope, endpoint)
    hooks.disable_webhook(db, scope, endpoint)
    (due,) = deliveries.due(db, 10, [])
    assert due.endpoint_status == "disabled"
    status = deliveries.record_outcome(
        db, DeliverySettings(), due, AttemptOutcome(utcnow(), 0, None, "endpoint disabled")
    )
    assert status == "failed"


def test_one_endpoints_backlog_never_takes_every_sending_slot(world: World) -> None:
    db, scope = world.db, world.scope
    slow = _endpoint(db, scope, ["reward.issued"])
    fast = _endpoint(db, scope, ["reward.issued"])
    for _ in range(12):
        hooks.send_test(db, scope, slow)
    latest = hooks.send_test(db, scope, fast)  # the newest of all: behind the slow endpoint's backlog

    candidates = deliveries.due(db, 8, [], per_endpoint=4)
    assert Counter(row.endpoint_id for row in candidates) == {slow: 4, fast: 1}
    assert deliveries.due(db, 100, [])[-1].id == latest.id  # oldest first without the cap
    # with the slow endpoint's four already in flight, only the fast one's is sent now
    in_flight = [row.id for row in candidates if row.endpoint_id == slow]
    more = deliveries.due(db, 8, in_flight, per_endpoint=4)
    picked = deliveries.pick_fair(more, Counter({slow: 4}), free=4, per_endpoint=4)
    assert [row.id for row in picked] == [latest.id]
    assert len(deliveries.pick_fair(more, Counter(), free=3, per_endpoint=4)) == 3
