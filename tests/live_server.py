"""Start a real `rewards-lab serve` process on 127.0.0.1 for tests (bootstrap first: one process per file)."""

from __future__ import annotations

import atexit
import base64
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from rewards_lab.store.api import is_postgres, open_store
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from tests.pg_cluster import PG_SECRET_KEY, TEMPLATE, PgCluster

START_TIMEOUT_S = 60.0  # generous: only a slow, loaded machine waits; a fast start returns at once
_children: list[subprocess.Popen[bytes]] = []


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process dies, however it dies (Linux prctl)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(command: list[str], log: IO[bytes], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a server process that can never outlive the tests (no leaked servers eating a CI machine); `env`:
    its whole environment (default: this process's)."""
    process = subprocess.Popen(command, stdout=log, stderr=log, env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509
    _children.append(process)
    return process


@atexit.register
def _reap() -> None:
    for process in _children:
        if process.poll() is None:
            process.kill()


@dataclass
class LiveServer:
    db: Path | str  # a DuckDB file, or a PostgreSQL URL
    base_url: str
    organization_id: str
    keys: dict[str, str]
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    boot: dict[str, object] = field(default_factory=dict)  # bootstrap's JSON (totp_secret...)

    def headers(self, environment: str = "sandbox", **extra: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.keys[environment]}",
            "X-Organization-ID": self.organization_id,
            "X-Environment": environment,
            **extra,
        }

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for it; returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            status = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the server did not stop within 30 s of the signal (killed)") from None
        finally:
            self.log.close()
        return status


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rewards_lab.cli.main", *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bootstrap(db: Path | str, org: str, *extra: str) -> dict[str, object]:
    command = cli("bootstrap", "--db", str(db), "--org", org, *extra)
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    boot: dict[str, object] = json.loads(result.stdout)
    return boot


def wait_until_serving(base_url: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    """Poll the OpenAPI document until the server answers; fail with its log if it exits or times out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{base_url}/openapi.json", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log.close()
            raise AssertionError(f"the server did not start: {Path(log.name).read_text()}")
        time.sleep(0.1)


def start_server(
    db: Path | str,
    org: str = "Acme",
    *bootstrap_args: str,
    serve_args: tuple[str, ...] = (),
    log_path: Path | None = None,
) -> LiveServer:
    """Bootstrap `db` (with `bootstrap_args`, e.g. a plan), start `rewards-lab serve` on a free port, wait. A
    PostgreSQL URL as `db` needs `log_path` (a file's log goes beside it) and REWARDS_LAB_SECRET_KEY set."""
    boot = bootstrap(db, org, *bootstrap_args)
    port = free_port()
    if log_path is None:
        assert isinstance(db, Path), "a PostgreSQL URL needs log_path"
        log_path = db.parent / f"{db.stem}.server.log"
    log = log_path.open("wb")
    command = cli("serve", "--db", str(db), "--port", str(port), *serve_args)
    process = spawn(command, log)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(base_url, process, log)
    keys = boot["api_keys"]
    assert isinstance(keys, dict)
    return LiveServer(db, base_url, str(boot["organization_id"]), keys, process, log, boot)


@contextmanager
def postgres_server(
    cluster: PgCluster,
    folder: Path,
    *bootstrap_args: str,
    workers: int = 2,
    partitions: int = 2,
    serve_args: tuple[str, ...] = (),
) -> Iterator[LiveServer]:
    """`start_server` on a fresh database of `cluster` cloned from the session's template (the `pg_template`
    fixture must have made it), served by `workers` processes with `partitions` event partitions; the log in
    `folder`. The database's key and the partitions stay in this process's environment inside the block (a `verify`
    run there reads the key); the database is dropped after."""
    import psycopg

    from rewards_lab.store.postgres.store import PARTITIONS_ENV
    from rewards_lab.store.secret_box import KEY_ENV

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    wanted = {KEY_ENV: base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii"), PARTITIONS_ENV: str(partitions)}
    saved = {variable: os.environ.get(variable) for variable in wanted}
    os.environ.update(wanted)
    try:
        serve = ("--workers", str(workers), *serve_args)
        live = start_server(cluster.dsn(name), "Acme", *bootstrap_args, serve_args=serve, log_path=folder / "serve.log")
        try:
            yield live
        finally:
            if live.process.poll() is None:
                live.stop()
    finally:
        for variable, value in saved.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def two_tenant_server(
    db: Path, *bootstrap_args: str, serve_args: tuple[str, ...] = ()
) -> Iterator[tuple[LiveServer, dict[str, object]]]:
    """A server for "Acme" on `db` beside a second organization ("Other Org", bootstrapped first: its keys are
    in the yielded dict) on the same file, for tests that one tenant never sees the other; stopped afterwards."""
    other = bootstrap(db, "Other Org")
    live = start_server(db, "Acme", *bootstrap_args, serve_args=serve_args)
    try:
        yield live, other
    finally:
        live.stop()


def stop_and_verify(live: LiveServer) -> None:
    """Stop the server, then check every invariant of the ledger it leaves in its file."""
    live.stop()
    if isinstance(live.db, str) and is_postgres(live.db):
        with open_store(live.db) as store:
            report = store.verify_ledger()
        assert report.ok, report.problems
        return
    database = Database(live.db)
    try:
        report = verify_ledger(database.reader())
    finally:
        database.close()
    assert report.ok, report.problems
