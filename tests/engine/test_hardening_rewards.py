"""Issue 14, "Rewards must never be lost" and "Customers named by id or by external_id" (in process, real DuckDB).

A failed event's replay evaluates the versions that were live for it and issues exactly what is missing; sums
past int64 are exact; a poisoned event is isolated without processing everything one by one, and its tenant sees
a registered code and a fixed message, never the exception's text; an external_id never shadows a customer id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.engine import event_matching, event_processing
from rewards_lab.service import customers, event_intake, event_queries, ledger, organizations, programmes
from rewards_lab.store.interfaces import Repositories
from rewards_lab.store.uow import reader, unit_of_work
from tests.conftest import World

BIG = 10**18 - 1  # the largest amount one action may issue (MAX_AMOUNT_MINOR)
SECRET = "SECRET-internal-detail /srv/rewards.duckdb"


def _event(external_id: str, customer: str, event_type: str = "order.completed", **data: Any) -> rq.EventCreate:
    body = {"type": event_type, "external_event_id": external_id, "customer_id": customer, "data": data}
    return validate(rq.EventCreate, body)


def _balance(world: World, wallet_id: str, asset_id: str) -> str:
    found = [b.balance for b in ledger.wallet_balances(world.db, world.scope, wallet_id).balances]
    assets = [b.asset_id for b in ledger.wallet_balances(world.db, world.scope, wallet_id).balances]
    return dict(zip(assets, found, strict=True)).get(asset_id, "0")


def _fixed_programme(
    world: World, asset_id: str, amount: str, actions: int = 1, event_type: str = "order.completed"
) -> str:
    programme = programmes.create_programme(
        world.db, world.scope, validate(rq.ProgrammeCreate, {"name": f"P {event_type}", "asset_id": asset_id})
    )
    body = {
        "program_id": programme.id,
        "event_type": event_type,
        "actions": [{"type": "issue", "amount": {"fixed": amount}}] * actions,
    }
    programmes.create_rule(world.db, world.scope, validate(rq.RuleCreate, body))
    return programmes.publish(world.db, world.scope, programme.id).version.id


class _Transactions:
    """Counts the units of work the event service opens (each is one database transaction)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = event_processing.unit_of_work

        def counted(database: Any) -> AbstractContextManager[Repositories]:
            self.count += 1
            return original(database)

        monkeypatch.setattr(event_processing, "unit_of_work", counted)


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bool]]:
    """While `armed`, evaluating any event whose data has `poison: true` raises an unexpected error."""
    switch = {"armed": True}

    def poisoned(rules: Any, batch: list[tuple[str, Any]]) -> Any:
        if switch["armed"] and any(isinstance(data, dict) and data.get("poison") is True for _, data in batch):
            raise RuntimeError(SECRET)
        return evaluate(rules, batch)

    monkeypatch.setattr(event_matching, "evaluate", poisoned)
    yield switch


# 2. sums past int64 ----------------------------------------------------------------------------------------
def test_a_batch_whose_sums_pass_int64_is_issued_exactly_in_one_transaction(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten actions of 10**18 - 1 per event: one event's issuance alone passes 2**63 (it failed with the raw
    "Python int too large to convert to C long" and the batch fell back to one transaction per event)."""
    customer = world.customer("whale")
    wallet = world.wallet(customer)
    asset = world.asset(decimals=0, symbol="BIG")
    _fixed_programme(world, asset.id, str(BIG), actions=10)
    for index in range(3):
        event_intake.submit_event(world.db, world.scope, _event(f"w-{index}", "whale"))
    transactions = _Transactions(monkeypatch)
    report = event_processing.process_pending(world.db)
    assert (report.processed, report.failed, report.issued, report.refused) == (3, 0, 30, 0)
    assert transactions.count == 1  # the batch was not split
    assert _balance(world, wallet.id, asset.id) == str(30 * BIG)
    assert 30 * BIG > 2**64
    page = event_queries.list_events(world.db, world.scope, PageRequest(limit=10)).data
    assert {e.status for e in page} == {"processed"} and all(e.error is None for e in page)


# 1 + 2: a poisoned event is isolated, shows a fixed message, and its replay issues what it should ------------
def test_a_poisoned_event_is_isolated_and_its_replay_issues_exactly_once(
    world: World, poison: dict[str, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, scope = world.db, world.scope
    customer = world.customer("shopper")
    wallet = world.wallet(customer)
    asset = world.asset()
    version_id = _fixed_programme(world, asset.id, "2.00")
    other_org = organizations.create_organization(db, "Other tenant")
    other = World(db, Scope(other_org.id, "sandbox"))
    other_wallet = other.wallet(other.customer("neighbour"))
    other_asset = other.asset()
    _fixed_programme(other, other_asset.id, "1.00")

    for index in range(60):
        data = {"poison": True} if index == 17 else {"n": index}
        event_intake.submit_event(db, scope, _event(f"a-{index:02d}", "shopper", **data))
    for index in range(20):
        event_intake.submit_event(db, other.scope, _event(f"b-{index:02d}", "neighbour"))
    transactions = _Transactions(monkeypatch)
    report = event_processing.process_pending(db, 1000)
    assert (report.processed, report.failed) == (79, 1)
    # one batch, then the poisoned tenant's events bisected: far fewer transactions than one per event (82)
    assert transactions.count <= 30, transactions.count
    assert _balance(world, wallet.id, asset.id) == "118.00"
    assert _balance(other, other_wallet.id, other_asset.id) == "20.00"

    poisoned = event_queries.list_events(db, scope, PageRequest(limit=10), status="failed").data
    assert [e.external_event_id for e in poisoned] == ["a-17"]
    failed = poisoned[0]
    assert failed.error is not None and failed.error.code == "internal_error"
    assert failed.error.message == event_processing.INTERNAL_FAILURE_MESSAGE and "SECRET" not in failed.error.message
    attempt = reader(db).events.to_process(scope, failed.id)
    assert attempt is not None and json.loads(attempt.evaluated_versions or "") == [version_id]  # recorded when planned

    # The cause goes away; the replay evaluates the version that was live and issues its reward, once.
    poison["armed"] = False
    replayed = event_processing.replay_event(db, scope, failed.id)
    assert replayed.status == "processed" and replayed.error is None
    executions = event_queries.list_executions(db, scope, PageRequest(), event_id=failed.id).data
    assert [(e.status, e.amount, e.program_version) for e in executions] == [("issued", "2.00", 1)]
    assert _balance(world, wallet.id, asset.id) == "120.00"
    with pytest.raises(ServiceError) as caught:
        event_processing.replay_event(db, scope, failed.id)
    assert caught.value.code == "event_not_replayable"
    assert _balance(world, wallet.id, asset.id) == "120.00"


def test_an_event_that_fails_alone_in_its_batch_keeps_its_versions(world: World, poison: dict[str, bool]) -> None:
    customer = world.customer("solo")
    wallet = world.wallet(customer)
    asset = world.asset()
    version_id = _fixed_programme(world, asset.id, "3.00")
    event = event_intake.submit_event(world.db, world.scope, _event("solo-1", "solo", poison=True))
    assert event_processing.process_all(world.db).failed == 1
    row = reader(world.db).events.get(world.scope, event.id)
    attempt = reader(world.db).events.to_process(world.scope, event.id)
    assert row is not None and row.error_message == event_processing.INTERNAL_FAILURE_MESSAGE
    assert attempt is not None and json.loads(attempt.evaluated_versions or "") == [version_id]
    poison["armed"] = False
    assert event_processing.replay_event(world.db, world.scope, event.id).status == "processed"
    assert _balance(world, wallet.id, asset.id) == "3.00"


@pytest.mark.parametrize("recorded", [None, "[]"])
def test_a_failed_event_without_recorded_versions_is_evaluated_at_replay(
    world: World, poison: dict[str, bool], recorded: str | None
) -> None:
    """Rows failed before this fix carry "[]" (or nothing): the replay resolves the live versions again rather
    than evaluating none and calling the event processed with nothing issued."""
    customer = world.customer("legacy")
    wallet = world.wallet(customer)
    asset = world.asset()
    _fixed_programme(world, asset.id, "4.00")
    event = event_intake.submit_event(world.db, world.scope, _event("legacy-1", "legacy", poison=True))
    event_processing.process_all(world.db)
    with unit_of_work(world.db) as uow:
        uow.con.execute("UPDATE events SET evaluated_versions = ? WHERE id = ?", [recorded, event.id])
    poison["armed"] = False
    assert event_processing.replay_event(world.db, world.scope, event.id).status == "processed"
    assert _balance(world, wallet.id, asset.id) == "4.00"
    executions = event_queries.list_executions(world.db, world.scope, PageRequest(), event_id=event.id).data
    assert [e.status for e in executions] == ["issued"]


def test_a_replay_issues_only_the_missing_actions_and_records_no_duplicate(world: World) -> None:
    """A failed replay (still refused) keeps its executions keyed by (event, version, rule, action): the final
    replay upserts them, never a second issued row for one key."""
    db, scope = world.db, world.scope
    customer = world.customer("twice")
    world.wallet(customer)
    asset = world.asset(supply_ceiling="5.00")
    _fixed_programme(world, asset.id, "3.00", actions=2)
    event = event_intake.submit_event(db, scope, _event("t-1", "twice"))
    event_processing.process_all(db)
    assert event_queries.get_event(db, scope, event.id).status == "failed"  # 3.00 issued, the second 3.00 refused
    assert event_processing.replay_event(db, scope, event.id).status == "failed"  # still no room under the ceiling
    rows = (
        reader(db)
        .con.execute(
            "SELECT action_index, status, count(*) FROM reward_executions WHERE event_id = ? GROUP BY ALL ORDER BY 1",
            [event.id],
        )
        .fetchall()
    )
    assert rows == [(0, "issued", 1), (1, "failed", 1)]


# 18. customers named by id or by external_id ----------------------------------------------------------------
def test_an_external_id_shaped_like_a_customer_id_is_refused(world: World) -> None:
    victim = world.customer("victim")
    for shaped in (victim.id, "cus_" + "0" * 32, "cus_" + "ab" * 16):
        with pytest.raises(ServiceError) as caught:
            world.customer(shaped)
        assert caught.value.code == "field_invalid" and caught.value.details["field"] == "external_id"
    # not the id shape: accepted as before (other prefixes, other lengths, upper case)
    for fine in ("cus_123", "wal_" + "0" * 32, "CUS_" + "AB" * 16, "customer-7"):
        assert world.customer(fine).external_id == fine


def test_an_id_always_names_its_customer_even_if_an_older_external_id_equals_it(world: World) -> None:
    """A row written before the refusal (external_id equal to another customer's id): the id wins everywhere,
    on the event path, the wallet path and the filters; the other customer is still found by its own id."""
    db, scope = world.db, world.scope
    victim = world.customer("victim")
    victim_wallet = world.wallet(victim)
    with unit_of_work(db) as uow:
        squatter = uow.customers.add(scope, "cus_" + "f" * 32, victim.id, None, None)
    squatter_wallet = world.wallet(customers.get_customer(db, scope, squatter.id))
    asset = world.asset()
    _fixed_programme(world, asset.id, "7.00")
    event_intake.submit_event(db, scope, _event("v-1", victim.id))
    event_processing.process_all(db)
    assert _balance(world, victim_wallet.id, asset.id) == "7.00"
    assert _balance(world, squatter_wallet.id, asset.id) == "0"
    assert customers.get_customer(db, scope, victim.id).id == victim.id
    executions = event_queries.list_executions(db, scope, PageRequest(), customer_id=victim.id).data
    assert [e.customer_id for e in executions] == [victim.id]


def test_events_are_listed_by_customer_whichever_name_each_event_used(world: World) -> None:
    db, scope = world.db, world.scope
    customer = world.customer("named-twice")
    other = world.customer("someone-else")
    by_id = event_intake.submit_event(db, scope, _event("n-1", customer.id))
    by_external = event_intake.submit_event(db, scope, _event("n-2", "named-twice"))
    event_intake.submit_event(db, scope, _event("n-3", other.id))
    unknown = event_intake.submit_event(db, scope, _event("n-4", "not-yet-a-customer"))
    for reference in (customer.id, "named-twice"):
        listed = event_queries.list_events(db, scope, PageRequest(), customer_id=reference).data
        assert sorted(e.id for e in listed) == sorted([by_id.id, by_external.id])
    listed = event_queries.list_events(db, scope, PageRequest(), customer_id="not-yet-a-customer").data
    assert [e.id for e in listed] == [unknown.id]  # no such customer: the reference as sent, as before
