"""A history pulled from a live server replays to what the server issued: the spring programme pushed to a real
`rewards-lab serve`, customers and events sent over HTTP and processed by its worker, the history pulled with
`Lab.history` (Parquet and NDJSON, with the executions), replayed with `replay.engine.replay` through the same
programme, and each event's issued total compared with the server's executions."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme
from rewards_lab.lab.push import push
from rewards_lab.lab.workbench import Lab
from rewards_lab.replay.engine import replay
from tests.live_server import LiveServer, start_server

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"
CUSTOMERS = ("alice", "bob", "carol")
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("history") / "history.duckdb", "Acme")
    yield server
    server.stop()


def _events() -> list[dict[str, Any]]:
    """Orders around the rule's threshold and with awkward decimals, sign-ups, reviews with and without photos,
    an event type no rule reads; some at the same instant, every one in the last hours (no age bound bites)."""
    amounts = ["5", "19.99", "20", "20.01", "42.5", "100.37", "0.2", "999.99", "33.333", "20"]
    events = []
    for i in range(36):
        customer = CUSTOMERS[i % 3]
        occurred = NOW - timedelta(hours=6) + timedelta(minutes=7 * (i // 2))  # pairs share an instant
        kind = ("order.completed", "order.completed", "review.posted", "customer.signed_up", "page.viewed")[i % 5]
        data: dict[str, Any] = {}
        if kind == "order.completed":
            data = {"amount": json.loads(amounts[i % len(amounts)])}
        elif kind == "review.posted":
            data = {"photos": i % 3}
        events.append(
            {
                "type": kind,
                "external_event_id": f"evt-{i:03d}",
                "customer_id": customer,
                "occurred_at": occurred.isoformat().replace("+00:00", "Z"),
                "data": data,
            }
        )
    return events


@pytest.fixture(scope="module")
def pushed(live: LiveServer) -> ProgrammeDefinition:
    """The programme pushed and published, its customers with wallets, the events sent and all processed."""
    definition = load_programme(SPRING)
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as client:
        push(definition, client)
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        for name in CUSTOMERS:
            customer = http.post("/customers", json={"external_id": name})
            assert customer.status_code == 201, customer.text
            wallet = http.post("/wallets", json={"customer_id": customer.json()["data"]["id"], "type": "customer"})
            assert wallet.status_code == 201, wallet.text
        for event in _events():
            assert http.post("/events", json=event).status_code == 202
        deadline = time.monotonic() + 30
        while http.get("/events", params={"status": "received", "limit": 1}).json()["data"]:
            assert time.monotonic() < deadline, "the worker never processed the events"
            time.sleep(0.1)
    return definition


def _issued_by_server(rows: list[dict[str, Any]]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        executions = row["executions"]
        for execution in json.loads(executions) if isinstance(executions, str) else executions:
            if execution["status"] == "issued":
                totals[row["external_event_id"]] += Decimal(execution["amount"])
    return dict(totals)


def _issued_by_replay(history: Path, definition: ProgrammeDefinition) -> dict[str, Decimal]:
    result = replay(history, definition)
    found = result.issuances.filter("status = 'issued'").aggregate(
        "external_event_id, sum(amount) AS total", "external_event_id"
    )
    return {event: Decimal(str(total)) for event, total in found.fetchall()}


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_a_pulled_history_replays_to_what_the_server_issued(
    live: LiveServer, pushed: ProgrammeDefinition, tmp_path: Path, suffix: str
) -> None:
    lines: list[str] = []
    path = Lab.history(
        live.base_url,
        since=NOW - timedelta(days=1),
        out=tmp_path / f"history{suffix}",
        organization_id=live.organization_id,
        environment="sandbox",
        api_key=live.keys["sandbox"],
        executions=True,
        progress=lines.append,
    )
    assert path == tmp_path / f"history{suffix}" and lines[-1].startswith("wrote ")
    if suffix == ".parquet":
        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(row["external_event_id"] for row in rows) == sorted(e["external_event_id"] for e in _events())
    assert {row["status"] for row in rows} == {"processed"}
    server = _issued_by_server(rows)
    assert len(server) >= 15 and sum(server.values()) > 0  # the comparison has something to compare
    assert _issued_by_replay(path, pushed) == server
