"""The server's forecast starts from what the ledger holds (issue 31): the asset's outstanding supply when the
window opens is the replay's opening supply, and what customers redeemed in the window is replayed, so the
liability and ceiling guards are not understated. The expected figures come from the lab's own gate
(`forecasting.gate.evaluate`) given the same events, opening supply and redemptions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.contract.validation import validate
from rewards_lab.forecasting.gate import GuardCheck, evaluate
from rewards_lab.service import event_intake, ledger, programme_forecast, programmes
from rewards_lab.service.programme_forecast import evaluate_draft
from rewards_lab.store.uow import snapshot
from tests.conftest import World

GUARDS = [
    {"metric": "liability_delta", "max": "100000"},
    {"metric": "ceiling_exhausted_within_days", "min": 1},
]


def _row(table: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str]]:
    return [(c["metric"], c["draft"], c["published"], c["checked"]) for c in table]


@pytest.mark.parametrize("decimals", [0, 2])
def test_the_forecast_replays_the_windows_redemptions_from_the_opening_supply(world: World, decimals: int) -> None:
    asset = world.asset(decimals=decimals, supply_ceiling="20000")
    buyer = world.customer("buyer")
    wallet = world.wallet(buyer)
    ledger.issue(world.db, world.scope, asset.id, validate(rq.IssueRequest, {**_to(wallet.id, "4000"), "reason": "x"}))
    with world.db.transaction() as con:  # posted long before the window opens
        con.execute("UPDATE transactions SET created_at = created_at - INTERVAL 200 DAY")
    created = programmes.create_programme(
        world.db,
        world.scope,
        validate(rq.ProgrammeCreate, {"name": "Supplied", "asset_id": asset.id, "guards": GUARDS}),
    )
    world.rule(created, amount={"fixed": "700"})
    when = datetime.now(UTC) - timedelta(hours=3)
    rows = []
    for n in range(4):  # the customer named by external id and by id: one customer for the replay too
        body = {"type": "order.completed", "external_event_id": f"o{n}", "customer_id": ["buyer", buyer.id][n % 2]}
        occurred = when + timedelta(minutes=n)
        event_intake.submit_event(
            world.db, world.scope, validate(rq.EventCreate, {**body, "occurred_at": occurred.isoformat()})
        )
        rows.append({**body, "occurred_at": occurred, "data": "{}"})
    spent = validate(rq.RedemptionRequest, {"wallet_id": wallet.id, "amount": "2500", "reference": "shop"})
    ledger.redeem(world.db, world.scope, asset.id, spent)

    with snapshot(world.db) as uow:
        row = uow.assets.get(world.scope, asset.id)
        assert row is not None
        now = datetime.now(UTC)
        assert programme_forecast.opening_supply(uow.con, world.scope, row, now - timedelta(days=90)) == _exact(
            "4000", decimals
        )
        redemptions = programme_forecast.window_redemptions(
            uow.con, world.scope, row, now - timedelta(days=90), now + timedelta(seconds=1)
        )
    assert redemptions.column("customer_id").to_pylist() == [buyer.id]
    assert redemptions.column("amount").to_pylist() == [_exact("2500", decimals)]

    served = evaluate_draft(world.db, world.scope, created.id).result
    assert served.events == 4
    definition = programme_forecast_definition(world, created.id)
    events = pd.DataFrame(rows)
    customers = pd.DataFrame([{"id": buyer.id, "external_id": "buyer"}])
    spent_frame = redemptions.to_pandas()
    lab = evaluate(definition, events, opening_supply="4000", redemptions=spent_frame, customers=customers)
    bare = evaluate(definition, events)
    served_rows = _row([c.model_dump(mode="json") for c in served.checks])
    assert served_rows == _row([_lab_row(c) for c in lab.checks])
    assert served_rows != _row([_lab_row(c) for c in bare.checks])  # opening supply and spending did matter
    # the liability starts from the 4000 outstanding, and the 2500 spent in the window is not liability any more
    liability = next(c for c in served.checks if c.metric == "liability_delta")
    assert liability.draft != _row([_lab_row(c) for c in bare.checks])[0][1]


def _to(wallet_id: str, amount: str) -> dict[str, str]:
    return {"wallet_id": wallet_id, "amount": amount}


def _exact(amount: str, decimals: int) -> str:
    return amount if decimals == 0 else f"{amount}.{'0' * decimals}"


def _lab_row(check: GuardCheck) -> dict[str, Any]:
    """A lab GuardCheck as the server writes its row (figures as the server's decimal strings)."""
    row: dict[str, Any] = programme_forecast._check(check).model_dump(mode="json")
    return row


def programme_forecast_definition(world: World, program_id: str) -> ProgrammeDefinition:
    with snapshot(world.db) as uow:
        programme = uow.programmes.get(world.scope, program_id)
        assert programme is not None
        return programme_forecast.definition_of(uow, world.scope, programme, programme.draft_version_id)


def test_the_opening_supply_counts_against_the_ceiling_guard(world: World) -> None:
    asset = world.asset(decimals=0, supply_ceiling="5000")
    wallet = world.wallet(world.customer("early"))
    ledger.issue(world.db, world.scope, asset.id, validate(rq.IssueRequest, {**_to(wallet.id, "4990"), "reason": "x"}))
    with world.db.transaction() as con:
        con.execute("UPDATE transactions SET created_at = created_at - INTERVAL 200 DAY")
    body = {"name": "Near the ceiling", "asset_id": asset.id, "guards": [GUARDS[1]]}
    created = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, body))
    world.rule(created, amount={"fixed": "1"})
    when = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    for n in range(12):
        event = {"type": "order.completed", "external_event_id": f"n{n}", "customer_id": "early", "occurred_at": when}
        event_intake.submit_event(world.db, world.scope, validate(rq.EventCreate, event))
    (check,) = evaluate_draft(world.db, world.scope, created.id).result.checks
    # 12 to issue on top of 4990 outstanding reach the ceiling of 5000 within the window: exhausted (0 days);
    # from an opening supply of 0 it would never run out
    assert (check.draft, check.passed) == ("0", False)
