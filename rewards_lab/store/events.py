"""Inbound business events: stored durably as `received`, then marked `processed` or `failed`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.queries import Row, RowPage, fetch_all, fetch_one, paginate

TENANT = "organization_id = ? AND environment = ?"
EVENT_COLUMNS = (
    "id",
    "external_event_id",
    "type",
    "customer_id",
    "occurred_at",
    "data",
    "payload_hash",
)

# What `events.process_pending` reads of a pending event.
PENDING_COLUMNS = (
    "id",
    "organization_id",
    "environment",
    "external_event_id",
    "type",
    "customer_id",
    "data",
    "attempts",
    "evaluated_versions",
)


class EventRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add_many(self, scope: Scope, events: list[dict[str, Any]], received_at: datetime | None = None) -> None:
        """Insert new events as `received` in one statement (the group-commit path of POST /events)."""
        if not events:
            return
        batch = pa.table({name: [event[name] for event in events] for name in EVENT_COLUMNS})
        self.con.register("event_batch", batch)
        try:
            self.con.execute(
                "INSERT INTO events SELECT id, ?, ?, external_event_id, type, customer_id, occurred_at, data, "
                "payload_hash, 'received', NULL, NULL, 0, NULL, ?, NULL FROM event_batch",
                [*scope.params, received_at or utcnow()],
            )
        finally:
            self.con.unregister("event_batch")

    def add_batch(self, rows: list[tuple[Scope, dict[str, Any]]], received_at: datetime) -> bool:
        """Insert new events of any tenants as `received` in ONE statement (no Python objects for DuckDB to scan:
        one list per column). Run outside a transaction, the statement is its own transaction: one commit.
        False, with nothing inserted, if an (organization, environment, external_event_id) is already stored."""
        if not rows:
            return True
        try:
            self._insert_batch(rows, received_at)
        except duckdb.ConstraintException:
            return False
        return True

    def _insert_batch(self, rows: list[tuple[Scope, dict[str, Any]]], received_at: datetime) -> None:
        self.con.execute(
            "INSERT INTO events SELECT unnest($id), unnest($org), unnest($env), unnest($ext), unnest($type), "
            "unnest($customer), unnest($occurred::TIMESTAMP[]), unnest($data), unnest($hash), 'received', NULL, "
            "NULL, 0, NULL, $received, NULL",
            {
                "id": [row["id"] for _, row in rows],
                "org": [scope.organization_id for scope, _ in rows],
                "env": [scope.environment for scope, _ in rows],
                "ext": [row["external_event_id"] for _, row in rows],
                "type": [row["type"] for _, row in rows],
                "customer": [row["customer_id"] for _, row in rows],
                "occurred": [row["occurred_at"] for _, row in rows],
                "data": [row["data"] for _, row in rows],
                "hash": [row["payload_hash"] for _, row in rows],
                "received": received_at,
            },
        )

    def get(self, scope: Scope, event_id: str) -> Row | None:
        return fetch_one(self.con, f"SELECT * FROM events WHERE {TENANT} AND id = ?", [*scope.params, event_id])

    def get_by_external_ids(self, scope: Scope, external_ids: list[str]) -> dict[str, Row]:
        rows = fetch_all(
            self.con,
            f"SELECT * FROM events WHERE {TENANT} AND external_event_id IN (SELECT unnest(?))",
            [*scope.params, external_ids],
        )
        return {row["external_event_id"]: row for row in rows}

    def pending(self, limit: int) -> list[Row]:
        """The oldest `received` events of every tenant, in arrival order: the columns processing reads (not the
        times, hash, status and error, whose conversion to Python objects cost the worker's thread the GIL)."""
        return fetch_all(
            self.con,
            f"SELECT {', '.join(PENDING_COLUMNS)} FROM events WHERE status = 'received' ORDER BY id LIMIT ?",
            [limit],
        )

    def received(self, scope: Scope, event_ids: list[str]) -> list[Row]:
        """`pending`'s columns for those of these events still `received`, in arrival order (the worker's retry
        of a failed batch reads them again inside each smaller transaction)."""
        return fetch_all(
            self.con,
            f"SELECT {', '.join(PENDING_COLUMNS)} FROM events WHERE {TENANT} AND status = 'received' "
            "AND id IN (SELECT unnest(?)) ORDER BY id",
            [*scope.params, event_ids],
        )

    def count_by_status(self) -> dict[str, int]:
        rows = self.con.execute("SELECT status, count(*) FROM events GROUP BY status").fetchall()
        return {status: int(count) for status, count in rows}

    def mark_many(self, scope: Scope, outcomes: list[tuple[str, str, str | None, str | None, str | None]]) -> None:
        """Set (event id, status, error code, error message, evaluated versions JSON) for many events at once.

        The versions are recorded once, at the first attempt that knows them, and kept by every later attempt
        (a replay evaluates the same versions); none recorded is NULL, or "[]" in rows written before issue 14."""
        if not outcomes:
            return
        ids, statuses, codes, messages, versions = (list(column) for column in zip(*outcomes, strict=True))
        batch = pa.table(
            {
                "id": ids,
                "status": statuses,
                "error_code": codes,
                "error_message": messages,
                "versions": versions,
            },
            schema=pa.schema(
                [
                    ("id", pa.string()),
                    ("status", pa.string()),
                    ("error_code", pa.string()),
                    ("error_message", pa.string()),
                    ("versions", pa.string()),
                ]
            ),
        )
        self.con.register("event_outcomes", batch)
        try:
            self.con.execute(
                "UPDATE events SET status = o.status, error_code = o.error_code, error_message = o.error_message, "
                "evaluated_versions = CASE WHEN coalesce(events.evaluated_versions, '[]') = '[]' THEN o.versions "
                "ELSE events.evaluated_versions END, attempts = attempts + 1, "
                "processed_at = ? FROM event_outcomes o "
                "WHERE events.id = o.id AND events.organization_id = ? AND events.environment = ?",
                [utcnow(), *scope.params],
            )
        finally:
            self.con.unregister("event_outcomes")

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage:
        sql = f"SELECT * FROM events WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        for name in ("status", "type"):
            if filters.get(name):
                sql += f" AND {name} = ?"
                params.append(filters[name])
        if filters.get("customer_refs"):  # the references (id, external_id) of one customer
            sql += " AND customer_id IN (SELECT unnest(?))"
            params.append(filters["customer_refs"])
        return paginate(self.con, list_name="events", select_sql=sql, params=params, page=page, sort=sort)

    def activity(self, scope: Scope, customer_refs: list[str], since: datetime) -> list[Row]:
        return fetch_all(
            self.con,
            f"SELECT customer_id, count(*) AS events, max(coalesce(occurred_at, received_at)) AS last_at "
            f"FROM events WHERE {TENANT} AND customer_id IN (SELECT unnest(?)) "
            "AND coalesce(occurred_at, received_at) >= ? GROUP BY customer_id",
            [*scope.params, customer_refs, since],
        )
