"""Retention: delete rows older than a cutoff, a bounded chunk per call, so that no transaction holds the writer
for long. Each function deletes at most `limit` rows (or deliveries) and returns how many it deleted; callers
repeat until a call deletes fewer than `limit`."""

from __future__ import annotations

from datetime import datetime

import duckdb

from rewards_lab.store.queries import fetch_all

# table -> the predicate of an expired row, with one `?` for the cutoff (naive UTC)
_EXPIRED: dict[str, str] = {
    "request_log": "created_at < ?",
    "idempotency_keys": "created_at < ?",
    "auth_audit": "created_at < ?",
    # a session is over when it expired or was revoked, whichever came first
    "sessions": "least(coalesce(revoked_at, expires_at), expires_at) < ?",
    # outbox messages already fanned out to deliveries (an undispatched one is never deleted)
    "outbox": "dispatched_at IS NOT NULL AND dispatched_at < ?",
    # counted sources of tier metrics (their sums live on in `tier_days`; kept for a retry's idempotency and audit)
    "tier_contributions": "created_at < ?",
}


def _count(row: tuple[object, ...] | None) -> int:
    value = row[0] if row else 0
    return int(value) if isinstance(value, int) else 0


def expired_sql(table: str) -> str:
    """The statement deleting up to `?` expired rows of `table` (one of `_EXPIRED`). Parameters: the cutoff, the
    limit. Rows are found by their address (`rowid`; PostgreSQL's `ctid`, store.dialect): by the key, DuckDB takes
    10 to 35 times longer per chunk on a 2-million-row request_log (it hashes the whole id column; rowid is a direct
    fetch), and PostgreSQL scans the table (request_log and auth_audit have no index on id), while the writer is
    held."""
    return f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {_EXPIRED[table]} LIMIT ?)"


def delete_expired(con: duckdb.DuckDBPyConnection, table: str, cutoff: datetime, limit: int) -> int:
    """Delete up to `limit` expired rows of `table` (one of `_EXPIRED`)."""
    return _count(con.execute(expired_sql(table), [cutoff, limit]).fetchone())


def delete_finished_deliveries(con: duckdb.DuckDBPyConnection, cutoff: datetime, limit: int) -> tuple[int, int]:
    """Up to `limit` webhook deliveries finished (succeeded or given up) before `cutoff`, with their attempts;
    a pending delivery is never deleted. Returns (deliveries, attempts) deleted."""
    ids = [
        row["id"]
        for row in fetch_all(
            con,
            "SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND completed_at IS NOT NULL "
            "AND completed_at < ? LIMIT ?",
            [cutoff, limit],
        )
    ]
    if not ids:
        return 0, 0
    attempts = _count(
        con.execute("DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT unnest(?))", [ids]).fetchone()
    )
    deliveries = _count(con.execute("DELETE FROM webhook_deliveries WHERE id IN (SELECT unnest(?))", [ids]).fetchone())
    return deliveries, attempts
