"""Crash safety of expiry: a process killed (SIGKILL) in the middle of an expiry round leaves nothing of it, and
the next round expires every due lot exactly once (one `expire` transaction and one `points.expired` message
per lot's wallet), as the event worker's batches do (tests/crash/test_crash_safety.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine.expiry import expire_due
from rewards_lab.service import assets, customers, ledger, organizations
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.verification import verify_ledger
from tests.crash.test_crash_safety import copy_database

REPO_ROOT = Path(__file__).resolve().parents[2]
WALLETS = 12
MARKER_TIMEOUT_S = 20.0
CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from datetime import datetime
    from pathlib import Path
    from rewards_lab.engine.expiry import expire_due
    from rewards_lab.store.database import Database

    spec = json.loads(Path(sys.argv[1]).read_text())
    database = Database(spec["db"])
    marker = Path(spec["marker"])

    def park(point):
        if point == spec["point"]:
            marker.with_suffix(".tmp").write_text(point)
            os.replace(marker.with_suffix(".tmp"), marker)
            while True:
                time.sleep(60)

    database.fault_hook = park
    expire_due(database, as_of=datetime.fromisoformat(spec["as_of"]))
    sys.exit(3)  # the kill should have come first
    """
)


def _prepare(path: Path) -> Scope:
    with Database(path) as db:
        scope = Scope(organizations.create_organization(db, "Expiring").id, "sandbox")
        body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0, "expiry": {"after_days": 30}}
        asset = assets.create_asset(db, scope, validate(rq.AssetCreate, body))
        assets.activate_asset(db, scope, asset.id)
        for index in range(WALLETS):
            owner = customers.create_customer(db, scope, validate(rq.CustomerCreate, {"external_id": f"c{index}"}))
            wallet = customers.create_wallet(db, scope, validate(rq.WalletCreate, {"customer_id": owner.id}))
            for amount in ("3", "4"):
                body = {"wallet_id": wallet.id, "amount": amount, "reason": "grant"}
                ledger.issue(db, scope, asset.id, validate(rq.IssueRequest, body))
    return scope


def _state(db: Database) -> tuple[int, int, int, int]:
    """(expire transactions, outbox messages of points.expired, open lots, what breakage holds)."""
    row = (
        db.reader()
        .execute(
            "SELECT (SELECT count(*) FROM transactions WHERE kind = 'expire'), "
            "(SELECT count(*) FROM outbox WHERE kind = 'points.expired'), "
            "(SELECT count(*) FROM lots WHERE remaining_minor > 0), "
            "(SELECT coalesce(sum(expired_minor), 0) FROM lots)"
        )
        .fetchone()
    )
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`_prepare`'s file, made once: each test kills a child on its own copy."""
    path = tmp_path_factory.mktemp("prepared") / "expiry.duckdb"
    _prepare(path)
    return path


@pytest.mark.parametrize("point", ["after_entries", "after_balances", "after_lots"])
def test_a_kill_mid_expiry_leaves_nothing_and_the_next_round_expires_each_lot_once(
    tmp_path: Path, prepared: Path, point: str
) -> None:
    path = copy_database(prepared, tmp_path / "expiry.duckdb")
    as_of = utcnow() + timedelta(days=31)
    marker = tmp_path / "marker"
    spec = {"db": str(path), "marker": str(marker), "point": point, "as_of": as_of.isoformat()}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    with (tmp_path / "child.log").open("wb") as log:
        child = subprocess.Popen(
            [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "spec.json")], stdout=log, stderr=log, env=env
        )
    try:
        deadline = time.monotonic() + MARKER_TIMEOUT_S
        while not marker.exists():
            assert child.poll() is None, (tmp_path / "child.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "child.log").read_text()
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    with Database(path) as db:
        assert _state(db) == (0, 0, 2 * WALLETS, 0)  # nothing of the killed round
        report = expire_due(db, as_of=as_of)
        assert (report.lots, report.refused) == (2 * WALLETS, 0)
        assert _state(db) == (2 * WALLETS, WALLETS, 0, 7 * WALLETS)
        assert expire_due(db, as_of=as_of).lots == 0
        assert _state(db) == (2 * WALLETS, WALLETS, 0, 7 * WALLETS)
        verified = verify_ledger(db.reader())
        assert verified.ok, verified.problems
