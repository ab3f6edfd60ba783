"""Issue 27 item 12: the secret-key file is made private like the database, the API accepts the time zones
programme files accept (one list of IANA names), and a publish with a guard override is in the audit trail."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import loads_programme
from rewards_lab.contract.time_zones import zone_names
from rewards_lab.service import organizations
from rewards_lab.store.database import Database
from rewards_lab.store.secret_box import KEY_ENV, KEY_FILE_SUFFIX
from tests.http_helpers import live_client, ok
from tests.live_server import LiveServer, start_server, stop_and_verify


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- the secret-key file ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loose_mode", [0o644, 0o640, 0o604], ids=["0644", "0640", "0604"])
def test_a_secret_key_file_left_readable_by_others_is_made_private_when_the_database_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loose_mode: int
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    path = tmp_path / "keyed.duckdb"
    key_file = Path(str(path) + KEY_FILE_SUFFIX)
    with Database(path) as database:
        organizations.create_organization(database, "Keyed")
    assert _mode(key_file) == 0o600  # created private
    key_file.chmod(loose_mode)  # an older release, a copy by hand, a restore with `cp`
    path.chmod(loose_mode)
    with Database(path) as database:
        assert _mode(path) == 0o600
        assert _mode(key_file) == 0o600
        names = database.reader().execute("SELECT name FROM organizations").fetchall()
        assert names == [("Keyed",)]  # the same key opened it


# -- one list of time zones ------------------------------------------------------------------------------------
NOT_ZONES = ["localtime", "Factory", "posixrules", "Europe/Nowhere", "../../etc/passwd", "/etc/localtime"]


def test_programme_files_and_the_api_share_one_list_of_iana_names() -> None:
    names = zone_names()
    assert {"UTC", "Europe/Paris", "America/Argentina/Buenos_Aires"} <= names
    assert not {"localtime", "Factory", "posixrules"} & names
    rules = (
        '"asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0}, '
        '"rules": [{"event_type": "e", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}]'
    )
    for name in NOT_ZONES:
        with pytest.raises(ServiceError) as caught:
            loads_programme(f'{{"programme": {{"name": "P", "timezone": "{name}"}}, {rules}}}')
        assert caught.value.details["field"] == "programme.timezone", name
    assert loads_programme(f'{{"programme": {{"name": "P", "timezone": "Europe/Paris"}}, {rules}}}')


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("small") / "small.duckdb", "Small")
    yield server
    stop_and_verify(server)


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with live_client(live) as client:
        yield client


def _asset(http: httpx.Client, symbol: str) -> str:
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return str(asset["id"])


def test_the_api_refuses_the_zone_names_programme_files_refuse(http: httpx.Client) -> None:
    asset_id = _asset(http, "TZ")
    for name in NOT_ZONES:
        answer = http.post("/reward-programs", json={"name": f"p {name}", "asset_id": asset_id, "timezone": name})
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["details"]["field"]) == (422, "field_invalid", "timezone")
    programme = ok(http.post("/reward-programs", json={"name": "paris", "asset_id": asset_id}), 201)
    for name in ("localtime", "Factory"):
        answer = http.patch(f"/reward-programs/{programme['id']}", json={"timezone": name})
        assert answer.status_code == 422 and answer.json()["error"]["details"]["field"] == "timezone", name
    edited = ok(http.patch(f"/reward-programs/{programme['id']}", json={"timezone": "Europe/Paris"}))
    assert edited["timezone"] == "Europe/Paris"


# -- a guard override is audited -------------------------------------------------------------------------------
def test_a_publish_with_a_guard_override_is_audited_with_who_which_version_and_why(
    live: LiveServer, http: httpx.Client
) -> None:
    asset_id = _asset(http, "GO")
    programme = ok(http.post("/reward-programs", json={"name": "overridden", "asset_id": asset_id}), 201)
    rule = {"program_id": programme["id"], "event_type": "e", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}
    ok(http.post("/reward-rules", json=rule), 201)
    key = ok(http.post("/developer/api-keys", json={"name": "publisher", "permissions": ["rewards.activate"]}), 201)
    as_publisher = {**live.headers(), "Authorization": f"Bearer {key['secret']}"}
    ok(http.post(f"/reward-programs/{programme['id']}/publish", headers=as_publisher), 201)  # no override
    body = {"guard_override": {"reason": "finance approved, ticket 42"}}
    publish = f"/reward-programs/{programme['id']}/publish"
    once = {**as_publisher, "Idempotency-Key": "override-once"}
    published = ok(http.post(publish, json=body, headers=once), 201)
    again = ok(http.post(publish, json=body, headers=once), 201)  # the stored answer: no second record
    assert again["version"]["id"] == published["version"]["id"]
    version = published["version"]
    assert version["number"] == 2 and version["guard_override"]["given_by"] == key["id"]

    audited = ok(http.get("/developer/audit", params={"kind": "guard_overridden"}))
    assert len(audited) == 1
    (entry,) = audited
    assert (entry["outcome"], entry["actor_id"], entry["subject_id"], entry["reason"]) == (
        "succeeded",
        key["id"],
        version["id"],
        "finance approved, ticket 42",
    )
    assert entry["environment"] == "sandbox" and entry["path"] == f"/v1{publish}" and entry["request_id"]
    assert key["secret"] not in str(entry)
