"""The store's one interface (`Store`), and `open_store`, which picks the implementation from a `--db` value.

`Store` is what the services, workers, API app and CLI use of a database, derived from their real uses: units of
work and readers over `Repositories` (store/interfaces.py), the event intake's own units, the append-only side
unit of the audit writer, retention's chunked deletes, the ledger's verification, readiness, the crash tests'
fault points, and closing. What only a DuckDB file has (its cursors, `copy_to`, the admin socket beside it, file
backups) stays on `DuckDBStore`; code that needs it asks for one with `as_duckdb`, which names what it is for.

Free functions with the names `store.uow` gave them (`unit_of_work(store)`, `reader(store)`, ...) keep the
callers' lines as they were.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

from rewards_lab.store.database import DuckDBStore
from rewards_lab.store.interfaces import EventStore, PartitionLeases, Repositories

if TYPE_CHECKING:
    from rewards_lab.store.secret_box import SecretBox
    from rewards_lab.store.shared_state import SharedState
    from rewards_lab.store.verification import LedgerReport

__all__ = [
    "DuckDBStore",
    "Store",
    "UnsupportedStore",
    "as_duckdb",
    "duckdb_path",
    "intake_events",
    "intake_unit_of_work",
    "is_postgres",
    "open_store",
    "reader",
    "snapshot",
    "unit_of_work",
]

POSTGRES_SCHEMES = ("postgresql", "postgres")
DUCKDB_SCHEME = "duckdb"
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$", re.DOTALL)


class UnsupportedStore(ValueError):
    """A `--db` value (or an operation) names a store this build cannot serve; the message says which and why.
    The CLI prints it and exits 2."""


class Store(Protocol):
    """A database the live service runs on (`DuckDBStore`, `store.postgres.store.PostgresStore`)."""

    @property
    def path(self) -> str:
        """Where the data is, for messages: a DuckDB file path (or `:memory:`), a PostgreSQL URL without its
        password."""
        ...

    def local_directory(self) -> Path | None:
        """The directory on this host whose filesystem holds the data (readiness's free-disk check), or None when
        the data is not on a local file (`:memory:`, a database server)."""
        ...

    @property
    def secret_box(self) -> SecretBox:
        """Seals and opens stored secrets (TOTP, webhook signing) under this database's key."""
        ...

    def unit_of_work(self) -> AbstractContextManager[Repositories]:
        """One atomic transaction: all of it commits, or (on any exception) none of it does."""
        ...

    def reader_repositories(self) -> Repositories:
        """Committed data for this thread's reads, no transaction held."""
        ...

    def snapshot_repositories(self) -> AbstractContextManager[Repositories]:
        """Reads that all see one committed state."""
        ...

    def intake_events(self) -> AbstractContextManager[EventStore]:
        """The event intake's events, each statement its own transaction, never waiting for the writer."""
        ...

    def intake_unit_of_work(self) -> AbstractContextManager[Repositories]:
        """A unit of work for the event intake, beside the writer's."""
        ...

    def side_unit_of_work(self) -> AbstractContextManager[Repositories]:
        """A transaction on this thread's own connection, beside the writer's and not waiting for it: only for
        append-only rows no other writer touches (the authentication audit's group commit)."""
        ...

    def delete_expired(self, table: str, cutoff: datetime, limit: int) -> int:
        """Retention: up to `limit` rows of `table` past `cutoff`, deleted in one transaction of their own."""
        ...

    def delete_finished_deliveries(self, cutoff: datetime, limit: int) -> tuple[int, int]:
        """Retention: up to `limit` finished webhook deliveries (and their attempts), in one transaction."""
        ...

    def verify_ledger(self) -> LedgerReport:
        """Every balance recomputed from the entries, every ledger invariant checked (committed data)."""
        ...

    def exclusive(self, name: str) -> AbstractContextManager[bool]:
        """Whether this process may do the work `name` ("retention") while no other process sharing the database
        does it: True while held (to the block's end), False at once when another process holds it."""
        ...

    def probe_write(self, timeout_s: float) -> bool:
        """Readiness: one tiny committed write; False when it cannot start within `timeout_s`."""
        ...

    def shared_state(self) -> SharedState | None:
        """The counters every process serving this database must share (store/shared_state.py), or None when one
        process serves it (DuckDB) and keeps them in its memory. Also what tells the callers that caches of
        mutable rows (the principal cache) would be stale in another process."""
        ...

    def checkpoint(self) -> None:
        """At a clean stop: whatever the store keeps outside its main file folded into it."""
        ...

    def event_leases(self) -> PartitionLeases | None:
        """The event worker's leases on the event partitions (a new set for each worker: several processes share
        the events of one database), or None where one process takes every event (DuckDB)."""
        ...

    def fault(self, point: str) -> None:
        """The crash tests' fault point `point` (a no-op unless a test set a hook)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


def duckdb_path(url_or_path: str | Path) -> str:
    """The DuckDB file a `--db` value names: a path as given, or the path of a `duckdb:` URL written as SQLAlchemy
    and duckdb_engine write it (no host; what follows the third slash is the path): `duckdb:///relative.duckdb`,
    `duckdb:////absolute/rewards.duckdb`, `duckdb:///:memory:`. A PostgreSQL URL, a `duckdb:` URL with a host,
    or any other `scheme://` is refused with `UnsupportedStore` (taken as a path, `Path` would fold its `//` and
    create a directory named after the scheme). The message never repeats the URL, which may carry a password."""
    text = str(url_or_path)
    match = _URL.match(text)
    if match is None:
        return text
    scheme = match.group("scheme").lower()
    if scheme == DUCKDB_SCHEME:
        rest = match.group("rest")
        if not rest.startswith("/") or len(rest) == 1:
            raise UnsupportedStore(
                "a duckdb: URL has no host and names a file: duckdb:///relative.duckdb or duckdb:////absolute/path"
            )
        return rest[1:]
    if scheme in POSTGRES_SCHEMES:
        raise UnsupportedStore(
            f"--db {scheme}://...: this command works on a DuckDB file; on PostgreSQL it is not built yet (issue 32)"
        )
    raise UnsupportedStore(
        f"--db {scheme}://...: unknown store scheme {scheme!r} (a DuckDB file path, or duckdb:///path)"
    )


def is_postgres(url_or_path: str | Path) -> bool:
    """Whether a `--db` value names a PostgreSQL database (a `postgresql://` or `postgres://` URL)."""
    match = _URL.match(str(url_or_path))
    return match is not None and match.group("scheme").lower() in POSTGRES_SCHEMES


def open_store(url_or_path: str | Path) -> Store:
    """The store a `--db` value names, opened (migrated, its secret key checked): a PostgreSQL database for a
    `postgresql://` or `postgres://` URL (`PostgresStore`: its key from REWARDS_LAB_SECRET_KEY; an unreachable
    or unfit database is refused with `UnsupportedStore`, the password never repeated); else a DuckDB file
    (created if absent) for a path or a `duckdb:` URL."""
    if is_postgres(url_or_path):
        from rewards_lab.store.postgres.store import PostgresStore  # psycopg, only when asked for

        return PostgresStore(str(url_or_path))
    return DuckDBStore(duckdb_path(url_or_path))


def as_duckdb(store: Store, purpose: str) -> DuckDBStore:
    """`store` as the DuckDB store `purpose` needs (it reads DuckDB cursors or the file itself); on any other
    store `UnsupportedStore` names the purpose."""
    if isinstance(store, DuckDBStore):
        return store
    raise UnsupportedStore(f"{purpose} runs on a DuckDB store only, not on {type(store).__name__}")


def unit_of_work(store: Store) -> AbstractContextManager[Repositories]:
    """`Store.unit_of_work`."""
    return store.unit_of_work()


def reader(store: Store) -> Repositories:
    """`Store.reader_repositories`."""
    return store.reader_repositories()


def snapshot(store: Store) -> AbstractContextManager[Repositories]:
    """`Store.snapshot_repositories`."""
    return store.snapshot_repositories()


def intake_events(store: Store) -> AbstractContextManager[EventStore]:
    """`Store.intake_events`."""
    return store.intake_events()


def intake_unit_of_work(store: Store) -> AbstractContextManager[Repositories]:
    """`Store.intake_unit_of_work`."""
    return store.intake_unit_of_work()
