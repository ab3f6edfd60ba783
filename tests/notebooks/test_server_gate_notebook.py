"""Notebook 05 pointed at a deployment shows the deployment's own guard table (issue 31): executed with papermill
against a real `rewards-lab serve` whose stored events break the programme's guard. The server's verdict stops the
notebook like the lab's, even when the lab's history (here: none of the programme's events) passes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.client import RewardsClient
from rewards_lab.contract.programme_file import parse_programme, save_programme
from rewards_lab.lab.push import push
from tests.live_server import LiveServer, start_server, stop_and_verify
from tests.notebooks.test_history_notebooks import printed

ROOT = Path(__file__).resolve().parents[2]
FILE = {
    "programme": {"name": "Notebook gated", "guards": [{"metric": "issued", "period": "day", "max": "1"}]},
    "asset": {"name": "Notebook points", "symbol": "NBG", "type": "points", "decimals": 0},
    "rules": [{"event_type": "visit.done", "actions": [{"type": "issue", "amount": {"fixed": "100"}}]}],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("gate_nb") / "gate.duckdb", "Acme")
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        push(parse_programme(FILE), client)  # published while nothing is stored: it passes
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        for n in range(3):
            event = {"type": "visit.done", "external_event_id": f"nb{n}", "customer_id": "c1"}
            assert http.post("/events", json=event).status_code == 202
    yield server
    stop_and_verify(server)


def _run(parameters: dict[str, Any], tmp_path: Path) -> Any:
    papermill = pytest.importorskip("papermill")
    return papermill.execute_notebook(
        str(ROOT / "notebooks" / "05_publish_gate.ipynb"),
        str(tmp_path / "05.ipynb"),
        parameters=parameters,
        cwd=str(ROOT / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
    )


def test_notebook_05_shows_the_deployments_table_and_stops_on_its_verdict(
    live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARDS_API_KEY", live.keys["sandbox"])
    programme = save_programme(parse_programme(FILE), tmp_path / "gated.json")
    quiet = tmp_path / "quiet.jsonl"  # the lab's history: no event the programme rewards, so its gate passes
    quiet.write_text(
        '{"external_event_id": "q1", "type": "other.thing", "customer_id": "c1", "occurred_at": '
        '"2026-01-05T10:00:00Z"}\n'
    )
    parameters = {
        "programme": str(programme),
        "history": str(quiet),
        "base_url": live.base_url,
        "organization": live.organization_id,
        "days": 30,
    }
    text = printed(_run({**parameters, "override": "launch week"}, tmp_path))
    assert "Server forecast gate (1 guard(s), 3 stored event(s) of the last 90 days):" in text
    assert "issued per day" in text and "300" in text and "1 guard(s) FAIL" in text
    assert "The deployment's draft holds the file" in text
    assert "The forecast gate passes" in text  # the lab's, on its quiet history
    assert "The server's gate fails, overridden: launch week" in text
    papermill = pytest.importorskip("papermill")
    with pytest.raises(papermill.PapermillExecutionError, match="ServerGateRefused"):
        _run(parameters, tmp_path)
    offline = printed(_run({**parameters, "server_gate": False}, tmp_path))
    assert "Server forecast gate" not in offline and "the lab's table above is the only one" in offline
