"""A reward the ledger refuses uses no cap and no budget (issue 27, item 6): a frozen wallet's reward fails and
counts nowhere, so replaying its event once the wallet is unfrozen counts it once; in one batch, a later reward
is decided against counters without the refused one; and the replay engines give the grant of a reward refused
by the supply ceiling back the same way. Against a real server on 127.0.0.1, a real DuckDB file and the replay."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.validation import validate
from rewards_lab.engine.event_processing import process_all
from rewards_lab.service import customers, programmes
from rewards_lab.service.event_intake import submit_event
from rewards_lab.store.database import Database
from tests.conftest import World
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.replay.test_replay_caps_reversals import agree, by_event, order, programme
from tests.webhook_receiver import ok

POLL_TIMEOUT_S = 15.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    live = start_server(tmp_path / "refused.duckdb")
    yield live
    stop_and_verify(live)


def _settled(http: httpx.Client, event_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        event: dict[str, Any] = ok(http.get(f"/events/{event_id}"))
        if event["status"] != "received":
            return event
        assert time.monotonic() < deadline, event
        time.sleep(0.05)


def _usage(path: Path) -> list[tuple[str, str, int, int]]:
    """(counter, customer, amount, rewards) of every usage counter in the file the server left."""
    database = Database(path)
    try:
        rows = database.reader().execute(
            "SELECT counter, customer_id, amount_minor, reward_count FROM limit_usage ORDER BY counter"
        )
        return [(str(c), str(k), int(a), int(n)) for c, k, a, n in rows.fetchall()]
    finally:
        database.close()


def test_a_reward_refused_for_a_frozen_wallet_uses_no_cap_and_its_replay_counts_once(server: LiveServer) -> None:
    """Cap 2 rewards a day, 10 each, and a daily budget: the wallet is frozen, the event fails; unfrozen, the event
    is replayed and issues 10. A second reward the same day still fits under the cap (the failed attempt used
    none of it), a third is skipped; the budget consumed what the wallet holds, 20."""
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        asset = ok(http.post("/assets", json={"name": "Stamps", "symbol": "STP", "type": "points", "decimals": 0}))
        ok(http.post(f"/assets/{asset['id']}/activate"))
        body = {"name": "Stamps", "asset_id": asset["id"], "budget": {"period": "day", "max_amount": "1000"}}
        shop = ok(http.post("/reward-programs", json=body), 201)
        rule = {
            "program_id": shop["id"],
            "event_type": "visit",
            "limits": [{"per": "customer", "period": "day", "max_count": 2}],
            "actions": [{"type": "issue", "amount": {"fixed": "10"}}],
        }
        ok(http.post("/reward-rules", json=rule), 201)
        ok(http.post(f"/reward-programs/{shop['id']}/publish"), 201)
        customer = ok(http.post("/customers", json={"external_id": "regular"}), 201)
        wallet = ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
        at = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()  # every visit on the same day

        def visit(name: str) -> dict[str, Any]:
            sent = {"type": "visit", "external_event_id": name, "customer_id": "regular", "occurred_at": at}
            return _settled(http, ok(http.post("/events", json={**sent, "data": {}}), 202)["id"])

        def executions(event: dict[str, Any]) -> list[tuple[str, str, str | None]]:
            found = ok(http.get("/reward-executions", params={"event_id": event["id"], "limit": 10}))
            return [(e["status"], e["amount"], e["error_code"]) for e in found]

        ok(http.post(f"/wallets/{wallet['id']}/freeze"))
        first = visit("visit-1")
        assert (first["status"], first["error"]["code"]) == ("failed", "wallet_frozen"), first
        assert executions(first) == [("failed", "10", "wallet_frozen")]
        ok(http.post(f"/wallets/{wallet['id']}/unfreeze"))
        replayed = ok(http.post(f"/events/{first['id']}/replay"))
        assert replayed["status"] == "processed", replayed
        assert executions(first) == [("issued", "10", None)]
        assert executions(visit("visit-2")) == [("issued", "10", None)]  # the cap's second reward
        assert executions(visit("visit-3"))[0][:2] == ("limited", "0")  # the cap is reached: two rewards
        (balance,) = ok(http.get(f"/wallets/{wallet['id']}/balances"))["balances"]
        assert balance["balance"] == "20"
        (today,) = ok(http.get(f"/reward-programs/{shop['id']}"))["budget_consumption"]
        assert today["consumed"] == balance["balance"] == "20"
    stop_and_verify(server)
    rule_counter = next(row for row in _usage(server.db) if row[0].startswith("rule:"))
    assert rule_counter[2:] == (20, 2)  # 20 given in 2 rewards: the failed attempt is nowhere


def test_in_one_batch_a_refused_reward_leaves_the_budget_to_the_next(world: World) -> None:
    """A daily budget of 10 and two rewards of 10 decided in one batch: the first goes to a frozen wallet and is
    refused, so the second, another customer's, gets the budget (it used to be cut to nothing by a reward that
    was never issued)."""
    asset = world.asset(decimals=0)
    body = {"name": "Stamps", "asset_id": asset.id, "budget": {"period": "day", "max_amount": "10"}}
    shop = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    world.rule(shop, "visit", amount={"fixed": "10"})
    programmes.publish(world.db, world.scope, shop.id)
    frozen, fine = world.wallet(world.customer("frozen")), world.wallet(world.customer("fine"))
    customers.freeze_wallet(world.db, world.scope, frozen.id)
    at = datetime.now(UTC) - timedelta(minutes=1)
    for name in ("frozen", "fine"):
        sent = {"type": "visit", "external_event_id": f"visit-{name}", "customer_id": name, "occurred_at": at}
        submit_event(world.db, world.scope, validate(rq.EventCreate, {**sent, "data": {}}))
    report = process_all(world.db)
    assert (report.issued, report.refused, report.failed) == (1, 1, 1)
    rows = world.db.reader().execute(
        "SELECT external_event_id, status, amount_minor, error_code, usage_keys FROM reward_executions "
        "ORDER BY external_event_id"
    )
    (refused, issued) = sorted(rows.fetchall(), key=lambda row: row[0] != "visit-frozen")
    assert refused[1:] == ("failed", 10, "wallet_frozen", None)  # counted in no counter
    assert issued[1:4] == ("issued", 10, None)
    held = world.db.reader().execute("SELECT balance_minor FROM balances WHERE account_id = ?", [fine.id])
    assert held.fetchone() == (10,)
    shown = programmes.get_programme(world.db, world.scope, shop.id).budget_consumption
    assert [(c.consumed, c.remaining) for c in shown] == [("10", "0")]


def test_the_replay_gives_back_the_grant_of_a_reward_the_ceiling_refused(tmp_path: Path) -> None:
    """A ceiling of 70 and a daily budget of 100: alice's 80 is refused by the ceiling and counts nowhere, so bob's
    50 fits the budget whole, live (one batch) and in the replay alike."""
    definition = programme(asset={"supply_ceiling": "70"}, info={"budget": {"period": "day", "max_amount": "100"}})
    outcome, _ = agree(tmp_path, definition, [order("o1", "alice", 0, 80), order("o2", "bob", 1, 50)])
    seen = by_event(outcome)
    assert seen["o1"][1:3] == ("failed", "asset_supply_exhausted")
    assert seen["o2"][:2] == (50, "issued")
