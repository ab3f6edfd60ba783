"""The secret key belongs to its database, the store's files are private without touching the process's umask,
and legacy webhook secrets are sealed (and the file rewritten) when the database opens.

- A database refuses a key that is not the one its secrets were sealed under (a key check value is stored in
  it), and a key file is created only for a new database: `backup`, `serve` or `verify` started without
  `REWARDS_LAB_SECRET_KEY` no longer invents a key beside a database sealed under the variable.
- The database file is created 0600 and its write-ahead log kept 0600 by the store itself; a file the process
  creates afterwards keeps the process's normal mode.
- Webhook signing secrets stored in plain text by an older release are sealed at open, in the same step as TOTP
  secrets, and the file is rewritten so no copy of the plain text stays on disk."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from rewards_lab.cli.demo import main as demo
from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.contract.webhook_signatures import (
    SIGNATURE_HEADER,
    TIMESTAMPED_SIGNATURE_HEADER,
    verify,
    verify_timestamped,
)
from rewards_lab.security import webhook_secrets
from rewards_lab.security.webhook_targets import ALLOW_PRIVATE_ENV
from rewards_lab.service import organizations
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.store import secret_box
from rewards_lab.store.backup import MANIFEST_NAME
from rewards_lab.store.database import Database
from rewards_lab.store.secret_box import KEY_ENV, KEY_FILE_SUFFIX, SecretKeyError, is_sealed, new_key_text
from rewards_lab.store.uow import reader
from rewards_lab.worker.deliveries import DeliveryWorker
from tests.live_server import cli, free_port
from tests.webhook_receiver import Receiver

CLI_TIMEOUT_S = 120


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _env(key: str | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != KEY_ENV}
    if key is not None:
        env[KEY_ENV] = key
    return env


def _run(*args: str, key: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=_env(key))


def _key_file(db: Path) -> Path:
    return Path(str(db) + KEY_FILE_SUFFIX)


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def normal_umask() -> Iterator[int]:
    """The test runs under umask 022 (files 0644), whatever the runner's is; the old umask is put back."""
    previous = os.umask(0o022)
    try:
        yield 0o022
    finally:
        os.umask(previous)


# -- the key belongs to its database -----------------------------------------------------------------------------
def test_a_key_that_is_not_the_databases_own_is_refused(tmp_path: Path, no_env_key: None) -> None:
    path = tmp_path / "own.duckdb"
    with Database(path) as database:
        organizations.create_organization(database, "Own key")
    own = _key_file(path).read_bytes()
    with pytest.raises(SecretKeyError, match=KEY_ENV):
        Database(path, secret_key=bytes(32))
    os.environ[KEY_ENV] = new_key_text()  # an operator's variable that is not this database's key
    try:
        with pytest.raises(SecretKeyError, match=KEY_ENV):
            Database(path)
    finally:
        del os.environ[KEY_ENV]
    assert _key_file(path).read_bytes() == own
    with Database(path) as database:  # the refusals released the file and changed nothing
        assert database.reader().execute("SELECT count(*) FROM organizations").fetchone() == (1,)


def test_no_key_file_is_invented_for_a_database_sealed_under_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "operator.duckdb"
    monkeypatch.setenv(KEY_ENV, new_key_text())
    with Database(path) as database:
        sealed = database.secret_box.seal("whsec_operator", context="webhook:whe_1")
    assert not _key_file(path).exists()
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(SecretKeyError, match=KEY_ENV):
        Database(path)
    assert not _key_file(path).exists()
    assert sealed.startswith(secret_box.SEALED_PREFIX)


def test_a_database_from_before_the_check_value_gets_one_and_a_wrong_key_is_still_caught(
    tmp_path: Path, no_env_key: None
) -> None:
    path = tmp_path / "older.duckdb"
    with Database(path) as database:
        scope = Scope(organizations.create_organization(database, "Older").id, "sandbox")
        hooks.create_webhook(
            database,
            scope,
            validate(rq.WebhookCreate, {"url": "https://hooks.example.com/h", "events": ["reward.issued"]}),
        )
    with duckdb.connect(str(path)) as con:  # what the release before the check value wrote: no check row
        con.execute("DELETE FROM secret_key_check")
    with pytest.raises(SecretKeyError, match=KEY_ENV):  # a sealed secret that does not open betrays the key
        Database(path, secret_key=bytes(32))
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM secret_key_check").fetchone() == (0,)
    with Database(path):
        pass
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM secret_key_check").fetchone() == (1,)
    with pytest.raises(SecretKeyError, match=KEY_ENV):
        Database(path, secret_key=bytes(32))


def test_a_database_from_before_sealing_without_a_key_file_still_opens(tmp_path: Path, no_env_key: None) -> None:
    """Nothing sealed and no check value: no key fixed yet, so a key file may be made for it."""
    path = tmp_path / "ancient.duckdb"
    with Database(path) as database:
        organizations.create_organization(database, "Ancient")
    with duckdb.connect(str(path)) as con:
        con.execute("DELETE FROM secret_key_check")
    _key_file(path).unlink()
    with Database(path) as database:
        assert database.reader().execute("SELECT count(*) FROM organizations").fetchone() == (1,)
    assert _mode(_key_file(path)) == 0o600


@pytest.mark.parametrize("command", ["verify", "backup", "serve"])
def test_the_cli_refuses_a_missing_or_wrong_key_with_exit_2_and_a_message(tmp_path: Path, command: str) -> None:
    db = tmp_path / "sealed.duckdb"
    key = new_key_text()
    made = _run("bootstrap", "--db", str(db), "--org", "Sealed", key=key)
    assert made.returncode == 0, made.stderr
    extra = {
        "verify": (),
        "backup": ("--out", str(tmp_path / "backup")),
        "serve": ("--port", str(free_port())),
    }[command]
    for wrong in (None, new_key_text()):
        refused = _run(command, "--db", str(db), *extra, key=wrong)
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert KEY_ENV in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.startswith(f"rewards-lab {command}: ")
        assert not _key_file(db).exists()
        assert not (tmp_path / "backup").exists()
    if command == "verify":
        checked = _run("verify", "--db", str(db), key=key)
        assert checked.returncode == 0, checked.stderr


def test_backup_and_restore_round_trip_with_the_variable_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key_text()
    monkeypatch.setenv(KEY_ENV, key)
    db = tmp_path / "live" / "demo.duckdb"
    demo(str(db))
    with Database(db) as database:
        sealed = database.secret_box.seal("whsec_env", context="webhook:whe_9")
    out = tmp_path / "backup"
    made = _run("backup", "--db", str(db), "--out", str(out), key=key)
    assert made.returncode == 0, made.stderr
    assert json.loads((out / MANIFEST_NAME).read_text())["secret_key"] == "environment"
    assert sorted(path.name for path in out.iterdir()) == ["manifest.json", "rewards.duckdb"]
    restored = tmp_path / "restored" / "copy.duckdb"
    wrong = _run("restore", "--from", str(out), "--db", str(restored), key=new_key_text())
    assert wrong.returncode == 2 and KEY_ENV in wrong.stderr and "Traceback" not in wrong.stderr
    back = _run("restore", "--from", str(out), "--db", str(restored), "--force", key=key)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["verify"]["ok"] is True
    assert not _key_file(restored).exists()
    with Database(restored) as database:
        assert database.secret_box.open(sealed, context="webhook:whe_9") == "whsec_env"


def test_backup_and_restore_round_trip_with_the_key_file(tmp_path: Path, no_env_key: None) -> None:
    db = tmp_path / "live" / "demo.duckdb"
    demo(str(db))
    with Database(db) as database:
        sealed = database.secret_box.seal("whsec_file", context="webhook:whe_8")
    out = tmp_path / "backup"
    made = _run("backup", "--db", str(db), "--out", str(out), key=None)
    assert made.returncode == 0, made.stderr
    assert json.loads((out / MANIFEST_NAME).read_text())["secret_key"] == "included"
    restored = tmp_path / "restored" / "copy.duckdb"
    under_variable = _run("restore", "--from", str(out), "--db", str(restored), key=new_key_text())
    assert under_variable.returncode == 2 and KEY_ENV in under_variable.stderr  # the variable wins over the file
    back = _run("restore", "--from", str(out), "--db", str(restored), "--force", key=None)
    assert back.returncode == 0, back.stderr
    assert _key_file(restored).read_bytes() == _key_file(db).read_bytes()
    with Database(restored) as database:
        assert database.secret_box.open(sealed, context="webhook:whe_8") == "whsec_file"


# -- private files, normal umask -------------------------------------------------------------------------------
def test_opening_a_database_leaves_the_process_umask_alone(tmp_path: Path, normal_umask: int) -> None:
    with Database(tmp_path / "private.duckdb") as database:
        organizations.create_organization(database, "Private")
        report = tmp_path / "report.txt"
        report.write_text("a report the lab writes")
        folder = tmp_path / "outputs"
        folder.mkdir()
        assert _mode(report) == 0o666 & ~normal_umask and _mode(folder) == 0o777 & ~normal_umask
        assert _mode(Path(database.path)) == 0o600 and _mode(Path(f"{database.path}.wal")) == 0o600
    current = os.umask(0o022)
    os.umask(current)
    assert current == normal_umask


def test_the_write_ahead_log_stays_private_across_checkpoints(tmp_path: Path, normal_umask: int) -> None:
    path = tmp_path / "wal.duckdb"
    wal = Path(f"{path}.wal")
    with Database(path) as database:
        for round_number in range(3):
            database.checkpoint()
            organizations.create_organization(database, f"Round {round_number}")
            assert _mode(wal) == 0o600
        with database.intake_cursor() as con:
            con.execute("CHECKPOINT")  # DuckDB deletes the log: the store puts a private one back
        assert _mode(wal) == 0o600
        organizations.create_organization(database, "After")
        assert _mode(wal) == 0o600 and _mode(path) == 0o600
    assert _mode(path) == 0o600


# -- legacy webhook secrets are sealed at open, and the file rewritten -----------------------------------------------
def test_legacy_webhook_secrets_are_sealed_at_open_and_leave_no_plain_text_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, normal_umask: int
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setenv(ALLOW_PRIVATE_ENV, "1")  # the receiver listens on 127.0.0.1
    path = tmp_path / "legacy.duckdb"
    receiver = Receiver()
    try:
        with Database(path) as database:
            scope = Scope(organizations.create_organization(database, "Legacy hooks").id, "sandbox")
            created = hooks.create_webhook(
                database, scope, validate(rq.WebhookCreate, {"url": receiver.url, "events": ["reward.issued"]})
            )
        legacy = created.signing_secret
        previous = "whsec_previous_plaintext_from_an_older_release"
        with duckdb.connect(str(path)) as con:  # what a database written before sealing holds
            con.execute(
                "UPDATE webhook_endpoints SET signing_secret = ?, previous_signing_secret = ?, "
                "previous_secret_expires_at = now()::TIMESTAMP + INTERVAL 1 DAY",
                [legacy, previous],
            )
        assert legacy.encode() in path.read_bytes()

        with Database(path) as database:  # run_worker=False or not: opening is what seals
            for file in (path, Path(f"{path}.wal")):
                if file.exists():
                    content = file.read_bytes()
                    assert legacy.encode() not in content and previous.encode() not in content, file
            assert _mode(path) == 0o600
            stored = database.reader().execute("SELECT signing_secret, previous_signing_secret FROM webhook_endpoints")
            current_sealed, previous_sealed = stored.fetchone() or ("", "")
            assert is_sealed(current_sealed) and is_sealed(previous_sealed)
            row = reader(database).webhooks.endpoint(scope, created.id)
            assert row is not None and webhook_secrets.signing_secrets(database, row) == [legacy, previous]

            worker = DeliveryWorker(database, DeliverySettings.from_env())
            worker.start()
            try:
                test = hooks.send_test(database, scope, created.id)
                worker.notify()
                (got,) = [d for d in receiver.wait_for(lambda seen: len(seen) >= 1) if d.body["id"] == test.id]
            finally:
                worker.stop()
            expected = "sha256=" + hmac.new(previous.encode(), got.raw, hashlib.sha256).hexdigest()
            assert got.headers[SIGNATURE_HEADER] == expected  # GitHub-style header: the previous secret
            assert verify(got.raw, got.headers[SIGNATURE_HEADER], previous)
            stamped = got.headers[TIMESTAMPED_SIGNATURE_HEADER]
            assert verify_timestamped(got.raw, stamped, legacy) and verify_timestamped(got.raw, stamped, previous)
        with Database(path) as database:  # idempotent: nothing left to seal, no rewrite
            assert database.reader().execute("SELECT signing_secret FROM webhook_endpoints").fetchone() == (
                current_sealed,
            )
    finally:
        receiver.close()
