"""Issue 14, item 13: `rewards-lab backup` makes a consistent, private copy (with the secret key) and
`rewards-lab restore` puts it at a new path, refusing to overwrite without --force; the restored ledger verifies
and holds the same balances, and the restored key opens secrets sealed before the backup."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from rewards_lab.cli.demo import main as demo
from rewards_lab.store.backup import DATABASE_NAME, KEY_NAME, MANIFEST_NAME
from rewards_lab.store.database import Database
from tests.live_server import cli

BALANCES = "SELECT account_id, asset_id, balance_minor, floor_minor FROM balances ORDER BY ALL"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=120, env=env)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_backup_restore_verify_and_same_balances(tmp_path: Path) -> None:
    db = tmp_path / "live" / "demo.duckdb"
    demo(str(db))  # the standard loop: customers, an asset, rewards issued, a redemption
    with Database(db) as database:
        sealed = database.secret_box.seal("whsec_before_backup", context="webhook:whk_1")
        with database.transaction() as con:  # a write after the last checkpoint: still in the write-ahead log
            con.execute("UPDATE organizations SET name = 'Renamed after the demo'")
    with duckdb.connect(str(db), read_only=True) as con:
        balances = con.execute(BALANCES).fetchall()
    assert balances and any(row[2] > 0 for row in balances)
    env = {k: v for k, v in os.environ.items() if k != "REWARDS_LAB_SECRET_KEY"}

    out = tmp_path / "backups" / "monday"
    made = _run("backup", "--db", str(db), "--out", str(out), env=env)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["secret_key"] == "included" and manifest["schema_version"] >= 10
    assert json.loads(made.stdout)["sha256"] == manifest["sha256"]
    assert _mode(out) == 0o700
    assert {path.name: _mode(path) for path in out.iterdir()} == {
        DATABASE_NAME: 0o600,
        KEY_NAME: 0o600,
        MANIFEST_NAME: 0o600,
    }
    assert _run("backup", "--db", str(db), "--out", str(out), env=env).returncode == 2  # not over a backup

    restored = tmp_path / "restored" / "copy.duckdb"
    back = _run("restore", "--from", str(out), "--db", str(restored), env=env)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["verify"] == {"ok": True, "problems": {}}
    assert _mode(restored) == 0o600 and _mode(Path(f"{restored}.secret-key")) == 0o600
    checked = _run("verify", "--db", str(restored), env=env)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True
    with duckdb.connect(str(restored), read_only=True) as con:
        assert con.execute(BALANCES).fetchall() == balances
        assert con.execute("SELECT name FROM organizations").fetchall() == [("Renamed after the demo",)]
    with Database(restored) as database:
        assert database.secret_box.open(sealed, context="webhook:whk_1") == "whsec_before_backup"

    again = _run("restore", "--from", str(out), "--db", str(restored), env=env)
    assert again.returncode == 2 and "--force" in again.stderr
    forced = _run("restore", "--from", str(out), "--db", str(restored), "--force", env=env)
    assert forced.returncode == 0, forced.stderr


def test_a_damaged_backup_is_refused_and_nothing_is_replaced(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    demo(str(db))
    out = tmp_path / "backup"
    assert _run("backup", "--db", str(db), "--out", str(out)).returncode == 0
    with (out / DATABASE_NAME).open("r+b") as handle:
        handle.seek(5000)
        handle.write(b"\xff" * 16)
    target = tmp_path / "target.duckdb"
    refused = _run("restore", "--from", str(out), "--db", str(target))
    assert refused.returncode == 2 and "manifest" in refused.stderr and not target.exists()
    assert _run("restore", "--from", str(tmp_path), "--db", str(target)).returncode == 2  # not a backup


def test_backup_refuses_while_another_process_has_the_file_open(tmp_path: Path) -> None:
    db = tmp_path / "busy.duckdb"
    Database(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('ready', flush=True); "
         "time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        busy = _run("backup", "--db", str(db), "--out", str(tmp_path / "out"))
        assert busy.returncode == 2 and "stop `rewards-lab serve` first" in busy.stderr
        assert time.monotonic() - started < 60 and not (tmp_path / "out").exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
