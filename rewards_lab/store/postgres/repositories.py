"""The repositories over PostgreSQL: DuckDB's own classes on a `PgConnection` (their SQL rendered per statement),
and the per-store code where DuckDB's statement has no PostgreSQL rendering (tests/store/test_sql_portability.py,
`PER_STORE`): the event intake's insert and the ledger's batch write (DuckDB reads its Arrow tables by a
replacement scan; here they are TEMP tables filled by COPY)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, cast

import duckdb
import pyarrow as pa

from rewards_lab.contract.scope import Scope
from rewards_lab.store.events import EventRepository
from rewards_lab.store.interfaces import NewEvent
from rewards_lab.store.ledger import LedgerRepository
from rewards_lab.store.postgres.connection import PgConnection
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


class PgEventRepository(EventRepository):
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


class PgLedgerRepository(LedgerRepository):
    def __init__(self, con: duckdb.DuckDBPyConnection, store: PostgresStore) -> None:
        super().__init__(con, None)  # no ledger cache: another process may write the same balances
        self.store = store

    def _fault(self, point: str) -> None:
        self.store.fault(point)  # the crash tests' fault points, as on DuckDB

    def _write_tables(self, scope: Scope, txn_batch: pa.Table, balance_deltas: pa.Table) -> None:
        """DuckDB's statements, over TEMP tables named as DuckDB's replacement scan names the Arrow tables."""
        con = cast(PgConnection, self.con)
        con.register("txn_batch", txn_batch)
        con.register("balance_deltas", balance_deltas)
        try:
            super()._write_tables(scope, txn_batch, balance_deltas)
        finally:
            con.unregister("txn_batch")
            con.unregister("balance_deltas")


class PostgresRepositories(DuckDBRepositories):
    """`store.interfaces.Repositories` on one PostgreSQL connection. No ledger cache (`database=None` for the
    ledger, wallets and assets): another process may write the same balances (plan section 5)."""

    def __init__(self, con: PgConnection, store: PostgresStore) -> None:
        duck = cast(duckdb.DuckDBPyConnection, con)  # the repositories use only what PgConnection gives
        super().__init__(duck, None)
        self.database = store  # type: ignore[assignment]  # what process-wide caches key on
        self.events = PgEventRepository(duck)
        self.ledger = PgLedgerRepository(duck, store)
