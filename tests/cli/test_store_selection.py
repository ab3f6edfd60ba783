"""Issue 32: every `--db` command goes through `open_store` (or its `duckdb_path`). `verify`, `bootstrap` and
`serve` run on PostgreSQL (an unreachable server refused with exit code 2 and no traceback); `backup` and
`restore` print PostgreSQL's own procedure and exit 2; `demo` and `retention` refuse a PostgreSQL URL by name;
`serve --workers N` above 1 is refused on a DuckDB file. No message repeats the password."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from rewards_lab.cli.main import ONE_DUCKDB_PROCESS, build_parser, main
from rewards_lab.store.secret_box import KEY_ENV, new_key_text
from tests.pg_cluster import PG_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
URL = "postgresql://rewards:hunter2@127.0.0.1:1/rewards"  # nothing listens on port 1


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """Every command that takes --db, with what else it requires."""
    backup = str(tmp_path / "backup")
    return {
        "serve": ["serve"],
        "serve --workers 2": ["serve", "--workers", "2"],
        "bootstrap": ["bootstrap", "--org", "Acme"],
        "verify": ["verify"],
        "demo": ["demo"],
        "retention": ["retention"],
        "backup": ["backup", "--out", backup],
        "backup --online": ["backup", "--online", "--out", backup],
        "restore": ["restore", "--from", backup],
    }


# What each command says to a PostgreSQL URL whose server does not answer.
REFUSALS = {
    "serve": "postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ",
    "serve --workers 2": "postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ",
    "bootstrap": "postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ",
    "verify": "postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ",
    "demo": "--db postgresql://...: this command works on a DuckDB file; on PostgreSQL it is not built yet",
    "retention": "postgresql://rewards@127.0.0.1:1/rewards: cannot connect: ",
    "backup": "backup --db postgresql://...: a PostgreSQL database is backed up and restored with PostgreSQL's",
    "backup --online": "backup --db postgresql://...: a PostgreSQL database is backed up and restored with",
    "restore": "restore --db postgresql://...: a PostgreSQL database is backed up and restored with PostgreSQL's",
}


@pytest.mark.parametrize("command", list(REFUSALS))
def test_every_db_command_given_an_unreachable_postgresql_url_exits_2_with_a_message_and_no_password(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, new_key_text())
    argv = _commands(tmp_path)[command]
    status = main([*argv, "--db", URL])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.startswith(f"rewards-lab {argv[0]}: {REFUSALS[command]}"), captured.err
    assert "hunter2" not in captured.err + captured.out  # the URL's password is never printed
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # nothing created: no file, no directory named "postgresql:"


def test_the_short_scheme_is_read_too(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, new_key_text())
    assert main(["verify", "--db", "postgres://rewards:hunter2@127.0.0.1:1/rewards"]) == 2
    assert "rewards-lab verify: postgresql://rewards@127.0.0.1:1/rewards: cannot connect" in capsys.readouterr().err


def test_bootstrap_and_verify_run_on_a_postgresql_database(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii"))
    assert main(["bootstrap", "--db", pg_store_url, "--org", "Acme"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["organization_id"].startswith("org_")
    assert main(["verify", "--db", pg_store_url]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["problems"] == {}
    with psycopg.connect(pg_store_url) as conn:  # written to that database, nothing beside it
        assert conn.execute("SELECT id, name FROM organizations").fetchall() == [(made["organization_id"], "Acme")]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(KEY_ENV, new_key_text())  # another key: refused by the key check value
    assert main(["verify", "--db", pg_store_url]) == 2
    assert KEY_ENV in capsys.readouterr().err


def test_serve_with_several_workers_on_a_duckdb_file_exits_2_and_opens_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sub" / "one.duckdb"
    for given in (str(path), f"duckdb:///{path}"):
        assert main(["serve", "--db", given, "--workers", "3"]) == 2
        assert capsys.readouterr().err == f"rewards-lab serve: {ONE_DUCKDB_PROCESS}\n"
    assert not path.parent.exists()  # refused before anything is created or opened


def test_workers_defaults_to_one_and_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["serve", "--db", "x.duckdb"]).workers == 1
    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["serve", "--db", "x.duckdb", "--workers", "0"])
    assert refused.value.code == 2
    assert "--workers: must be 1 or more" in capsys.readouterr().err


def test_the_installed_command_refuses_workers_and_a_postgresql_url_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), KEY_ENV: new_key_text()}
    command = [sys.executable, "-m", "rewards_lab.cli.main"]
    workers = subprocess.run(
        [*command, "serve", "--db", str(tmp_path / "x.duckdb"), "--workers", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (workers.returncode, workers.stderr) == (2, f"rewards-lab serve: {ONE_DUCKDB_PROCESS}\n")
    url = subprocess.run(
        [*command, "bootstrap", "--db", URL, "--org", "Acme"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert url.returncode == 2
    assert url.stderr.startswith("rewards-lab bootstrap: postgresql://rewards@127.0.0.1:1/rewards: cannot connect")
    assert "Traceback" not in url.stderr and "hunter2" not in url.stderr
    assert list(tmp_path.iterdir()) == []


def test_backup_and_restore_on_postgresql_print_the_base_backup_and_point_in_time_procedure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["backup", "--out", str(tmp_path / "b")], ["restore", "--from", str(tmp_path / "b")]):
        assert main([*argv, "--db", URL]) == 2
        err = capsys.readouterr().err
        for step in ("archive_mode = on", "pg_basebackup", "pg_verifybackup", "recovery_target_time", "verify --db"):
            assert step in err, (argv[0], step)
        assert "hunter2" not in err
    assert list(tmp_path.iterdir()) == []


def test_retention_runs_on_a_postgresql_database(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii"))
    insert = (
        "INSERT INTO idempotency_keys VALUES ('org_x', 'sandbox', %s, 'issue', 'h', '{}', 201, "
        "now() AT TIME ZONE 'UTC' - %s::interval)"
    )
    with psycopg.connect(pg_store_url, autocommit=True) as conn:  # one key past the 7-day window, one inside it
        conn.execute(insert, ["old", "8 days"])
        conn.execute(insert, ["new", "1 hour"])
    assert main(["retention", "--db", pg_store_url]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"]["idempotency_keys"] == 1, report
    with psycopg.connect(pg_store_url) as conn:
        assert conn.execute("SELECT key FROM idempotency_keys").fetchall() == [("new",)]
