"""Issue 27, item 2: one tenant's publishing cannot stall another tenant's writes, and the event worker's cache of
compiled versions stays bounded, against a real server on 127.0.0.1 run in this process (uvicorn in a thread), so
that the tests can look inside: which thread holds the write lock when the heavy work runs, and what the cache
holds.

The stall tests pause the heavy work (presenting a published version's rules, compiling a version) at its first
step, then make another tenant's write: it must complete while the heavy work is paused. With the heavy work
inside the write lock, the write could only complete after the pause: no timing threshold decides the outcome.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from rewards_lab import presenters
from rewards_lab.api.app import create_app
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.engine import rule_book
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from tests.live_server import bootstrap, free_port

PAUSE_S = 40.0  # how long the heavy work waits for the other tenant's write before going on regardless
WRITE_WAIT_S = 20.0  # how long the test waits for that write while the heavy work is paused (a busy machine)


@dataclass
class Tenant:
    http: httpx.Client
    organization_id: str


@dataclass
class InProcessServer:
    database: Database
    heavy: Tenant
    normal: Tenant


@pytest.fixture
def served(tmp_path: Path) -> Iterator[InProcessServer]:
    path = tmp_path / "service.duckdb"
    boots = [bootstrap(path, name, "--plan", "enterprise") for name in ("Heavy", "Normal")]
    database = Database(path)
    server = uvicorn.Server(
        uvicorn.Config(create_app(database), host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the in-process server did not start"
        time.sleep(0.05)
    base_url = f"http://127.0.0.1:{server.config.port}/v1"
    tenants = []
    for boot in boots:
        keys = boot["api_keys"]
        assert isinstance(keys, dict)
        headers = {
            "Authorization": f"Bearer {keys['sandbox']}",
            "X-Organization-ID": str(boot["organization_id"]),
            "X-Environment": "sandbox",
        }
        tenants.append(
            Tenant(httpx.Client(base_url=base_url, headers=headers, timeout=60), str(boot["organization_id"]))
        )
    try:
        yield InProcessServer(database, tenants[0], tenants[1])
    finally:
        for tenant in tenants:
            tenant.http.close()
        server.should_exit = True
        thread.join(30)
        report = verify_ledger(database.reader())
        database.close()
        assert report.ok, report.problems


def _ok(response: httpx.Response, status: int = 200) -> Any:
    body = response.json()
    assert response.status_code == status, str(body)[:500]
    return body["data"]


def _programme(http: httpx.Client, symbol: str, rules: int, event_type: str = "order.completed") -> str:
    asset = _ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 2}), 201)
    _ok(http.post(f"/assets/{asset['id']}/activate"))
    program_id = str(_ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)["id"])
    for index in range(rules):
        rule = {
            "program_id": program_id,
            "event_type": event_type,
            "conditions": [{"field": "amount", "operator": "gte", "value": index}],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        }
        _ok(http.post("/reward-rules", json=rule), 201)
    return program_id


def _customer(http: httpx.Client, external_id: str) -> str:
    """A customer and its wallet (two writes); the wallet's id."""
    customer = _ok(http.post("/customers", json={"external_id": external_id}), 201)
    return str(_ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)["id"])


def _processed(http: httpx.Client, event_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        event: dict[str, Any] = _ok(http.get(f"/events/{event_id}"))
        if event["status"] != "received":
            return event
        assert time.monotonic() < deadline, "the event was never processed"
        time.sleep(0.05)


def _event(http: httpx.Client, external_id: str, event_type: str = "order.completed") -> str:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": "heavy-1", "data": {"amount": 100}}
    return str(_ok(http.post("/events", json=body), 202)["id"])


class Pause:
    """Wraps a function so that its first call (once armed) records whether the calling thread holds the write
    lock, then waits until released (at most PAUSE_S) before it runs."""

    def __init__(self, database: Database, function: Callable[..., Any]) -> None:
        self.database, self.function = database, function
        self.armed = False
        self.entered, self.released = threading.Event(), threading.Event()
        self.lock_held: bool | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.armed and not self.entered.is_set():
            self.lock_held = bool(self.database._write_lock._is_owned())  # type: ignore[attr-defined]  # noqa: SLF001
            self.entered.set()
            self.released.wait(PAUSE_S)
        return self.function(*args, **kwargs)


def _write_while_paused(pause: Pause, normal: Tenant, label: str) -> float | None:
    """Another tenant's write (a customer and a wallet) made while the heavy work is paused: its duration, or
    None if it had not completed after WRITE_WAIT_S."""
    assert pause.entered.wait(30), "the heavy work never started"
    finished: list[float] = []

    def write() -> None:
        started = time.monotonic()
        _customer(normal.http, f"normal-{label}")
        finished.append(time.monotonic() - started)

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(WRITE_WAIT_S)
    completed = finished[0] if finished else None
    pause.released.set()
    writer.join(60)
    assert finished, "the other tenant's write never completed"
    return completed


def test_another_tenants_write_completes_while_a_large_publish_prepares(
    served: InProcessServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    program_id = _programme(served.heavy.http, "HVY", rules=30)
    pause = Pause(served.database, presenters.rule)
    monkeypatch.setattr(presenters, "rule", pause)
    pause.armed = True
    published: list[httpx.Response] = []
    publisher = threading.Thread(
        target=lambda: published.append(served.heavy.http.post(f"/reward-programs/{program_id}/publish"))
    )
    publisher.start()
    took = _write_while_paused(pause, served.normal, "publish")
    publisher.join(60)
    assert pause.lock_held is False, "publishing presented its rules inside the write lock"
    assert took is not None, "the other tenant's write waited for the publish"
    version = _ok(published[0], 201)["version"]
    assert version["number"] == 1 and len(version["rules"]) == 30 and {r["version"] for r in version["rules"]} == {1}


def test_another_tenants_write_completes_while_the_worker_compiles_a_new_version(
    served: InProcessServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    heavy = served.heavy.http
    program_id = _programme(heavy, "CMP", rules=30)
    wallet_id = _customer(heavy, "heavy-1")
    _ok(heavy.post(f"/reward-programs/{program_id}/publish"), 201)
    pause = Pause(served.database, rule_book.compile_rows)
    monkeypatch.setattr(rule_book, "compile_rows", pause)
    pause.armed = True
    event_id = _event(heavy, "order-1")
    took = _write_while_paused(pause, served.normal, "compile")
    assert pause.lock_held is False, "the worker compiled the version inside the write lock"
    assert took is not None, "the other tenant's write waited for the compile"
    assert _processed(heavy, event_id)["status"] == "processed"
    (balance,) = _ok(heavy.get(f"/wallets/{wallet_id}/balances"))["balances"]
    assert balance["balance"] == "30.00", balance  # every rule of the version compiled outside the lock issued


def _live_rule_specs() -> int:
    gc.collect()
    return sum(1 for item in gc.get_objects() if isinstance(item, RuleSpec))


def test_the_compiled_cache_stays_bounded_after_many_publishes(
    served: InProcessServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rule_book, "MAX_ENTRIES", 3, raising=False)
    heavy = served.heavy.http
    _customer(heavy, "heavy-1")
    steady = _programme(heavy, "STD", rules=2, event_type="review.posted")
    _ok(heavy.post(f"/reward-programs/{steady}/publish"), 201)
    _processed(heavy, _event(heavy, "review-1", "review.posted"))
    program_id = _programme(heavy, "PUB", rules=20)
    baseline = _live_rule_specs()
    for round_number in range(1, 9):  # each publish is a new version with 20 rules, then an event evaluates it
        rule = {
            "program_id": program_id,
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": 0}],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        }
        if round_number > 1:
            _ok(heavy.post("/reward-rules", json=rule), 201)
        _ok(heavy.post(f"/reward-programs/{program_id}/publish"), 201)
        _processed(heavy, _event(heavy, f"order-{round_number}"))
    # At most 3 versions stay compiled (today: every version ever evaluated, 8 x 20+ rules).
    assert _live_rule_specs() - baseline <= 3 * 30, "compiled rules of superseded versions are kept"
    entries, estimated = rule_book.compiled_cache(served.database).stats()
    assert entries == 3 and estimated > 0
    # Superseded versions went first: the steady programme's live version, used least recently, is still held.
    versions = _ok(heavy.get(f"/reward-programs/{steady}/versions"))
    cache, scope = rule_book.compiled_cache(served.database), Scope(served.heavy.organization_id, "sandbox")
    assert cache.get(scope, versions[0]["id"]) is not None
    later = _ok(heavy.get(f"/reward-programs/{program_id}/versions"))
    assert cache.get(scope, later[-2]["id"]) is not None  # the live version of PUB
    assert cache.get(scope, later[0]["id"]) is None  # its first, superseded
