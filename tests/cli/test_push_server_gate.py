"""`rewards-lab push` against a server that enforces the forecast gate (issue 31): a file whose draft breaks its
guard on the deployment's stored events is refused by the server, and push shows the server's guard table and
exits 3, even without a local history; with `--override REASON` it publishes past the server's refusal when the
key holds rewards.guards.override, and says clearly why not when it does not."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.permissions import ALL_PERMISSIONS
from rewards_lab.contract.programme_file import parse_programme, save_programme
from rewards_lab.lab.server_gate import server_table, server_text
from tests.live_server import LiveServer, start_server, stop_and_verify


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("push-gate") / "push.duckdb", "Push")
    yield server
    stop_and_verify(server)


def _push(live: LiveServer, *args: str, key: str | None = None) -> tuple[int, str, str]:
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox", "--yes"]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"REWARDS_API_KEY": key or live.keys["sandbox"]}), redirect_stdout(out):
        with redirect_stderr(err):
            status = main(["push", *args, *target])
    return status, out.getvalue(), err.getvalue()


def _file(path: Path, amount: str, name: str = "Server gated", event_type: str = "visit.done", **settings: Any) -> Path:
    data = {
        "programme": {"name": name, "guards": [{"metric": "issued", "period": "day", "max": "1"}], **settings},
        "asset": {"name": f"{name} points", "symbol": name[:4].upper(), "type": "points", "decimals": 0},
        "rules": [{"event_type": event_type, "actions": [{"type": "issue", "amount": {"fixed": amount}}]}],
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


def test_push_overrides_a_refusal_only_the_server_found_with_a_key_allowed_to(live: LiveServer, tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    status, out, err = _push(live, str(_file(path, "1", "Overridable", "tour.done")))
    assert status == 0, out + err
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
        for n in range(2):
            event = {"type": "tour.done", "external_event_id": f"t{n}", "customer_id": "c1"}
            assert http.post("/events", json=event).status_code in (200, 201, 202)
        permissions = sorted(ALL_PERMISSIONS - {"rewards.guards.override"})
        created = http.post("/developer/api-keys", json={"name": "no override", "permissions": permissions})
        assert created.status_code == 201, created.text
        plain_key = created.json()["data"]["secret"]
    _file(path, "1000", "Overridable", "tour.done")
    # a key without rewards.guards.override: the server's table, a clear refusal, nothing published
    status, out, err = _push(live, str(path), "--override", "launch week", key=plain_key)
    assert status == 3, out + err
    assert "issued per day" in out and "2000" in out and "1 guard(s) FAIL" in out
    assert "permission_denied" in err and "may not override the server's forecast gate" in err
    assert _live_version(live, "Overridable")["current_version"] == 1
    # the same refusal as JSON: the server's table, the override asked for and refused, and the permission named
    status, out, err = _push(live, str(path), "--override", "launch week", "--json", key=plain_key)
    assert status == 3, out + err
    gate = json.loads(out)["server_gate"]
    assert gate["passed"] is False and gate["overridden"] is None
    assert gate["override_refused"] == "rewards.guards.override"
    (guard,) = gate["guards"]
    assert guard["result"] == "FAIL" and guard["draft"] == "2000"
    assert "may not override the server's forecast gate" in err
    assert _live_version(live, "Overridable")["current_version"] == 1
    # the bootstrap key holds it: published with the reason, in the audit trail
    status, out, err = _push(live, str(path), "--override", "launch week, approved")
    assert status == 0, out + err
    assert "1 guard(s) FAIL" in out and "Overridden: publishing past the server's gate" in out
    programme = _live_version(live, "Overridable")
    assert programme["current_version"] == 2
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
        versions = http.get(f"/reward-programs/{programme['id']}/versions").json()["data"]
        audited = http.get("/developer/audit", params={"kind": "guard_overridden"}).json()["data"]
    (published,) = [v for v in versions if v["number"] == 2]
    assert published["guard_override"]["reason"] == "launch week, approved"
    assert [entry["subject_id"] for entry in audited] == [published["id"]]


def test_push_carries_the_files_guard_window_to_the_servers_guard_set(live: LiveServer, tmp_path: Path) -> None:
    path = _file(tmp_path / "w.json", "1", "Windowed", "stay.done", guard_window_days=30)
    assert '"guard_window_days": 30' in path.read_text()
    status, out, err = _push(live, str(path))
    assert status == 0, out + err
    assert "no difference between the lab and the live side" in out
    programme = _live_version(live, "Windowed")
    assert (programme["guard_window_days"], programme["current_version"]) == (30, 1)
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
        forecast = http.post(f"/reward-programs/{programme['id']}/forecast").json()["data"]
    assert forecast["window_days"] == 30
    status, out, err = _push(live, str(path), "--plan-only")
    assert (status, out.splitlines()[-1]) == (0, "No changes: the live side matches the file."), out + err
    # a different window is a planned change, applied and published (a longer window loosens nothing)
    _file(path, "1", "Windowed", "stay.done", guard_window_days=45)
    status, out, err = _push(live, str(path), "--plan-only")
    assert status == 0 and "~ set the draft's forecast guards" in out and "last 45 days" in out, out + err
    status, out, err = _push(live, str(path))
    assert status == 0, out + err
    assert _live_version(live, "Windowed")["guard_window_days"] == 45
    # absent from the file: the default, 90
    _file(path, "1", "Windowed", "stay.done")
    assert "guard_window_days" not in path.read_text()
    status, out, err = _push(live, str(path))
    assert status == 0, out + err
    assert _live_version(live, "Windowed")["guard_window_days"] == 90


def _live_version(live: LiveServer, name: str) -> dict[str, Any]:
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=30) as http:
        (programme,) = [p for p in http.get("/reward-programs").json()["data"] if p["name"] == name]
    found: dict[str, Any] = programme
    return found


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
