"""A programme's bound on a live event's age (issue 27, item 4) beyond the HTTP API: programme files (absent: the
default, null: no bound, written so), the Lab, push (plan, apply, verify) against a real `rewards-lab serve`,
programmes stored before the setting existed (no bound), the in-process batch intake refusing future events one by
one, and replay equal to the live engine for a history whose events are received when they occurred."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.programme_file import (
    ProgrammeDefinition,
    dumps_programme,
    loads_programme,
    parse_programme,
)
from rewards_lab.contract.validation import validate
from rewards_lab.domain.settings import NO_SPENDING
from rewards_lab.engine import event_processing
from rewards_lab.lab.push import make_plan, push
from rewards_lab.lab.push_verify import sample_time, verify
from rewards_lab.lab.workbench import Lab
from rewards_lab.replay.engine import replay
from rewards_lab.service import event_intake, event_queries, programmes
from rewards_lab.store.uow import unit_of_work
from tests.conftest import World
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.replay_live import replayed_outcome, run_live

ORDER = "order.completed"
FILE: dict[str, Any] = {
    "programme": {"name": "Aged", "limits": [{"per": "customer", "period": "month", "max_amount": "100"}]},
    "asset": {"name": "Aged points", "symbol": "AGE", "type": "points", "decimals": 0},
    "rules": [
        {
            "event_type": ORDER,
            "conditions": [{"field": "amount", "operator": "gte", "value": 10}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}],
        }
    ],
}


def definition(tag: str = "", **programme: Any) -> ProgrammeDefinition:
    data = copy.deepcopy(FILE)
    data["asset"]["symbol"] += tag
    data["programme"]["name"] += tag
    data["programme"].update(programme)
    return parse_programme(data)


# files ----------------------------------------------------------------------------------------------------------
def test_a_file_without_the_setting_means_the_default_and_is_written_as_before() -> None:
    plain = definition()
    assert plain.programme.max_event_age_days == 30
    assert "max_event_age_days" not in dumps_programme(plain)
    assert loads_programme(dumps_programme(plain)) == plain


def test_a_file_keeps_an_explicit_bound_and_null_for_backfills() -> None:
    seven = definition(max_event_age_days=7)
    assert '"max_event_age_days": 7' in dumps_programme(seven)
    assert loads_programme(dumps_programme(seven)).programme.max_event_age_days == 7
    backfill = definition(max_event_age_days=None)
    assert backfill.programme.max_event_age_days is None
    text = dumps_programme(backfill)
    assert '"max_event_age_days": null' in text  # absent would read back as the default
    assert loads_programme(text).programme.max_event_age_days is None
    for bad in (0, 36_601, 2.5, "7"):
        with pytest.raises(ServiceError) as caught:
            definition(max_event_age_days=bad)
        assert caught.value.details["field"] == "programme.max_event_age_days", caught.value.details


def test_the_lab_loads_sets_and_exports_the_bound() -> None:
    with Lab() as lab:
        backfill = lab.load(definition("L", max_event_age_days=None))
        assert backfill.definition().programme.max_event_age_days is None
        seven = lab.load(definition("S", max_event_age_days=7))
        assert seven.schedule().max_event_age_days == 7
        seven.publish()
        assert seven.set_spending(max_event_age_days=None).max_event_age_days is None
        assert seven.definition("live").programme.max_event_age_days == 7
        assert seven.definition().programme.max_event_age_days is None


# push ------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push_age") / "push.duckdb", "Acme")
    yield server
    stop_and_verify(server)


def _client(live: LiveServer) -> RewardsClient:
    return RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox")


def _published(api: RewardsClient, name: str) -> list[int | None]:
    (programme,) = [p for p in api.iter_programmes() if p.name == name]
    return [v.max_event_age_days for v in api.iter_versions(programme.id) if v.status == "published"]


def test_push_creates_plans_and_changes_the_bound_and_verify_compares_amounts(live: LiveServer) -> None:
    with _client(live) as api:
        seven = definition("P", max_event_age_days=7)
        push(seven, api)
        assert _published(api, "AgedP") == [7]
        again = make_plan(seven, api)
        assert not again.changes, again.text()
        assert any("max event age 7 days" in line for line in again.matches), again.matches
        backfill = definition("P", max_event_age_days=None)
        plan = make_plan(backfill, api)
        assert [step.kind for step in plan.steps] == ["update_spending", "publish"], plan.text()
        assert "max event age none" in plan.text()
        push(backfill, api)
        assert _published(api, "AgedP") == [7, None]
        assert not make_plan(backfill, api).changes
        default = definition("D")  # the file says nothing: the service's default, nothing sent
        push(default, api)
        assert _published(api, "AgedD") == [30]
        assert not make_plan(default, api).changes
        # the fixed sample time (June 2026) is older than 30 days: verify simulates at a recent time instead, so
        # the amounts are compared, not hidden behind event_too_old
        report = verify(default, api)
        assert report.ok and report.checks > 0, report.text()
        assert not any("event_too_old" in d.live for d in report.differences)


def test_verify_expects_event_too_old_where_the_window_is_all_older_than_the_bound(live: LiveServer) -> None:
    ended = definition("W", starts_at="2020-01-01T00:00:00Z", ends_at="2020-02-01T00:00:00Z")
    with _client(live) as api:
        push(ended, api)
        report = verify(ended, api)
        assert report.ok and report.checks > 0, report.text()
        # both sides said event_too_old: the live side's simulation at the sample time does
        (programme,) = [p for p in api.iter_programmes() if p.name == "AgedW"]
        at = sample_time(ended).isoformat()
        simulated = api.simulate_programme(programme.id, {"type": ORDER, "amount": 20}, version="live", occurred_at=at)
        (action,) = simulated.rules[0].actions
        assert (action.amount, action.error_code) == ("0", "event_too_old"), action


# programmes stored before the setting, and the in-process batch intake ----------------------------------------
def test_a_programme_stored_before_the_setting_has_no_bound(world: World) -> None:
    asset = world.asset()
    world.wallet(world.customer("old-customer"))
    programme = world.programme(asset)
    world.rule(programme)
    with unit_of_work(world.db) as uow:  # as stored before issue 27: no max_event_age_days in its settings
        row = uow.programmes.get(world.scope, programme.id)
        assert row is not None
        uow.programmes.set_spending(world.scope, row.draft_version_id, NO_SPENDING)  # stored as NULL
    assert programmes.get_programme(world.db, world.scope, programme.id).max_event_age_days is None
    programmes.publish(world.db, world.scope, programme.id)
    body = {
        "type": ORDER,
        "external_event_id": "e-2001",
        "customer_id": "old-customer",
        "occurred_at": "2001-01-01T00:00:00Z",
    }
    event = event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, {**body, "data": {}}))
    event_processing.process_all(world.db)
    (execution,) = event_queries.list_executions(world.db, world.scope, PageRequest(limit=10), event_id=event.id).data
    assert (execution.status, execution.error_code, execution.amount) == ("issued", None, "10.00")


def test_an_event_too_old_is_processed_even_for_a_customer_without_a_wallet(world: World) -> None:
    """Nothing is issued, so nothing needs a wallet: the event is processed (not failed `wallet_not_found`)."""
    programme = world.programme(world.asset())
    world.rule(programme)
    programmes.publish(world.db, world.scope, programme.id)
    world.customer("walletless")
    old = (datetime.now(UTC) - timedelta(days=45)).isoformat()
    body = {"type": ORDER, "external_event_id": "w-1", "customer_id": "walletless", "occurred_at": old}
    event = event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, body))
    event_processing.process_all(world.db)
    assert event_queries.get_event(world.db, world.scope, event.id).status == "processed"
    (execution,) = event_queries.list_executions(world.db, world.scope, PageRequest(limit=10), event_id=event.id).data
    assert (execution.status, execution.error_code, execution.wallet_id) == ("limited", "event_too_old", None)


def test_the_batch_intake_refuses_each_future_event_and_stores_the_rest(world: World) -> None:
    now = datetime.now(UTC)
    times = [now, now + timedelta(hours=2), now - timedelta(days=400), now + timedelta(minutes=4), None]
    bodies = [
        validate(
            rq.EventCreate,
            {"type": ORDER, "external_event_id": f"b-{n}", "customer_id": "c", "occurred_at": at},
        )
        for n, at in enumerate(times)
    ]
    results = event_intake.submit_events(world.db, world.scope, bodies)
    refused = [r for r in results if isinstance(r, ServiceError)]
    assert [r.details["field"] for r in refused] == ["occurred_at"]
    assert isinstance(results[1], ServiceError) and results[1].code == "field_invalid"
    stored = event_queries.list_events(world.db, world.scope, PageRequest(limit=10)).data
    assert sorted(e.external_event_id for e in stored) == ["b-0", "b-2", "b-3", "b-4"]


# replay equal to live -----------------------------------------------------------------------------------------
def _history() -> list[dict[str, Any]]:
    """Orders over three months (far older than a day by now): alice twice a month, bob once."""
    base = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    stream = []
    for month in range(3):
        for n, (customer, amount) in enumerate((("alice", 70), ("alice", 60), ("bob", 40))):
            at = base + timedelta(days=30 * month, hours=n)
            name = f"o-{month}-{n}"
            stream.append(
                {
                    "external_event_id": name,
                    "type": ORDER,
                    "customer_id": customer,
                    "occurred_at": at,
                    "data": {"amount": amount},
                }
            )
    return stream


@pytest.mark.parametrize("bound", [1, 30, None])
def test_replay_equals_live_when_each_event_is_received_when_it_occurred(tmp_path: Path, bound: int | None) -> None:
    """However tight the bound, no event of a history is too old when it is received as it occurs: live (each
    event received at its occurred_at) and replay issue the same, the caps cut the same."""
    file = definition(max_event_age_days=bound)
    live_run = run_live(tmp_path / "live.duckdb", file, _history(), [])
    result = replay(pd.DataFrame(live_run.submitted), file, customers=live_run.customers)
    assert replayed_outcome(result).sorted() == live_run.outcome.sorted()
    assert all(row[5] is None for row in live_run.outcome.rows), live_run.outcome.rows  # no event_too_old
    assert sum(live_run.outcome.balances.values()) == 3 * (100 + 40)  # alice capped at 100 a month


def test_the_same_history_received_today_is_too_old_live(world: World) -> None:
    """The control: received now, the history's events are older than a day and the live engine rewards none."""
    asset = world.asset(decimals=0, symbol="AGE")
    body = {"name": "Aged", "asset_id": asset.id, "max_event_age_days": 1}
    programme = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    world.rule(programme, amount={"fixed": "5"})
    programmes.publish(world.db, world.scope, programme.id)
    for name in ("alice", "bob"):
        world.wallet(world.customer(name))
    bodies = [validate(rq.EventCreate, event) for event in _history()]
    assert not any(isinstance(x, ServiceError) for x in event_intake.submit_events(world.db, world.scope, bodies))
    event_processing.process_all(world.db)
    found = event_queries.list_executions(world.db, world.scope, PageRequest(limit=50)).data
    assert len(found) == 9 and {(e.status, e.error_code, e.amount) for e in found} == {
        ("limited", "event_too_old", "0")
    }
    assert {e.status for e in event_queries.list_events(world.db, world.scope, PageRequest(limit=50)).data} == {
        "processed"
    }
