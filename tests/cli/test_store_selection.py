"""Issue 32, increment 1: every `--db` command goes through `open_store` (or its `duckdb_path`): a PostgreSQL URL
is refused by name with exit code 2 and no traceback, and `serve --workers N` above 1 is refused on a DuckDB file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewards_lab.cli.main import ONE_DUCKDB_PROCESS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
URL = "postgresql://rewards:hunter2@db.internal:5432/rewards"


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


@pytest.mark.parametrize(
    "command",
    ["serve", "serve --workers 2", "bootstrap", "verify", "demo", "retention", "backup", "backup --online", "restore"],
)
def test_every_db_command_refuses_a_postgresql_url_by_name_with_exit_code_2(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _commands(tmp_path)[command]
    status = main([*argv, "--db", URL])
    captured = capsys.readouterr()
    assert status == 2
    name = argv[0]
    assert captured.err.startswith(f"rewards-lab {name}: --db postgresql://...: ")
    assert "the PostgreSQL store is not built yet" in captured.err
    assert "hunter2" not in captured.err + captured.out  # the URL's password is never printed
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # nothing created: no file, no directory named "postgresql:"


def test_the_short_scheme_is_refused_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["verify", "--db", "postgres://localhost/rewards"]) == 2
    assert "rewards-lab verify: --db postgres://...: the PostgreSQL store is not built yet" in capsys.readouterr().err


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
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
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
    assert url.stderr.startswith("rewards-lab bootstrap: --db postgresql://...: the PostgreSQL store is not built")
    assert "Traceback" not in url.stderr and "hunter2" not in url.stderr
    assert list(tmp_path.iterdir()) == []
