"""Operator commands over a database file no service has open (`retention`, `backup`, `restore`), and the online
backup a running service takes of itself (`backup --online`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rewards_lab.store.api import duckdb_path, is_postgres, open_store
from rewards_lab.store.backup import BackupError

# What `backup` and `restore` print for a PostgreSQL --db, instead of pretending (docs/deploy.md has the whole text)
POSTGRES_BACKUP = """{command} --db postgresql://...: a PostgreSQL database is backed up and restored with PostgreSQL's
own tools, not by this command (docs/deploy.md, "Online backup and point-in-time restore"):
  1. archive every WAL segment (primary's postgresql.conf): wal_level = replica, archive_mode = on,
     archive_command = 'test ! -f /mnt/wal-archive/%f && cp %p /mnt/wal-archive/%f', archive_timeout = 60
  2. take a base backup while it serves, then check it:
     pg_basebackup -h PRIMARY -U replicator -D /backups/base-DATE -Fp -X stream --checkpoint=fast
     pg_verifybackup /backups/base-DATE
  3. restore to a moment into a NEW data directory: copy the base backup, touch recovery.signal, set
     restore_command = 'cp /mnt/wal-archive/%f %p', recovery_target_time = '...+00',
     recovery_target_action = 'promote', and start it
  4. verify the restored ledger: REWARDS_LAB_SECRET_KEY=... rewards-lab verify --db postgresql://.../rewards"""


def _refuse_postgres(command: str, db: str) -> bool:
    """True (after printing the procedure) when `db` is a PostgreSQL URL: `command` does not apply to it."""
    if not is_postgres(db):
        return False
    print(f"rewards-lab {command}: " + POSTGRES_BACKUP.format(command=command), file=sys.stderr)
    return True


def _print(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=2, default=str))


def _retention(args: argparse.Namespace) -> int:
    from rewards_lab.service.retention import RetentionSettings, run_once
    from rewards_lab.store.backup import open_existing

    try:
        settings = RetentionSettings.from_env()
        if is_postgres(args.db):  # a server's database: other processes may serve it meanwhile (row deletes)
            with open_store(args.db) as store:
                report = run_once(store, settings)
        else:
            with open_existing(Path(duckdb_path(args.db))) as database:
                report = run_once(database, settings)
    except (ValueError, BackupError) as error:
        print(f"rewards-lab retention: {error}", file=sys.stderr)
        return 2
    held_elsewhere = {"skipped": "another process is running retention"} if report.held_elsewhere else {}
    _print({"deleted": report.deleted, "as_of": report.at, **held_elsewhere})
    return 0


def _backup(args: argparse.Namespace) -> int:
    from rewards_lab.store.backup import backup

    if _refuse_postgres("backup", args.db):
        return 2
    if args.online:
        return _online_backup(args)
    try:
        manifest = backup(duckdb_path(args.db), args.out)
    except BackupError as error:
        print(f"rewards-lab backup: {error}", file=sys.stderr)
        return 2
    _print({"backup": str(Path(args.out)), **manifest.to_json()})
    return 0


def _online_backup(args: argparse.Namespace) -> int:
    """Ask the server serving `--db` to back itself up into `--out` (worker/admin_socket.py); exit 1 when the
    copy's ledger does not verify, 2 when no backup was made."""
    from rewards_lab.worker.admin_socket import request_backup

    try:
        answer = request_backup(duckdb_path(args.db), args.out)
    except (ConnectionError, OSError, ValueError) as error:
        print(f"rewards-lab backup: {error}", file=sys.stderr)
        return 2
    if not answer.get("ok"):
        print(f"rewards-lab backup: {answer.get('error')}", file=sys.stderr)
        return 2
    del answer["ok"]
    _print(answer)
    return 0 if answer["verify"]["ok"] else 1


def _restore(args: argparse.Namespace) -> int:
    """Copy the backup into place once the staged copy is verified (opened, migrated forward, ledger checked)."""
    from rewards_lab.store.backup import restore

    if _refuse_postgres("restore", args.db):
        return 2
    try:
        manifest, report = restore(args.source, duckdb_path(args.db), force=args.force)
    except BackupError as error:
        print(f"rewards-lab restore: {error}", file=sys.stderr)
        return 2
    _print(
        {
            "restored": str(Path(duckdb_path(args.db))),
            "from": manifest.to_json(),
            "verify": {"ok": report.ok, "problems": report.problems},
        }
    )
    return 0


def configure(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `retention`, `backup` and `restore` to the `rewards-lab` command."""
    retention = commands.add_parser(
        "retention", help="delete rows past their retention window once (REWARDS_LAB_RETENTION_* settings)"
    )
    retention.add_argument("--db", required=True, help="DuckDB file (no service may have it open), or a PostgreSQL URL")
    retention.set_defaults(run=_retention)
    backup = commands.add_parser(
        "backup",
        help="a consistent copy of a database and its secret key, into a new directory: of a stopped service's "
        "file, or (--online) taken by the running `serve` itself while it keeps serving",
    )
    backup.add_argument(
        "--db", required=True, help="DuckDB file (stopped, or with --online the file a running `serve` serves)"
    )
    backup.add_argument("--out", required=True, help="backup directory to create (must be new or empty)")
    backup.add_argument(
        "--online",
        action="store_true",
        help="ask the server serving --db (through its socket <db>.admin.sock, this host's same user or root "
        "only) to copy its database while it keeps serving",
    )
    backup.set_defaults(run=_backup)
    restore = commands.add_parser("restore", help="restore a backup to a database path, then verify the ledger")
    restore.add_argument("--from", dest="source", required=True, help="backup directory made by `backup`")
    restore.add_argument("--db", required=True, help="database file to create")
    restore.add_argument("--force", action="store_true", help="overwrite an existing database (and its key file)")
    restore.set_defaults(run=_restore)
