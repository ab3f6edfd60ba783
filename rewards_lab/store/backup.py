"""Backup and restore of the DuckDB file: a checkpointed copy, its secret key, and a manifest.

A backup is a directory (created 0700; every file in it 0600):

- `rewards.duckdb`: the database file, copied after a CHECKPOINT while this process holds DuckDB's file lock, so
  no other process can write during the copy and the write-ahead log is empty (everything is in the file). This
  is why `backup` needs `serve` stopped: DuckDB lets one process open a file, and a backup refuses to run
  beside a writer rather than copy a file in motion. A running server backs itself up instead
  (`online_backup`, asked through `worker/admin_socket.py`): it copies one snapshot of its own database into a
  new file (`DuckDBStore.copy_to`), in the same layout, and verifies the copy.
- `rewards.duckdb.secret-key`: the key that seals webhook and TOTP secrets (`store.secret_box`), when the
  database uses a key file. Without it the sealed secrets of the copy never open again. When the operator
  supplies `REWARDS_LAB_SECRET_KEY` instead, the key is not copied (the manifest says so) and the same variable
  must be set to restore. Either way the database was opened first, which refuses a key that is not its own
  (`store/secret_key_check.py`): a backup never copies (or invents) a key that does not open its secrets.
- `manifest.json`: format, time, source path, size and SHA-256 of the copy, schema version, where the key is.

A file copy (rather than DuckDB's EXPORT DATABASE) keeps everything exactly: tables, views, CHECK constraints,
the migration history, byte for byte; restoring is a copy back, and a newer release migrates it forward on open.
`restore` refuses while any process has the target open, and replaces nothing before the staged copy is verified.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewards_lab.store.database import DuckDBStore, utcnow
from rewards_lab.store.file_lock import FileInUse, held_closed
from rewards_lab.store.queries import scalar
from rewards_lab.store.secret_box import KEY_ENV, KEY_FILE_SUFFIX, SecretKeyError
from rewards_lab.store.verification import LedgerReport, verify_ledger

DATABASE_NAME = "rewards.duckdb"
KEY_NAME = DATABASE_NAME + KEY_FILE_SUFFIX
MANIFEST_NAME = "manifest.json"
FORMAT = 1
_COPY_CHUNK_BYTES = 1 << 20


class BackupError(RuntimeError):
    """A backup or restore refused (the message says why and what to do)."""


@dataclass(frozen=True, slots=True)
class Manifest:
    format: int
    created_at: str
    source: str
    size_bytes: int
    sha256: str
    schema_version: int
    secret_key: str  # "included" or "environment"

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _private_copy(source: Path, target: Path) -> str:
    """Copy `source` to a new file `target` created 0600; returns the SHA-256 of what was written."""
    digest = hashlib.sha256()
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with source.open("rb") as reading, os.fdopen(descriptor, "wb") as writing:
        while chunk := reading.read(_COPY_CHUNK_BYTES):
            digest.update(chunk)
            writing.write(chunk)
        writing.flush()
        os.fsync(writing.fileno())
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as reading:
        while chunk := reading.read(_COPY_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def open_existing(path: Path) -> DuckDBStore:
    if not path.is_file():
        raise BackupError(f"no database at {path}")
    try:
        return DuckDBStore(path)
    except SecretKeyError as error:  # the key is missing or not this database's: say so, not "stop serve"
        raise BackupError(str(error)) from None
    except Exception as error:  # DuckDB's lock error when `serve` (or anything) has the file open
        raise BackupError(f"cannot open {path} ({type(error).__name__}); stop `rewards-lab serve` first") from None


def _new_backup_dir(out: Path) -> None:
    """Create the backup directory, 0700; refused unless it is new or empty."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupError(f"{out} exists and is not an empty directory")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(out, 0o700)


def _copy_key(source: Path, out: Path) -> str:
    """Copy the key file of the database at `source` into `out`, unless the key is the operator's variable;
    where the key is, for the manifest."""
    key_file = Path(str(source) + KEY_FILE_SUFFIX)
    if os.environ.get(KEY_ENV):
        return "environment"
    if not key_file.is_file():
        raise BackupError(f"no secret key: neither {KEY_ENV} nor {key_file}")
    _private_copy(key_file, out / KEY_NAME)
    return "included"


def _write_manifest(source: Path, out: Path, version: int, key: str) -> Manifest:
    copy = out / DATABASE_NAME
    manifest = Manifest(
        FORMAT, utcnow().isoformat() + "Z", str(source.resolve()), copy.stat().st_size, _sha256(copy), version, key
    )
    descriptor = os.open(out / MANIFEST_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(manifest.to_json(), handle, indent=2)
    return manifest


def backup(db_path: str | Path, out_dir: str | Path) -> Manifest:
    """A consistent copy of the database (and its key file) into `out_dir`, which must be new or empty."""
    source = Path(db_path)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupError(f"{out} exists and is not an empty directory")
    with open_existing(source) as database:
        database.checkpoint()  # the write-ahead log folded into the file: the file alone is the database
        version = int(scalar(database.reader(), "SELECT max(version) FROM schema_migrations"))
        _new_backup_dir(out)
        _private_copy(source, out / DATABASE_NAME)  # still holding the file lock: nobody writes
    return _write_manifest(source, out, version, _copy_key(source, out))


def online_backup(database: DuckDBStore, out_dir: str | Path) -> tuple[Manifest, LedgerReport]:
    """A backup of the database this process serves, taken while it keeps serving (`DuckDBStore.copy_to`: one
    snapshot, so it holds exactly the transactions committed when the copy began), in the same layout as
    `backup`'s. The copy is then opened as a restore would open it (its key checked) and its ledger verified."""
    source = Path(database.path)
    out = Path(out_dir)
    if not out.is_absolute():
        raise BackupError(f"{out} is not an absolute path (the server resolves it, not the caller)")
    _new_backup_dir(out)
    try:
        key = _copy_key(source, out)  # beside the copy, where opening it looks for it
        database.copy_to(out / DATABASE_NAME)
        with open_existing(out / DATABASE_NAME) as copy:
            version = int(scalar(copy.reader(), "SELECT max(version) FROM schema_migrations"))
            report = verify_ledger(copy.reader())
        return _write_manifest(source, out, version, key), report
    except BaseException:
        for made in out.iterdir():  # no half backup left behind (the directory was empty)
            made.unlink()
        raise


def read_manifest(backup_dir: Path) -> Manifest:
    try:
        data = json.loads((backup_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        manifest = Manifest(**data)
    except (OSError, ValueError, TypeError) as error:
        raise BackupError(f"{backup_dir} is not a backup ({MANIFEST_NAME}: {type(error).__name__})") from None
    if manifest.format != FORMAT:
        raise BackupError(f"backup format {manifest.format} is not {FORMAT}")
    return manifest


def restore(backup_dir: str | Path, db_path: str | Path, *, force: bool = False) -> tuple[Manifest, LedgerReport]:
    """Copy a backup to `db_path` (refused if a database or key file is there, unless `force`).

    Refused while another process has `db_path` open (`file_lock.held_closed`: DuckDB's own lock, held by this
    call until the new file is in place, so no server can open the old file meanwhile). Nothing is replaced until
    the staged copy is verified: its SHA-256 against the manifest, then opened as the restored database will be
    (migrated forward, its key checked) and its ledger verified. The key file is put in place first and the
    database file last, each atomically."""
    source = Path(backup_dir)
    manifest = read_manifest(source)
    target = Path(db_path)
    key_target = Path(str(target) + KEY_FILE_SUFFIX)
    wal = Path(str(target) + ".wal")
    present = [path for path in (target, wal, key_target) if path.exists()]
    if present and not force:
        raise BackupError(f"{present[0]} exists; pass --force to overwrite it")
    if manifest.secret_key == "environment" and not os.environ.get(KEY_ENV):
        raise BackupError(f"this backup's secrets are sealed under {KEY_ENV}: set it as when the backup was made")
    if _sha256(source / DATABASE_NAME) != manifest.sha256:
        raise BackupError("the backup's database file does not match its manifest (damaged or altered)")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with held_closed(target):
            staging = target.with_name(target.name + ".restoring")
            key_staging = Path(str(staging) + KEY_FILE_SUFFIX)
            try:
                report = _stage(source, manifest, staging, key_staging)
                if manifest.secret_key == "included":
                    os.replace(key_staging, key_target)
                wal.unlink(missing_ok=True)  # a log of the database being replaced must never meet the copy
                os.replace(staging, target)
            finally:
                for leftover in (staging, key_staging, Path(f"{staging}.wal")):
                    leftover.unlink(missing_ok=True)
    except FileInUse as error:
        raise BackupError(f"{error}: stop it before restoring over its database") from None
    return manifest, report


def _stage(source: Path, manifest: Manifest, staging: Path, key_staging: Path) -> LedgerReport:
    """The backup copied to `staging` (and its key beside it), checked and opened; its ledger's report."""
    for leftover in (staging, key_staging, Path(f"{staging}.wal")):
        leftover.unlink(missing_ok=True)
    if _private_copy(source / DATABASE_NAME, staging) != manifest.sha256:
        raise BackupError("the copy does not match the manifest")
    if manifest.secret_key == "included":
        _private_copy(source / KEY_NAME, key_staging)
    with open_existing(staging) as database:  # migrated forward and its key checked, as it will be opened
        report = verify_ledger(database.reader())
    if not report.ok:
        raise BackupError(f"the backup's ledger does not verify ({report.problems}); nothing was replaced")
    return report
