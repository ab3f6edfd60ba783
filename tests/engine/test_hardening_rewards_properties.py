"""Issue 14: the overflow boundary. Amounts near the per-amount limit (10**18 - 1, just under 2**60) across many
postings and events of one batch, balances past 2**63: the batch path decides exactly as one posting at a time,
and the stored balances are the exact sums (they were built as int64 and overflowed)."""

from __future__ import annotations

import copy
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.ledger import Posting
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.posting_decision import decide_batch
from rewards_lab.domain.posting_policy import MAX_ISSUED_MINOR, AssetState, LedgerState, PostingRequest
from rewards_lab.domain.posting_whole import decide_whole
from rewards_lab.engine import event_processing
from rewards_lab.engine.postings import apply_postings
from rewards_lab.service import event_intake, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.uow import reader, unit_of_work
from rewards_lab.store.verification import verify_ledger
from tests.conftest import World

WALLETS = ["wal_a", "wal_b", "wal_c"]
INT64_MAX = 2**63 - 1
near_limit = st.one_of(
    st.integers(MAX_AMOUNT_MINOR - 1_000, MAX_AMOUNT_MINOR),
    st.integers(1, 1_000),
    st.integers(MAX_AMOUNT_MINOR + 1, MAX_AMOUNT_MINOR + 10),  # over the per-amount limit: refused
    st.just(INT64_MAX),
)
big_balance = st.one_of(st.integers(0, 10), st.integers(INT64_MAX - 10**18, INT64_MAX + 10**18), st.just(2**70))


@st.composite
def states(draw: st.DrawFn) -> LedgerState:
    issued = draw(st.one_of(st.integers(0, 2**64), st.integers(MAX_ISSUED_MINOR - 3 * 10**18, MAX_ISSUED_MINOR)))
    asset = AssetState("active", 0, None, "iss", "red", issued)
    balances: dict[tuple[str, str], int] = {(w, "ast"): draw(big_balance) for w in WALLETS}
    balances[("iss", "ast")] = -issued
    return LedgerState({"ast": asset}, set(WALLETS), {}, balances)


@st.composite
def batches(draw: st.DrawFn) -> list[PostingRequest]:
    kind = draw(st.sampled_from(["reward", "issue", "transfer", "mixed"]))
    size = draw(st.integers(1, 40))
    batch = []
    for index in range(size):
        this = kind if kind != "mixed" else draw(st.sampled_from(["reward", "transfer", "redemption"]))
        wallet = draw(st.sampled_from(WALLETS))
        to_wallet = draw(st.sampled_from([w for w in WALLETS if w != wallet])) if this == "transfer" else None
        batch.append(PostingRequest(f"txn_{index:03d}", this, "ast", draw(near_limit), wallet, to_wallet))
    return batch


def _one_by_one(state: LedgerState, batch: list[PostingRequest]) -> tuple[list[Any], list[tuple[str, str]]]:
    accepted, refused = [], []
    for request in batch:
        try:
            accepted.append(state.decide(request))
        except ServiceError as error:
            refused.append((request.transaction_id, error.code))
    return accepted, refused


@settings(max_examples=300, deadline=None)
@given(state=states(), batch=batches())
def test_the_batch_paths_decide_as_one_by_one_at_the_overflow_boundary(
    state: LedgerState, batch: list[PostingRequest]
) -> None:
    expected = copy.deepcopy(state)
    expected_accepted, expected_refused = _one_by_one(expected, batch)
    whole_state = copy.deepcopy(state)
    whole = decide_whole(whole_state, batch)
    if whole is not None:  # accepted whole: exactly when one by one accepts everything, with the same balances
        assert expected_refused == [] and whole.postings() == expected_accepted
        assert whole_state.balances == expected.balances and whole_state.outstanding == expected.outstanding
    accepted, refused = _decided(state, batch)
    assert accepted == expected_accepted
    assert [(request.transaction_id, error.code) for request, error in refused] == expected_refused
    assert state.balances == expected.balances and state.outstanding == expected.outstanding
    assert -state.balances[("iss", "ast")] <= MAX_ISSUED_MINOR


def test_amounts_past_the_limits_are_refused_as_amount_too_large() -> None:
    asset = AssetState("active", 0, None, "iss", "red", 0)
    state = LedgerState({"ast": asset}, {"wal_a"}, {}, {("iss", "ast"): -(MAX_ISSUED_MINOR - 5)})
    with pytest.raises(ServiceError) as caught:
        state.decide(PostingRequest("t1", "reward", "ast", 6, "wal_a"))
    assert caught.value.code == "amount_too_large" and caught.value.details["field"] == "amount"
    state.decide(PostingRequest("t2", "reward", "ast", 5, "wal_a"))  # exactly at the limit: accepted
    with pytest.raises(ServiceError) as caught:
        state.decide(PostingRequest("t3", "transfer", "ast", MAX_AMOUNT_MINOR + 1, "wal_a", "wal_b"))
    assert caught.value.code == "amount_too_large"


# the store: a batch against one tenant, the same postings one per transaction against another ------------------
def _tenant(db: Database, name: str, ceiling: str | None) -> tuple[Scope, list[str], list[str]]:
    org = organizations.create_organization(db, name)
    world = World(db, Scope(org.id, "sandbox"))
    wallets = [world.wallet(world.customer(f"c{i}")).id for i in range(3)]
    open_asset = world.asset(decimals=0, symbol="OPEN").id
    capped = world.asset(decimals=0, symbol="CAP", **({"supply_ceiling": ceiling} if ceiling else {})).id
    return world.scope, wallets, [open_asset, capped]


postings = st.lists(
    st.tuples(
        st.sampled_from(["issue", "issue", "transfer", "redemption"]),
        st.integers(0, 1),  # asset
        st.integers(0, 2),  # wallet
        st.integers(1, 2),  # offset of the receiving wallet (transfers)
        st.one_of(st.integers(MAX_AMOUNT_MINOR - 10, MAX_AMOUNT_MINOR), st.integers(1, 10**9)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(postings, min_size=1, max_size=3), ceiling=st.sampled_from([None, str(MAX_AMOUNT_MINOR)]))
def test_stored_balances_are_exact_past_int64_and_equal_one_transaction_per_posting(
    rounds: list[list[tuple[str, int, int, int, int]]], ceiling: str | None
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Database(Path(folder) / "ledger.duckdb")
        try:
            batched = _tenant(db, "batched", ceiling)
            single = _tenant(db, "single", ceiling)
            outcomes: dict[str, list[str | None]] = {"batched": [], "single": []}
            for round_ in rounds:
                for name, (scope, wallets, assets) in (("batched", batched), ("single", single)):
                    requests = [
                        PostingRequest(
                            new_id("transaction"),
                            kind,  # type: ignore[arg-type]
                            assets[asset],
                            amount,
                            wallets[wallet],
                            wallets[(wallet + offset) % 3] if kind == "transfer" else None,
                        )
                        for kind, asset, wallet, offset, amount in round_
                    ]
                    groups = [requests] if name == "batched" else [[request] for request in requests]
                    for group in groups:
                        with unit_of_work(db) as uow:
                            outcome = apply_postings(uow, scope, group)
                        refused = {request.transaction_id: error.code for request, error in outcome.rejected}
                        outcomes[name].extend(refused.get(request.transaction_id) for request in group)
            expected, refusals = _model(rounds, None if ceiling is None else int(ceiling))
            assert outcomes["batched"] == outcomes["single"] == refusals
            for scope, wallets, assets in (batched, single):
                stored = reader(db).ledger.balances_of(scope, wallets, assets)
                found = {(wallets.index(w), assets.index(a)): value for (w, a), value in stored.items()}
                assert {k: v for k, v in found.items() if v} == {k: v for k, v in expected.items() if v}
            report = verify_ledger(db.reader())
            assert report.ok, report.problems
        finally:
            db.close()


def _model(
    rounds: list[list[tuple[str, int, int, int, int]]], ceiling: int | None
) -> tuple[dict[tuple[int, int], int], list[str | None]]:
    """Each (wallet, asset)'s exact balance and each posting's refusal, by plain Python arithmetic: issues within
    the capped asset's ceiling, redemptions and transfers within the giver's balance."""
    balances: dict[tuple[int, int], int] = defaultdict(int)
    outstanding = [0, 0]
    caps = [None, ceiling]
    refusals: list[str | None] = []
    for round_ in rounds:
        for kind, asset, wallet, offset, amount in round_:
            cap = caps[asset]
            if kind == "issue":
                if cap is not None and outstanding[asset] + amount > cap:
                    refusals.append("asset_supply_exhausted")
                    continue
                balances[(wallet, asset)] += amount
                outstanding[asset] += amount
            elif balances[(wallet, asset)] < amount:
                refusals.append("insufficient_balance")
                continue
            else:
                balances[(wallet, asset)] -= amount
                if kind == "transfer":
                    balances[((wallet + offset) % 3, asset)] += amount
                else:
                    outstanding[asset] -= amount
            refusals.append(None)
    return dict(balances), refusals


def test_events_with_many_large_actions_in_one_batch_equal_one_event_per_batch(tmp_path: Path) -> None:
    """Twelve events, each with ten actions of 10**18 - 1 against a capped asset and an open one: processed in
    one batch and one event per batch (another database), the executions' statuses and balances are equal."""
    results = []
    for batch_size in (1000, 1):
        db = Database(tmp_path / f"events-{batch_size}.duckdb")
        try:
            org = organizations.create_organization(db, "o")
            world = World(db, Scope(org.id, "sandbox"))
            wallet = world.wallet(world.customer("whale")).id
            open_asset = world.asset(decimals=0, symbol="OPEN")
            capped = world.asset(decimals=0, symbol="CAP", supply_ceiling=str(MAX_AMOUNT_MINOR))
            for asset, amount in ((open_asset, MAX_AMOUNT_MINOR), (capped, MAX_AMOUNT_MINOR // 7)):
                programme = programmes.create_programme(
                    db, world.scope, validate(rq.ProgrammeCreate, {"name": asset.symbol, "asset_id": asset.id})
                )
                rule = {
                    "program_id": programme.id,
                    "event_type": "jackpot.won",
                    "actions": [{"type": "issue", "amount": {"fixed": str(amount)}}] * 10,
                }
                programmes.create_rule(db, world.scope, validate(rq.RuleCreate, rule))
                programmes.publish(db, world.scope, programme.id)
            for index in range(12):
                body = {"type": "jackpot.won", "external_event_id": f"j-{index:02d}", "customer_id": "whale"}
                event_intake.submit_event(db, world.scope, validate(rq.EventCreate, body))
            event_processing.process_all(db, batch_size)
            statuses = (
                reader(db)
                .con.execute(
                    "SELECT e.external_event_id, x.action_index, a.symbol, x.status, x.error_code "
                    "FROM reward_executions x JOIN events e ON e.id = x.event_id "
                    "JOIN assets a ON a.id = x.asset_id ORDER BY 1, 3, 2"
                )
                .fetchall()
            )
            balances = reader(db).ledger.balances_of(world.scope, [wallet], [open_asset.id, capped.id])
            results.append((statuses, sorted(balances.values())))
            report = verify_ledger(db.reader())
            assert report.ok, report.problems
        finally:
            db.close()
    assert results[0] == results[1]
    statuses, balances = results[0]
    assert balances == sorted([120 * MAX_AMOUNT_MINOR, 7 * (MAX_AMOUNT_MINOR // 7)])
    assert {row[4] for row in statuses if row[3] == "failed"} == {"asset_supply_exhausted"}


def _decided(state: LedgerState, batch: list[PostingRequest]) -> tuple[list[Posting], list[tuple[PostingRequest, Any]]]:
    """`decide_batch`'s accepted postings and refusals."""
    decision = decide_batch(state, batch)
    return decision.accepted, decision.rejected
