"""The forecast gate, enforced by the server (issue 31; contract.guard_requests).

A draft's guards are checked on the tenant's OWN stored events of the last `guard_window_days` (the draft's
setting, default 90): the events are read on a snapshot (never under the write lock) into an Arrow table in the
replay's input form (external_event_id, type, customer_id, occurred_at, data as JSON text; occurred_at is the
event's time, else its receipt; only the types the draft or the live version has rules for) and replayed
through the draft and the live version by `forecasting.gate.evaluate`, the same gate the lab runs on a file.
Nothing leaves the server.

Bounded: at most `max_events` events (`forecast_too_large`, 422: the count is read before any row) and at most
`timeout_s` seconds of DuckDB work (a timer interrupts the snapshot's and the replay's queries:
`forecast_timeout`, 422). Both are settings (`REWARDS_LAB_FORECAST_MAX_EVENTS`, `REWARDS_LAB_FORECAST_TIMEOUT_S`).
The evaluation remembers a fingerprint of what it read of the programme (the draft's rule digests and settings,
the live version, the asset); publishing reads it again inside the unit of work and refuses with
`programme_draft_changed` when it moved ("work read outside a lock is read again inside it").

The replay also gets what customers redeemed of the asset in the window (the ledger's redemptions, so clawbacks meet
the balances they had and the liability forecast sees spending) and the asset's outstanding supply when the window
opens (the opening supply: the ceiling and liability guards start from it, as the lab's forecast does with
`opening_supply=`), both by the time the ledger posted them; and the customers those name (id and external id
only: rules reading other `customer.*` fields still see none).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import duckdb
import pyarrow as pa

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, Guard
from rewards_lab.contract.programme_file import ProgrammeDefinition, definition_of_version
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.engine.postings import asset_row
from rewards_lab.engine.rule_book import programme_row
from rewards_lab.store.api import Store, reader, snapshot
from rewards_lab.store.interfaces import AssetRow, ProgrammeRow, Repositories, VersionRow

if TYPE_CHECKING:  # the replay stack (pandas, SQLGlot) loads on the first forecast, not with the API
    from rewards_lab.forecasting.gate import GateReport, GuardCheck

ENV_MAX_EVENTS = "REWARDS_LAB_FORECAST_MAX_EVENTS"
ENV_TIMEOUT = "REWARDS_LAB_FORECAST_TIMEOUT_S"
DEFAULT_MAX_EVENTS = 2_000_000
DEFAULT_TIMEOUT_S = 60.0
# A snapshot's connection: a DuckDB cursor, or another store's DuckDB-shaped one (`execute`/`fetchall`/`interrupt`:
# PostgreSQL's `PgConnection`)
Reads = Any
NEVER = "never"  # a ceiling that never runs out within the forecast's horizon (an infinite number of days)


@dataclass(frozen=True)
class ForecastLimits:
    max_events: int = DEFAULT_MAX_EVENTS
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ForecastLimits:
        env = os.environ if environ is None else environ
        most = int(env[ENV_MAX_EVENTS]) if env.get(ENV_MAX_EVENTS, "").strip() else DEFAULT_MAX_EVENTS
        timeout = float(env[ENV_TIMEOUT]) if env.get(ENV_TIMEOUT, "").strip() else DEFAULT_TIMEOUT_S
        if most < 1 or timeout <= 0:
            raise ValueError("the forecast's max events must be >= 1 and its timeout > 0")
        return cls(most, timeout)


@dataclass(frozen=True)
class Forecast:
    """The guard table of a draft, and the fingerprint of what it was evaluated on."""

    result: r.ForecastResult
    fingerprint: str


# --- definitions of store rows -----------------------------------------------------------------------------------
def definition_of(uow: Repositories, scope: Scope, programme: ProgrammeRow, version_id: str) -> ProgrammeDefinition:
    """A stored version (draft or published) as a programme file would hold it: what the replay reads. Built by
    `contract.programme_file.definition_of_version`, the same conversion the lab's gate uses on API resources."""
    row = uow.programmes.get_version(scope, version_id)
    if row is None:
        raise ServiceError("programme_version_not_found", version_id=version_id)
    version = presenters.version(row, uow.programmes.rules_of(scope, [version_id]))
    asset = presenters.asset(asset_row(uow, scope, programme.asset_id))
    return definition_of_version(presenters.programme(programme), version, asset)


def window_days(row: ProgrammeRow | VersionRow) -> int:
    return row.guard_window_days or DEFAULT_GUARD_WINDOW_DAYS


def fingerprint(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> str:
    """What an evaluation reads of the programme: the draft's rules (their digests) and settings, the live
    version, the asset's ceiling. Equal fingerprints: the evaluation still stands."""
    draft = uow.programmes.get_version(scope, programme.draft_version_id)
    asset = asset_row(uow, scope, programme.asset_id)
    parts = [
        programme.draft_version_id,
        str(programme.current_version),
        repr(uow.programmes.rule_digests(scope, programme.draft_version_id)),
        repr(draft),
        repr((asset.decimals, asset.supply_ceiling_minor, asset.value_per_unit)),
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


# --- the events of the window ------------------------------------------------------------------------------------
_EVENT_TIME = "COALESCE(occurred_at, received_at)"
_WINDOW = (
    f"organization_id = ? AND environment = ? AND {_EVENT_TIME} >= ? AND {_EVENT_TIME} < ? "
    "AND type IN (SELECT unnest(?))"
)


def window_events(con: Reads, scope: Scope, start: datetime, end: datetime, types: list[str], most: int) -> pa.Table:
    """The tenant's stored events of [start, end) of the `types` the versions have rules for (no other event
    can change what they issue), in the replay's input form, in the order they were received;
    `forecast_too_large` when there are more than `most` (counted before any row is read)."""
    params = [*scope.params, _naive(start), _naive(end), types]
    count = int(con.execute(f"SELECT count(*) FROM events WHERE {_WINDOW}", params).fetchall()[0][0])
    if count > most:
        raise ServiceError("forecast_too_large", limit=most, events=count, window_start=start.isoformat())
    select = (
        f"SELECT external_event_id, type, customer_id, {_EVENT_TIME} AS occurred_at, data FROM events "
        f"WHERE {_WINDOW} ORDER BY received_at, id"
    )
    table = _arrow(con, select, params, _EVENT_COLUMNS)
    at = table.schema.get_field_index("occurred_at")
    return table.set_column(at, "occurred_at", table.column(at).cast(pa.timestamp("us", tz="UTC")))


def window_redemptions(con: Reads, scope: Scope, asset: AssetRow, start: datetime, end: datetime) -> pa.Table:
    """What customers spent of the asset in [start, end) (the ledger's redemptions, by the time they were posted),
    in the replay's redemptions form (customer_id: the wallet's customer, amount: a decimal string)."""
    rows = con.execute(
        "SELECT w.customer_id, t.amount_minor, t.created_at FROM transactions t "
        "JOIN wallets w ON w.id = t.source_account_id AND w.organization_id = t.organization_id "
        "AND w.environment = t.environment "
        "WHERE t.organization_id = ? AND t.environment = ? AND t.asset_id = ? AND t.kind = 'redemption' "
        "AND t.created_at >= ? AND t.created_at < ? ORDER BY t.created_at, t.id",
        [*scope.params, asset.id, _naive(start), _naive(end)],
    ).fetchall()
    decimals = int(asset.decimals)
    return pa.table(
        {
            "customer_id": pa.array([row[0] for row in rows], pa.string()),
            "amount": pa.array([format_amount(int(row[1]), decimals) for row in rows], pa.string()),
            "occurred_at": pa.array([row[2] for row in rows], pa.timestamp("us", tz="UTC")),
        }
    )


def opening_supply(con: Reads, scope: Scope, asset: AssetRow, start: datetime) -> str:
    """The asset's outstanding supply when the window opens (issued - redeemed - expired, as the asset shows it,
    from the ledger's entries posted before `start`), as a decimal string."""
    accounts = [a for a in (asset.issuance_account_id, asset.redemption_account_id, asset.breakage_account_id) if a]
    total = con.execute(
        "SELECT coalesce(-sum(amount_minor), 0) FROM entries WHERE organization_id = ? AND environment = ? "
        "AND asset_id = ? AND account_id IN (SELECT unnest(?)) AND created_at < ?",
        [*scope.params, asset.id, accounts, _naive(start)],
    ).fetchall()[0][0]
    return format_amount(int(total), int(asset.decimals))


def window_customers(con: Reads, scope: Scope, references: list[str]) -> pa.Table:
    """The customers the window's events and redemptions name (by id or external id): their `id` and
    `external_id`, so that the replay resolves both references to one customer as the live engine does (a
    redemption names the wallet's customer by id, an event may name it by its external id)."""
    return _arrow(
        con,
        "SELECT id, external_id FROM customers WHERE organization_id = ? AND environment = ? "
        "AND (id IN (SELECT unnest(?)) OR external_id IN (SELECT unnest(?))) ORDER BY id",
        [*scope.params, references, references],
        _CUSTOMER_COLUMNS,
    )


_EVENT_COLUMNS = pa.schema(
    [
        ("external_event_id", pa.string()),
        ("type", pa.string()),
        ("customer_id", pa.string()),
        ("occurred_at", pa.timestamp("us")),
        ("data", pa.string()),
    ]
)
_CUSTOMER_COLUMNS = pa.schema([("id", pa.string()), ("external_id", pa.string())])


def _arrow(con: Any, select: str, params: list[Any], schema: pa.Schema) -> pa.Table:
    """The rows of `select` as an Arrow table: straight from DuckDB, or fetched from another store's connection
    (PostgreSQL's `PgConnection`: rows through psycopg, typed by `schema`)."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        return con.sql(select, params=params).to_arrow_table()
    rows = con.execute(select, params).fetchall()
    return pa.table([pa.array([row[i] for row in rows], field.type) for i, field in enumerate(schema)], schema=schema)


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


class _Deadline:
    """Interrupts the queries of the connections it watches once `seconds` have passed (`fired` says it did). A
    connection is watched only while this forecast uses it: the snapshot's cursor serves the thread's other
    reads afterwards and must never be interrupted then."""

    def __init__(self, seconds: float) -> None:
        self.fired = threading.Event()
        self._watched: list[Reads] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._stop)
        self._timer.daemon = True

    def _stop(self) -> None:
        with self._lock:
            self.fired.set()
            for con in self._watched:
                con.interrupt()

    @contextmanager
    def watching(self, con: Reads) -> Iterator[None]:
        with self._lock:
            self._watched.append(con)
        try:
            yield
        finally:
            with self._lock:
                self._watched.remove(con)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


# --- the table ---------------------------------------------------------------------------------------------------
def _figure(value: Decimal | float) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return NEVER
        return str(Decimal(repr(value)).normalize()) if value != int(value) else str(int(value))
    return str(value)


def _check(check: GuardCheck) -> r.GuardCheckResult:
    guard: Guard = check.guard
    return r.GuardCheckResult(
        metric=check.metric,
        limit=check.limit,
        draft=_figure(check.draft),
        published=None if check.published is None else _figure(check.published),
        checked=_figure(check.checked),
        passed=check.passed,
        guard=guard,
    )


def evaluate_draft(
    database: Store,
    scope: Scope,
    program_id: str,
    *,
    limits: ForecastLimits | None = None,
    now: datetime | None = None,
) -> Forecast:
    """The draft's guards on the window's stored events, through the draft and the live version (off the write
    path: a snapshot for the reads, a connection of the replay's own for the replay)."""
    from rewards_lab.forecasting.gate import evaluate
    from rewards_lab.replay.engine import quiet_connection

    bounds = limits or ForecastLimits.from_env()
    end = now or datetime.now(UTC)
    replay_con = quiet_connection()
    try:
        with _Deadline(bounds.timeout_s) as deadline:
            try:
                with snapshot(database) as uow, deadline.watching(_connection(uow)):
                    programme = programme_row(uow, scope, program_id)
                    days = window_days(programme)
                    start = end - timedelta(days=days)
                    stamp = fingerprint(uow, scope, programme)
                    draft = definition_of(uow, scope, programme, programme.draft_version_id)
                    published = _live_definition(uow, scope, programme)
                    types = sorted({rule.event_type for d in (draft, published) if d for rule in d.rules})
                    events = window_events(_connection(uow), scope, start, end, types, bounds.max_events)
                    asset = asset_row(uow, scope, programme.asset_id)
                    spent = window_redemptions(_connection(uow), scope, asset, start, end)
                    opening = opening_supply(_connection(uow), scope, asset, start)
                    named = sorted(
                        {*events.column("customer_id").to_pylist(), *spent.column("customer_id").to_pylist()}
                    )
                    customers = window_customers(_connection(uow), scope, named)
                with deadline.watching(replay_con):  # the snapshot is over: the replay reads the Arrow tables
                    report = evaluate(
                        draft,
                        events,
                        published=published,
                        connection=replay_con,
                        opening_supply=opening,
                        redemptions=spent if spent.num_rows else None,
                        customers=customers if customers.num_rows else None,
                    )
            except duckdb.InterruptException:
                raise ServiceError("forecast_timeout", limit_s=bounds.timeout_s) from None
            if deadline.fired.is_set():
                raise ServiceError("forecast_timeout", limit_s=bounds.timeout_s)
    finally:
        replay_con.close()
    return Forecast(_result(programme, report, events.num_rows, start, end, days), stamp)


def _connection(uow: Repositories) -> Reads:
    """The snapshot's own connection (DuckDB's cursor, PostgreSQL's `PgConnection`): the window's reads are SQL
    of their own, not a repository's."""
    return cast(Any, uow).con


def _live_definition(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> ProgrammeDefinition | None:
    """The live version as a definition (None: nothing published, or a live version without rules, which issues
    nothing: compared as nothing published)."""
    if programme.current_version is None:
        return None
    live = uow.programmes.get_version_by_number(scope, programme.id, programme.current_version)
    if live is None:
        return None
    try:
        return definition_of(uow, scope, programme, live.id)
    except ServiceError:
        return None


def _result(
    programme: ProgrammeRow, report: GateReport, events: int, start: datetime, end: datetime, days: int
) -> r.ForecastResult:
    from rewards_lab.forecasting.gate import DEFAULT_DAYS

    return r.ForecastResult(
        program_id=programme.id,
        draft_version_id=programme.draft_version_id,
        published_version=programme.current_version if report.published is not None else None,
        passed=report.passed,
        window_days=days,
        window_start=start,
        window_end=end,
        events=events,
        forecast_days=DEFAULT_DAYS,
        checks=[_check(check) for check in report.checks],
    )


def guarded_forecast(database: Store, scope: Scope, program_id: str) -> Forecast | None:
    """The forecast publishing checks: None when the draft has no guards (or there is no such programme; the
    unit of work refuses it), so a programme without guards publishes exactly as before."""
    programme = reader(database).programmes.get(scope, program_id)
    if programme is None or not programme.guards:
        return None
    return evaluate_draft(database, scope, program_id)


def forecast_programme(database: Store, scope: Scope, program_id: str) -> r.ForecastResult:
    """`POST /reward-programs/{id}/forecast`: the guard table without publishing (a failing draft too)."""
    return evaluate_draft(database, scope, program_id).result


def table_details(result: r.ForecastResult) -> dict[str, Any]:
    """The guard table as the refusal's `details` carry it (JSON: figures as decimal strings)."""
    data: dict[str, Any] = result.model_dump(mode="json")
    return data
