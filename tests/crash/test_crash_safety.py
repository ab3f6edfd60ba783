"""Crash safety: a process killed (SIGKILL) in the middle of a posting leaves no partial transaction.

Each test prepares a DuckDB file through the service layer, closes it, and hands it to a child process. The child
runs one operation (a big batch through `apply_postings`, one `ledger.issue`, or
`event_processing.process_pending`) with
`Database.fault_hook` set to park it, mid-transaction, at one of the ledger writer's fault points; the parent then
kills it with SIGKILL, reopens the file and checks that nothing of the killed transaction is visible and that
running the operation again completes it exactly once. A last test kills a child at a random moment of a long
loop of small committed issues and checks that every reported call, and at most the one in flight, is there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.ids import new_ids
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine import event_processing
from rewards_lab.service import event_intake, ledger, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.uow import unit_of_work
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World

REPO_ROOT = Path(__file__).resolve().parents[2]
FAULT_POINTS = ("after_entries", "after_balances")
OPERATIONS = ("batch", "issue", "events")
WALLET_COUNT = 20
PRIOR_ISSUE = "50.00"  # issued to each wallet before the crash
PRIOR_ISSUE_MINOR = 5_000
BATCH_ISSUES = 10_000  # ten times the worker's default batch
BATCH_ISSUE_MINOR = 20
BATCH_TRANSFERS = 500  # round the wallets, among the issues
BATCH_TRANSFER_MINOR = 100
BATCH_OVER_CEILING = 10  # issues past the ceiling, refused with asset_supply_exhausted
# Exactly room for the batch's issues on top of the opening issues.
SUPPLY_CEILING_MINOR = WALLET_COUNT * PRIOR_ISSUE_MINOR + BATCH_ISSUES * BATCH_ISSUE_MINOR
SUPPLY_CEILING = f"{SUPPLY_CEILING_MINOR // 100}.{SUPPLY_CEILING_MINOR % 100:02d}"
ISSUE_AMOUNT, ISSUE_MINOR = "7.00", 700  # the single service call
EVENT_COUNT = 300  # every other event meets the rule's condition
REWARD_MINOR = 1_000  # the rule's fixed 10.00
MARKER_TIMEOUT_S = 20.0
LOOP_MIN_REPORTED = 25
LOOP_CALLS_LIMIT = 100_000  # far more than can run before the kill

CHILD_SCRIPT = textwrap.dedent(
    """
    import json
    import os
    import sys
    import time
    from pathlib import Path

    from rewards_lab.contract import requests as rq
    from rewards_lab.contract.scope import Scope
    from rewards_lab.contract.validation import validate
    from rewards_lab.domain.posting_policy import PostingRequest
    from rewards_lab.service import event_intake, ledger
    from rewards_lab.engine import event_processing
    from rewards_lab.engine.postings import apply_postings
    from rewards_lab.store.database import Database
    from rewards_lab.store.uow import unit_of_work

    spec = json.loads(Path(sys.argv[1]).read_text())
    database = Database(spec["db_path"])
    scope = Scope(spec["organization_id"], spec["environment"])
    marker = Path(spec["marker_path"])


    def park(point):
        # At the chosen point (mid-transaction), say so and wait to be killed.
        if point == spec["fault_point"]:
            staging = marker.with_suffix(".tmp")
            staging.write_text(point)
            os.replace(staging, marker)
            while True:
                time.sleep(60)


    if spec["fault_point"] is not None:
        database.fault_hook = park

    operation = spec["operation"]
    if operation == "batch":
        with unit_of_work(database) as uow:
            apply_postings(uow, scope, [PostingRequest(**fields) for fields in spec["requests"]])
    elif operation == "issue":
        body = validate(rq.IssueRequest, spec["issue"])
        ledger.issue(database, scope, spec["asset_id"], body, idempotency_key=spec["idempotency_key"])
    elif operation == "events":
        event_processing.process_pending(database)
    elif operation == "loop":
        body = validate(rq.IssueRequest, spec["issue"])
        with open(spec["progress_path"], "a", encoding="utf-8") as progress:
            for call in range(spec["calls"]):
                done = ledger.issue(database, scope, spec["asset_id"], body, idempotency_key=f"loop-{call}")
                progress.write(f"{call} {done.id}\\n")
                progress.flush()
    database.close()
    sys.exit(3)  # the kill should have come first
    """
)


@dataclass
class Prepared:
    """A database file ready for the child, and what the test needs to know about it."""

    path: Path
    scope: Scope
    asset_id: str
    wallet_ids: list[str]
    event_ids: list[str]
    before: dict[str, Any]


# state of the file --------------------------------------------------------------------------------------------
def _snapshot(db: Database) -> dict[str, Any]:
    """Everything a killed transaction could have touched, in comparable form."""
    con = db.reader()

    def scalar(sql: str) -> Any:
        row = con.execute(sql).fetchone()
        assert row is not None
        return row[0]

    return {
        "transactions": scalar("SELECT count(*) FROM transactions"),
        "entries": scalar("SELECT count(*) FROM entries"),
        "balance_rows": scalar("SELECT count(*) FROM balances"),
        "transaction_ids": frozenset(row[0] for row in con.execute("SELECT id FROM transactions").fetchall()),
        "balances": {
            (account, asset): int(balance)
            for account, asset, balance in con.execute(
                "SELECT account_id, asset_id, balance_minor FROM balances"
            ).fetchall()
        },
        "executions": scalar("SELECT count(*) FROM reward_executions"),
        "outbox": Counter(dict(con.execute("SELECT kind, count(*) FROM outbox GROUP BY kind").fetchall())),
        "idempotency_keys": frozenset(row[0] for row in con.execute("SELECT key FROM idempotency_keys").fetchall()),
        "events": sorted(
            con.execute("SELECT id, status, attempts, evaluated_versions, processed_at FROM events").fetchall()
        ),
    }


def _wallet_balances(db: Database, prepared: Prepared) -> dict[str, int]:
    rows = db.reader().execute(
        "SELECT account_id, balance_minor FROM balances WHERE asset_id = ? AND starts_with(account_id, 'wal_')",
        [prepared.asset_id],
    )
    stored = {account: int(balance) for account, balance in rows.fetchall()}
    return {wallet_id: stored.get(wallet_id, 0) for wallet_id in prepared.wallet_ids}


def _assert_verified(db: Database) -> None:
    report = verify_ledger(db.reader())
    assert report.ok, report.problems
    assert report.entries == 2 * report.transactions


def _prepare(tmp_path: Path, *, with_events: bool) -> Prepared:
    path = tmp_path / "rewards.duckdb"
    with Database(path) as db:
        org = organizations.create_organization(db, "Crash test organization")
        scope = Scope(org.id, "sandbox")
        world = World(db, scope)
        asset = world.asset(supply_ceiling=SUPPLY_CEILING)
        wallet_ids = [world.wallet().id for _ in range(WALLET_COUNT)]
        programme = world.programme(asset)
        world.rule(
            programme, conditions=[{"field": "amount", "operator": "gte", "value": 20}], amount={"fixed": "10.00"}
        )
        programmes.publish(db, scope, programme.id)
        for index, wallet_id in enumerate(wallet_ids):
            body = validate(rq.IssueRequest, {"wallet_id": wallet_id, "amount": PRIOR_ISSUE, "reason": "opening"})
            ledger.issue(db, scope, asset.id, body, idempotency_key=f"opening-{index}")
        event_ids: list[str] = []
        if with_events:
            bodies = [
                validate(
                    rq.EventCreate,
                    {
                        "type": "order.completed",
                        "external_event_id": f"order-{number}",
                        "customer_id": f"customer-{number % WALLET_COUNT + 1}",
                        "data": {"amount": 30 if number % 2 == 0 else 10},
                    },
                )
                for number in range(EVENT_COUNT)
            ]
            for result in event_intake.submit_events(db, scope, bodies):
                assert not isinstance(result, BaseException), result
                event_ids.append(result.id)
        _assert_verified(db)
        before = _snapshot(db)
    return Prepared(path, scope, asset.id, wallet_ids, event_ids, before)


def copy_database(source: Path, target: Path) -> Path:
    """A closed database file and its key file (and write-ahead log, if any) copied to `target`."""
    for suffix in ("", ".secret-key", ".wal"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy2(f"{source}{suffix}", f"{target}{suffix}")  # the key file stays private (its mode)
    return target


@pytest.fixture(scope="module")
def prepare(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, bool], Prepared]:
    """`_prepare`'s file made once per module (with or without events), each test given its own copy of it: the
    copy is what a fresh preparation would have written, without building it again."""
    made: dict[bool, Prepared] = {}

    def copy(tmp_path: Path, with_events: bool) -> Prepared:
        if with_events not in made:
            made[with_events] = _prepare(tmp_path_factory.mktemp("prepared"), with_events=with_events)
        template = made[with_events]
        return dataclasses.replace(template, path=copy_database(template.path, tmp_path / template.path.name))

    return copy


# the child process ----------------------------------------------------------------------------------------------
@contextmanager
def _child(tmp_path: Path, spec: dict[str, Any]) -> Iterator[subprocess.Popen[bytes]]:
    """Start the child on `spec`; whatever happens in the test, it is killed and reaped on the way out."""
    script = tmp_path / "child.py"
    script.write_text(CHILD_SCRIPT, encoding="utf-8")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    with (tmp_path / "child.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(script), str(spec_path)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def _child_log(tmp_path: Path) -> str:
    return (tmp_path / "child.log").read_text(encoding="utf-8", errors="replace")


def _wait_for(tmp_path: Path, process: subprocess.Popen[bytes], ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + MARKER_TIMEOUT_S
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"child exited ({process.returncode}) before {what}:\n{_child_log(tmp_path)}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {MARKER_TIMEOUT_S} s:\n{_child_log(tmp_path)}")
        time.sleep(0.01)


def _kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=10) == -signal.SIGKILL


# the operations ----------------------------------------------------------------------------------------------
def _batch_requests(prepared: Prepared) -> list[PostingRequest]:
    """Issues up to the ceiling with transfers round the wallets among them, then issues the ceiling refuses."""
    wallets = prepared.wallet_ids
    ids = iter(new_ids("transaction", BATCH_ISSUES + BATCH_TRANSFERS + BATCH_OVER_CEILING))
    requests: list[PostingRequest] = []
    transfers = 0
    for number in range(BATCH_ISSUES):
        wallet = wallets[number % len(wallets)]
        requests.append(PostingRequest(next(ids), "issue", prepared.asset_id, BATCH_ISSUE_MINOR, wallet))
        if number % (BATCH_ISSUES // BATCH_TRANSFERS) == 0:
            sender, receiver = wallets[transfers % len(wallets)], wallets[(transfers + 1) % len(wallets)]
            requests.append(
                PostingRequest(
                    next(ids), "transfer", prepared.asset_id, BATCH_TRANSFER_MINOR, sender, to_wallet_id=receiver
                )
            )
            transfers += 1
    assert transfers == BATCH_TRANSFERS
    for number in range(BATCH_OVER_CEILING):
        requests.append(PostingRequest(next(ids), "issue", prepared.asset_id, 1, wallets[number]))
    return requests


def _spec(prepared: Prepared, tmp_path: Path, operation: str, fault_point: str | None) -> dict[str, Any]:
    return {
        "db_path": str(prepared.path),
        "organization_id": prepared.scope.organization_id,
        "environment": prepared.scope.environment,
        "asset_id": prepared.asset_id,
        "marker_path": str(tmp_path / "marker"),
        "fault_point": fault_point,
        "operation": operation,
    }


def _issue_body(prepared: Prepared, amount: str) -> dict[str, str]:
    return {"wallet_id": prepared.wallet_ids[0], "amount": amount, "reason": "crash test"}


def _rerun_batch(db: Database, prepared: Prepared, requests: list[PostingRequest]) -> None:
    balances_before = _wallet_balances(db, prepared)
    with unit_of_work(db) as uow:
        outcome = ledger.apply_postings(uow, prepared.scope, requests)
    assert len(outcome.accepted) == BATCH_ISSUES + BATCH_TRANSFERS
    assert [request for request, _ in outcome.rejected] == requests[-BATCH_OVER_CEILING:]
    assert {error.code for _, error in outcome.rejected} == {"asset_supply_exhausted"}

    after = _snapshot(db)
    accepted_ids = {posting.transaction_id for posting in outcome.accepted}
    assert after["transaction_ids"] == prepared.before["transaction_ids"] | accepted_ids
    assert after["entries"] == prepared.before["entries"] + 2 * len(accepted_ids)
    expected = dict(balances_before)
    for request in requests[:-BATCH_OVER_CEILING]:
        if request.kind == "issue":
            expected[request.wallet_id] += request.amount_minor
        else:
            assert request.to_wallet_id is not None
            expected[request.wallet_id] -= request.amount_minor
            expected[request.to_wallet_id] += request.amount_minor
    assert _wallet_balances(db, prepared) == expected
    assert sum(expected.values()) == SUPPLY_CEILING_MINOR  # outstanding supply sits exactly at the ceiling


def _rerun_issue(db: Database, prepared: Prepared, spec: dict[str, Any]) -> None:
    body = validate(rq.IssueRequest, spec["issue"])
    balances_before = _wallet_balances(db, prepared)
    done = ledger.issue(db, prepared.scope, prepared.asset_id, body, idempotency_key=spec["idempotency_key"])
    after = _snapshot(db)
    assert after["transaction_ids"] == prepared.before["transaction_ids"] | {done.id}
    assert after["idempotency_keys"] == prepared.before["idempotency_keys"] | {spec["idempotency_key"]}
    again = ledger.issue(db, prepared.scope, prepared.asset_id, body, idempotency_key=spec["idempotency_key"])
    assert again.id == done.id
    assert _snapshot(db) == after
    expected = {**balances_before, prepared.wallet_ids[0]: balances_before[prepared.wallet_ids[0]] + ISSUE_MINOR}
    assert _wallet_balances(db, prepared) == expected


def _rerun_events(db: Database, prepared: Prepared) -> None:
    report = event_processing.process_all(db)
    rewarded = EVENT_COUNT // 2
    assert (report.processed, report.failed, report.issued, report.refused) == (EVENT_COUNT, 0, rewarded, 0)
    con = db.reader()
    statuses = con.execute("SELECT status, attempts, count(*) FROM events GROUP BY ALL").fetchall()
    assert statuses == [("processed", 1, EVENT_COUNT)]
    executions = con.execute(
        "SELECT e.event_id, e.status, e.amount_minor, t.id, t.amount_minor, t.execution_id, t.kind "
        "FROM reward_executions e LEFT JOIN transactions t ON t.id = e.transaction_id"
    ).fetchall()
    assert len(executions) == rewarded
    assert len({row[0] for row in executions}) == rewarded  # each reward issued once
    for row in executions:
        assert row[1:3] == ("issued", REWARD_MINOR)
        assert row[3] is not None and row[4] == REWARD_MINOR and row[6] == "reward"
    after = _snapshot(db)
    assert after["transactions"] == prepared.before["transactions"] + rewarded
    assert after["outbox"]["reward.issued"] == prepared.before["outbox"]["reward.issued"] + rewarded
    assert event_processing.process_all(db).processed == 0
    assert _snapshot(db) == after


# the tests -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault_point", FAULT_POINTS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_kill_mid_posting_leaves_no_partial_transaction(
    tmp_path: Path, prepare: Callable[[Path, bool], Prepared], operation: str, fault_point: str
) -> None:
    prepared = prepare(tmp_path, operation == "events")
    spec = _spec(prepared, tmp_path, operation, fault_point)
    requests: list[PostingRequest] = []
    if operation == "batch":
        requests = _batch_requests(prepared)
        spec["requests"] = [request._asdict() for request in requests]
    elif operation == "issue":
        spec["issue"] = _issue_body(prepared, ISSUE_AMOUNT)
        spec["idempotency_key"] = "crash-issue"

    marker = tmp_path / "marker"
    with _child(tmp_path, spec) as process:
        _wait_for(tmp_path, process, marker.exists, f"fault point {fault_point}")
        assert marker.read_text() == fault_point
        _kill(process)

    with Database(prepared.path) as db:
        _assert_verified(db)
        after = _snapshot(db)
        assert after == prepared.before  # nothing of the killed transaction is visible
        if operation == "events":
            # Still `received`, never attempted: a restart processes them.
            assert [row[:4] for row in after["events"]] == [(id_, "received", 0, None) for id_ in prepared.event_ids]

        if operation == "batch":
            _rerun_batch(db, prepared, requests)
        elif operation == "issue":
            _rerun_issue(db, prepared, spec)
        else:
            _rerun_events(db, prepared)
        _assert_verified(db)


def test_a_kill_at_a_random_moment_of_many_small_issues_loses_nothing_committed(
    tmp_path: Path, prepare: Callable[[Path, bool], Prepared]
) -> None:
    prepared = prepare(tmp_path, False)
    spec = _spec(prepared, tmp_path, "loop", None)
    spec["issue"] = _issue_body(prepared, "0.01")
    spec["calls"] = LOOP_CALLS_LIMIT
    progress = tmp_path / "progress"
    spec["progress_path"] = str(progress)

    def reported() -> list[str]:
        """Transaction ids of the calls the child reported complete (a torn last line is not a report)."""
        if not progress.exists():
            return []
        text = progress.read_text(encoding="utf-8")
        lines = text.split("\n")[:-1]  # everything before the last newline
        for call, line in enumerate(lines):
            assert line.split(" ")[0] == str(call)
        return [line.split(" ")[1] for line in lines]

    delay_s = random.uniform(0.0, 0.5)
    with _child(tmp_path, spec) as process:
        _wait_for(tmp_path, process, lambda: len(reported()) >= LOOP_MIN_REPORTED, "progress")
        time.sleep(delay_s)
        _kill(process)
    completed = reported()

    with Database(prepared.path) as db:
        _assert_verified(db)
        after = _snapshot(db)
        new_ids_ = after["transaction_ids"] - prepared.before["transaction_ids"]
        in_flight = len(new_ids_) - len(completed)
        assert in_flight in (0, 1), (len(new_ids_), len(completed), delay_s)
        assert set(completed) <= new_ids_
        assert after["idempotency_keys"] - prepared.before["idempotency_keys"] == {
            f"loop-{call}" for call in range(len(new_ids_))
        }

        # A restart retries the call in flight under its key: it exists exactly once afterwards either way.
        retry_key = f"loop-{len(completed)}"
        body = validate(rq.IssueRequest, spec["issue"])
        retried = ledger.issue(db, prepared.scope, prepared.asset_id, body, idempotency_key=retry_key)
        final = _snapshot(db)
        assert final["transaction_ids"] == prepared.before["transaction_ids"] | set(completed) | {retried.id}
        assert final["transactions"] == prepared.before["transactions"] + len(completed) + 1
        wallet = prepared.wallet_ids[0]
        assert _wallet_balances(db, prepared)[wallet] == PRIOR_ISSUE_MINOR + len(completed) + 1
        _assert_verified(db)
