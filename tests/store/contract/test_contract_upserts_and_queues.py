"""Upserts and queues on both stores: idempotency keys, the cap and budget counters (replaced, past 2^64), the
outbox and its dispatch, webhook deliveries (an all-NULL column, due order, attempts, requeue) and lots."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import pytest

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import (
    ExecutionFilter,
    ExecutionRecord,
    LotFilter,
    LotTaken,
    NewDelivery,
    NewLot,
    Usage,
    UsageKey,
)
from tests.store.contract.support import world_of


def test_an_idempotency_key_is_stored_per_scope_and_replaced(store: Store, scope: Scope) -> None:
    other = Scope(scope.organization_id, "production")
    with store.unit_of_work() as uow:
        uow.idempotency.add(scope, "key-1", "issue", "hash-a", '{"amount": "1.00"}', 201)
    reader = store.reader_repositories()
    row = reader.idempotency.get(scope, "key-1")
    assert row is not None and (row.operation, row.request_hash, row.status_code) == ("issue", "hash-a", 201)
    assert row.response_value() == {"amount": "1.00"} and row.created_at.tzinfo is None
    assert reader.idempotency.get(other, "key-1") is None and reader.idempotency.get(scope, "KEY-1") is None
    with store.unit_of_work() as uow:  # the same key again: the row is replaced, not doubled
        uow.idempotency.add(scope, "key-1", "redeem", "hash-b", "{}", 200)
        uow.idempotency.add(other, "key-1", "issue", "hash-c", "{}", 201)
    again = store.reader_repositories().idempotency.get(scope, "key-1")
    assert again is not None and (again.operation, again.request_hash, again.status_code) == ("redeem", "hash-b", 200)


def test_usage_counters_are_replaced_and_summed_past_2_to_the_64(store: Store, scope: Scope) -> None:
    big = 2**64 + 7
    keys = [UsageKey("prg_1", "budget:month", "", "2026-01-01"), UsageKey("prg_1", "budget:month", "", "2026-02-01")]
    rule = UsageKey("prg_1", "rule:r1:day", "cus_1", "2026-02-01")
    with store.unit_of_work() as uow:
        uow.limit_usage.save(scope, {})
        uow.limit_usage.save(scope, {keys[0]: Usage(5, 1), keys[1]: Usage(big, 2), rule: Usage(3, 1)})
    with store.unit_of_work() as uow:
        uow.limit_usage.save(scope, {keys[0]: Usage(big, 3)})  # replaced
        uow.limit_usage.save(Scope(scope.organization_id, "production"), {keys[0]: Usage(1, 1)})
    reader = store.reader_repositories()
    assert reader.limit_usage.load(scope, []) == {}
    loaded = reader.limit_usage.load(scope, [*keys, rule, UsageKey("prg_1", "budget:month", "", "2025-12-01")])
    assert loaded == {keys[0]: Usage(big, 3), keys[1]: Usage(big, 2), rule: Usage(3, 1)}
    assert all(type(u.amount_minor) is int for u in loaded.values())
    periods = reader.limit_usage.periods(scope, "prg_1", "budget:month", 10)
    assert periods == [("2026-02-01", Usage(big, 2)), ("2026-01-01", Usage(big, 3))]
    assert reader.limit_usage.periods(scope, "prg_1", "budget:month", 1) == [("2026-02-01", Usage(big, 2))]


def test_the_outbox_keeps_its_order_and_dispatch_marks_messages(store: Store, scope: Scope) -> None:
    messages = [(f"obx_{n}", "reward.issued", f"txn_{n}", f'{{"n": {n}}}') for n in (3, 1, 2)]
    with store.unit_of_work() as uow:
        uow.outbox.add_many(scope, [])
        uow.outbox.add_many(scope, messages)
    reader = store.reader_repositories()
    assert [m.id for m in reader.outbox.of_scope(scope)] == ["obx_1", "obx_2", "obx_3"]
    assert [m.id for m in reader.outbox.undispatched(2)] == ["obx_1", "obx_2"]
    assert reader.webhooks.undispatched_count() == 3
    with store.unit_of_work() as uow:
        uow.webhooks.mark_dispatched([])
        uow.webhooks.mark_dispatched(["obx_1", "obx_3", "obx_absent"])
    reader = store.reader_repositories()
    assert [m.id for m in reader.outbox.undispatched(10)] == ["obx_2"] and reader.webhooks.undispatched_count() == 1
    sent = {m.id: m for m in reader.outbox.of_scope(scope)}
    assert sent["obx_1"].dispatched_at is not None and sent["obx_2"].dispatched_at is None
    assert sent["obx_3"].payload_value() == {"n": 3} and sent["obx_3"].resource_id == "txn_3"


def test_webhook_deliveries_with_an_all_null_column_are_due_attempted_and_requeued(store: Store, scope: Scope) -> None:
    """`add_deliveries` registers an Arrow table inferred by `pa.table`: test deliveries (no outbox message) give
    an `outbox_id` column of Arrow type null."""
    t0 = datetime(2026, 3, 1, 12, 0, 0, 250_000)
    with store.unit_of_work() as uow:
        endpoint = uow.webhooks.add_endpoint(scope, "whe_1", "https://example.com/hook", ["reward.issued"], "s", "whs")
        rows = [
            NewDelivery(f"whd_{i}", *scope.params, endpoint.id, None, "webhook.test", f'{{"n": {i}}}') for i in (2, 1)
        ]
        uow.webhooks.add_deliveries(rows, t0)
    reader = store.reader_repositories()
    assert reader.webhooks.due(t0 - timedelta(microseconds=1), 10, [], 10, 10, []) == []
    due = reader.webhooks.due(t0, 10, [], 10, 10, [])
    assert [(d.id, d.body, d.next_attempt_at, d.url) for d in due] == [
        ("whd_1", '{"n": 1}', t0, "https://example.com/hook"),
        ("whd_2", '{"n": 2}', t0, "https://example.com/hook"),
    ]
    assert [d.id for d in reader.webhooks.due(t0, 10, ["whd_1"], 10, 10, [])] == ["whd_2"]
    assert [d.id for d in reader.webhooks.due(t0, 10, [], 1, 10, [])] == ["whd_1"]  # one per endpoint
    assert reader.webhooks.due(t0, 10, [], 10, 10, [endpoint.id]) == []
    assert reader.webhooks.pending_count() == 2
    with store.unit_of_work() as uow:
        uow.webhooks.record_attempt(
            due[0],
            attempted_at=t0,
            duration_ms=12,
            status_code=None,
            error="timeout",
            succeeded=False,
            next_status="failed",
            next_attempt_at=None,
        )
    reader = store.reader_repositories()
    failed = reader.webhooks.delivery(scope, "whd_1")
    assert failed is not None and (failed.status, failed.attempt_count, failed.outbox_id) == ("failed", 1, None)
    attempts = reader.webhooks.attempts_of(["whd_1", "whd_2"])
    assert [(a.delivery_id, a.number, a.status_code, a.error, a.succeeded, a.attempted_at) for a in attempts] == [
        ("whd_1", 1, None, "timeout", False, t0)
    ]
    assert reader.webhooks.attempts_of([]) == [] and reader.webhooks.pending_count() == 1
    with store.unit_of_work() as uow:
        uow.webhooks.requeue(scope, "whd_1", t0 + timedelta(hours=1))
    again = store.reader_repositories().webhooks.delivery(scope, "whd_1")
    assert again is not None and (again.status, again.round_attempts, again.attempt_count) == ("pending", 0, 1)
    assert again.next_attempt_at == t0 + timedelta(hours=1) and again.completed_at is None
    listed = store.reader_repositories().webhooks.deliveries_page(scope, endpoint.id, PageRequest(), "created_at", None)
    assert sorted(d.id for d in listed.rows) == ["whd_1", "whd_2"]


def test_lots_are_made_taken_from_and_expired_alike_on_both_stores(store: Store) -> None:
    """`lots.write` (DuckDB: Arrow tables by a replacement scan; PostgreSQL: typed arrays): lots made with amounts
    past 2^64, a lot taken from twice in one write (one row, the sum), an expiry marking its lot."""
    world = world_of(store)
    wallet = world.wallet()
    t0 = datetime(2026, 1, 1, 12, 0, 0)
    big = 2**70
    made = [
        NewLot("lot_a", wallet.id, "ast_x", t0, t0 + timedelta(days=30), big, "txn_a"),
        NewLot("lot_b", wallet.id, "ast_x", t0 + timedelta(hours=1), None, 500, "txn_b"),
    ]
    with store.unit_of_work() as uow:
        uow.lots.write(world.scope, made, [])
    with store.unit_of_work() as uow:
        uow.lots.write(
            world.scope, [], [LotTaken("lot_a", 100), LotTaken("lot_a", 50), LotTaken("lot_b", 500, "txn_x")]
        )
    reader = store.reader_repositories()
    lots = reader.lots.open_lots(world.scope, [(wallet.id, "ast_x")])[(wallet.id, "ast_x")]
    assert [(lot.id, lot.remaining, type(lot.remaining)) for lot in lots] == [("lot_a", big - 150, int)]
    assert reader.lots.next_expiry(world.scope, wallet.id) == {"ast_x": (t0 + timedelta(days=30), big - 150)}
    rows = reader.lots.page(world.scope, wallet.id, PageRequest(), LotFilter(status="expired")).rows
    assert [(row.id, row.expired_minor, row.remaining_minor) for row in rows] == [("lot_b", 500, 0)]
    assert [lot.id for lot in reader.lots.due(t0 + timedelta(days=31), 10)] == ["lot_a"]


def test_a_lot_made_and_taken_from_in_one_write_keeps_what_is_left(store: Store) -> None:
    """A batch may take from a lot it makes (an order and a refund processed together): `lots.write` makes the
    lots before it takes from them, so the taking is not lost on a row that did not exist yet."""
    world = world_of(store)
    wallet = world.wallet()
    t0 = datetime(2026, 1, 1, 12, 0, 0)
    made = [NewLot("lot_n", wallet.id, "ast_x", t0, t0 + timedelta(days=1), 25, "txn_n")]
    with store.unit_of_work() as uow:
        uow.lots.write(world.scope, made, [LotTaken("lot_n", 10), LotTaken("lot_n", 4)])
    reader = store.reader_repositories()
    lots = reader.lots.open_lots(world.scope, [(wallet.id, "ast_x")])[(wallet.id, "ast_x")]
    assert [(lot.id, lot.remaining) for lot in lots] == [("lot_n", 11)]
    rows = reader.lots.page(world.scope, wallet.id, PageRequest(), LotFilter()).rows
    assert [(row.amount_minor, row.remaining_minor, row.expired_minor) for row in rows] == [(25, 11, 0)]


def _execution(n: int, status: str = "issued", txn: str | None = None) -> ExecutionRecord:
    return ExecutionRecord(
        f"rex_{n:02}", f"evt_{n % 2}", f"e-{n % 2}", "cus_1", "prg_1", "ver_1", 1, f"rul_{n}", 0, "ast_1",
        "wal_1", 100 * n, status, None, txn, f'{{"n": {n}}}',
    )  # fmt: skip


def test_executions_are_inserted_once_upserted_on_replay_and_counted_back(store: Store, scope: Scope) -> None:
    with store.unit_of_work() as uow:
        uow.executions.insert_many(scope, [])
        uow.executions.insert_many(scope, [_execution(n) for n in range(1, 6)])
    # The same key again: refused, nothing written. DuckDB's error is then the TransactionException of the
    # `unregister` in `_write`'s finally (its transaction is aborted), PostgreSQL's the translated
    # ConstraintException: both `duckdb.Error` (noted in notes/i32-contract.md).
    with pytest.raises(duckdb.Error), store.unit_of_work() as uow:
        uow.executions.insert_many(scope, [_execution(1)._replace(id="rex_other")])
    reader = store.reader_repositories()
    first = {e.id: e for e in reader.executions.for_events(scope, ["evt_0", "evt_1"])}
    assert sorted(first) == [f"rex_{n:02}" for n in range(1, 6)] and reader.executions.for_events(scope, []) == []
    with store.unit_of_work() as uow:  # a replay: the stored rows take the new outcome, a new one is added
        uow.executions.upsert_many(scope, [_execution(2, "failed"), _execution(6, "issued", "txn_6")])
        uow.executions.add_reversed(scope, {"rex_01": 40, "rex_03": 300})
        uow.executions.add_reversed(scope, {"rex_01": 60})
        uow.executions.add_taken_back(scope, {"rex_01": 25})
        uow.executions.add_reversed(scope, {})
    reader = store.reader_repositories()
    now = {e.id: e for e in reader.executions.for_events(scope, ["evt_0", "evt_1"])}
    assert len(now) == 6 and now["rex_02"].status == "failed" and now["rex_06"].transaction_id == "txn_6"
    assert now["rex_02"].created_at == first["rex_02"].created_at
    assert (now["rex_01"].reversed_minor, now["rex_01"].taken_back_minor, now["rex_03"].reversed_minor) == (
        100,
        25,
        300,
    )
    assert now["rex_04"].inputs_value() == {"n": 4}
    for direction in ("asc", "desc"):
        seen, cursor = [], None
        while True:
            request = PageRequest(limit=4, cursor=cursor, direction=direction)  # type: ignore[arg-type]
            page = reader.executions.page(scope, request, "created_at", ExecutionFilter())
            seen += [e.id for e in page.rows]
            if not page.has_more:
                break
            cursor = page.next_cursor
        expected = sorted(now, key=lambda i: (now[i].created_at, i), reverse=direction == "desc")
        assert seen == expected, direction
    failed = reader.executions.page(scope, PageRequest(), "created_at", ExecutionFilter(status="failed")).rows
    assert [e.id for e in failed] == ["rex_02"]
