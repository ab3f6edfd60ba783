"""The statements rewritten portably for issue 32 (the three QUALIFY, the EXCLUDE, the zipped list parameters) and
retention's bounded delete (`rowid`, rendered as `ctid`) run through their own repositories against both engines at
once, over the same rows: each statement runs on DuckDB as written and on PostgreSQL as `store.dialect` renders it,
and the two must answer the same rows (in the same order where one is asked for), or touch as many, before the
repository gets DuckDB's answer. Then the tables are read back on both: the same effects. DuckDB's own behaviour is
held by the repositories' existing tests (tests/engine, tests/worker, ...)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pytest
import sqlglot

from rewards_lab.contract.scope import Scope
from rewards_lab.store.dialect import render
from rewards_lab.store.executions import ExecutionRepository
from rewards_lab.store.interfaces import Usage, UsageKey
from rewards_lab.store.ledger import LedgerRepository
from rewards_lab.store.limit_usage import LimitUsageRepository
from rewards_lab.store.lots import LotRepository
from rewards_lab.store.retention import delete_expired
from rewards_lab.store.schema import steps
from rewards_lab.store.wallets import WalletRepository
from rewards_lab.store.webhooks import WebhookRepository

T0 = datetime(2026, 3, 1, 12, 0, 0)
A = Scope("org_a", "sandbox")
B = Scope("org_b", "sandbox")


def _ints(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(int(v) if isinstance(v, Decimal) else v for v in row) for row in rows]


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


class Both:
    """A connection for the repositories that runs every statement on both engines and compares the answers."""

    def __init__(self, db: duckdb.DuckDBPyConnection, pg: psycopg.Connection[Any]) -> None:
        self.db, self.pg = db, pg
        self.statements = 0

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> _Rows:
        rows = self.db.execute(sql, list(params or [])).fetchall()
        cursor = self.pg.execute(render(sql), list(params or []))
        if cursor.description is None:  # INSERT/UPDATE/DELETE: DuckDB answers with the count of rows touched
            assert rows == [(cursor.rowcount,)], f"{sql}\n{render(sql)}"
        elif sqlglot.parse_one(sql, read="duckdb").args.get("order") is not None:
            assert _ints(cursor.fetchall()) == rows, f"{sql}\n{render(sql)}"
        else:  # no order asked for: the same rows, in any order
            assert sorted(_ints(cursor.fetchall()), key=repr) == sorted(rows, key=repr), f"{sql}\n{render(sql)}"
        self.statements += 1
        return _Rows(rows)

    def insert(self, table: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            marks = ", ".join("?" for _ in row)
            self.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})", list(row.values()))

    def same(self, sql: str) -> list[tuple[Any, ...]]:
        """A read of both engines' tables: the same rows (and not none: an empty read proves nothing)."""
        rows = self.execute(sql).fetchall()
        assert rows, sql
        return rows


@pytest.fixture
def both(pg_database: str) -> Iterator[Both]:
    db = duckdb.connect()
    with psycopg.connect(pg_database, autocommit=True) as pg:
        for step in steps("duckdb", ()):
            for sql in step.statements:
                db.execute(sql)
        for step in steps("postgres", ()):
            for sql in step.statements:
                pg.execute(render(sql).replace("%%", "%"))
        yield Both(db, pg)
    db.close()


def _tenant(scope: Scope) -> dict[str, str]:
    return {"organization_id": scope.organization_id, "environment": scope.environment}


def test_reward_wallets_take_each_customers_first_wallet_on_both(both: Both) -> None:
    wallets = [("wal_3", "cus_1"), ("wal_1", "cus_1"), ("wal_2", "cus_2"), ("wal_4", "cus_2"), ("wal_5", "cus_3")]
    both.insert(
        "wallets",
        [
            {"id": w, **_tenant(A), "customer_id": c, "type": "customer", "status": "active",
             "transfer_policy": "open", "created_at": T0}
            for w, c in wallets
        ]
        + [{"id": "wal_0", **_tenant(A), "customer_id": "cus_2", "type": "promo", "status": "active",
            "transfer_policy": "open", "created_at": T0}],
    )  # fmt: skip
    found = WalletRepository(both).reward_wallets(A, ["cus_1", "cus_2", "cus_9"])  # type: ignore[arg-type]
    assert {c: w.id for c, w in found.items()} == {"cus_1": "wal_1", "cus_2": "wal_2"}


def test_next_expiry_is_each_assets_earliest_open_expiry_on_both(both: Both) -> None:
    lots = [("lot_1", "ast_a", 1, 5), ("lot_2", "ast_a", 1, 2**70), ("lot_3", "ast_a", 3, 7), ("lot_4", "ast_b", 2, 1)]
    lots += [("lot_5", "ast_b", 1, 0), ("lot_6", "ast_c", None, 4)]
    both.insert(
        "lots",
        [
            {"id": i, **_tenant(A), "wallet_id": "wal_1", "asset_id": a, "issued_at": T0,
             "expires_at": None if d is None else T0 + timedelta(days=d), "amount_minor": 2**71,
             "remaining_minor": left, "expired_minor": 0, "source_transaction_id": "txn_" + i,
             "created_at": T0, "updated_at": T0}
            for i, a, d, left in lots
        ],
    )  # fmt: skip
    found = LotRepository(both).next_expiry(A, "wal_1")  # type: ignore[arg-type]
    assert found == {"ast_a": (T0 + timedelta(days=1), 5 + 2**70), "ast_b": (T0 + timedelta(days=2), 1)}


def test_due_deliveries_keep_both_caps_and_the_order_on_both(both: Both) -> None:
    endpoints = [("we_1", A, "enabled"), ("we_2", A, "enabled"), ("we_3", B, "enabled"), ("we_4", B, "disabled")]
    both.insert(
        "webhook_endpoints",
        [
            {"id": e, **_tenant(s), "url": f"https://{e}.example", "events": "[]", "signing_secret": "s",
             "secret_prefix": "p", "status": status, "created_at": T0}
            for e, s, status in endpoints
        ],
    )  # fmt: skip
    deliveries = [(f"wd_{n:02d}", e, s, T0 + timedelta(seconds=(n * 7) % 11)) for n, (e, s, _) in
                  enumerate(endpoints * 4)]  # fmt: skip
    both.insert(
        "webhook_deliveries",
        [
            {"id": d, **_tenant(s), "endpoint_id": e, "outbox_id": "ob_" + d, "kind": "k", "body": "{}",
             "status": "pending", "attempt_count": 0, "round_attempts": 0, "next_attempt_at": at, "created_at": T0}
            for d, e, s, at in deliveries
        ],
    )  # fmt: skip
    hooks = WebhookRepository(both)  # type: ignore[arg-type]
    now = T0 + timedelta(seconds=9)
    for exclude, skip, per_endpoint, per_tenant, limit in [
        ([], [], 2, 3, 10),
        (["wd_00", "wd_05"], ["we_3"], 1, 1, 10),
        ([], [], 10, 10, 4),
    ]:
        due = hooks.due(now, limit, exclude, per_endpoint, per_tenant, skip)
        assert due  # the caps were exercised on rows, not on nothing
        assert len(due) <= limit and all(d.id not in exclude for d in due)
        assert all(d.endpoint_id not in skip or d.endpoint_status != "enabled" for d in due)


def test_limit_usage_and_execution_counters_take_zipped_lists_on_both(both: Both) -> None:
    keys = [UsageKey("prg_1", f"rule:r{n}:2026-03", f"cus_{n}", "2026-03-01") for n in range(3)]
    usage = LimitUsageRepository(both)  # type: ignore[arg-type]
    usage.save(A, {k: Usage(2**64 + n, n + 1) for n, k in enumerate(keys)})
    usage.save(A, {keys[1]: Usage(-(2**65), 9)})  # replaced in place
    assert usage.load(A, [*keys, UsageKey("prg_1", "x", "y", "z")]) == {
        keys[0]: Usage(2**64, 1),
        keys[1]: Usage(-(2**65), 9),
        keys[2]: Usage(2**64 + 2, 3),
    }
    executions = [f"exe_{n}" for n in range(3)]
    both.insert(
        "reward_executions",
        [
            {"id": e, **_tenant(A), "event_id": "evt_" + e, "external_event_id": "x" + e, "customer_id": "cus_1",
             "program_id": "prg_1", "version_id": "ver_1", "version_number": 1, "rule_id": "r", "action_index": 0,
             "asset_id": "ast_a", "amount_minor": 100, "status": "succeeded", "inputs": "{}", "created_at": T0,
             "updated_at": T0, "reversed_minor": 0, "taken_back_minor": 0}
            for e in executions
        ],
    )  # fmt: skip
    repository = ExecutionRepository(both)  # type: ignore[arg-type]
    repository.add_reversed(A, {"exe_0": 30, "exe_2": 2**40})
    repository.add_taken_back(A, {"exe_2": 5, "exe_9": 1})
    assert both.same("SELECT id, reversed_minor, taken_back_minor FROM reward_executions ORDER BY id") == [
        ("exe_0", 30, 0), ("exe_1", 0, 0), ("exe_2", 2**40, 5)
    ]  # fmt: skip


def test_floors_lowered_by_zipped_account_and_asset_lists_on_both(both: Both) -> None:
    both.insert(
        "balances",
        [
            {**_tenant(A), "account_id": account, "asset_id": asset, "balance_minor": 10, "floor_minor": 0,
             "updated_at": T0}
            for account, asset in [("wal_1", "ast_a"), ("wal_1", "ast_b"), ("wal_2", "ast_a"), ("sys_1", "ast_a")]
        ],
    )  # fmt: skip
    LedgerRepository(both)._lower_floors(A, {("wal_1", "ast_b"), ("wal_2", "ast_a"), ("sys_1", "ast_a")})  # type: ignore[arg-type]
    floors = both.same("SELECT account_id, asset_id, floor_minor FROM balances ORDER BY account_id, asset_id")
    assert [f for *_, f in floors if f != 0] == [-(10**38 - 1)] * 2  # sys_1 is not a wallet: untouched


def test_retention_deletes_by_key_a_bounded_chunk_on_both(both: Both) -> None:
    old, new = T0 - timedelta(days=30), T0
    both.insert(
        "idempotency_keys",
        [
            {**_tenant(s), "key": k, "operation": "op", "request_hash": "h", "response": "{}", "status_code": 200,
             "created_at": at}
            for s, k, at in [(A, "k1", old), (B, "k1", old), (A, "k2", old), (A, "k3", new)]
        ],
    )  # fmt: skip
    both.insert(
        "request_log",
        [
            {"id": f"req_{n}", "request_id": "r", "method": "GET", "path": "/", "status": 200, "duration_ms": 1.0,
             "created_at": old if n < 3 else new}
            for n in range(5)
        ],
    )  # fmt: skip
    cutoff = T0 - timedelta(days=1)
    assert delete_expired(both, "idempotency_keys", cutoff, 2) == 2  # type: ignore[arg-type]
    assert delete_expired(both, "idempotency_keys", cutoff, 2) == 1  # type: ignore[arg-type]
    assert delete_expired(both, "request_log", cutoff, 10) == 3  # type: ignore[arg-type]
    assert both.same("SELECT key FROM idempotency_keys") == [("k3",)]
    assert both.same("SELECT id FROM request_log ORDER BY id") == [("req_3",), ("req_4",)]
