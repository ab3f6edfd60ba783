"""GET /events/export: a tenant's events of a time range as a file the replay reads, streamed (docs/replay.md).

The export reads one snapshot (`DuckDBStore.snapshot`: a read transaction on a cursor of its own), never the write
lock: events keep arriving and being processed while it streams. Rows come out of DuckDB as Arrow record batches
of `BATCH_ROWS` and leave as NDJSON lines or Parquet row groups, so memory stays bounded by a batch whatever the
range holds.

Order and resumption: events are ordered by (occurred_at, external_event_id), occurred_at being the event's time
as the live engine took it (its occurred_at, else when it was received). One answer holds at most `limit` events;
when more follow, `X-Export-Next-After` names the last one's external_event_id (percent-encoded: any text, safe
in a header) and the next request passes it, decoded, as `after` (with `until` fixed to the first answer's
`X-Export-Until`), so a client can resume after any complete answer.

The columns are those the replay reads (`replay.inputs`: external_event_id, type, customer_id, occurred_at, and
the data as a `data` column of JSON text: the very text the service stored and evaluated) and, for comparing,
event_id, status and received_at; with include=executions, `executions`: what the service issued for the event
(JSON text in Parquet, a list in NDJSON).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.operations import EXPORT_DEFAULT_LIMIT, EXPORT_FORMATS, EXPORT_MAX_LIMIT, EXPORT_MEDIA
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import parse_instant
from rewards_lab.domain.money import format_amount
from rewards_lab.store.api import Store
from rewards_lab.store.database import DuckDBStore, utcnow

_DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() takes "²", which int() refuses
BATCH_ROWS = 2_000  # rows per Arrow batch: one Parquet row group, one NDJSON chunk
TENANT = "organization_id = ? AND environment = ?"
_EXECUTION_FIELDS = (
    "execution_id",
    "program_id",
    "version_number",
    "rule_id",
    "action_index",
    "customer_id",
    "asset_id",
    "amount",
    "status",
    "error_code",
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class ExportRequest:
    since: datetime | None  # naive UTC; None: from the first event
    until: datetime  # naive UTC, exclusive
    format: str
    executions: bool
    after: str | None
    limit: int

    @property
    def media_type(self) -> str:
        return EXPORT_MEDIA[self.format]


def parse_request(query: Mapping[str, str]) -> ExportRequest:
    """The export's query parameters, checked: each refusal names its field."""
    # A parameter given empty is given: refused as the schema says (a date-time, an enum value, a non-empty id).
    since = parse_instant(query.get("since"), "since")
    until = parse_instant(query.get("until"), "until") or utcnow()
    if since is not None and until <= since:
        raise ServiceError("period_invalid", "until must be after since", field="until")
    form = query.get("format", "ndjson")
    if form not in EXPORT_FORMATS:
        raise ServiceError("field_invalid", f"format must be one of {', '.join(EXPORT_FORMATS)}", field="format")
    include = query.get("include")
    if include not in (None, "executions"):
        raise ServiceError("field_invalid", "include must be executions", field="include")
    raw_limit = query.get("limit")
    limit = EXPORT_DEFAULT_LIMIT
    if raw_limit is not None:
        if not _DIGITS.fullmatch(raw_limit) or not 1 <= int(raw_limit) <= EXPORT_MAX_LIMIT:
            raise ServiceError("field_invalid", f"limit must be a whole number 1..{EXPORT_MAX_LIMIT}", field="limit")
        limit = int(raw_limit)
    after = query.get("after")
    if after is not None and not 1 <= len(after) <= 255:
        raise ServiceError("field_invalid", "after must be an external_event_id", field="after")
    return ExportRequest(since, until, form, include == "executions", after, limit)


@dataclass
class Export:
    """An export under way: its range, where it stops, and the snapshot it reads (released by `chunks`)."""

    request: ExportRequest
    rows: int  # events in this answer
    next_after: str | None  # the last event's external_event_id when more follow
    _batches: Callable[[], Iterator[pa.RecordBatch]]  # the answer's rows, read on the snapshot
    _release: Callable[[], None]  # ends the snapshot (idempotent)

    @property
    def headers(self) -> dict[str, str]:
        headers = {"X-Export-Until": _rfc3339(self.request.until), "X-Export-Rows": str(self.rows)}
        if self.next_after is not None:
            headers["X-Export-Next-After"] = quote(self.next_after, safe="")  # any text, header-safe
        return headers

    def chunks(self) -> Iterator[bytes]:
        """The file, batch by batch; the snapshot is released at the end (or when the client goes away)."""
        try:
            reader = self._batches()
            if self.request.format == "ndjson":
                for batch in reader:
                    yield _ndjson(batch)
            else:
                yield from _parquet(reader, self.request.executions)
        finally:
            self._release()

    def close(self) -> None:
        self._release()


def open_export(database: Store, scope: Scope, request: ExportRequest) -> Export:
    """Open the snapshot, find where this answer stops (at most `limit` events) and whether more follow."""
    if not isinstance(database, DuckDBStore):
        from rewards_lab.service.event_export_pg import open_export_pg  # another store: rows fetched into Arrow

        return open_export_pg(database, scope, request)
    cursor = database.snapshot()
    try:
        where, params = _range(cursor, scope, request)
        bound = cursor.execute(
            f"SELECT t, external_event_id FROM ({_KEYS} WHERE {where}) ORDER BY t, external_event_id LIMIT 2 OFFSET ?",
            [*params, request.limit - 1],
        ).fetchall()
        rows = cursor.execute(f"SELECT count(*) FROM ({_KEYS} WHERE {where} LIMIT ?)", [*params, request.limit])
        (count,) = rows.fetchone() or (0,)
        next_after = str(bound[0][1]) if len(bound) == 2 else None
        select = _select(request.executions, where)
        select_params = [*params, request.limit, *(scope.params if request.executions else [])]

        def batches() -> Iterator[pa.RecordBatch]:
            reader: pa.RecordBatchReader = cursor.execute(select, select_params).to_arrow_reader(BATCH_ROWS)
            yield from reader

        return Export(request, int(count), next_after, batches, lambda: DuckDBStore.close_snapshot(cursor))
    except BaseException:
        DuckDBStore.close_snapshot(cursor)
        raise


_KEYS = "SELECT * FROM (SELECT *, coalesce(occurred_at, received_at) AS t FROM events)"


def _range(cursor: duckdb.DuckDBPyConnection, scope: Scope, request: ExportRequest) -> tuple[str, list[Any]]:
    """The WHERE of the answer's events over `_KEYS` (tenant, range, after the resumption point)."""
    where = f"{TENANT} AND t < ?"
    params: list[Any] = [*scope.params, request.until]
    if request.since is not None:
        where += " AND t >= ?"
        params.append(request.since)
    if request.after is not None:
        found = cursor.execute(
            f"SELECT coalesce(occurred_at, received_at) FROM events WHERE {TENANT} AND external_event_id = ?",
            [*scope.params, request.after],
        ).fetchall()
        if not found:
            raise ServiceError("field_invalid", "after must name an exported event's external_event_id", field="after")
        where += " AND (t > ? OR (t = ? AND external_event_id > ?))"
        params += [found[0][0], found[0][0], request.after]
    return where, params


def _select(executions: bool, where: str) -> str:
    columns = (
        "e.external_event_id, e.type, e.customer_id, timezone('UTC', e.t) AS occurred_at, e.data, "
        "e.id AS event_id, e.status, timezone('UTC', e.received_at) AS received_at"
    )
    events = f"SELECT * FROM ({_KEYS} WHERE {where}) ORDER BY t, external_event_id LIMIT ?"
    if not executions:
        return f"SELECT {columns} FROM ({events}) e ORDER BY e.t, e.external_event_id"
    issued = (
        "SELECT x.event_id, list({'execution_id': x.id, 'program_id': x.program_id, "
        "'version_number': x.version_number, 'rule_id': x.rule_id, 'action_index': x.action_index, "
        "'customer_id': x.customer_id, 'asset_id': x.asset_id, 'amount_minor': x.amount_minor, "
        "'decimals': a.decimals, 'status': x.status, 'error_code': x.error_code} "
        "ORDER BY x.program_id, x.version_number, x.rule_id, x.action_index) AS executions "
        f"FROM reward_executions x JOIN assets a ON a.id = x.asset_id WHERE x.{TENANT.replace(' AND ', ' AND x.')} "
        "GROUP BY x.event_id"
    )
    return (
        f"SELECT {columns}, coalesce(i.executions, []) AS executions FROM ({events}) e "
        f"LEFT JOIN ({issued}) i ON i.event_id = e.id ORDER BY e.t, e.external_event_id"
    )


def _executions(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the service issued for one event, amounts as the API writes them (decimal strings)."""
    issued = []
    for item in raw:
        amount = format_amount(int(item["amount_minor"]), int(item["decimals"]))
        issued.append({name: amount if name == "amount" else item[name] for name in _EXECUTION_FIELDS})
    return issued


def _ndjson(batch: pa.RecordBatch) -> bytes:
    """One line per event; `data` is the stored JSON text as it is (no number goes through a float)."""
    columns = batch.to_pydict()
    has_executions = "executions" in columns
    lines = []
    for i in range(batch.num_rows):
        head = {
            "external_event_id": columns["external_event_id"][i],
            "type": columns["type"][i],
            "customer_id": columns["customer_id"][i],
            "occurred_at": _rfc3339(columns["occurred_at"][i]),
        }
        tail: dict[str, Any] = {
            "event_id": columns["event_id"][i],
            "status": columns["status"][i],
            "received_at": _rfc3339(columns["received_at"][i]),
        }
        if has_executions:
            tail["executions"] = _executions(columns["executions"][i])
        line = jsonutil.dumps(head)[:-1] + ',"data":' + columns["data"][i] + "," + jsonutil.dumps(tail)[1:]
        lines.append(line)
    return ("\n".join(lines) + "\n").encode() if lines else b""


PARQUET_SCHEMA = pa.schema(
    [
        ("external_event_id", pa.string()),
        ("type", pa.string()),
        ("customer_id", pa.string()),
        ("occurred_at", _TIMESTAMP),
        ("data", pa.string()),
        ("event_id", pa.string()),
        ("status", pa.string()),
        ("received_at", _TIMESTAMP),
    ]
)


class _Drain:
    """A write-only file for ParquetWriter whose bytes are taken out after each row group."""

    closed = False

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._written = 0

    def write(self, data: bytes | memoryview) -> int:
        self._parts.append(bytes(data))
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


def _parquet(reader: pa.RecordBatchReader, executions: bool) -> Iterator[bytes]:
    schema = PARQUET_SCHEMA.append(pa.field("executions", pa.string())) if executions else PARQUET_SCHEMA
    sink = _Drain()
    with pq.ParquetWriter(sink, schema) as writer:
        for batch in reader:
            writer.write_table(_parquet_table(batch, schema, executions))
            chunk = sink.take()
            if chunk:
                yield chunk
    yield sink.take()  # the footer


def _parquet_table(batch: pa.RecordBatch, schema: pa.Schema, executions: bool) -> pa.Table:
    columns = [batch.column(name).cast(schema.field(name).type) for name in PARQUET_SCHEMA.names]
    if executions:
        issued = [jsonutil.dumps(_executions(raw)) for raw in batch.column("executions").to_pylist()]
        columns.append(pa.array(issued, pa.string()))
    return pa.Table.from_arrays(columns, schema=schema)


def _rfc3339(moment: datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
