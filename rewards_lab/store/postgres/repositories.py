"""The repositories over PostgreSQL: DuckDB's own classes on a `PgConnection` (their SQL rendered per statement),
and the per-store code where DuckDB's statement has no PostgreSQL rendering (tests/store/test_sql_portability.py,
`PER_STORE`): the event intake's insert and the ledger's batch write (DuckDB reads its Arrow tables by a
replacement scan; here the transactions go in by COPY and the balances from typed arrays), and the lots' write
(another replacement scan)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, cast

import duckdb
import pyarrow as pa

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.posting_policy import LedgerState
from rewards_lab.store.database import utcnow
from rewards_lab.store.dialect import render
from rewards_lab.store.events import PENDING_COLUMNS, EventRepository
from rewards_lab.store.idempotency import IdempotencyRepository
from rewards_lab.store.interfaces import (
    EventOutcome,
    EventPartitions,
    LotTaken,
    NewEvent,
    NewLot,
    PendingEvent,
    Usage,
    UsageKey,
)
from rewards_lab.store.ledger import LedgerRepository, _invariant
from rewards_lab.store.limit_usage import LimitUsageRepository
from rewards_lab.store.postgres.claims import PgLotClaims, PgOutboxRepository, PgTierClaims, PgWebhookRepository
from rewards_lab.store.postgres.connection import PgConnection
from rewards_lab.store.postgres.row_locks import lock_balances, lock_counters
from rewards_lab.store.uow import DuckDBRepositories

if TYPE_CHECKING:
    from rewards_lab.store.postgres.store import PostgresStore

# The intake's insert: one statement over typed arrays (DuckDB's text unnests named list parameters).
_INSERT_EVENTS = (
    "INSERT INTO events SELECT u.id, u.org, u.env, u.ext, u.type, u.customer, u.occurred, u.data, u.hash, "
    "'received', NULL, NULL, 0, NULL, %(received)s, NULL, NULL, NULL FROM unnest(%(id)s::text[], %(org)s::text[], "
    "%(env)s::text[], %(ext)s::text[], %(type)s::text[], %(customer)s::text[], %(occurred)s::timestamp[], "
    "%(data)s::text[], %(hash)s::text[]) AS u(id, org, env, ext, type, customer, occurred, data, hash)"
)


_COPY_TRANSACTIONS = (
    "COPY transactions (id, organization_id, environment, kind, asset_id, amount_minor, source_account_id, "
    "destination_account_id, memo, execution_id, created_at, id_time_ms) FROM STDIN"
)
_DELTAS = (
    "unnest(%(account)s::text[], %(asset)s::text[], %(delta)s::numeric[], %(floor)s::numeric[]) "
    "AS d(account_id, asset_id, delta, floor_delta)"
)
# ledger._UPDATE_BALANCES and _INSERT_BALANCES over typed arrays: the same arithmetic, the same floors.
_UPDATE_BALANCES = (
    "UPDATE balances SET balance_minor = balance_minor + d.delta, "
    "floor_minor = CASE WHEN starts_with(balances.account_id, 'wal_') AND floor_minor < 0 "
    "THEN LEAST(0, balance_minor + d.delta) ELSE floor_minor + d.floor_delta END, "
    f"updated_at = %(now)s FROM {_DELTAS} "
    "WHERE balances.account_id = d.account_id AND balances.asset_id = d.asset_id"
)
_INSERT_BALANCES = (
    "INSERT INTO balances SELECT %(org)s, %(env)s, d.account_id, d.asset_id, d.delta, "
    f"CASE WHEN starts_with(d.account_id, 'wal_') THEN 0 END, %(now)s FROM {_DELTAS} "
    "WHERE NOT EXISTS (SELECT 1 FROM balances b WHERE b.account_id = d.account_id AND b.asset_id = d.asset_id)"
)


# The partition of an event (plan 5.1): a hash of its tenant and RESOLVED customer (an event names its customer by
# id or external id, both spellings land in one partition; an id wins, as in `customers.resolve_many`), or of the
# raw reference when no customer has it yet. Every process computes it alike at claim time.
_PARTITION = (
    "mod(mod(hashtextextended(e.organization_id || '/' || e.environment || '/' || coalesce("
    "(SELECT c.id FROM customers c WHERE c.id = e.customer_id AND c.organization_id = e.organization_id "
    "AND c.environment = e.environment), "
    "(SELECT c.id FROM customers c WHERE c.external_id = e.customer_id AND c.organization_id = e.organization_id "
    "AND c.environment = e.environment), e.customer_id), 0), %(count)s) + %(count)s, %(count)s)"
)


_LOCK_RECEIVED = "SELECT id FROM events WHERE id = ANY(%(ids)s::text[]) AND status = 'received' ORDER BY id FOR UPDATE"


def _pending_sql(partitioned: bool, lock: bool) -> str:
    sql = render(f"SELECT {PENDING_COLUMNS} FROM events AS e") + (
        " WHERE e.status = 'received' AND (e.wait_until IS NULL OR e.wait_until <= %(now)s)"
    )
    if partitioned:
        sql += f" AND {_PARTITION} = ANY(%(held)s::int[])"
    sql += " ORDER BY e.id LIMIT %(limit)s"
    return sql + " FOR UPDATE OF e" if lock else sql


class PgEventRepository(EventRepository):
    def pending(self, limit: int, partitions: EventPartitions | None = None) -> list[PendingEvent]:
        """DuckDB's `pending`, of the `partitions` this worker holds (None: every event). In a unit of work the
        events are also locked (`FOR UPDATE`), a safety net should two workers ever believe they hold one
        partition: the second waits for the first's commit, then no longer sees them `received`."""
        con = cast(PgConnection, self.con)
        partitioned = partitions is not None and partitions.total > 1
        if partitions is not None and not partitions.held:
            return []
        params: dict[str, object] = {"now": utcnow(), "limit": limit}
        if partitions is not None and partitioned:
            params.update(count=partitions.total, held=list(partitions.held))
        rows = con.execute_native(_pending_sql(partitioned, con.writes), params).fetchall()
        return list(map(PendingEvent._make, rows))

    def waiting_on(self, scope: Scope, external_ids: list[str]) -> list[PendingEvent]:
        """DuckDB's, locked in a unit of work as `pending` locks (a refund naming another customer than its
        original may be in another worker's partition): those another worker processed meanwhile are left out."""
        return self._locked(super().waiting_on(scope, external_ids))

    def received(self, scope: Scope, event_ids: list[str]) -> list[PendingEvent]:
        return self._locked(super().received(scope, event_ids))

    def _locked(self, events: list[PendingEvent]) -> list[PendingEvent]:
        con = cast(PgConnection, self.con)
        if not con.writes or not events:
            return events
        rows = con.execute_native(_LOCK_RECEIVED, {"ids": [event.id for event in events]}).fetchall()
        still = {row[0] for row in rows}
        return [event for event in events if event.id in still]

    def add(self, events: list[tuple[Scope, NewEvent]], received_at: datetime) -> bool:
        """As DuckDB's: all inserted in one statement, or none (False) if one is already stored. Inside a
        transaction the statement runs in a savepoint, so a refused insert leaves the transaction usable."""
        if not events:
            return True
        con = cast(PgConnection, self.con)
        scopes, rows = zip(*events, strict=True)
        ids, external_ids, types, customers, occurred, data, hashes = zip(*rows, strict=True)
        params = {
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
        }
        try:
            with con.savepoint():
                con.execute_native(_INSERT_EVENTS, params)
        except duckdb.ConstraintException:
            return False
        return True

    def mark_many(self, scope: Scope, outcomes: list[EventOutcome]) -> None:
        """As DuckDB's (versions recorded once, at the first attempt that knows them), from typed arrays: one
        statement per batch without a temporary table (DuckDB's registers an Arrow table)."""
        if not outcomes:
            return
        con = cast(PgConnection, self.con)
        con.execute_native(
            _MARK_EVENTS,
            {
                "id": [o.event_id for o in outcomes],
                "status": [o.status for o in outcomes],
                "code": [o.error_code for o in outcomes],
                "message": [o.error_message for o in outcomes],
                "versions": [None if o.versions is None else jsonutil.dumps(o.versions) for o in outcomes],
                "now": utcnow(),
                "org": scope.organization_id,
                "env": scope.environment,
            },
        )


_MARK_EVENTS = (
    "UPDATE events SET status = o.status, error_code = o.error_code, error_message = o.error_message, "
    "evaluated_versions = CASE WHEN coalesce(events.evaluated_versions, '[]') = '[]' THEN o.versions "
    "ELSE events.evaluated_versions END, attempts = attempts + 1, processed_at = %(now)s "
    "FROM unnest(%(id)s::text[], %(status)s::text[], %(code)s::text[], %(message)s::text[], %(versions)s::text[]) "
    "AS o(id, status, error_code, error_message, versions) "
    "WHERE events.id = o.id AND events.organization_id = %(org)s AND events.environment = %(env)s"
)


class PgLedgerRepository(LedgerRepository):
    def __init__(self, con: duckdb.DuckDBPyConnection, store: PostgresStore) -> None:
        super().__init__(con, None)  # no ledger cache: another process may write the same balances
        self.store = store

    def ledger_state(self, scope: Scope, wallet_ids: set[str], accounts: Mapping[str, Collection[str]]) -> LedgerState:
        """DuckDB's, read after this unit of work has locked what the decision depends on (plan 5.2): the
        wallets' balances, then the asset's system accounts where a supply ceiling makes the decision depend on
        them; so two processes never decide on the same balance at once."""
        con = cast(PgConnection, self.con)
        if con.writes and accounts:
            lock_balances(con, scope, accounts)
        return super().ledger_state(scope, wallet_ids, accounts)

    def _fault(self, point: str) -> None:
        self.store.fault(point)  # the crash tests' fault points, as on DuckDB

    def _write_tables(self, scope: Scope, txn_batch: pa.Table, balance_deltas: pa.Table) -> None:
        """DuckDB's three statements, PostgreSQL's way (plan section 4): the transactions by COPY straight into
        the table (the CHECKs fire as rows arrive, inside the unit's transaction), then the balances updated and
        the new ones inserted from typed arrays (one round trip each, no temporary table). Same fault points,
        same refusals as DuckDB's (`ledger._invariant`)."""
        con = cast(PgConnection, self.con)
        now = self.written_at = utcnow()
        accounts = balance_deltas.column("account_id").to_pylist()
        deltas = {
            "account": accounts,
            "asset": balance_deltas.column("asset_id").to_pylist(),
            "delta": [str(v) for v in balance_deltas.column("delta").to_pylist()],
            "floor": [str(v) for v in balance_deltas.column("floor_delta").to_pylist()],
            "org": scope.organization_id,
            "env": scope.environment,
            "now": now,
        }
        try:
            con.copy_rows(
                _COPY_TRANSACTIONS,
                (
                    (row[0], *scope.params, *row[1:8], now, row[8])
                    for row in zip(*(c.to_pylist() for c in txn_batch.columns), strict=True)
                ),
            )
            self._fault("after_entries")
            updated = con.execute_native(_UPDATE_BALANCES, deltas).fetchone()
            if updated is None or int(updated[0]) < len(accounts):
                con.execute_native(_INSERT_BALANCES, deltas)
            self._fault("after_balances")
        except duckdb.ConstraintException as error:
            raise ServiceError(
                "internal_error", "ledger invariant refused by the store", invariant=_invariant(str(error))
            ) from error
        except duckdb.OutOfRangeException as error:
            raise ServiceError(
                "internal_error", "ledger invariant refused by the store", invariant="balance_out_of_range"
            ) from error


_TAKE_LOTS = (
    "UPDATE lots SET remaining_minor = remaining_minor - t.taken, "
    "expired_minor = expired_minor + CASE WHEN t.expired_by IS NULL THEN 0 ELSE t.taken END, "
    "expired_transaction_id = coalesce(t.expired_by, expired_transaction_id), updated_at = %(now)s "
    "FROM unnest(%(id)s::text[], %(taken)s::numeric[], %(expired)s::text[]) AS t(id, taken, expired_by) "
    "WHERE lots.id = t.id AND lots.organization_id = %(org)s AND lots.environment = %(env)s"
)
_MAKE_LOTS = (
    "INSERT INTO lots SELECT m.id, %(org)s, %(env)s, m.wallet_id, m.asset_id, m.issued_at, m.expires_at, "
    "m.amount, m.amount, 0, m.source, NULL, %(now)s, %(now)s FROM unnest(%(id)s::text[], %(wallet)s::text[], "
    "%(asset)s::text[], %(issued)s::timestamp[], %(expires)s::timestamp[], %(amount)s::numeric[], "
    "%(source)s::text[]) AS m(id, wallet_id, asset_id, issued_at, expires_at, amount, source)"
)


class PgLotRepository(PgLotClaims):
    def write(self, scope: Scope, made: Sequence[NewLot], taken: Sequence[LotTaken]) -> None:
        """As DuckDB's (the lots made first, then taken from; a lot taken from twice in a batch: one row, the
        sum), from typed arrays (DuckDB reads Arrow tables by a replacement scan)."""
        con = cast(PgConnection, self.con)
        tenant = {"org": scope.organization_id, "env": scope.environment, "now": utcnow()}
        if made:
            con.execute_native(
                _MAKE_LOTS,
                {**tenant, "id": [m.id for m in made], "wallet": [m.wallet_id for m in made],
                 "asset": [m.asset_id for m in made], "issued": [m.issued_at for m in made],
                 "expires": [m.expires_at for m in made], "amount": [str(m.amount_minor) for m in made],
                 "source": [m.source_transaction_id for m in made]},
            )  # fmt: skip
        if taken:
            amounts: dict[str, int] = {}
            expired: dict[str, str] = {}
            for lot_id, part, expired_by in taken:
                amounts[lot_id] = amounts.get(lot_id, 0) + part
                if expired_by is not None:
                    expired[lot_id] = expired_by
            lots = list(amounts)
            con.execute_native(
                _TAKE_LOTS,
                {**tenant, "id": lots, "taken": [str(amounts[i]) for i in lots],
                 "expired": [expired.get(i) for i in lots]},
            )  # fmt: skip


# A key's transaction advisory lock: one 64-bit hash of the scope and the key (a collision only makes two keys wait
# for each other); the separators keep ("a", "bc") and ("ab", "c") apart.
_HOLD_KEY = "SELECT pg_try_advisory_xact_lock(hashtextextended(%(org)s || '/' || %(env)s || '/' || %(key)s, 0))"


class PgIdempotencyRepository(IdempotencyRepository):
    """Keys unique across processes (plan section 5.4): `hold` takes a transaction advisory lock on the key
    before `run_write` reads it, so a second request of the key in another process is answered at once
    (`idempotency_request_in_progress`) rather than waiting on the first's row. Every keyed unit of work takes it
    before reading the key, so no two can both find it absent and both write; the primary key keeps one row per
    key (`add` replaces it, as on DuckDB: the store contract's, used for a key past its retention window)."""

    def hold(self, scope: Scope, key: str) -> bool:
        con = cast(PgConnection, self.con)
        row = con.execute_native(_HOLD_KEY, {"org": scope.organization_id, "env": scope.environment, "key": key})
        found = row.fetchone()
        return bool(found and found[0])


class PgLimitUsageRepository(LimitUsageRepository):
    def load(self, scope: Scope, keys: list[UsageKey]) -> dict[UsageKey, Usage]:
        """DuckDB's, read after this unit of work has locked the counters (plan 5.2), so a cap or a budget is
        never decided on a count another process is about to change."""
        con = cast(PgConnection, self.con)
        if con.writes and keys:
            lock_counters(con, scope, keys)
        return super().load(scope, keys)


class PostgresRepositories(DuckDBRepositories):
    """`store.interfaces.Repositories` on one PostgreSQL connection. No ledger cache (`database=None` for the
    ledger, wallets and assets): another process may write the same balances (plan section 5)."""

    def __init__(self, con: PgConnection, store: PostgresStore) -> None:
        duck = cast(duckdb.DuckDBPyConnection, con)  # the repositories use only what PgConnection gives
        super().__init__(duck, None)
        self.database = store  # type: ignore[assignment]  # what process-wide caches key on
        self.events = PgEventRepository(duck)
        self.ledger = PgLedgerRepository(duck, store)
        self.lots = PgLotRepository(duck)
        self.outbox = PgOutboxRepository(duck)
        self.webhooks = PgWebhookRepository(duck)
        self.idempotency = PgIdempotencyRepository(duck)
        self.limit_usage = PgLimitUsageRepository(duck)
        self.tiers = PgTierClaims(duck)
