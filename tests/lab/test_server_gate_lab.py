"""The Lab shows the guard table the service checks on publish (issue 31), over the events its database holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import parse_programme
from rewards_lab.contract.validation import validate
from rewards_lab.lab.workbench import Lab
from rewards_lab.service import event_intake

FILE: dict[str, Any] = {
    "programme": {"name": "Lab gated", "guards": [{"metric": "issued", "period": "day", "max": "1"}]},
    "asset": {"name": "Lab points", "symbol": "LABG", "type": "points", "decimals": 0},
    "rules": [{"event_type": "visit.done", "actions": [{"type": "issue", "amount": {"fixed": "1000"}}]}],
}


def test_the_lab_shows_the_servers_table_and_the_service_refuses_the_draft(tmp_path: Path) -> None:
    with Lab(tmp_path / "lab.duckdb") as lab:
        programme = lab.load(parse_programme(FILE))
        assert programme.server_forecast()["result"].tolist() == ["pass"]  # nothing stored yet
        for n in range(2):
            body = {"type": "visit.done", "external_event_id": f"v{n}", "customer_id": "c1"}
            event_intake.submit_event(programme._db, programme._scope, validate(rq.EventCreate, body))
        table = programme.server_forecast()
        assert table[["metric", "draft", "published", "result"]].values.tolist() == [
            ["issued per day", "2000", "-", "FAIL"]
        ]
        with pytest.raises(ServiceError) as refused:
            programme.publish()
        assert refused.value.code == "forecast_guard_failed"


def test_a_files_guard_window_reaches_the_service_and_comes_back_in_the_definition(tmp_path: Path) -> None:
    info = dict(FILE["programme"])
    windowed = {**FILE, "programme": {**info, "guard_window_days": 21}}
    with Lab(tmp_path / "lab.duckdb") as lab:
        programme = lab.load(parse_programme(windowed))
        assert programme.info().guard_window_days == 21
        assert programme.definition().programme.guard_window_days == 21
        plain = lab.load(parse_programme({**FILE, "programme": {**info, "name": "Plain"}}))
        assert plain.info().guard_window_days == 90
        assert "guard_window_days" not in plain.definition().payload()["programme"]
