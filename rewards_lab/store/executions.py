"""Reward execution records: one per (event, programme version, rule, action), with its provenance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import ExecutionFilter, ExecutionRecord, StoredExecution
from rewards_lab.store.queries import RowPage, decoding, paginate
from rewards_lab.store.settings_json import cut_from, cut_text, keys_from, keys_text, reversal_from, reversal_text

TENANT = "organization_id = ? AND environment = ?"


_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("event_id", pa.string()),
        ("external_event_id", pa.string()),
        ("customer_id", pa.string()),
        ("program_id", pa.string()),
        ("version_id", pa.string()),
        ("version_number", pa.int32()),
        ("rule_id", pa.string()),
        ("action_index", pa.int32()),
        ("asset_id", pa.string()),
        ("wallet_id", pa.string()),
        ("amount_minor", pa.int64()),
        ("status", pa.string()),
        ("error_code", pa.string()),
        ("transaction_id", pa.string()),
        ("inputs", pa.string()),
        ("requested_minor", pa.int64()),
        ("limited", pa.string()),
        ("usage_keys", pa.string()),
        ("reversal", pa.string()),
    ]
)
assert tuple(_SCHEMA.names) == ExecutionRecord._fields
_STORED = ", ".join(StoredExecution._fields)
# The typed records, as JSON columns (in `_SCHEMA`'s order), and back as they are read.
_ENCODERS: dict[str, Callable[[Any], str | None]] = {
    "limited": cut_text,
    "usage_keys": keys_text,
    "reversal": reversal_text,
}
_ENCODED = [(_SCHEMA.names.index(name), encode) for name, encode in _ENCODERS.items()]
_STORED_EXECUTION = decoding(StoredExecution, {"limited": cut_from, "usage_keys": keys_from, "reversal": reversal_from})


class ExecutionRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def insert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None:
        """Insert new records (none of their keys is stored yet: the unique index refuses the statement if so)."""
        self._write(scope, records, "")

    def upsert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None:
        """Insert new records; a record whose key exists (a replay) takes the new status and transaction."""
        self._write(
            scope,
            records,
            " ON CONFLICT (event_id, version_id, rule_id, action_index) DO UPDATE SET "
            "status = excluded.status, error_code = excluded.error_code, wallet_id = excluded.wallet_id, "
            "transaction_id = excluded.transaction_id, amount_minor = excluded.amount_minor, "
            "inputs = excluded.inputs, updated_at = excluded.updated_at, "
            "requested_minor = excluded.requested_minor, limited = excluded.limited, "
            "usage_keys = excluded.usage_keys, reversal = excluded.reversal",
        )

    def _write(self, scope: Scope, records: list[ExecutionRecord], on_conflict: str) -> None:
        if not records:
            return
        columns: list[Any] = list(zip(*records, strict=True))
        for index, encode in _ENCODED:  # most records have none: NULL without a call each
            column = columns[index]
            if any(column):
                columns[index] = [encode(value) if value else None for value in column]
            else:
                columns[index] = [None] * len(column)
        batch = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, _SCHEMA, strict=True)], schema=_SCHEMA
        )
        now = utcnow()
        self.con.register("execution_batch", batch)
        try:
            self.con.execute(
                "INSERT INTO reward_executions SELECT id, ?, ?, event_id, external_event_id, customer_id, program_id, "
                "version_id, version_number, rule_id, action_index, asset_id, wallet_id, amount_minor, status, "
                "error_code, transaction_id, inputs, ?, ?, requested_minor, limited, usage_keys, 0, reversal, 0 "
                "FROM execution_batch" + on_conflict,
                [*scope.params, now, now],
            )
        finally:
            self.con.unregister("execution_batch")

    def for_events(self, scope: Scope, event_ids: list[str]) -> list[StoredExecution]:
        rows = self.con.execute(
            f"SELECT {_STORED} FROM reward_executions WHERE {TENANT} AND event_id IN (SELECT unnest(?)) ORDER BY id",
            [*scope.params, event_ids],
        ).fetchall()
        return [_STORED_EXECUTION(*row) for row in rows]

    def add_reversed(self, scope: Scope, amounts: dict[str, int]) -> None:
        """Count what reversals targeted against these rewards (execution id -> minor units)."""
        if not amounts:
            return
        self.con.execute(
            "UPDATE reward_executions SET reversed_minor = reversed_minor + w.amount "
            "FROM (SELECT unnest(CAST(? AS VARCHAR[])) AS id, unnest(CAST(? AS BIGINT[])) AS amount) w "
            "WHERE reward_executions.id = w.id AND organization_id = ? AND environment = ?",
            [list(amounts), list(amounts.values()), *scope.params],
        )

    def add_taken_back(self, scope: Scope, amounts: dict[str, int]) -> None:
        """Count what reversals took back of these rewards from their wallets (execution id -> minor units)."""
        if not amounts:
            return
        self.con.execute(
            "UPDATE reward_executions SET taken_back_minor = taken_back_minor + w.amount "
            "FROM (SELECT unnest(CAST(? AS VARCHAR[])) AS id, unnest(CAST(? AS BIGINT[])) AS amount) w "
            "WHERE reward_executions.id = w.id AND organization_id = ? AND environment = ?",
            [list(amounts), list(amounts.values()), *scope.params],
        )

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: ExecutionFilter) -> RowPage[StoredExecution]:
        sql = f"SELECT {_STORED} FROM reward_executions WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        for name in ("customer_id", "event_id", "program_id", "rule_id", "status"):
            if getattr(filters, name):
                sql += f" AND {name} = ?"
                params.append(getattr(filters, name))
        listed = paginate(self.con, list_name="executions", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(_STORED_EXECUTION)
