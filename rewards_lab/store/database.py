"""The DuckDB file, its single writer and the unit of work.

DuckDB lets one process open a file. Inside it, one writer at a time runs a unit of work (a lock serialises
them); a unit of work is one database transaction that commits as a whole or not at all. Reads that need no
transaction use a per-thread cursor and never wait for the writer (DuckDB's MVCC gives them a snapshot).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import duckdb

from rewards_lab.store.ledger_cache import LedgerCache
from rewards_lab.store.private_files import (
    create_private_database,
    drop_empty_wal,
    keep_wal_private,
    narrow_existing_files,
    wal_path,
)
from rewards_lab.store.schema import steps
from rewards_lab.store.secret_box import SecretBox, configured_key, key_for_database, key_source

if TYPE_CHECKING:
    from rewards_lab.store.interfaces import EventStore, Repositories
    from rewards_lab.store.verification import LedgerReport

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    """Now as naive UTC, the form every TIMESTAMP column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


class DuckDBStore:
    """One DuckDB database (a file, or `:memory:`) owned by this process: the DuckDB implementation of
    `store.api.Store` (its members below the cursors' own), with what only a file has (`copy_to`, cursors)."""

    def __init__(
        self, path: str | Path = ":memory:", *, threads: int | None = 1, secret_key: bytes | None = None
    ) -> None:
        """`threads=1` suits the service's many small statements (a second thread only adds hand-off cost);
        analytical users (replay) pass None for DuckDB's default of one thread per core. `secret_key` seals
        stored secrets (default: `secret_box.key_for_database`); a key that is not the database's own is refused
        with `SecretKeyError` (`store/secret_key_check.py`). A new database file is created 0600 and its
        write-ahead log kept 0600 (`store/private_files.py`)."""
        self.path = str(path)
        self._in_memory = self.path.startswith(":memory:")
        key = secret_key if secret_key is not None else configured_key()  # a malformed variable fails first
        source = "the key given to DuckDBStore" if secret_key is not None else key_source(self.path)
        created = False
        if not self._in_memory:
            created = create_private_database(Path(self.path))
            narrow_existing_files(self.path)
        config: dict[str, Any] = {}
        if threads is not None:
            config["threads"] = threads
        self._config = config
        self._connection = duckdb.connect(self.path, config=config)
        self._write_lock = threading.RLock()
        self._intake_lock = threading.Lock()
        self._copy_lock = threading.Lock()  # one online copy at a time (`copy_to`)
        self._intake_cursor: duckdb.DuckDBPyConnection | None = None
        self.ledger_cache = LedgerCache()
        self._local = threading.local()
        # Fault injection for crash tests: called by the ledger writer between its statements.
        self.fault_hook: Callable[[str], None] | None = None
        try:
            self._keep_wal_private()
            self.migrate()
            if key is None:
                key = key_for_database(self.path, may_create=created or not self._key_is_fixed())
            self.secret_box = SecretBox(key)
            self._check_key(source)
            self.seal_plaintext_secrets()
        except BaseException:
            self._connection.close()  # a refused key (or anything else) leaves the file free for the next try
            raise

    def _key_is_fixed(self) -> bool:
        from rewards_lab.store.secret_key_check import key_is_fixed  # it imports the repositories, which import us

        return key_is_fixed(self._connection)

    def _check_key(self, source: str) -> None:
        from rewards_lab.store.secret_key_check import check_key

        with self.transaction() as tx:
            check_key(tx, self.secret_box, path=self.path, source=source)

    def seal_plaintext_secrets(self) -> None:
        """After the migrations: seal the TOTP and webhook signing secrets that a database written before sealing
        holds in plain text (a no-op once done). DuckDB leaves an updated row's old version in free blocks of the
        file until it reuses them, so when anything was sealed the file is rewritten (`_rewrite_file`): no copy
        of the plain text stays on disk in it."""
        from rewards_lab.store.accounts import seal_plaintext_totp_secrets  # accounts imports this module
        from rewards_lab.store.webhooks import seal_plaintext_webhook_secrets

        with self.transaction() as tx:
            sealed = seal_plaintext_totp_secrets(tx, self.secret_box)
            sealed += seal_plaintext_webhook_secrets(tx, self.secret_box)
        if sealed:
            log.info("sealed %d secrets stored in plain text by an older release", sealed)
            if not self._in_memory:
                self._rewrite_file()

    def _keep_wal_private(self) -> None:
        if not self._in_memory:
            keep_wal_private(self.path)

    def _rewrite_file(self) -> None:
        """Copy every table and view into a fresh file and put it in the old one's place (once, at open)."""
        fresh = f"{self.path}.rewrite"
        for leftover in (Path(fresh), wal_path(fresh)):
            leftover.unlink(missing_ok=True)
        create_private_database(Path(fresh))  # 0600 from the start: it becomes the database file
        con = self._connection
        (name,) = con.execute("SELECT current_database()").fetchone() or ("",)
        quoted = fresh.replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS rewrite_target")
        keep_wal_private(fresh)  # the copy's own log, while COPY writes it
        con.execute(f'COPY FROM DATABASE "{name}" TO rewrite_target')
        con.execute("DETACH rewrite_target")
        con.close()
        os.replace(fresh, self.path)
        wal_path(self.path).unlink(missing_ok=True)  # closed cleanly: checkpointed, nothing left to replay
        self._connection = duckdb.connect(self.path, config=self._config)
        self._keep_wal_private()

    def migrate(self) -> None:
        con = self._connection
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
        )
        applied = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
        for versions, description, statements in steps("duckdb", applied):
            with self.transaction() as tx:
                for statement in statements:
                    tx.execute(statement)
                for version in versions:
                    tx.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, utcnow()])
        self._keep_wal_private()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One database transaction on the writer connection: commit on success, roll back on any error."""
        with self._write_lock:
            con = self._connection
            con.execute("BEGIN TRANSACTION")
            self.ledger_cache.begin()
            try:
                yield con
            except BaseException:
                self.ledger_cache.rollback()
                con.execute("ROLLBACK")
                raise
            try:
                con.execute("COMMIT")
            except BaseException:
                self.ledger_cache.rollback()
                raise
            self.ledger_cache.commit()
            self._keep_wal_private()  # a commit may have checkpointed (and deleted the log)

    @contextmanager
    def intake_transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A transaction beside the writer's, on a cursor of its own, for the event intake only.

        The intake only INSERTs new events (and reads); the writer only updates events after they commit. The
        two never touch the same rows, so DuckDB's optimistic concurrency lets them commit independently and an
        incoming event never waits for a long processing batch. Nothing here touches the ledger or its cache.
        """
        with self._intake_lock:
            if self._intake_cursor is None:
                self._intake_cursor = self._connection.cursor()
            con = self._intake_cursor
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            self._keep_wal_private()

    @contextmanager
    def intake_cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The intake's cursor outside any transaction: each statement is then a transaction of its own (the
        group commit's fast path is ONE statement, so BEGIN and COMMIT would be two statements more)."""
        with self._intake_lock:
            if self._intake_cursor is None:
                self._intake_cursor = self._connection.cursor()
            try:
                yield self._intake_cursor
            finally:
                self._keep_wal_private()

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A cursor for this thread's reads: a snapshot of committed data, outside any write transaction."""
        cursor: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._connection.cursor()
            self._local.cursor = cursor
        return cursor

    def snapshot(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own inside a read transaction: every statement on it reads the same committed state
        (DuckDB's MVCC), however long it stays open, and it takes none of our locks (writers go on committing).
        The caller closes it (`close_snapshot`); a long export reads through one."""
        cursor = self._connection.cursor()
        cursor.execute("BEGIN TRANSACTION")
        return cursor

    @staticmethod
    def close_snapshot(cursor: duckdb.DuckDBPyConnection) -> None:
        try:
            cursor.execute("ROLLBACK")  # it wrote nothing
        except duckdb.Error:
            pass  # already closed with the database
        finally:
            cursor.close()

    def probe_write(self, timeout_s: float) -> bool:
        """Readiness: one tiny transaction through the single writer (an upsert of the one `health_probe` row,
        committed, so the write-ahead log really takes it). False when the writer stays busy for `timeout_s`
        (a wedged writer is not ready either); a database that refuses the write raises."""
        if not self._write_lock.acquire(timeout=timeout_s):
            return False
        try:
            with self.transaction() as tx:
                tx.execute("INSERT OR REPLACE INTO health_probe VALUES (1, ?)", [utcnow()])
        finally:
            self._write_lock.release()
        return True

    def fault(self, point: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point)

    def copy_to(self, target: Path) -> None:
        """A consistent copy of this database into the new file `target` (0600), while it keeps serving.

        `COPY FROM DATABASE` inside one transaction on a cursor of its own reads one snapshot (DuckDB's MVCC): the
        copy holds exactly the transactions committed when it began, every table at the same instant, and
        writers go on committing meanwhile (no lock of ours is held: the write lock would stall every tenant
        for the length of the copy). Every committed state is a consistent one (that is what the crash tests
        hold), so a snapshot is too. Tables, views, constraints and the migration history are copied as
        `_rewrite_file` copies them."""
        if not create_private_database(target):
            raise FileExistsError(target)
        quoted = str(target).replace("'", "''")
        with self._copy_lock:
            cursor = self._connection.cursor()
            try:
                (name,) = cursor.execute("SELECT current_database()").fetchone() or ("",)
                cursor.execute(f"ATTACH '{quoted}' AS online_copy")
                keep_wal_private(str(target))  # the copy's own log, while COPY writes it
                try:
                    cursor.execute("BEGIN TRANSACTION")
                    try:
                        cursor.execute(f'COPY FROM DATABASE "{name}" TO online_copy')
                    except BaseException:
                        cursor.execute("ROLLBACK")
                        raise
                    cursor.execute("COMMIT")
                finally:
                    cursor.execute("DETACH online_copy")  # checkpoints the copy: its file alone is the database
            finally:
                cursor.close()
        drop_empty_wal(str(target))  # the empty log `keep_wal_private` left, if unused

    def local_directory(self) -> Path | None:
        """The file's directory (readiness measures its filesystem's free space); None in memory."""
        return None if self._in_memory else Path(self.path).resolve().parent

    def shared_state(self) -> None:
        """None: one process serves a DuckDB file, and its memory holds the rate counters and login failures."""
        return None

    def event_leases(self) -> None:
        """None: one process writes a DuckDB file, and its event worker takes every event."""
        return None

    def checkpoint(self) -> None:
        with self._write_lock:
            self._connection.execute("CHECKPOINT")
            self._keep_wal_private()  # DuckDB deleted the log

    def close(self) -> None:
        with self._write_lock, self._intake_lock:
            if not self._in_memory:
                # The empty log the store put in place, unused: removed while DuckDB's lock still keeps other
                # processes out (a log with content is DuckDB's: it checkpoints and deletes it at close).
                drop_empty_wal(self.path)
            self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # `store.api.Store`: the units of work over `Repositories` (store/uow.py builds them on the cursors above;
    # imported here, not at the top: the repositories import this module).

    def unit_of_work(self) -> AbstractContextManager[Repositories]:
        from rewards_lab.store.uow import unit_of_work

        return unit_of_work(self)

    def reader_repositories(self) -> Repositories:
        from rewards_lab.store.uow import reader

        return reader(self)

    def snapshot_repositories(self) -> AbstractContextManager[Repositories]:
        from rewards_lab.store.uow import snapshot

        return snapshot(self)

    def intake_events(self) -> AbstractContextManager[EventStore]:
        from rewards_lab.store.uow import intake_events

        return intake_events(self)

    def intake_unit_of_work(self) -> AbstractContextManager[Repositories]:
        from rewards_lab.store.uow import intake_unit_of_work

        return intake_unit_of_work(self)

    @contextmanager
    def side_unit_of_work(self) -> Iterator[Repositories]:
        """A transaction on this thread's reader cursor, outside the write lock: DuckDB's optimistic concurrency
        lets it commit beside the writer as long as the two touch different rows (append-only tables)."""
        from rewards_lab.store.uow import DuckDBRepositories

        con = self.reader()
        con.execute("BEGIN TRANSACTION")
        try:
            yield DuckDBRepositories(con, self)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def delete_expired(self, table: str, cutoff: datetime, limit: int) -> int:
        from rewards_lab.store.retention import delete_expired

        with self.transaction() as con:
            return delete_expired(con, table, cutoff, limit)

    def delete_finished_deliveries(self, cutoff: datetime, limit: int) -> tuple[int, int]:
        from rewards_lab.store.retention import delete_finished_deliveries

        with self.transaction() as con:
            return delete_finished_deliveries(con, cutoff, limit)

    def verify_ledger(self) -> LedgerReport:
        from rewards_lab.store.verification import verify_ledger

        return verify_ledger(self.reader())

    @contextmanager
    def exclusive(self, name: str) -> Iterator[bool]:
        """Always held: one process opens a DuckDB file (`Store.exclusive`)."""
        yield True


Database = DuckDBStore  # the name before `store.api.Store` existed; kept so that nothing outside breaks
