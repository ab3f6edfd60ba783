"""Inbound business events: stored durably as `received`, then marked `processed` or `failed`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract import jsonutil
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import EventFilter, EventOutcome, EventPartitions, NewEvent, PendingEvent, StoredEvent
from rewards_lab.store.queries import RowPage, paginate

TENANT = "organization_id = ? AND environment = ?"


# PendingEvent's columns; its event time and time of receipt computed by DuckDB (see PendingEvent).
_COMPUTED = {
    "event_time_us": "epoch_us(coalesce(occurred_at, received_at)) AS event_time_us",
    "received_at_us": "epoch_us(received_at) AS received_at_us",
}
PENDING_COLUMNS = ", ".join(_COMPUTED.get(name, name) for name in PendingEvent._fields)
_STORED = ", ".join(StoredEvent._fields)
_OUTCOME_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("status", pa.string()),
        ("error_code", pa.string()),
        ("error_message", pa.string()),
        ("versions", pa.string()),
    ]
)


class EventRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, events: list[tuple[Scope, NewEvent]], received_at: datetime) -> bool:
        """Insert new events of any tenants as `received` in ONE statement (one list per column, no Python
        objects for DuckDB to scan). Outside a transaction the statement is its own transaction: one commit.
        False, with nothing inserted, if an (organization, environment, external_event_id) is already stored."""
        if not events:
            return True
        scopes, rows = zip(*events, strict=True)
        ids, external_ids, types, customers, occurred, data, hashes = zip(*rows, strict=True)
        try:
            self.con.execute(
                "INSERT INTO events SELECT unnest($id), unnest($org), unnest($env), unnest($ext), unnest($type), "
                "unnest($customer), unnest($occurred::TIMESTAMP[]), unnest($data), unnest($hash), 'received', "
                "NULL, NULL, 0, NULL, $received, NULL, NULL, NULL",
                {
                    "id": list(ids),
                    "org": [scope.organization_id for scope in scopes],
                    "env": [scope.environment for scope in scopes],
                    "ext": list(external_ids),
                    "type": list(types),
                    "customer": list(customers),
                    "occurred": list(occurred),
                    "data": list(data),
                    "hash": list(hashes),
                    "received": received_at,
                },
            )
        except duckdb.ConstraintException:
            return False
        return True

    def get(self, scope: Scope, event_id: str) -> StoredEvent | None:
        rows = self.con.execute(
            f"SELECT {_STORED} FROM events WHERE {TENANT} AND id = ?", [*scope.params, event_id]
        ).fetchall()
        return StoredEvent._make(rows[0]) if rows else None

    def get_by_external_ids(self, scope: Scope, external_ids: list[str]) -> dict[str, StoredEvent]:
        rows = self.con.execute(
            f"SELECT {_STORED} FROM events WHERE {TENANT} AND external_event_id IN (SELECT unnest(?))",
            [*scope.params, external_ids],
        ).fetchall()
        return {row.external_event_id: row for row in map(StoredEvent._make, rows)}

    def pending(self, limit: int, partitions: EventPartitions | None = None) -> list[PendingEvent]:
        """The oldest `received` events of every tenant, in arrival order, but for refunds still waiting for
        their original (those come back when it is processed, or when their wait is over). DuckDB has one process
        and leases no partitions (`DuckDBStore.event_leases` is None): `partitions` is None or all of one."""
        if partitions is not None and partitions.total != 1:
            raise ValueError("a DuckDB store takes every event: it leases no partitions")
        rows = self.con.execute(
            f"SELECT {PENDING_COLUMNS} FROM events WHERE status = 'received' "
            "AND (wait_until IS NULL OR wait_until <= ?) ORDER BY id LIMIT ?",
            [utcnow(), limit],
        ).fetchall()
        return list(map(PendingEvent._make, rows))

    def wait(self, scope: Scope, waits: dict[str, str], until: datetime) -> None:
        """These received events (id -> the external_event_id of the original each waits for) wait until then."""
        if not waits:
            return
        self.con.execute(
            "UPDATE events SET waiting_for = w.original, wait_until = ? "
            "FROM (SELECT unnest(CAST(? AS VARCHAR[])) AS id, unnest(CAST(? AS VARCHAR[])) AS original) w "
            "WHERE events.id = w.id AND events.organization_id = ? AND events.environment = ?",
            [until, list(waits), list(waits.values()), *scope.params],
        )

    def waiting_on(self, scope: Scope, external_ids: list[str]) -> list[PendingEvent]:
        """The received events waiting for one of these originals, in arrival order."""
        rows = self.con.execute(
            f"SELECT {PENDING_COLUMNS} FROM events WHERE {TENANT} AND status = 'received' "
            "AND waiting_for IN (SELECT unnest(?)) ORDER BY id",
            [*scope.params, external_ids],
        ).fetchall()
        return list(map(PendingEvent._make, rows))

    def received(self, scope: Scope, event_ids: list[str]) -> list[PendingEvent]:
        """`pending`'s columns for those of these events still `received`, in arrival order (the worker's retry
        of a failed batch reads them again inside each smaller transaction)."""
        rows = self.con.execute(
            f"SELECT {PENDING_COLUMNS} FROM events WHERE {TENANT} AND status = 'received' "
            "AND id IN (SELECT unnest(?)) ORDER BY id",
            [*scope.params, event_ids],
        ).fetchall()
        return list(map(PendingEvent._make, rows))

    def to_process(self, scope: Scope, event_id: str) -> PendingEvent | None:
        """`pending`'s columns of one event, whatever its status (a failed event replayed on request)."""
        rows = self.con.execute(
            f"SELECT {PENDING_COLUMNS} FROM events WHERE {TENANT} AND id = ?", [*scope.params, event_id]
        ).fetchall()
        return PendingEvent._make(rows[0]) if rows else None

    def mark_many(self, scope: Scope, outcomes: list[EventOutcome]) -> None:
        """Record many events' attempts at once.

        The versions are recorded once, at the first attempt that knows them, and kept by every later attempt
        (a replay evaluates the same versions); none recorded is NULL, or "[]" in rows written before issue 14."""
        if not outcomes:
            return
        columns: list[Any] = list(zip(*outcomes, strict=True))
        columns[4] = [None if versions is None else jsonutil.dumps(versions) for versions in columns[4]]
        batch = pa.Table.from_arrays([pa.array(c, pa.string()) for c in columns], schema=_OUTCOME_SCHEMA)
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

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: EventFilter) -> RowPage[StoredEvent]:
        sql = f"SELECT {_STORED} FROM events WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        for name in ("status", "type"):
            if getattr(filters, name):
                sql += f" AND {name} = ?"
                params.append(getattr(filters, name))
        if filters.customer_refs:  # the references (id, external_id) of one customer
            sql += " AND customer_id IN (SELECT unnest(?))"
            params.append(filters.customer_refs)
        listed = paginate(self.con, list_name="events", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(StoredEvent)
