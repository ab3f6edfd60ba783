"""Crash safety of the tier worker: a process killed (SIGKILL) in the middle of a review round keeps the rounds it
committed and nothing of the one in progress, and the next run reviews every customer left exactly once (one
`downgraded` history row and one `tier.changed` message per customer), as expiry's rounds do
(tests/crash/test_crash_expiry.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.engine import event_processing
from rewards_lab.engine.tier_reviews import review_due
from rewards_lab.service import event_intake, organizations, programmes
from rewards_lab.store.database import Database
from tests.conftest import World
from tests.crash.test_crash_safety import copy_database

REPO_ROOT = Path(__file__).resolve().parents[2]
CUSTOMERS = 12
ROUND = 5  # rounds of 5, 5 and 2 customers
AS_OF = datetime(2026, 3, 2)  # after the first review (1 March) of January's gold customers
MARKER_TIMEOUT_S = 20.0
CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from datetime import datetime
    from pathlib import Path
    from rewards_lab.engine.tier_reviews import review_due
    from rewards_lab.store.database import Database

    spec = json.loads(Path(sys.argv[1]).read_text())
    database = Database(spec["db"])
    marker = Path(spec["marker"])
    seen = []

    def park(point):
        if point == "after_tiers":
            seen.append(point)
        if point == "after_tiers" and len(seen) == spec["nth"]:
            marker.with_suffix(".tmp").write_text(point)
            os.replace(marker.with_suffix(".tmp"), marker)
            while True:
                time.sleep(60)

    database.fault_hook = park
    review_due(database, as_of=datetime.fromisoformat(spec["as_of"]), round_size=spec["round"])
    sys.exit(3)  # the kill should have come first
    """
)


def _prepare(path: Path) -> None:
    """CUSTOMERS customers at gold since 10 January 2026 (one order of 300 each), first reviewed on 1 March."""
    with Database(path) as db:
        scope = Scope(organizations.create_organization(db, "Tiered").id, "sandbox")
        world = World(db, scope)
        asset = world.asset(decimals=0)
        tiers = {
            "metric": {"type": "points"},
            "window": {"type": "calendar", "period": "month"},
            "levels": [
                {"code": "member", "name": "Member"},
                {"code": "gold", "name": "Gold", "entry": "300"},
            ],
        }
        body = {"name": "Monthly", "asset_id": asset.id, "tiers": tiers, "max_event_age_days": None}
        programme = programmes.create_programme(db, scope, validate(rq.ProgrammeCreate, body))
        rule = {
            "program_id": programme.id,
            "event_type": "order",
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}],
        }
        programmes.create_rule(db, scope, validate(rq.RuleCreate, rule))
        programmes.publish(db, scope, programme.id)
        for index in range(CUSTOMERS):
            name = f"c{index:02d}"
            world.wallet(world.customer(name))
            event = {
                "type": "order",
                "external_event_id": name,
                "customer_id": name,
                "occurred_at": "2026-01-10T10:00:00Z",
                "data": {"amount": Decimal(300)},
            }
            event_intake.submit_event(db, scope, validate(rq.EventCreate, event))
        event_processing.process_all(db)


def _state(db: Database) -> tuple[int, int, int, int]:
    """(customers still gold, downgrade history rows, distinct customers downgraded, tier.changed messages)."""
    row = (
        db.reader()
        .execute(
            "SELECT (SELECT count(*) FROM customer_tiers WHERE tier = 'gold'), "
            "(SELECT count(*) FROM tier_changes WHERE kind = 'downgraded'), "
            "(SELECT count(DISTINCT customer_id) FROM tier_changes WHERE kind = 'downgraded'), "
            "(SELECT count(*) FROM outbox WHERE kind = 'tier.changed')"
        )
        .fetchone()
    )
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prepared") / "tiers.duckdb"
    _prepare(path)
    return path


@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_kill_mid_round_keeps_the_committed_rounds_and_the_next_run_reviews_the_rest_once(
    tmp_path: Path, prepared: Path, nth: int
) -> None:
    path = copy_database(prepared, tmp_path / "tiers.duckdb")
    with Database(path) as db:
        assert _state(db) == (CUSTOMERS, 0, 0, CUSTOMERS)  # the upgrades' messages only
    marker = tmp_path / "marker"
    spec = {"db": str(path), "marker": str(marker), "nth": nth, "round": ROUND, "as_of": AS_OF.isoformat()}
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
    committed = ROUND * (nth - 1)  # the rounds before the one killed
    with Database(path) as db:
        assert _state(db) == (CUSTOMERS - committed, committed, committed, CUSTOMERS + committed)
        report = review_due(db, as_of=AS_OF, round_size=ROUND)
        assert (report.customers, dict(report.changes)) == (
            CUSTOMERS - committed,
            {"downgraded": CUSTOMERS - committed},
        )
        done = (0, CUSTOMERS, CUSTOMERS, 2 * CUSTOMERS)
        assert _state(db) == done
        assert review_due(db, as_of=AS_OF, round_size=ROUND).customers == 0
        assert _state(db) == done
