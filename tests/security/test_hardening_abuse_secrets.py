"""Issue 14 item 10 (TOTP and files): TOTP secrets are sealed at rest, plaintext rows of an older database are
sealed when it opens, and the database files are readable by their owner only."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import duckdb
import httpx
import pyotp

from rewards_lab.contract import developer as d
from rewards_lab.security import sessions
from rewards_lab.security.login_guard import LoginGuard
from rewards_lab.service import organizations
from rewards_lab.store.database import Database
from rewards_lab.store.secret_box import is_sealed
from tests.live_server import cli, start_server

EMAIL, PASSWORD = "owner@sealed.test", "a long enough passphrase"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_bootstrap_prints_the_totp_secret_once_and_the_database_file_never_holds_it(tmp_path: Path) -> None:
    db = tmp_path / "sealed.duckdb"
    live = start_server(db, "Sealed", "--email", EMAIL, "--password", PASSWORD, "--totp")
    try:
        secret = str(live.boot["totp_secret"])
        assert len(secret) == 32
        code = pyotp.TOTP(secret).now()
        response = httpx.post(
            f"{live.base_url}/auth/login", json={"email": EMAIL, "password": PASSWORD, "totp_code": code}, timeout=10
        )
        assert response.status_code == 201, response.text
        # The secret is shown nowhere else: not in the login answer, not in the server's log.
        assert secret not in response.text
    finally:
        live.stop()
    assert secret not in (tmp_path / "sealed.server.log").read_text()
    for path in (db, Path(f"{db}.wal")):
        if path.exists():
            assert secret.encode() not in path.read_bytes(), path
    with duckdb.connect(str(db), read_only=True) as con:
        (stored,) = con.execute("SELECT totp_secret FROM accounts").fetchone() or ("",)
    assert is_sealed(stored) and secret not in stored


def test_plaintext_totp_secrets_of_an_older_database_are_sealed_when_it_opens(tmp_path: Path) -> None:
    db_path = tmp_path / "legacy.duckdb"
    with Database(db_path) as database:
        org = organizations.create_organization(database, "Legacy")
        account, secret = sessions.create_owner_account(database, org.id, EMAIL, PASSWORD, totp=True)
        assert secret is not None
    with duckdb.connect(str(db_path)) as con:  # what a database written before sealing holds
        con.execute("UPDATE accounts SET totp_secret = ? WHERE id = ?", [secret, account.id])
        constraints = con.execute("SELECT count(*) FROM duckdb_constraints()").fetchone()
    assert secret.encode() in db_path.read_bytes()
    with Database(db_path) as database:
        # Sealed, and no earlier version of the row left in the file's free blocks (the file was rewritten).
        assert secret.encode() not in db_path.read_bytes()
        assert database.reader().execute("SELECT count(*) FROM duckdb_constraints()").fetchone() == constraints
        stored = database.reader().execute("SELECT totp_secret FROM accounts").fetchone()
        assert stored is not None and is_sealed(stored[0]) and secret not in stored[0]
        request = d.LoginRequest(email=EMAIL, password=PASSWORD, totp_code=pyotp.TOTP(secret).now())
        created = sessions.login(database, LoginGuard(), request, address="127.0.0.1")
        assert created.account.second_factor is True


def test_database_files_are_created_readable_by_their_owner_only(tmp_path: Path) -> None:
    db_path = tmp_path / "private.duckdb"
    with Database(db_path) as database:
        organizations.create_organization(database, "Private")  # a write: the write-ahead log exists now
        wal = Path(f"{db_path}.wal")
        assert wal.exists()
        assert _mode(db_path) == 0o600 and _mode(wal) == 0o600
        database.checkpoint()  # DuckDB deletes the log here and makes a new one at the next write
        organizations.create_organization(database, "Private 2")
        assert _mode(wal) == 0o600
    assert _mode(db_path) == 0o600 and _mode(Path(f"{db_path}.secret-key")) == 0o600


def test_files_of_an_older_database_become_private_when_it_opens(tmp_path: Path) -> None:
    db_path = tmp_path / "open.duckdb"
    subprocess.run(cli("bootstrap", "--db", str(db_path), "--org", "Open"), check=True, capture_output=True)
    db_path.chmod(0o644)
    with Database(db_path):
        assert _mode(db_path) == 0o600
