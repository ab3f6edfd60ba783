"""The point-in-time restore of docs/deploy.md, rehearsed on throwaway clusters: WAL archived, a base backup
taken online, rows written before and after a chosen moment, and a second cluster recovered from the backup and
the archive to that moment holds exactly the rows committed up to it.

The steps are the document's ("Online backup and point-in-time restore"), in its order and with its settings: a
change to one is a change to the other. Two differences, both for speed: the clusters run with fsync off
(`tests/pg_cluster.py`), and `pg_basebackup` is given `--no-sync`. Left out until issue 32's PostgreSQL store
exists (increment 4): `rewards-lab verify --db` on the restored database; a table of this test stands for the
ledger.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pg_cluster import PgCluster, server_tempdir, start_or_skip

psycopg = pytest.importorskip("psycopg")

BATCH = 50  # rows per write: enough that a partial replay would show, few enough to stay fast
BASEBACKUP_FLAGS = ("-Fp", "-X", "stream", "--checkpoint=fast")  # docs/deploy.md's; the rehearsal adds --no-sync
DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def archive_settings(archive: Path) -> dict[str, str]:
    """The primary's settings in docs/deploy.md: every completed WAL segment copied into `archive`, never over
    an existing file (a second primary pointed at the same archive by mistake must not overwrite the first's)."""
    return {
        "wal_level": "replica",
        "archive_mode": "on",
        "archive_command": f"test ! -f {archive}/%f && cp %p {archive}/%f",
    }


def recovery_settings(archive: Path, target_time: str) -> dict[str, str]:
    """The restored cluster's settings in docs/deploy.md: WAL fetched back from the archive, replay stopped at
    `target_time` (transactions committed at or before it kept, later ones not), then promoted to a primary."""
    return {
        "restore_command": f"cp {archive}/%f %p",
        "recovery_target_time": target_time,
        "recovery_target_action": "promote",
    }


@dataclass
class Primary:
    cluster: PgCluster
    archive: Path  # the WAL archive (elsewhere in production: another disk, an object store)
    backups: Path  # where base backups go

    @property
    def dsn(self) -> str:
        return self.cluster.dsn("payments")


@pytest.fixture
def primary() -> Iterator[Primary]:
    """A cluster of its own, archiving (archive_mode is read at start, and the session's cluster is shared)."""
    archive, backups = server_tempdir(), server_tempdir()
    try:
        cluster = start_or_skip(settings=archive_settings(archive))
        try:
            yield Primary(cluster, archive, backups)
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(archive, ignore_errors=True)
        shutil.rmtree(backups, ignore_errors=True)


def write_batch(dsn: str, first: int) -> list[int]:
    """One transaction of BATCH rows, ids from `first`: the ids committed."""
    ids = list(range(first, first + BATCH))
    with psycopg.connect(dsn) as conn:
        conn.cursor().executemany("INSERT INTO payments (id, note) VALUES (%s, %s)", [(i, f"row {i}") for i in ids])
    return ids


def server_now(dsn: str) -> str:
    """The server's clock as text with its offset: the form `recovery_target_time` reads."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT clock_timestamp()::text").fetchone()
    assert row is not None
    return str(row[0])


def switch_and_wait_archived(dsn: str, timeout_s: float = 30.0) -> str:
    """`pg_switch_wal()` closes the current segment; wait until the archiver has copied it. Its file name."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        assert row is not None
        segment = str(row[0])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stats = conn.execute("SELECT last_archived_wal, last_failed_wal FROM pg_stat_archiver").fetchone()
            assert stats is not None
            if stats[0] is not None and stats[0] >= segment:
                return segment
            time.sleep(0.05)
    raise AssertionError(f"WAL segment {segment} not archived after {timeout_s} s (last failed: {stats[1]})")


def test_a_base_backup_and_the_wal_archive_restore_exactly_the_rows_committed_up_to_the_target_time(
    primary: Primary,
) -> None:
    with psycopg.connect(primary.cluster.dsn(), autocommit=True) as admin:
        admin.execute("CREATE DATABASE payments TEMPLATE template0")
    with psycopg.connect(primary.dsn) as conn:
        conn.execute("CREATE TABLE payments (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
    in_backup = write_batch(primary.dsn, 1)

    base = primary.backups / "base"  # pg_basebackup creates it: online, the primary keeps taking writes
    primary.cluster.run_tool("pg_basebackup", "-D", str(base), "-Fp", "-X", "stream", "--checkpoint=fast", "--no-sync")
    primary.cluster.run_tool("pg_verifybackup", str(base), connect=False)  # every file against its manifest

    after_backup = write_batch(primary.dsn, 1_000)
    target_time = server_now(primary.dsn)  # an operator's "just before the mistake"
    time.sleep(0.01)  # the next commit's timestamp strictly after the target, whatever the clock's resolution
    after_target = write_batch(primary.dsn, 2_000)
    with psycopg.connect(primary.dsn) as conn:
        conn.execute("DELETE FROM payments WHERE id < 2000")  # the mistake the restore undoes
    switch_and_wait_archived(primary.dsn)  # recovery needs a commit past the target in the archive to stop there

    restored = PgCluster.restore(
        base, password=primary.cluster.password, settings=recovery_settings(primary.archive, target_time)
    )
    try:
        with psycopg.connect(restored.dsn("payments")) as conn:
            ids = [row[0] for row in conn.execute("SELECT id FROM payments ORDER BY id")]
            in_recovery = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            conn.execute("INSERT INTO payments (id, note) VALUES (%s, 'after the restore')", (9_999,))
        assert ids == in_backup + after_backup, "the rows committed up to the target, and none after"
        assert not set(ids) & set(after_target)
        assert in_recovery == (False,), "promoted: the restored cluster is a primary that takes writes"
    finally:
        restored.stop()
    with psycopg.connect(primary.dsn) as conn:  # the primary itself kept the mistake: the restore is a new cluster
        left = conn.execute("SELECT count(*) FROM payments").fetchone()
    assert left == (len(after_target),)


def test_the_rehearsal_runs_the_settings_and_commands_docs_deploy_md_gives() -> None:
    """The document and the rehearsal in step: every setting the rehearsal sets, with the document's archive path
    and target time, is in the document's configuration blocks with the same value, and so are the commands."""
    text = DEPLOY_DOC.read_text()
    blocks = "\n".join(re.findall(r"^```\w*\n(.*?)^```$", text, flags=re.S | re.M))
    documented = dict(re.findall(r"^(\w+) = '?(.*?)'?$", blocks, flags=re.M))
    archive = Path("/mnt/wal-archive")
    rehearsed = archive_settings(archive) | recovery_settings(archive, "2026-11-29 14:03:00+00")
    assert {name: documented.get(name) for name in rehearsed} == rehearsed
    assert f"pg_basebackup -h PRIMARY -U replicator -D /backups/base-2026-11-29 {' '.join(BASEBACKUP_FLAGS)}" in blocks
    assert "pg_verifybackup /backups/base-2026-11-29" in blocks
    assert "touch /var/lib/postgresql/15/restored/recovery.signal" in blocks
