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
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from rewards_lab.store.ledger_cache import LedgerCache
from rewards_lab.store.schema import MIGRATIONS
from rewards_lab.store.secret_box import SecretBox, key_for_database

log = logging.getLogger(__name__)
PRIVATE_FILE_MODE = 0o600
_PRIVATE_UMASK = 0o077


def make_files_private(path: str) -> None:
    """Files the store creates are readable by their owner only.

    DuckDB creates the database file at connect and deletes and re-creates its write-ahead log (`<db>.wal`) at
    every checkpoint, with the process's umask, so one `chmod` cannot hold: the process umask gains 077 (from now
    on every file this process creates is private, which is what a service holding secrets wants) and the files
    an older version left readable are narrowed to 0600."""
    os.umask(os.umask(_PRIVATE_UMASK) | _PRIVATE_UMASK)
    for existing in (Path(path), Path(f"{path}.wal")):
        try:
            if existing.stat().st_mode & 0o077:
                existing.chmod(PRIVATE_FILE_MODE)
        except FileNotFoundError:
            continue
        except PermissionError:  # another user's file: DuckDB says what it thinks of opening it
            log.warning("cannot make %s private (not its owner)", existing)


def utcnow() -> datetime:
    """Now as naive UTC, the form every TIMESTAMP column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


class Database:
    """One DuckDB database (a file, or `:memory:`) owned by this process."""

    def __init__(
        self, path: str | Path = ":memory:", *, threads: int | None = 1, secret_key: bytes | None = None
    ) -> None:
        """`threads=1` suits the service's many small statements (a second thread only adds hand-off cost);
        analytical users (replay) pass None for DuckDB's default of one thread per core. `secret_key` seals
        stored secrets (default: `secret_box.key_for_database`)."""
        self.path = str(path)
        in_memory = self.path.startswith(":memory:")
        if not in_memory:
            make_files_private(self.path)
        self.secret_box = SecretBox(secret_key if secret_key is not None else key_for_database(self.path))
        config: dict[str, Any] = {}
        if threads is not None:
            config["threads"] = threads
        self._config = config
        self._connection = duckdb.connect(self.path, config=config)
        self._write_lock = threading.RLock()
        self._intake_lock = threading.Lock()
        self._intake_cursor: duckdb.DuckDBPyConnection | None = None
        self.ledger_cache = LedgerCache()
        self._local = threading.local()
        # Fault injection for crash tests: called by the ledger writer between its statements.
        self.fault_hook: Callable[[str], None] | None = None
        self.migrate()
        self.seal_plaintext_secrets()

    def seal_plaintext_secrets(self) -> None:
        """After the migrations: seal secrets that a database written before sealing holds in plain text (a
        no-op once done). DuckDB leaves an updated row's old version in free blocks of the file until it reuses
        them, so when anything was sealed the file is rewritten (`_rewrite_file`): no copy of the plain text
        stays on disk in it."""
        from rewards_lab.store.accounts import seal_plaintext_totp_secrets  # accounts imports this module

        with self.transaction() as tx:
            sealed = seal_plaintext_totp_secrets(tx, self.secret_box)
        if sealed and not self.path.startswith(":memory:"):
            self._rewrite_file()

    def _rewrite_file(self) -> None:
        """Copy every table and view into a fresh file and put it in the old one's place (once, at open)."""
        fresh = f"{self.path}.rewrite"
        for leftover in (Path(fresh), Path(f"{fresh}.wal")):
            leftover.unlink(missing_ok=True)
        con = self._connection
        (name,) = con.execute("SELECT current_database()").fetchone() or ("",)
        quoted = fresh.replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS rewrite_target")
        con.execute(f'COPY FROM DATABASE "{name}" TO rewrite_target')
        con.execute("DETACH rewrite_target")
        con.close()
        os.replace(fresh, self.path)
        Path(f"{self.path}.wal").unlink(missing_ok=True)  # closed cleanly: checkpointed, nothing left to replay
        self._connection = duckdb.connect(self.path, config=self._config)

    def migrate(self) -> None:
        con = self._connection
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
        )
        applied = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, description, statements in sorted(MIGRATIONS):
            if version in applied:
                continue
            with self.transaction() as tx:
                for statement in statements:
                    tx.execute(statement)
                tx.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, utcnow()])

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

    @contextmanager
    def intake_cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The intake's cursor outside any transaction: each statement is then a transaction of its own (the
        group commit's fast path is ONE statement, so BEGIN and COMMIT would be two statements more)."""
        with self._intake_lock:
            if self._intake_cursor is None:
                self._intake_cursor = self._connection.cursor()
            yield self._intake_cursor

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A cursor for this thread's reads: a snapshot of committed data, outside any write transaction."""
        cursor: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._connection.cursor()
            self._local.cursor = cursor
        return cursor

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

    def checkpoint(self) -> None:
        with self._write_lock:
            self._connection.execute("CHECKPOINT")

    def close(self) -> None:
        with self._write_lock, self._intake_lock:
            self._connection.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
