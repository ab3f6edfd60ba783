"""GET /events/export on a store other than DuckDB (PostgreSQL): the same answer as `event_export`, its rows
fetched through the store's snapshot connection (`PgConnection`: psycopg, a REPEATABLE READ transaction) with a
server-side cursor, `BATCH_ROWS` at a time, into Arrow record batches of the columns DuckDB's reader gives; the
executions come as a `json_agg` column, which psycopg decodes into the same list of objects."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, cast

import pyarrow as pa

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.service.event_export import BATCH_ROWS, Export, ExportRequest
from rewards_lab.store.api import Store

_TENANT = "organization_id = %s AND environment = %s"
_KEYS = "SELECT k.* FROM (SELECT e.*, coalesce(e.occurred_at, e.received_at) AS t FROM events e) k"
_COLUMNS = pa.schema(
    [
        ("external_event_id", pa.string()),
        ("type", pa.string()),
        ("customer_id", pa.string()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("data", pa.string()),
        ("event_id", pa.string()),
        ("status", pa.string()),
        ("received_at", pa.timestamp("us", tz="UTC")),
    ]
)
_EXECUTION = (
    "json_build_object('execution_id', x.id, 'program_id', x.program_id, 'version_number', x.version_number, "
    "'rule_id', x.rule_id, 'action_index', x.action_index, 'customer_id', x.customer_id, 'asset_id', x.asset_id, "
    "'amount_minor', x.amount_minor::text, 'decimals', a.decimals, 'status', x.status, 'error_code', x.error_code)"
)


def open_export_pg(database: Store, scope: Scope, request: ExportRequest) -> Export:
    stack = ExitStack()
    try:
        uow = stack.enter_context(database.snapshot_repositories())
        conn: Any = cast(Any, uow).con.conn  # the snapshot's psycopg connection, inside its transaction
        where, params = _range(conn, scope, request)
        bound = conn.execute(
            f"SELECT t, external_event_id FROM ({_KEYS} WHERE {where}) b ORDER BY t, external_event_id "
            "LIMIT 2 OFFSET %s",
            [*params, request.limit - 1],
        ).fetchall()
        (count,) = conn.execute(
            f"SELECT count(*) FROM ({_KEYS} WHERE {where} LIMIT %s) c", [*params, request.limit]
        ).fetchone() or (0,)
        next_after = str(bound[0][1]) if len(bound) == 2 else None
        select, select_params = _select(request.executions, where, [*params, request.limit], scope)

        def batches() -> Iterator[pa.RecordBatch]:
            with conn.cursor(name="rewards_lab_export") as cursor:
                cursor.execute(select, select_params)
                while rows := cursor.fetchmany(BATCH_ROWS):
                    yield _batch(rows, request.executions)

        return Export(request, int(count), next_after, batches, stack.close)
    except BaseException:
        stack.close()
        raise


def _range(conn: Any, scope: Scope, request: ExportRequest) -> tuple[str, list[Any]]:
    where = f"k.{_TENANT.replace(' AND ', ' AND k.')} AND k.t < %s"
    params: list[Any] = [*scope.params, request.until]
    if request.since is not None:
        where += " AND k.t >= %s"
        params.append(request.since)
    if request.after is not None:
        found = conn.execute(
            f"SELECT coalesce(occurred_at, received_at) FROM events WHERE {_TENANT} AND external_event_id = %s",
            [*scope.params, request.after],
        ).fetchall()
        if not found:
            raise ServiceError("field_invalid", "after must name an exported event's external_event_id", field="after")
        where += " AND (k.t > %s OR (k.t = %s AND k.external_event_id > %s))"
        params += [found[0][0], found[0][0], request.after]
    return where, params


def _select(executions: bool, where: str, params: list[Any], scope: Scope) -> tuple[str, list[Any]]:
    columns = (
        "e.external_event_id, e.type, e.customer_id, e.t AS occurred_at, e.data, e.id AS event_id, e.status, "
        "e.received_at"
    )
    events = f"SELECT * FROM ({_KEYS} WHERE {where}) w ORDER BY t, external_event_id LIMIT %s"
    if not executions:
        return f"SELECT {columns} FROM ({events}) e ORDER BY e.t, e.external_event_id", params
    issued = (
        f"SELECT x.event_id, json_agg({_EXECUTION} ORDER BY x.program_id, x.version_number, x.rule_id, "
        "x.action_index) AS executions FROM reward_executions x JOIN assets a ON a.id = x.asset_id "
        "WHERE x.organization_id = %s AND x.environment = %s GROUP BY x.event_id"
    )
    select = (
        f"SELECT {columns}, coalesce(i.executions, '[]'::json) AS executions FROM ({events}) e "
        f"LEFT JOIN ({issued}) i ON i.event_id = e.id ORDER BY e.t, e.external_event_id"
    )
    return select, [*params, *scope.params]


def _batch(rows: list[tuple[Any, ...]], executions: bool) -> pa.RecordBatch:
    """Rows as DuckDB's reader gives them: times in UTC (stored naive UTC), executions a list of objects."""
    arrays = [pa.array([row[i] for row in rows], field.type) for i, field in enumerate(_COLUMNS)]
    if not executions:
        return pa.RecordBatch.from_arrays(arrays, schema=_COLUMNS)
    issued = pa.array([row[len(_COLUMNS)] for row in rows])  # psycopg decodes a json column
    return pa.RecordBatch.from_arrays([*arrays, issued], names=[*_COLUMNS.names, "executions"])
