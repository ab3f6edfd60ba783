"""What the processes serving one database share beyond its rows: rate-limit counters and login-guard failures.

A DuckDB file is served by one process, whose memory holds both (api/rate_limits.py, security/login_guard.py):
`Store.shared_state()` is None there. Several processes serve a PostgreSQL database (`serve --workers N`, several
hosts), so there the counters live in the database (`rate_counters`, `login_failures`: migration 27, UNLOGGED) and
`shared_state()` gives this interface over them (store/postgres/shared.py). The rules (limits, windows, backoffs)
stay with their callers; this is only the storage, each operation atomic across processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol


class SharedStateUnavailable(RuntimeError):
    """The database could not answer (unreachable, pool exhausted): the caller decides (the rate limiter falls
    back to its own process's counters)."""


class LoginRecords(Protocol):
    """The login guard's records of a few keys, locked against every other process for one transaction."""

    def get(self, key: str) -> tuple[int, float] | None:
        """(failures, last failure's time in epoch seconds), or None when the key has none."""
        ...

    def put(self, key: str, failures: int, last_failure_at: float) -> None: ...

    def drop(self, key: str) -> None: ...


class SharedState(Protocol):
    def count_request(self, bucket: str, window_start: int) -> int:
        """One more request in `bucket`'s window (starting at `window_start`, epoch seconds); the count after it."""
        ...

    def request_count(self, bucket: str, window_start: int) -> int:
        """How many requests `bucket` has made in the window, without counting one."""
        ...

    def forget_windows_before(self, window_start: int) -> None:
        """Delete the counters of every window that started before `window_start`."""
        ...

    def login_records(self, keys: Sequence[str]) -> AbstractContextManager[LoginRecords]:
        """`keys`' records, locked (in one order, so two callers never deadlock) until the block ends, when what
        was put or dropped commits; an exception leaves them as they were."""
        ...

    def forget_login_failures_before(self, at: float) -> None:
        """Delete the records whose last failure is older than `at` (epoch seconds)."""
        ...
