"""The DuckDB file, its single writer and the unit of work.

DuckDB lets one process open a file. Inside it, one writer at a time runs a unit of work (a lock serialises
them); a unit of work is one database transaction that commits as a whole or not at all. Reads that need no
transaction use a per-thread cursor and never wait for the writer (DuckDB's MVCC gives them a snapshot).
"""

from __future__ import annotations

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
        self.secret_box = SecretBox(secret_key if secret_key is not None else key_for_database(self.path))
        config: dict[str, Any] = {}
        if threads is not None:
            config["threads"] = threads
        self._connection = duckdb.connect(self.path, config=config)
        self._write_lock = threading.RLock()
        self._intake_lock = threading.Lock()
        self._intake_cursor: duckdb.DuckDBPyConnection | None = None
        self.ledger_cache = LedgerCache()
        self._local = threading.local()
        # Fault injection for crash tests: called by the ledger writer between its statements.
        self.fault_hook: Callable[[str], None] | None = None
        self.migrate()

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
