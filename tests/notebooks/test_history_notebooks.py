"""Notebooks 02 and 05 read a deployment's history instead of a file: executed with papermill against a real
`rewards-lab serve` holding events sent over HTTP (the sample history's first ones), the history pulled with
Lab.history."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from rewards_lab.contract import jsonutil
from tests.live_server import LiveServer, start_server

ROOT = Path(__file__).resolve().parents[2]
SENT = 150


def printed(notebook: Any) -> str:
    return "".join(
        str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("history_nb") / "history.duckdb", "Acme")
    sample = pd.read_parquet(ROOT / "data" / "sample_events.parquet").head(SENT)
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        for row in sample.to_dict(orient="records"):
            data = {
                key: (value if key == "amount" else int(value))  # amount: a Decimal, sent as a JSON number
                for key, value in row.items()
                if key not in ("external_event_id", "type", "customer_id", "occurred_at")
                and value is not None
                and not (isinstance(value, float) and math.isnan(value))
            }
            body = {
                "type": row["type"],
                "external_event_id": row["external_event_id"],
                "customer_id": row["customer_id"],
                "occurred_at": row["occurred_at"].isoformat(),
                "data": data,
            }
            assert http.post("/events", content=jsonutil.dumps(body)).status_code == 202
    yield server
    server.stop()


def _run(name: str, parameters: dict[str, Any], tmp_path: Path) -> Any:
    papermill = pytest.importorskip("papermill")
    return papermill.execute_notebook(
        str(ROOT / "notebooks" / name),
        str(tmp_path / name),
        parameters=parameters,
        cwd=str(ROOT / "notebooks"),
        kernel_name="python3",
        progress_bar=False,
    )


def test_notebook_02_replays_the_deployments_history(
    live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARDS_API_KEY", live.keys["sandbox"])
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the pulled file's default place
    parameters = {
        "history_base_url": live.base_url,
        "history_organization": live.organization_id,
        "history_since": "2026-01-01T00:00:00Z",
        "projection_days": 14,
        "sweep_rates": [0.05, 0.1],
        "sweep_thresholds": [0, 20],
    }
    text = printed(_run("02_replay_and_forecast.ipynb", parameters, tmp_path))
    assert f"{SENT} events replayed" in text


def test_notebook_05_gates_on_the_deployments_history(
    live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARDS_API_KEY", live.keys["sandbox"])
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    parameters = {
        "base_url": live.base_url,
        "organization": live.organization_id,
        "history_since": "2026-01-01T00:00:00Z",
        "history": "no-such-file.parquet",  # not read: the deployment's history is
        "days": 30,
    }
    text = printed(_run("05_publish_gate.ipynb", parameters, tmp_path))
    assert "liability 30 days ahead" in text
