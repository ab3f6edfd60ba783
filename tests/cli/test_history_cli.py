"""`rewards-lab history pull` against a real server: the file by suffix, progress on stderr, usage errors, the
API's refusals explained; and `pull_history` interrupted after some answers resumes where it stopped, leaving no
half-written file meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from rewards_lab.client import ApiConnectionError, RewardsClient
from rewards_lab.lab.history import pull_history
from tests.live_server import LiveServer, cli, start_server

EVENTS = 23


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("history_cli") / "history.duckdb", "Acme")
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        for i in range(EVENTS):
            body = {
                "type": "order.completed",
                "external_event_id": f"e-{i:02d}",
                "customer_id": "c1",
                "occurred_at": f"2026-05-{1 + i // 4:02d}T12:00:00Z",
                "data": {"amount": i},
            }
            assert http.post("/events", json=body).status_code == 202
    yield server
    server.stop()


def _pull(live: LiveServer, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REWARDS_API_KEY": key or live.keys["sandbox"]}
    target = ("--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox")
    return subprocess.run(
        cli("history", "pull", *target, *args), capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_pull_writes_the_file_by_suffix_with_progress_on_stderr(live: LiveServer, tmp_path: Path) -> None:
    parquet, ndjson = tmp_path / "h.parquet", tmp_path / "h.ndjson"
    done = _pull(live, "--since", "2026-05-01T00:00:00Z", "--out", str(parquet), "--page-size", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(parquet)
    assert done.stderr.count("part ") == 5 and f"wrote {parquet}: {EVENTS} events" in done.stderr
    assert not (tmp_path / "h.parquet.parts").exists()
    table = pq.read_table(parquet)
    assert table.column("external_event_id").to_pylist() == [f"e-{i:02d}" for i in range(EVENTS)]
    done = _pull(live, "--since", "2026-05-01T00:00:00Z", "--until", "2026-05-03T00:00:00Z", "--out", str(ndjson))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in ndjson.read_text().splitlines()]
    assert [r["external_event_id"] for r in rows] == [f"e-{i:02d}" for i in range(8)]  # until is exclusive


def test_pull_refuses_a_bad_suffix_and_explains_the_api_refusal(live: LiveServer, tmp_path: Path) -> None:
    bad = _pull(live, "--since", "2026-05-01T00:00:00Z", "--out", str(tmp_path / "h.csv"))
    assert bad.returncode == 2 and ".parquet" in bad.stderr
    refused = _pull(live, "--since", "2026-05-02T00:00:00Z", "--until", "2026-05-01T00:00:00Z", "--out", "x.ndjson")
    assert refused.returncode == 1 and "period_invalid" in refused.stderr
    wrong_key = _pull(live, "--since", "2026-05-01T00:00:00Z", "--out", str(tmp_path / "k.ndjson"), key="rlk_nope")
    assert wrong_key.returncode == 1 and "credentials_invalid" in wrong_key.stderr
    assert not (tmp_path / "k.ndjson").exists()


class _Failing(RewardsClient):
    """A client whose connection drops after `answers` export answers."""

    def __init__(self, live: LiveServer, answers: int) -> None:
        super().__init__(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox")
        self.left = answers

    def call(self, call: Any) -> Any:
        if self.left == 0:
            raise ApiConnectionError("connection_failed", "dropped")
        self.left -= 1
        return super().call(call)


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_an_interrupted_pull_resumes_after_its_last_complete_answer(
    live: LiveServer, tmp_path: Path, suffix: str
) -> None:
    out = tmp_path / f"resumed{suffix}"
    with _Failing(live, 2) as failing, pytest.raises(ApiConnectionError):
        pull_history(failing, out, since="2026-05-01T00:00:00Z", limit=4)
    assert not out.exists()  # nothing half written where the file goes
    state = json.loads((tmp_path / f"resumed{suffix}.parts" / "state.json").read_text())
    assert len(state["parts"]) == 2 and state["after"] == "e-07"
    lines: list[str] = []
    with _Failing(live, 100) as resuming:
        pulled = pull_history(resuming, out, since="2026-05-01T00:00:00Z", limit=4, progress=lines.append)
        assert resuming.left == 100 - 4  # only the answers that were missing
    assert lines[0] == "resuming after 2 parts (8 events)"
    assert pulled.events == EVENTS and pulled.parts == 6
    fresh = tmp_path / f"fresh{suffix}"
    with RewardsClient(live.base_url, live.keys["sandbox"], live.organization_id, "sandbox") as client:
        pull_history(client, fresh, since="2026-05-01T00:00:00Z")
    if suffix == ".parquet":
        assert pq.read_table(out).equals(pq.read_table(fresh))
    else:
        assert out.read_bytes() == fresh.read_bytes()
