"""The store's own files are readable by their owner only, without touching the process's umask.

DuckDB creates its files with mode 0666 minus the process's umask (usually 0644) and offers no option for the
mode. What DuckDB does, as tests/store/test_secret_key_and_files.py checks:

- it refuses an empty file as a database, so a new database is created in a fresh 0700 directory beside the
  target, made 0600 there, then linked into place: never readable by others, not even for an instant;
- it deletes the write-ahead log (`<db>.wal`) at every checkpoint (explicit, automatic at commit, or at open)
  and creates it again at the next write; when a log file already exists, even empty, it writes into that file
  and keeps its mode. So the store puts an empty 0600 log in place whenever there is none: at open and after
  every commit and checkpoint of its own (`keep_wal_private`, one `stat` when the log is there). A log DuckDB
  re-created in between (a checkpoint racing that step) is narrowed to 0600 at the next commit.

The umask stays as it was: files the rest of the process writes (lab saves, reports, replay outputs) keep their
usual mode.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

import duckdb

from rewards_lab.store.secret_box import KEY_FILE_SUFFIX

log = logging.getLogger(__name__)
PRIVATE_FILE_MODE = 0o600
_OTHERS = 0o077


def wal_path(path: str) -> Path:
    return Path(f"{path}.wal")


def create_private_database(path: Path) -> bool:
    """Create an empty DuckDB database at `path`, mode 0600 from its first byte, unless a file is there already.
    True when this call created it."""
    if path.exists():
        return False
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent))  # 0700
    try:
        staged = staging / path.name
        duckdb.connect(str(staged)).close()
        staged.chmod(PRIVATE_FILE_MODE)
        try:
            os.link(staged, path)  # never replaces a file another opener created meanwhile
        except FileExistsError:
            return False
        return True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def narrow_existing_files(path: str) -> None:
    """A database, its log and its secret-key file that an older release (or a copy made by hand) left readable
    by others become 0600. The key file matters most: whoever reads it opens every sealed secret."""
    for existing in (Path(path), wal_path(path), Path(path + KEY_FILE_SUFFIX)):
        try:
            if existing.stat().st_mode & _OTHERS:
                existing.chmod(PRIVATE_FILE_MODE)
        except FileNotFoundError:
            continue
        except PermissionError:  # another user's file: DuckDB says what it thinks of opening it
            log.warning("cannot make %s private (not its owner)", existing)


def keep_wal_private(path: str) -> None:
    """Make sure the write-ahead log DuckDB writes next is a 0600 file (see the module's docstring)."""
    wal = wal_path(path)
    try:
        mode = wal.stat().st_mode
    except FileNotFoundError:
        try:
            os.close(os.open(wal, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
        except FileExistsError:  # DuckDB made one meanwhile: checked at the next commit
            pass
        except PermissionError:  # a read-only directory: DuckDB cannot write a log there either
            log.debug("cannot create %s", wal)
        return
    if mode & _OTHERS:
        with contextlib.suppress(FileNotFoundError):
            wal.chmod(PRIVATE_FILE_MODE)


def drop_empty_wal(path: str) -> None:
    """Remove the log `keep_wal_private` put in place if nothing was written to it (call before closing, while
    DuckDB's file lock keeps other processes out and no commit of this one runs)."""
    wal = wal_path(path)
    with contextlib.suppress(FileNotFoundError):
        if wal.stat().st_size == 0:
            wal.unlink()
