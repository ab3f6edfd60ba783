"""`PostgresStore`: the `store.api.Store` Protocol on a PostgreSQL database, through a psycopg pool.

Transactions (decisions for issue 32, increment 4):
- a unit of work is one transaction at READ COMMITTED on a pooled connection, under this process's write lock (one
  writer per process, as on DuckDB); across processes the counters and balances a decision depends on are locked
  in one order (`row_locks.py`) and the event worker takes only the partitions it leases (`leases.py`);
- readers are autocommit connections, one per thread (each statement sees what is committed when it starts);
- a snapshot is one REPEATABLE READ READ ONLY transaction (every statement sees one committed state);
- the intake's events run autocommit (one statement, one commit) and its unit of work in a transaction of its own,
  both under the intake lock and not the writer's;
- migrations run under a session advisory lock, so two processes opening one new database migrate it once.
The database must sort text bytewise (collation C), as DuckDB does: another collation is refused at open.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from rewards_lab.store.api import UnsupportedStore
from rewards_lab.store.database import utcnow
from rewards_lab.store.dialect import render
from rewards_lab.store.postgres.connection import PgConnection, configure
from rewards_lab.store.postgres.leases import EventLeases, check_count
from rewards_lab.store.postgres.repositories import PostgresRepositories
from rewards_lab.store.postgres.shared import PgSharedState
from rewards_lab.store.schema import steps
from rewards_lab.store.secret_box import KEY_ENV, SecretBox, configured_key

if TYPE_CHECKING:
    from rewards_lab.store.interfaces import EventStore, Repositories
    from rewards_lab.store.verification import LedgerReport

MIGRATION_LOCK = 0x7265_7761_7264_73  # pg_advisory_lock's key for migrations ("rewards")
BACKGROUND_LOCK = 0x7265_7761_7264_74  # held by the one process that runs the single-process workers (serving.py)
# The events' partitions (plan 5.1): 1 is way a, one worker at a time in the whole database, in id order as on
# DuckDB (beneficiaries' rewards included); more let that many workers take events at once. 1 until increment 12
# measures the gain against the hot rows (budgets, ceilings) that serialise batches anyway. Every process of one
# database must use the same number.
EVENT_PARTITIONS = 1
PARTITIONS_ENV = "REWARDS_LAB_EVENT_PARTITIONS"
# `exclusive(name)`'s session advisory locks: the work one process at a time does (retention: its deletes are safe
# twice, but each would scan for the same rows)
EXCLUSIVE_LOCKS = {"retention": 0x7265_7761_7264_75}
BYTEWISE = ("C", "POSIX")
CONNECT_TIMEOUT_S = 10
POOL_MAX = 12  # intake 1, event worker 1, deliveries 1, API handlers ~8 (plan section 4)
_SCHEMA_MIGRATIONS = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
    "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
)


class StoreUnavailable(UnsupportedStore):
    """The PostgreSQL database cannot be used: unreachable, or not fit (collation, no key); the message says
    which, without the password."""


def redacted(url: str) -> str:
    """`url` without its password (nor any option): what messages and `path` show. `psycopg.Error` when libpq
    cannot read it."""
    parts = conninfo_to_dict(url)
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def _scrub(message: str, url: str) -> str:
    password = conninfo_to_dict(url).get("password")
    return message.replace(str(password), "***") if password else message


def libpq_url(url: str) -> str:
    """`url` with its scheme as libpq reads it (`postgres://` and `PostgreSQL://` are the same database)."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql://{rest}" if sep and scheme.lower() in ("postgresql", "postgres") else url


class PostgresStore:
    """One PostgreSQL database (`url`: a libpq URL or key=value string), opened: migrated, its collation and
    secret key checked."""

    def __init__(
        self,
        url: str,
        *,
        secret_key: bytes | None = None,
        pool_max: int = POOL_MAX,
        event_partitions: int | None = None,
    ) -> None:
        self.url = url = libpq_url(url)
        self.event_partitions = check_count(
            event_partitions if event_partitions is not None else int(os.environ.get(PARTITIONS_ENV, EVENT_PARTITIONS))
        )
        try:
            self.path = redacted(url)
        except psycopg.Error:
            raise StoreUnavailable("--db postgresql://...: not a PostgreSQL URL libpq can read") from None
        self.fault_hook: Any = None
        self._write_lock = threading.RLock()
        self._intake_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[psycopg.Connection[Any]] = []
        self._readers_lock = threading.Lock()
        self._leader: psycopg.Connection[Any] | None = None
        self._shared = PgSharedState(self)
        key = secret_key if secret_key is not None else configured_key()
        if key is None:
            raise StoreUnavailable(
                f"{self.path}: a PostgreSQL store takes its secret key from {KEY_ENV} (there is no key file beside "
                "a server's database); set it"
            )
        with self._connect() as conn:
            self._check_collation(conn)
            self.migrate(conn)
            self.constraints = _constraints(conn)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_max,
            kwargs=_connection_options(),
            configure=configure,
            check=ConnectionPool.check_connection,
            name="rewards_lab",
            open=True,
        )
        try:
            self.secret_box = SecretBox(key)
            self._check_key("the key given to PostgresStore" if secret_key is not None else KEY_ENV)
        except BaseException:
            self.close()
            raise

    # Opening

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.url, **_connection_options())
        except psycopg.OperationalError as error:
            first = _scrub(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__, self.url)
            raise StoreUnavailable(f"{self.path}: cannot connect: {first}") from None
        configure(conn)
        return conn

    def _check_collation(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute("SELECT datcollate, datctype FROM pg_database WHERE datname = current_database()").fetchone()
        collate = row[0] if row else "?"
        if collate not in BYTEWISE:
            raise StoreUnavailable(
                f'{self.path}: the database\'s collation is {collate!r}; the store needs collation "C" (text '
                "sorted bytewise, as DuckDB sorts it: pagination cursors depend on it). Create the database with "
                "CREATE DATABASE ... LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
            )

    def migrate(self, conn: psycopg.Connection[Any] | None = None) -> None:
        """Every migration not yet applied, one transaction per step (the baseline first on a new database),
        under a session advisory lock: a second process waits, then finds them applied."""
        if conn is None:
            with self._connect() as own:
                self.migrate(own)
            return
        conn.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
        try:
            conn.execute(render(_SCHEMA_MIGRATIONS), [])
            applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations").fetchall()}
            for versions, description, statements in steps("postgres", applied):
                with conn.transaction():
                    for statement in statements:
                        conn.execute(render(statement), [])
                    for version in versions:
                        conn.execute(
                            "INSERT INTO schema_migrations VALUES (%s, %s, %s)", [version, description, utcnow()]
                        )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK])

    def _check_key(self, source: str) -> None:
        from rewards_lab.store.accounts import seal_plaintext_totp_secrets  # they import the repositories
        from rewards_lab.store.secret_key_check import check_key
        from rewards_lab.store.webhooks import seal_plaintext_webhook_secrets

        with self._transaction() as con:
            duck: Any = con
            check_key(duck, self.secret_box, path=self.path, source=source)
            seal_plaintext_totp_secrets(duck, self.secret_box)
            seal_plaintext_webhook_secrets(duck, self.secret_box)

    # Connections and transactions

    @contextmanager
    def _transaction(self) -> Iterator[PgConnection]:
        """One transaction (READ COMMITTED) on a pooled connection under the write lock."""
        with self._write_lock, self._pool.connection() as conn, conn.transaction():
            yield PgConnection(conn, self.constraints, writes=True)

    def _reader(self) -> PgConnection:
        return PgConnection(self.thread_connection(), self.constraints)

    def thread_connection(self) -> psycopg.Connection[Any]:
        """This thread's autocommit connection, outside the pool (the reads' and the rate counters')."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def pooled_transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction on a pooled connection, outside the write lock (the login guard's records)."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def shared_state(self) -> PgSharedState:
        """The rate counters and login failures every process serving this database shares."""
        return self._shared

    @contextmanager
    def unit_of_work(self) -> Iterator[Repositories]:
        with self._transaction() as con:
            yield PostgresRepositories(con, self)

    def reader_repositories(self) -> Repositories:
        return PostgresRepositories(self._reader(), self)

    @contextmanager
    def snapshot_repositories(self) -> Iterator[Repositories]:
        with self._pool.connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield PostgresRepositories(PgConnection(conn, self.constraints), self)
            finally:
                conn.execute("ROLLBACK")  # it wrote nothing

    @contextmanager
    def intake_events(self) -> Iterator[EventStore]:
        with self._intake_lock, self._pool.connection() as conn:
            yield PostgresRepositories(PgConnection(conn, self.constraints), self).events

    @contextmanager
    def intake_unit_of_work(self) -> Iterator[Repositories]:
        with self._intake_lock, self._pool.connection() as conn, conn.transaction():
            yield PostgresRepositories(PgConnection(conn, self.constraints), self)

    @contextmanager
    def side_unit_of_work(self) -> Iterator[Repositories]:
        with self._pool.connection() as conn, conn.transaction():
            yield PostgresRepositories(PgConnection(conn, self.constraints), self)

    def delete_expired(self, table: str, cutoff: datetime, limit: int) -> int:
        from rewards_lab.store.retention import delete_expired

        with self._transaction() as con:
            duck: Any = con
            return delete_expired(duck, table, cutoff, limit)

    def delete_finished_deliveries(self, cutoff: datetime, limit: int) -> tuple[int, int]:
        from rewards_lab.store.retention import delete_finished_deliveries

        with self._transaction() as con:
            duck: Any = con
            return delete_finished_deliveries(duck, cutoff, limit)

    def verify_ledger(self) -> LedgerReport:
        from rewards_lab.store.verification import verify_ledger

        duck: Any = self._reader()
        return verify_ledger(duck)

    def probe_write(self, timeout_s: float) -> bool:
        """Readiness: the `health_probe` row upserted and committed through the pool; False when no connection
        comes within `timeout_s` or the write does not finish within it (statement_timeout)."""
        try:
            with self._pool.connection(timeout=timeout_s) as conn, conn.transaction():
                conn.execute("SELECT set_config('statement_timeout', %s, true)", [f"{int(timeout_s * 1000)}ms"])
                PgConnection(conn).execute("INSERT OR REPLACE INTO health_probe VALUES (1, ?)", [utcnow()])
        except (PoolTimeout, pg_errors.QueryCanceled):
            return False
        return True

    def try_lead(self) -> bool:
        """Whether this process holds the database's background lock (a session advisory lock on a connection of
        its own, kept until `close`): the one process of several that runs the background workers not yet safe in
        several processes (`api.serving.MULTI_PROCESS`). The lock goes with the session, so a killed leader's
        successor (or its restarted self) takes it over."""
        if self._leader is None:
            conn = self._connect()
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", [BACKGROUND_LOCK]).fetchone()
            if not (row and row[0]):
                conn.close()
                return False
            self._leader = conn
        return True

    @contextmanager
    def exclusive(self, name: str) -> Iterator[bool]:
        """`pg_try_advisory_lock` of `name`'s key on a connection of its own, held until the block ends (then the
        connection closes: a process killed meanwhile loses the lock with its session). False at once when another
        session holds it."""
        conn = self._connect()
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", [EXCLUSIVE_LOCKS[name]]).fetchone()
            yield bool(row and row[0])
        finally:
            conn.close()

    def event_leases(self) -> EventLeases:
        """A new set of leases on the `event_partitions` partitions, on a connection of its own (opened at the
        first claim): one per event worker."""
        return EventLeases(self._connect, self.event_partitions)

    def local_directory(self) -> Path | None:
        """None: the data is on the database server, whose disk the operator watches (docs/deploy.md)."""
        return None

    def checkpoint(self) -> None:
        """Nothing to fold: PostgreSQL's write-ahead log is the server's to manage."""

    def fault(self, point: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point)

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
        leader = getattr(self, "_leader", None)
        if leader is not None:
            leader.close()  # the background lock goes with the session
            self._leader = None
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _connection_options() -> dict[str, Any]:
    return {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S, "options": "-c TimeZone=UTC"}


def _constraints(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Each constraint's definition by name: a refused write's message names the columns it checks (as DuckDB's
    message does), which `ledger._invariant` reads."""
    rows = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
    ).fetchall()
    return {str(name): str(definition) for name, definition in rows}
