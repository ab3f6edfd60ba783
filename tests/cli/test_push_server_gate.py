"""`rewards-lab push` against a server that enforces the forecast gate (issue 31): a file whose draft breaks its
guard on the deployment's stored events is refused by the server, and push shows the server's guard table and
exits 3, even without a local history."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.programme_file import parse_programme, save_programme
from rewards_lab.lab.server_gate import server_table, server_text
from tests.live_server import LiveServer, start_server, stop_and_verify


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push-gate") / "push.duckdb", "Push")
    yield server
    stop_and_verify(server)


def _push(live: LiveServer, *args: str) -> tuple[int, str, str]:
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox", "--yes"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["push", *args, *target])
    return status, out.getvalue(), err.getvalue()


def _file(path: Path, amount: str) -> Path:
    data = {
        "programme": {"name": "Server gated", "guards": [{"metric": "issued", "period": "day", "max": "1"}]},
        "asset": {"name": "Push points", "symbol": "PUSH", "type": "points", "decimals": 0},
        "rules": [{"event_type": "visit.done", "actions": [{"type": "issue", "amount": {"fixed": amount}}]}],
    }
    save_programme(parse_programme(data), path)
    return path


def test_push_shows_the_servers_table_when_the_server_refuses_the_draft(live: LiveServer, tmp_path: Path) -> None:
    status, out, err = _push(live, str(_file(tmp_path / "p.json", "1")))
    assert status == 0, out + err  # no stored events yet: the guard holds
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
        for n in range(2):
            event = {"type": "visit.done", "external_event_id": f"v{n}", "customer_id": "c1"}
            assert http.post("/events", json=event).status_code in (200, 201, 202)
    status, out, err = _push(live, str(_file(tmp_path / "p.json", "1000")))
    assert status == 3, out + err
    assert "Server forecast gate (1 guard(s), 2 stored event(s) of the last 90 days)" in out
    assert "issued per day" in out and "2000" in out and "1 guard(s) FAIL" in out
    assert "Not published: the server's forecast gate refused" in err


def test_the_servers_table_as_text_and_frame() -> None:
    answer = {
        "events": 3,
        "window_days": 30,
        "checks": [
            {
                "metric": "issued per day",
                "limit": "<= 1",
                "draft": "5",
                "published": None,
                "checked": "5",
                "passed": False,
            },
            {
                "metric": "ceiling_exhausted_within_days",
                "limit": ">= 9",
                "draft": "never",
                "published": "12",
                "checked": "never",
                "passed": True,
            },
        ],
    }
    table = server_table(answer)
    assert table["published"].tolist() == ["-", "12"] and table["result"].tolist() == ["FAIL", "pass"]
    assert (
        server_text(answer).splitlines()[0]
        == "Server forecast gate (2 guard(s), 3 stored event(s) of the last 30 days):"
    )
    assert server_text({"checks": []}) == "Server forecast gate: the draft declares no guards."
