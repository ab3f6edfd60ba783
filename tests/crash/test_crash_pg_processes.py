"""Crash safety of the PostgreSQL-backed service with two API-and-worker processes (issue 32, increment 10).

Two `rewards-lab serve` processes on one database, each on its own port (the test picks which one answers and
which one dies), with `REWARDS_LAB_EVENT_PARTITIONS=4`: both event workers lease two partitions each. A programme
rewards each event with its amount, under a per-customer cap and a daily budget that both bind. Two client threads
send a burst of events and Idempotency-Keyed writes (issue, redeem) alternately to the two processes; each keyed
write is sent to BOTH processes at once (the duplicate a client's retry through a load balancer makes). At a
random point of the burst (the seed's), the test waits until the process it picked has a write transaction open
(`backend_xid` in `pg_stat_activity`: mid-batch or mid-write) and kills it with SIGKILL; the clients resend what
got no answer to the survivor; the killed process is restarted on its port. Once every event answered 2xx is
settled and every key has been replayed once more, both stop and the database is checked:

- every event answered 2xx is stored exactly once and `processed`; nothing else is stored;
- each (event, version, rule, action) has exactly one execution (none issued twice, none lost) and every issued
  execution one ledger transaction;
- no customer got more than the cap, the programme no more than the budget, and the total is exactly what the
  cap and budget allow (so nothing was lost either); the usage counters agree;
- every keyed write was applied once (one transaction per key) and every answer for a key (both concurrent
  sends, retries after the kill, the replay at the end) is the same 201 and names that transaction;
- the wallets hold their opening balances plus the rewards plus the issues minus the redemptions, and the
  PostgreSQL store's `verify_ledger` finds nothing.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.security.webhook_targets import ALLOW_PRIVATE_ENV
from rewards_lab.service import ledger, programmes, webhooks
from rewards_lab.store.postgres.leases import LEASE_CLASS
from rewards_lab.store.postgres.store import PARTITIONS_ENV, PostgresStore
from rewards_lab.store.secret_box import KEY_ENV
from tests.conftest import World
from tests.live_server import bootstrap, cli, free_port, spawn, wait_until_serving
from tests.pg_cluster import PG_SECRET_KEY, PgCluster
from tests.webhook_receiver import Receiver

SEEDS = (11, 23, 37)
PARTITIONS = 4
CUSTOMERS = 8
THREADS = 2
OPS_PER_THREAD = 150
KEYED_EVERY = 6  # every 6th operation of a thread is a keyed write (issue, then redeem, alternately)
TAIL_EVENTS = 16  # sent after the restart, through both processes
CAP_MINOR = 2_000  # 20.00 per customer and day
BUDGET_MINOR = 12_000  # 120.00 per day: less than the caps allow (8 x 20.00), more than one customer's cap
OPENING_MINOR = 10_000  # each wallet's 100.00 before the burst: a redemption is never refused
ISSUE, ISSUE_MINOR = "2.00", 200
REDEEM, REDEEM_MINOR = "1.00", 100
SERVE_ARGS = (
    "--unauthenticated-limit-per-minute",  # start-up polls from 127.0.0.1; the budget is shared by the processes
    "10000",
    "--worker-batch-size",  # many small batches: the kill lands in one
    "16",
)
WEBHOOK_TIMEOUT_S = "2"
WEBHOOK_LEASE_MARGIN_S = "3"  # a delivery a killed sender had claimed is due again 5 s later (30 s by default)
DELIVERY_TIMEOUT_S = 120.0
BURST_DEADLINE_S = 180.0  # generous: a loaded machine (the suite on two cores) is slow, never wrong
SETTLE_TIMEOUT_S = 120.0
RETRY_PAUSE_S = 0.02


@dataclass(frozen=True)
class Prepared:
    """A bootstrapped, set-up database the tests clone: the tenant, its keys, the asset, the wallets."""

    template: str
    organization_id: str
    api_key: str
    asset_id: str
    wallets: dict[str, str]  # customer's external id -> wallet id


def _create_database(cluster: PgCluster, name: str, template: str) -> str:
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return cluster.dsn(name)


def _drop_database(cluster: PgCluster, name: str) -> None:
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """The webhook receiver every seed's `reward.issued` deliveries reach (it answers 200)."""
    listening = Receiver()
    try:
        yield listening
    finally:
        listening.close()


@pytest.fixture(scope="module")
def prepared(pg_cluster: PgCluster, pg_template: str, receiver: Receiver) -> Iterator[Prepared]:
    """Bootstrapped by the CLI once, then the programme, customers and wallets made through the services; every
    test runs on a clone (`CREATE DATABASE ... TEMPLATE`), so a seed costs its servers, not its set-up."""
    name = f"crash_{secrets.token_hex(6)}"
    url = _create_database(pg_cluster, name, pg_template)
    saved = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii")
    try:
        boot = bootstrap(url, "Acme", "--plan", "enterprise", "--rate-limit", "1000000")
        keys = boot["api_keys"]
        assert isinstance(keys, dict)
        store = PostgresStore(url, secret_key=PG_SECRET_KEY)
        try:
            world = World(store, Scope(str(boot["organization_id"]), "sandbox"))  # type: ignore[arg-type]
            asset = world.asset()
            body = {
                "name": "Capped",
                "asset_id": asset.id,
                "limits": [{"per": "customer", "period": "day", "max_amount": f"{CAP_MINOR / 100:.2f}"}],
                "budget": {"period": "day", "max_amount": f"{BUDGET_MINOR / 100:.2f}"},
            }
            programme = programmes.create_programme(store, world.scope, validate(rq.ProgrammeCreate, body))
            world.rule(programme, amount={"per": "amount", "rate": Decimal(1)})
            programmes.publish(store, world.scope, programme.id)
            hook = validate(rq.WebhookCreate, {"url": receiver.url, "events": ["reward.issued"]})
            webhooks.create_webhook(store, world.scope, hook, allow_private=True)
            wallets = {}
            for n in range(CUSTOMERS):
                wallet = world.wallet(world.customer(f"c-{n}"))
                opening = {"wallet_id": wallet.id, "amount": f"{OPENING_MINOR / 100:.2f}", "reason": "opening"}
                ledger.issue(store, world.scope, asset.id, validate(rq.IssueRequest, opening))
                wallets[f"c-{n}"] = wallet.id
        finally:
            store.close()  # no session may stay on a template
        yield Prepared(name, str(boot["organization_id"]), str(keys["sandbox"]), asset.id, wallets)
    finally:
        if saved is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = saved
        _drop_database(pg_cluster, name)


@dataclass
class Node:
    """One `serve` process of the two: its port stays the same across a restart."""

    name: str
    db: str
    logs: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: Any = None
    log: IO[bytes] | None = None
    starts: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def application_name(self) -> str:
        return self.env["PGAPPNAME"]

    def start(self) -> None:
        self.starts += 1
        if self.log is not None:
            self.log.close()
        self.log = (self.logs / f"{self.name}-{self.starts}.log").open("wb")
        command = cli("serve", "--db", self.db, "--port", str(self.port), *SERVE_ARGS)
        self.process = spawn(command, self.log, self.env)

    def wait(self) -> None:
        assert self.log is not None
        wait_until_serving(self.base_url, self.process, self.log)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except Exception:
                self.process.kill()
                self.process.wait()
        if self.log is not None:
            self.log.close()

    def log_text(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.logs.glob(f"{self.name}-*.log")))


@dataclass(frozen=True)
class Operation:
    kind: str  # "event", "issue" or "redeem"
    key: str  # the event's external id, or the Idempotency-Key
    customer: str
    amount_minor: int
    first_node: int

    def request(self, asset_id: str, wallets: dict[str, str]) -> tuple[str, str, dict[str, str]]:
        """(path, body, headers): the same bytes on every send of the operation."""
        amount = f"{self.amount_minor // 100}.{self.amount_minor % 100:02d}"
        if self.kind == "event":
            body = (  # the amount a JSON number, as a client's order total
                f'{{"type": "order.completed", "external_event_id": "{self.key}", '
                f'"customer_id": "{self.customer}", "data": {{"amount": {amount}}}}}'
            )
            return "/events", body, {}
        fields = {"wallet_id": wallets[self.customer], "amount": amount}
        if self.kind == "issue":
            path, fields["reason"] = f"/assets/{asset_id}/issue", self.key
        else:
            path, fields["reference"] = f"/assets/{asset_id}/redemptions", self.key
        return path, json.dumps(fields), {"Idempotency-Key": self.key}


def _plan(rng: random.Random, thread: int, count: int, prefix: str = "") -> list[Operation]:
    operations = []
    for i in range(count):
        customer = f"c-{rng.randrange(CUSTOMERS)}"
        node = (i + thread) % 2
        if i % KEYED_EVERY == KEYED_EVERY - 1:
            kind = "issue" if (i // KEYED_EVERY) % 2 == 0 else "redeem"
            amount = ISSUE_MINOR if kind == "issue" else REDEEM_MINOR
            operations.append(Operation(kind, f"{prefix}{kind}-{thread}-{i}", customer, amount, node))
        else:
            operations.append(Operation("event", f"{prefix}e-{thread}-{i}", customer, rng.randint(50, 300), node))
    return operations


@dataclass
class Outcome:
    """What the clients saw: the accepted events, every final answer per key, how many sends failed."""

    accepted: dict[str, Operation] = field(default_factory=dict)
    answers: dict[str, list[tuple[int, Any]]] = field(default_factory=lambda: defaultdict(list))
    keyed: dict[str, Operation] = field(default_factory=dict)
    unanswered: Counter[str] = field(default_factory=Counter)  # transport errors, 5xx, 409 in progress
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Clients:
    """Sends operations to the two nodes; what gets no answer (connection lost, 5xx) or is still in progress in
    another process (409 `idempotency_request_in_progress`) is sent again, to the other node, until answered."""

    def __init__(self, nodes: list[Node], prepared: Prepared, outcome: Outcome, deadline: float) -> None:
        self.nodes, self.prepared, self.outcome, self.deadline = nodes, prepared, outcome, deadline
        self.headers = {
            "Authorization": f"Bearer {prepared.api_key}",
            "X-Organization-ID": prepared.organization_id,
            "X-Environment": "sandbox",
            "Content-Type": "application/json",
        }

    def client(self) -> httpx.Client:
        return httpx.Client(headers=self.headers, timeout=20)

    def send(self, http: httpx.Client, operation: Operation, node: int) -> httpx.Response:
        path, body, headers = operation.request(self.prepared.asset_id, self.prepared.wallets)
        while True:
            assert time.monotonic() < self.deadline, f"{operation.key} never answered"
            try:
                response = http.post(f"{self.nodes[node % 2].base_url}{path}", content=body, headers=headers)
            except httpx.TransportError as error:
                self._count(type(error).__name__)
                node += 1
                time.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code >= 500:
                self._count(str(response.status_code))
                node += 1
                time.sleep(RETRY_PAUSE_S)
                continue
            if response.status_code == 409 and response.json()["error"]["code"] == "idempotency_request_in_progress":
                self._count("409 in progress")
                time.sleep(RETRY_PAUSE_S)
                continue
            return response

    def _count(self, what: str) -> None:
        with self.outcome.lock:
            self.outcome.unanswered[what] += 1

    def run(self, operations: list[Operation]) -> None:
        """One client thread: events to one node; a keyed write to both at once (a helper sends the second)."""
        with self.client() as http, self.client() as second, ThreadPoolExecutor(max_workers=1) as helper:
            for operation in operations:
                if operation.kind == "event":
                    self.record(operation, self.send(http, operation, operation.first_node))
                else:
                    other = helper.submit(self.send, second, operation, operation.first_node + 1)
                    self.record(operation, self.send(http, operation, operation.first_node))
                    self.record(operation, other.result())
                with self.outcome.lock:
                    self.outcome.done += 1

    def record(self, operation: Operation, response: httpx.Response) -> None:
        body = response.json()
        with self.outcome.lock:
            if operation.kind == "event":
                assert response.status_code == 202, body
                self.outcome.accepted[operation.key] = operation
            else:
                self.outcome.keyed[operation.key] = operation
                self.outcome.answers[operation.key].append((response.status_code, body.get("data", body)))


def _rows(url: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _leases(url: str) -> dict[str, int]:
    """How many event partitions each process (by application name) leases."""
    rows = _rows(
        url,
        "SELECT a.application_name, count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objsubid = 2 GROUP BY 1",
        [LEASE_CLASS],
    )
    return {str(name): int(count) for name, count in rows}


def _writing(url: str, application_name: str) -> str | None:
    """The statement of the process's open write transaction, if it has one (an event batch, a keyed write, an
    intake), else None."""
    rows = _rows(
        url,
        "SELECT query FROM pg_stat_activity WHERE application_name = %s AND backend_xid IS NOT NULL LIMIT 1",
        [application_name],
    )
    return " ".join(str(rows[0][0]).split())[:80] if rows else None


def _wait(condition: Any, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _away_from_midnight() -> None:
    """The cap and budget are per UTC day: a burst across midnight would count two days."""
    now = datetime.now(UTC)
    left = 86_400 - (now.hour * 3600 + now.minute * 60 + now.second)
    if left < 120:
        time.sleep(left + 1)


@pytest.fixture(params=SEEDS, ids=[f"seed{seed}" for seed in SEEDS])
def seed(request: pytest.FixtureRequest) -> int:
    value: int = request.param
    return value


def test_kill_9_of_one_of_two_processes_loses_nothing_and_issues_nothing_twice(
    seed: int,
    prepared: Prepared,
    receiver: Receiver,
    pg_cluster: PgCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(seed)
    name = f"t_{secrets.token_hex(6)}"
    url = _create_database(pg_cluster, name, prepared.template)
    env = {
        **os.environ,
        KEY_ENV: base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii"),
        PARTITIONS_ENV: str(PARTITIONS),
        ALLOW_PRIVATE_ENV: "1",  # the receiver listens on 127.0.0.1
        "REWARDS_LAB_WEBHOOK_TIMEOUT_S": WEBHOOK_TIMEOUT_S,
        "REWARDS_LAB_WEBHOOK_LEASE_MARGIN_S": WEBHOOK_LEASE_MARGIN_S,
    }
    nodes = [Node(n, url, tmp_path, {**env, "PGAPPNAME": f"crash-{n}-{secrets.token_hex(3)}"}) for n in "ab"]
    outcome = Outcome()
    started = time.monotonic()
    try:
        for node in nodes:  # both started, then both waited for
            node.start()
        for node in nodes:
            node.wait()
        _wait(lambda: sorted(_leases(url).values()) == [2, 2], "both event workers lease two partitions", 30)
        _away_from_midnight()

        clients = Clients(nodes, prepared, outcome, time.monotonic() + BURST_DEADLINE_S)
        plans = [_plan(rng, thread, OPS_PER_THREAD) for thread in range(THREADS)]
        threads = [threading.Thread(target=clients.run, args=(plan,), daemon=True) for plan in plans]
        kill_after = rng.randint(THREADS * OPS_PER_THREAD * 3 // 10, THREADS * OPS_PER_THREAD * 6 // 10)
        for thread in threads:
            thread.start()
        _wait(lambda: outcome.done >= kill_after, "the burst reached the kill point", BURST_DEADLINE_S)

        # The victim: a process holding partitions (the most; the seed breaks a tie), killed mid-write if it
        # opens one within two seconds (it nearly always does: batches of 16 among the burst's writes).
        shares = _leases(url)
        most = max(shares.get(node.application_name, 0) for node in nodes)
        victim = rng.choice([node for node in nodes if shares.get(node.application_name, 0) == most])
        assert most > 0, shares
        deadline = time.monotonic() + 2
        while (mid_write := _writing(url, victim.application_name)) is None and time.monotonic() < deadline:
            time.sleep(0.002)
        os.kill(victim.process.pid, signal.SIGKILL)
        assert victim.process.wait(30) == -signal.SIGKILL
        killed_at = outcome.done
        victim.start()  # on its port: the clients keep sending to the survivor meanwhile
        victim.wait()
        for thread in threads:
            thread.join(BURST_DEADLINE_S)
            assert not thread.is_alive(), "a client thread did not finish"
        _wait(lambda: sorted(_leases(url).values()) == [2, 2], "the restarted process leases its share", 30)

        tail = Clients(nodes, prepared, outcome, time.monotonic() + BURST_DEADLINE_S)
        tail.run(_plan(rng, THREADS, TAIL_EVENTS, prefix="tail-"))  # through both, the restarted one included

        def settled() -> bool:
            rows = _rows(url, "SELECT count(*) FILTER (WHERE status = 'received'), count(*) FROM events")
            return rows[0] == (0, len(outcome.accepted))

        _wait(settled, "every accepted event settled", SETTLE_TIMEOUT_S)
        settled_at = time.monotonic()

        def delivered() -> bool:
            rows = _rows(
                url,
                "SELECT (SELECT count(*) FROM outbox WHERE dispatched_at IS NULL), "
                "(SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded')",
            )
            return rows[0] == (0, 0)

        _wait(delivered, "every reward.issued delivered", DELIVERY_TIMEOUT_S)
        delivered_s = time.monotonic() - settled_at
        with tail.client() as http:  # each key once more, after the fact: the first answer again
            for number, operation in enumerate(sorted(outcome.keyed.values(), key=lambda o: o.key)):
                tail.record(operation, tail.send(http, operation, number))
    finally:
        for node in nodes:
            node.stop()
    elapsed = time.monotonic() - started
    logs = {node.name: node.log_text() for node in nodes}
    try:
        _check(url, prepared, outcome)
        _check_deliveries(url, receiver)
        store = PostgresStore(url, secret_key=PG_SECRET_KEY)
        try:
            report = store.verify_ledger()
        finally:
            store.close()
        assert report.ok, report.problems
        survivor = next(node for node in nodes if node is not victim)
        assert "Traceback" not in logs[survivor.name], logs[survivor.name][-4000:]
    finally:
        _drop_database(pg_cluster, name)
    with capsys.disabled():
        print(
            f"\npg crash test seed {seed}: killed {victim.name} after {killed_at} of {THREADS * OPS_PER_THREAD} "
            f"operations (writing: {mid_write}); {len(outcome.accepted)} events, "
            f"{len(outcome.keyed)} keys; resent: {dict(outcome.unanswered)}; deliveries done {delivered_s:.1f} s after "
            f"the events; {elapsed:.1f} s"
        )


def _check(url: str, prepared: Prepared, outcome: Outcome) -> None:
    accepted = outcome.accepted
    # every event answered 2xx stored exactly once and processed; nothing else stored
    events = _rows(url, "SELECT external_event_id, status, count(*) FROM events GROUP BY 1, 2")
    assert {row[0] for row in events} == set(accepted)
    assert Counter(row[1] for row in events) == Counter({"processed": len(accepted)}), Counter(r[1] for r in events)
    assert {row[2] for row in events} == {1}

    # one execution per (event, version, rule, action) and one per event (none twice, none lost)
    twice = _rows(
        url,
        "SELECT event_id, version_id, rule_id, action_index FROM reward_executions "
        "GROUP BY 1, 2, 3, 4 HAVING count(*) > 1",
    )
    assert twice == []
    executions = _rows(
        url,
        "SELECT x.external_event_id, x.status, x.amount_minor, coalesce(x.requested_minor, x.amount_minor), "
        "c.external_id, x.id FROM reward_executions x JOIN customers c ON c.id = x.customer_id",
    )
    assert sorted(row[0] for row in executions) == sorted(accepted)
    assert {row[1] for row in executions} <= {"issued", "limited"}, Counter(row[1] for row in executions)
    for external_id, _, _, requested, customer, _ in executions:
        assert (requested, customer) == (accepted[external_id].amount_minor, accepted[external_id].customer)

    # the cap and the budget hold, and give exactly what they allow
    issued: Counter[str] = Counter()
    demand: Counter[str] = Counter()
    for _, _, amount, requested, customer, _ in executions:
        issued[customer] += amount
        demand[customer] += requested
    assert max(issued.values()) <= CAP_MINOR, issued
    total = sum(issued.values())
    assert total <= BUDGET_MINOR
    assert total == min(BUDGET_MINOR, sum(min(CAP_MINOR, wanted) for wanted in demand.values())), (issued, demand)
    usage = dict(_rows(url, "SELECT counter, sum(amount_minor) FROM limit_usage GROUP BY 1"))
    assert usage and set(usage.values()) == {total}, usage

    # every issued execution has one ledger transaction, no transaction without its execution
    rewarded = _rows(
        url,
        "SELECT execution_id, count(*), sum(amount_minor) FROM transactions WHERE execution_id IS NOT NULL GROUP BY 1",
    )
    assert {row[0] for row in rewarded} == {row[5] for row in executions if row[2] > 0}
    assert {row[1] for row in rewarded} <= {1}
    assert sum(int(row[2]) for row in rewarded) == total

    # every keyed write applied once; every answer for a key the same 201 naming that one transaction
    written = {
        memo: (count, transaction_id)
        for memo, count, transaction_id in _rows(
            url,
            "SELECT memo, count(*), min(id) FROM transactions WHERE kind IN ('issue', 'redemption') "
            "AND memo <> 'opening' GROUP BY 1",
        )
    }
    assert set(written) == set(outcome.keyed)
    for key, answers in outcome.answers.items():
        assert len(answers) >= 3, (key, answers)  # both concurrent sends and the replay
        assert all(answer == answers[0] for answer in answers), (key, answers)
        status, data = answers[0]
        assert status == 201, (key, data)
        assert written[key] == (1, data["id"]), (key, written[key], data)

    # the wallets: opening + rewards + issues - redemptions
    issues = sum(op.amount_minor for op in outcome.keyed.values() if op.kind == "issue")
    redeemed = sum(op.amount_minor for op in outcome.keyed.values() if op.kind == "redeem")
    (wallets,) = _rows(
        url,
        "SELECT sum(balance_minor) FROM balances WHERE account_id = ANY(%s)",
        [list(prepared.wallets.values())],
    )
    assert wallets[0] == CUSTOMERS * OPENING_MINOR + total + issues - redeemed


def _check_deliveries(url: str, receiver: Receiver) -> None:
    """Every issued reward announced once (one outbox message, one delivery) and received at least once."""
    announced = _rows(url, "SELECT resource_id, id FROM outbox WHERE kind = 'reward.issued'")
    issued = {row[0] for row in _rows(url, "SELECT id FROM reward_executions WHERE status = 'issued'")}
    assert sorted(row[0] for row in announced) == sorted(issued)
    deliveries = _rows(url, "SELECT outbox_id, id FROM webhook_deliveries")
    assert sorted(row[0] for row in deliveries) == sorted(row[1] for row in announced)  # fanned out once each
    got = {}
    for request in receiver.snapshot():
        got.setdefault(request.body["id"], request.body)
    assert {row[1] for row in deliveries} <= set(got)  # at least once (a killed sender's may come twice)
    assert {got[row[1]]["data"]["execution_id"] for row in deliveries} == issued
