"""The throwaway PostgreSQL cluster (tests/pg_cluster.py) works, and holds what the PostgreSQL store will rely on:
exact NUMERIC(38, 0) amounts past BIGINT, timestamptz round trips, and FOR UPDATE SKIP LOCKED between two
connections (how workers in several processes will claim events without waiting on each other)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg_cluster import PgCluster, sweep_stale


@pytest.fixture
def con(pg_database: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(pg_database) as connection:
        yield connection


def test_the_cluster_is_private_and_answers_over_tcp_and_its_socket(pg_cluster: PgCluster) -> None:
    with psycopg.connect(pg_cluster.dsn()) as tcp, psycopg.connect(pg_cluster.socket_dsn()) as local:
        assert tcp.info.server_version >= 150000
        row = tcp.execute("SELECT inet_server_addr()::text, current_setting('port')").fetchone()
        assert row == ("127.0.0.1/32", str(pg_cluster.port))
        assert local.execute("SELECT inet_server_addr()").fetchone() == (None,)  # no address: the unix socket
    assert Path(pg_cluster.root).name.startswith("rewards-lab-pg-")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_cluster.dsn().replace(pg_cluster.password, "wrong"))


def test_numeric_38_amounts_round_trip_exactly_past_bigint(con: psycopg.Connection[tuple[Any, ...]]) -> None:
    near = 2**63 - 1  # BIGINT's largest: a balance of many entries may pass it, an entry's amount may reach it
    amounts = [near, near + 1, -(near + 2), 10**38 - 1, 0]
    con.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, amount NUMERIC(38, 0) NOT NULL)")
    with con.cursor() as cur:
        cur.executemany("INSERT INTO entries VALUES (%s, %s)", list(enumerate(amounts)))
    rows = con.execute("SELECT amount FROM entries ORDER BY id").fetchall()
    assert [amount for (amount,) in rows] == [Decimal(a) for a in amounts]
    assert all(isinstance(amount, Decimal) for (amount,) in rows)
    (total,) = con.execute("SELECT sum(amount) FROM entries WHERE id < 2").fetchone() or (None,)
    assert total == Decimal(2 * near + 1)  # no overflow, no float on the way
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        con.execute("INSERT INTO entries VALUES (9, %s)", [10**38])
    con.rollback()


def test_timestamptz_round_trips_to_the_microsecond(con: psycopg.Connection[tuple[Any, ...]]) -> None:
    paris = timezone(timedelta(hours=1))
    moments = [datetime(2026, 3, 29, 0, 59, 59, 999999, tzinfo=UTC), datetime(1969, 12, 31, 23, 0, 1, tzinfo=paris)]
    con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, occurred_at TIMESTAMPTZ NOT NULL)")
    with con.cursor() as cur:
        cur.executemany("INSERT INTO events VALUES (%s, %s)", list(enumerate(moments)))
    rows = con.execute("SELECT occurred_at FROM events ORDER BY id").fetchall()
    assert [moment for (moment,) in rows] == moments  # the same instants (aware datetimes compare as instants)
    assert all(moment.utcoffset() is not None for (moment,) in rows)  # aware, whatever the session's time zone
    row = con.execute("SELECT (extract(epoch FROM occurred_at) * 1e6)::bigint FROM events WHERE id = 1").fetchone()
    assert row == (-7199 * 10**6,)  # 1969-12-31T22:00:01Z: 7,199 s before the epoch


def test_skip_locked_gives_two_connections_disjoint_rows(pg_cluster: PgCluster, pg_database: str) -> None:
    claim = "SELECT id FROM queue WHERE NOT done ORDER BY id LIMIT 3 FOR UPDATE SKIP LOCKED"
    with psycopg.connect(pg_database, autocommit=True) as setup:
        setup.execute("CREATE TABLE queue (id INTEGER PRIMARY KEY, done BOOLEAN NOT NULL DEFAULT false)")
        setup.execute("INSERT INTO queue (id) SELECT generate_series(1, 5)")
    with psycopg.connect(pg_database) as first, psycopg.connect(pg_database) as second:
        first_rows = [i for (i,) in first.execute(claim).fetchall()]  # its transaction stays open: rows locked
        second.execute("SET lock_timeout = '200ms'")  # a plain FOR UPDATE waits: it fails after 0.2 s
        second_rows = [i for (i,) in second.execute(claim).fetchall()]
        assert first_rows == [1, 2, 3]
        assert second_rows == [4, 5]  # the locked rows skipped, not waited for
        with pytest.raises(psycopg.errors.LockNotAvailable):
            second.execute("SELECT id FROM queue WHERE id = 1 FOR UPDATE")  # without SKIP LOCKED: it waits
        second.rollback()
        first.execute("UPDATE queue SET done = true WHERE id = ANY(%s)", [first_rows])
        first.commit()
        assert [i for (i,) in second.execute(claim).fetchall()] == [4, 5]  # done rows gone, 4-5 free again
        second.commit()


def test_a_killed_test_run_leaves_no_server_and_its_directory_is_swept(tmp_path: Path) -> None:
    """The server is the test process's child, not a daemon: SIGKILL of the test process takes it down, and the
    next start removes the directory it left."""
    script = (
        "import sys, time\n"
        "from tests.pg_cluster import PgCluster\n"
        "cluster = PgCluster.start()\n"
        "assert cluster.server is not None\n"
        "print(cluster.server.pid, cluster.root, flush=True)\n"
        "time.sleep(120)\n"
    )
    root_dir = Path(__file__).resolve().parents[2]
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=root_dir,
        env={**os.environ, "PYTHONPATH": str(root_dir)},
    )
    try:
        assert owner.stdout is not None
        pid_text, root_text = owner.stdout.readline().decode().split()
        server_pid, root = int(pid_text), Path(root_text)
        assert root.is_dir()
        os.kill(server_pid, 0)  # running
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{server_pid}").exists() and not _zombie(server_pid):
        time.sleep(0.05)
    assert not Path(f"/proc/{server_pid}").exists() or _zombie(server_pid), "the server outlived its test run"
    assert root.is_dir()  # nothing could clean up after a SIGKILL...
    sweep_stale()
    assert not root.exists()  # ...so the next start does


def _zombie(pid: int) -> bool:
    """A killed child of a dead parent waits for init to reap it: it runs nothing any more."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True
