"""Whether another process has a DuckDB file open, and keeping every other process out while it is replaced.

DuckDB locks the database file it opens with a POSIX record lock on the whole file (`fcntl(F_SETLK)`: a write
lock for a read-write opener, a read lock for a read-only one) and refuses to open a file another process has
locked. `held_closed` takes the same kind of lock, so the answer is DuckDB's own: it covers `rewards-lab serve`,
the lab, `verify` and any other DuckDB opener, it needs no pid file that a crash would leave stale (the kernel
drops the lock with the process), and while it is held no DuckDB process can open the file either.

POSIX record locks belong to the process: another lock of the *same* process does not conflict, and closing any
descriptor of the file drops every lock the process holds on it. So this is for a process that does not have the
database open itself (the `restore` command), never for the server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from collections.abc import Iterator
from pathlib import Path

# struct flock on Linux (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid, padded to 32 bytes.
_FLOCK = "hhqqi4x"


class FileInUse(RuntimeError):
    """Another process has the file open (DuckDB's lock is held); `pid` names it when the system says."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"process {pid}" if pid else "another process"
        super().__init__(f"{path} is in use by {holder} (a running `rewards-lab serve`?)")
        self.pid = pid


def _holder(descriptor: int) -> int | None:
    """The pid of a process whose lock conflicts with a write lock on the whole file (best effort)."""
    try:
        answer = fcntl.fcntl(descriptor, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        kind, _, _, _, pid = struct.unpack(_FLOCK, answer)
    except (OSError, struct.error):
        return None
    return int(pid) if kind != fcntl.F_UNLCK and pid > 0 else None


@contextlib.contextmanager
def held_closed(path: Path) -> Iterator[None]:
    """Hold DuckDB's lock on `path` (if it exists) for the block: `FileInUse` when another process has it open.

    Replacing the file with `os.replace` inside the block is safe: the lock stays on the file being replaced,
    so nobody opens it meanwhile, and an opener after the replacement gets the new file."""
    try:
        descriptor = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield
        return
    try:
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # EAGAIN or EACCES: somebody holds it
            raise FileInUse(path, _holder(descriptor)) from None
        yield
    finally:
        os.close(descriptor)  # releases the lock
