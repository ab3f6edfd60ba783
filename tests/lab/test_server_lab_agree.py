"""The lab's gate and the server's gate replay the same definition (issue 31): for an expiring programme, the
guard table push computes from a deployment's history (`lab.push_gate.gate_for`, the published version read back
through `contract.programme_file.definition_of_version`) equals the one the server answers on
`POST /reward-programs/{id}/forecast` over the same stored events."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.forecasting.gate import GateReport, evaluate
from rewards_lab.lab.push import apply, make_plan
from rewards_lab.lab.push_gate import gate_for, published_definition
from rewards_lab.lab.workbench import Lab
from rewards_lab.service.programme_forecast import _check
from tests.live_server import LiveServer, start_server, stop_and_verify

GUARDS = [
    {"metric": "issued", "period": "week", "max": "100000"},
    {"metric": "liability_delta", "max": "100000"},
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("agree") / "agree.duckdb", "Agree")
    yield server
    stop_and_verify(server)


def _definition(amount: str) -> ProgrammeDefinition:
    return parse_programme(
        {
            "programme": {"name": "Expiring", "guards": GUARDS, "expiry": {"after_days": 4}},
            "asset": {"name": "Fading points", "symbol": "FADE", "type": "points", "decimals": 2},
            "rules": [{"event_type": "visit.done", "actions": [{"type": "issue", "amount": {"fixed": amount}}]}],
        }
    )


def _rows(checks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(c["metric"], c["limit"], c["draft"], c["published"], c["checked"], c["passed"]) for c in checks]


def _lab_rows(report: GateReport) -> list[tuple[Any, ...]]:
    return _rows([_check(check).model_dump(mode="json") for check in report.checks])


def test_an_expiring_programme_gets_the_same_guard_table_from_the_lab_and_the_server(
    live: LiveServer, tmp_path: Path
) -> None:
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as client:
        apply(make_plan(_definition("10"), client), client)  # version 1 is live (nothing stored yet: it passes)
        now = datetime.now(UTC)
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
            for n in range(24):  # three customers over the last 24 days: lots expire within the history
                occurred = now - timedelta(days=24 - n, hours=n % 5)
                event = {
                    "type": "visit.done",
                    "external_event_id": f"v{n}",
                    "customer_id": f"c{n % 3}",
                    "occurred_at": occurred.isoformat(),
                }
                assert http.post("/events", json=event).status_code in (200, 201, 202)
        draft = _definition("35")
        apply(make_plan(draft, client), client, publish=False)  # the draft now holds the file
        plan = make_plan(draft, client)
        served = client.forecast_programme(plan.programme.id if plan.programme else "")
    assert served.events == 24 and served.published_version == 1

    history = Lab.history(
        live.base_url,
        served.window_start,
        until=served.window_end,
        out=tmp_path / "history.parquet",
        organization_id=live.organization_id,
        api_key=live.keys["sandbox"],
    )
    lab = gate_for(plan, history)
    server_rows = _rows([check.model_dump(mode="json") for check in served.checks])
    assert server_rows == _lab_rows(lab)
    # the published version read back carries the expiry: without it the lab's table would differ
    live_version = published_definition(plan)
    assert live_version is not None and live_version.programme.expiry is not None
    never_expiring = draft.model_copy(update={"programme": draft.programme.model_copy(update={"expiry": None})})
    unexpired = live_version.model_copy(
        update={"programme": live_version.programme.model_copy(update={"expiry": None})}
    )
    assert _lab_rows(evaluate(never_expiring, history, published=unexpired)) != server_rows
