"""Programme lifecycle (issue 17) against a real `rewards-lab serve` on 127.0.0.1 and its event worker: a
version's schedule (timezone, starts_at <= t < ends_at over the event's time), deactivation and activation, and
rolling back by restoring a published version into the draft."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import duckdb
import httpx
import pytest

from rewards_lab.cli.main import main
from rewards_lab.client import ConflictError, RewardsClient
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.schema import MIGRATIONS
from rewards_lab.store.uow import reader
from tests.http_helpers import live_client, ok, refused, settled
from tests.live_server import LiveServer, start_server, stop_and_verify

EVENT = "visit.completed"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("lifecycle") / "service.duckdb")
    yield live
    stop_and_verify(live)


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error envelope, holding exactly type, code, message and details."""
    return refused(response, status, code, exact_fields=True)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


_counter = iter(range(1_000_000))


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{time.monotonic_ns()}"


def _asset(http: httpx.Client) -> dict[str, Any]:
    symbol = "L" + str(next(_counter))
    asset = ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 0}), 201)
    ok(http.post(f"/assets/{asset['id']}/activate"))
    return dict(asset)


def _programme(http: httpx.Client, asset: dict[str, Any], amount: str, **schedule: Any) -> dict[str, Any]:
    """A published programme issuing `amount` per EVENT, its first draft created with `schedule`."""
    body = {"name": _unique("programme"), "asset_id": asset["id"], **schedule}
    programme = ok(http.post("/reward-programs", json=body), 201)
    rule = {
        "program_id": programme["id"],
        "event_type": EVENT,
        "actions": [{"type": "issue", "amount": {"fixed": amount}}],
    }
    ok(http.post("/reward-rules", json=rule), 201)
    ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
    return dict(ok(http.get(f"/reward-programs/{programme['id']}")))


def _customer(http: httpx.Client, *, wallet: bool = True) -> str:
    external_id = _unique("customer")
    customer = ok(http.post("/customers", json={"external_id": external_id}), 201)
    if wallet:
        ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
    return external_id


def _send(http: httpx.Client, customer: str, occurred_at: str | None = None) -> dict[str, Any]:
    """Send one EVENT (with `occurred_at` when given) and wait until the worker has processed it."""
    body: dict[str, Any] = {"type": EVENT, "external_event_id": _unique("event"), "customer_id": customer}
    if occurred_at is not None:
        body["occurred_at"] = occurred_at
    return settled(http, ok(http.post("/events", json=body), 202)["id"])


def _executions(http: httpx.Client, event: dict[str, Any], asset: dict[str, Any]) -> list[dict[str, Any]]:
    """The executions the event caused in the asset's programmes (other tests' programmes reward EVENT too)."""
    executions = ok(http.get("/reward-executions", params={"event_id": event["id"], "limit": 100}))
    return [e for e in executions if e["asset_id"] == asset["id"]]


def _rewarded_by(http: httpx.Client, event: dict[str, Any], asset: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(programme, version, status) of each execution the event caused in the asset's programmes, sorted."""
    return sorted((e["program_id"], e["program_version"], e["status"]) for e in _executions(http, event, asset))


# --- schedule: window over the event's time -----------------------------------------------------------------


def test_window_is_inclusive_at_its_start_and_exclusive_at_its_end_over_occurred_at(http: httpx.Client) -> None:
    asset = _asset(http)
    # The bounds are instants: an offset other than Z names the same instant, and they are shown in UTC.
    window = {"timezone": "Europe/Paris", "starts_at": "2026-03-01T00:00:00+01:00", "ends_at": "2026-03-02T00:00:00Z"}
    programme = _programme(http, asset, "5", **window, max_event_age_days=None)  # March 2026: a backfill
    assert (programme["timezone"], programme["starts_at"], programme["ends_at"]) == (
        "Europe/Paris",
        "2026-02-28T23:00:00Z",
        "2026-03-02T00:00:00Z",
    )
    live = ok(http.get(f"/reward-programs/{programme['id']}/versions"))[0]
    assert (live["number"], live["timezone"], live["starts_at"], live["ends_at"]) == (
        1,
        "Europe/Paris",
        "2026-02-28T23:00:00Z",
        "2026-03-02T00:00:00Z",
    )
    customer = _customer(http)
    cases = {
        "2026-02-28T22:59:59.999999Z": False,  # a microsecond before the start
        "2026-03-01T00:00:00+01:00": True,  # exactly the start (written with another offset)
        "2026-03-01T12:00:00Z": True,
        "2026-03-01T23:59:59.999999Z": True,  # a microsecond before the end
        "2026-03-02T01:00:00+01:00": False,  # exactly the end
        "2026-03-05T00:00:00Z": False,
    }
    for occurred_at, rewarded in cases.items():
        event = _send(http, customer, occurred_at)
        assert event["status"] == "processed", event
        expected = [(programme["id"], 1, "issued")] if rewarded else []
        assert _rewarded_by(http, event, asset) == expected, occurred_at


def test_time_of_receipt_is_the_events_time_when_occurred_at_is_absent(http: httpx.Client) -> None:
    asset = _asset(http)
    now = datetime.now(UTC)
    current = _programme(
        http, asset, "1", starts_at=_iso(now - timedelta(hours=1)), ends_at=_iso(now + timedelta(hours=1))
    )
    past = _programme(
        http, asset, "10", starts_at=_iso(now - timedelta(hours=3)), ends_at=_iso(now - timedelta(hours=2))
    )
    future = _programme(http, asset, "100", starts_at=_iso(now + timedelta(days=1)))
    customer = _customer(http)
    received_now = _send(http, customer)
    assert received_now["occurred_at"] is None
    assert _rewarded_by(http, received_now, asset) == [(current["id"], 1, "issued")]
    back_then = _send(http, customer, _iso(now - timedelta(hours=2, minutes=30)))
    assert _rewarded_by(http, back_then, asset) == [(past["id"], 1, "issued")]
    # an event dated in the future is refused at intake (issue 27): the future programme rewards nothing yet
    ahead = {"type": EVENT, "external_event_id": _unique("event"), "customer_id": customer}
    refused = _error(
        http.post("/events", json={**ahead, "occurred_at": _iso(now + timedelta(days=2))}), 422, "field_invalid"
    )
    assert refused["details"]["field"] == "occurred_at"
    assert future["current_version"] == 1


def test_timezone_and_bounds_are_validated_with_the_field_named(http: httpx.Client) -> None:
    asset = _asset(http)
    base = {"name": "Validated", "asset_id": asset["id"]}
    for body, field in (
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"timezone": "../../etc/passwd"}, "timezone"),
        ({"timezone": ""}, "timezone"),
        ({"starts_at": "2026-03-01T00:00:00"}, "starts_at"),  # no offset: which instant is ambiguous
        ({"ends_at": 1767225600}, "ends_at"),
        ({"starts_at": "2026-03-02T00:00:00Z", "ends_at": "2026-03-01T00:00:00Z"}, "ends_at"),
        ({"starts_at": "2026-03-01T00:00:00Z", "ends_at": "2026-03-01T01:00:00+01:00"}, "ends_at"),  # empty window
    ):
        error = _error(http.post("/reward-programs", json={**base, **body}), 422, "field_invalid")
        assert error["details"]["field"] == field, body
    programme = ok(
        http.post("/reward-programs", json={**base, "timezone": "Asia/Kolkata", "starts_at": "2026-03-01T00:00:00Z"}),
        201,
    )
    assert (programme["status"], programme["timezone"], programme["ends_at"]) == ("active", "Asia/Kolkata", None)
    path = f"/reward-programs/{programme['id']}"
    assert _error(http.patch(path, json={"timezone": "Nowhere/City"}), 422, "field_invalid")["details"]["field"] == (
        "timezone"
    )
    # Only ends_at is sent: it is checked against the draft's starts_at.
    bad_end = _error(http.patch(path, json={"ends_at": "2026-02-01T00:00:00Z"}), 422, "field_invalid")
    assert bad_end["details"]["field"] == "ends_at"
    assert _error(http.patch(path, json={"name": None}), 422, "field_invalid")["details"]["field"] == "name"
    assert _error(http.patch(path, json={"colour": "red"}), 422, "field_unknown")["details"]["field"] == "colour"
    unchanged = ok(http.get(path))
    assert (unchanged["timezone"], unchanged["starts_at"], unchanged["ends_at"]) == (
        "Asia/Kolkata",
        "2026-03-01T00:00:00Z",
        None,
    )
    # null clears a bound and the description; a null timezone is the default, UTC; absent fields stay.
    edited = ok(
        http.patch(
            path,
            json={"name": "Renamed", "description": "spring", "ends_at": "2026-04-01T00:00:00-05:00"},
        )
    )
    assert (edited["name"], edited["description"], edited["ends_at"]) == ("Renamed", "spring", "2026-04-01T05:00:00Z")
    cleared = ok(http.patch(path, json={"starts_at": None, "timezone": None, "description": None}))
    assert (cleared["name"], cleared["description"], cleared["timezone"]) == ("Renamed", None, "UTC")
    assert (cleared["starts_at"], cleared["ends_at"]) == (None, "2026-04-01T05:00:00Z")
    _error(http.patch("/reward-programs/prg_missing", json={"name": "x"}), 404, "programme_not_found")


def test_patch_edits_the_draft_only_and_the_published_window_applies_until_the_next_publish(
    http: httpx.Client,
) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, "3")  # v1: no window
    path = f"/reward-programs/{programme['id']}"
    customer = _customer(http)
    past_end = _iso(datetime.now(UTC) - timedelta(days=1))
    edited = ok(http.patch(path, json={"ends_at": past_end, "timezone": "America/New_York"}))
    assert (edited["ends_at"], edited["timezone"], edited["current_version"]) == (past_end, "America/New_York", 1)
    versions = ok(http.get(f"{path}/versions"))
    assert [(v["number"], v["timezone"], v["ends_at"]) for v in versions] == [
        (1, "UTC", None),
        (None, "America/New_York", past_end),
    ]
    # v1, as published, still rewards an event of now.
    assert _rewarded_by(http, _send(http, customer), asset) == [(programme["id"], 1, "issued")]
    published = ok(http.post(f"{path}/publish"), 201)
    assert (published["version"]["number"], published["version"]["ends_at"]) == (2, past_end)
    # The new draft is a copy of v2, schedule included (as rules are copied).
    draft = ok(http.get(path))
    assert (draft["timezone"], draft["ends_at"]) == ("America/New_York", past_end)
    assert _rewarded_by(http, _send(http, customer), asset) == []
    before_end = _iso(datetime.now(UTC) - timedelta(days=2))
    assert _rewarded_by(http, _send(http, customer, before_end), asset) == [(programme["id"], 2, "issued")]


# --- activation -----------------------------------------------------------------------------------------------


def test_deactivate_stops_rewards_while_another_programme_on_the_asset_keeps_issuing(http: httpx.Client) -> None:
    asset = _asset(http)
    paused = _programme(http, asset, "1")
    other = _programme(http, asset, "10")
    customer = _customer(http)
    before = _send(http, customer)
    assert _rewarded_by(http, before, asset) == sorted([(paused["id"], 1, "issued"), (other["id"], 1, "issued")])

    deactivated = ok(http.post(f"/reward-programs/{paused['id']}/deactivate"))
    assert (deactivated["status"], deactivated["current_version"]) == ("inactive", 1)
    assert ok(http.get(f"/assets/{asset['id']}"))["status"] == "active"  # the asset is untouched
    while_inactive = _send(http, customer)
    assert _rewarded_by(http, while_inactive, asset) == [(other["id"], 1, "issued")]
    assert _rewarded_by(http, before, asset) == sorted([(paused["id"], 1, "issued"), (other["id"], 1, "issued")])

    moved = _error(http.post(f"/reward-programs/{paused['id']}/deactivate"), 409, "invalid_state_transition")
    assert (moved["details"]["state"], moved["details"]["resource"]) == ("inactive", "programme")
    # Rules can still be edited and versions published while inactive: they take effect on activation.
    assert ok(http.post(f"/reward-programs/{paused['id']}/publish"), 201)["version"]["number"] == 2
    assert _rewarded_by(http, _send(http, customer), asset) == [(other["id"], 1, "issued")]

    activated = ok(http.post(f"/reward-programs/{paused['id']}/activate"))
    assert activated["status"] == "active"
    _error(http.post(f"/reward-programs/{paused['id']}/activate"), 409, "invalid_state_transition")
    after = _send(http, customer)
    assert _rewarded_by(http, after, asset) == sorted([(paused["id"], 2, "issued"), (other["id"], 1, "issued")])
    # What was processed while inactive stays as it was.
    assert _rewarded_by(http, while_inactive, asset) == [(other["id"], 1, "issued")]
    _error(http.post("/reward-programs/prg_missing/deactivate"), 404, "programme_not_found")


def test_a_failed_event_replayed_after_deactivation_uses_the_versions_recorded_for_it(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, "4")
    customer = _customer(http, wallet=False)
    failed = _send(http, customer)
    assert (failed["status"], failed["error"]["code"]) == ("failed", "wallet_not_found")
    ok(http.post(f"/reward-programs/{programme['id']}/deactivate"))
    customer_id = ok(http.get("/customers", params={"external_id": customer}))[0]["id"]
    ok(http.post("/wallets", json={"customer_id": customer_id}), 201)
    replayed = ok(http.post(f"/events/{failed['id']}/replay"))
    assert replayed["status"] == "processed"
    assert _rewarded_by(http, failed, asset) == [(programme["id"], 1, "issued")]


def test_state_moves_with_an_idempotency_key_return_the_first_answer(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, "1")
    path = f"/reward-programs/{programme['id']}/deactivate"
    first = ok(http.post(path, headers={"Idempotency-Key": _unique("key")}))
    key = _unique("key")
    again = ok(http.post(f"/reward-programs/{programme['id']}/activate", headers={"Idempotency-Key": key}))
    assert ok(http.post(f"/reward-programs/{programme['id']}/activate", headers={"Idempotency-Key": key})) == again
    assert (first["status"], again["status"]) == ("inactive", "active")
    # A schedule sent with a create is part of the request its key stands for.
    create = {"name": "Keyed", "asset_id": asset["id"], "timezone": "Europe/Rome"}
    created = ok(http.post("/reward-programs", json=create, headers={"Idempotency-Key": key + "-create"}), 201)
    assert ok(http.post("/reward-programs", json=create, headers={"Idempotency-Key": key + "-create"}), 201) == created
    other = {**create, "timezone": "Europe/Oslo"}
    _error(
        http.post("/reward-programs", json=other, headers={"Idempotency-Key": key + "-create"}),
        409,
        "idempotency_key_reused",
    )


# --- restore -------------------------------------------------------------------------------------------------


def _rules(version: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    return [(r["id"], r["event_type"], r["conditions"], r["actions"]) for r in version["rules"]]


def test_restore_then_publish_makes_a_new_version_equal_to_the_restored_one(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(
        http, asset, "5", timezone="Europe/London", starts_at="2026-01-01T00:00:00Z", ends_at="2030-01-01T00:00:00Z"
    )
    path = f"/reward-programs/{programme['id']}"
    v1 = ok(http.get(f"{path}/versions"))[0]
    (first_rule,) = v1["rules"]
    ok(http.patch(f"/reward-rules/{first_rule['id']}", json={"actions": [{"type": "issue", "amount": {"fixed": "7"}}]}))
    rule = {
        "program_id": programme["id"],
        "event_type": "order.completed",
        "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
    }
    added = ok(http.post("/reward-rules", json=rule), 201)
    ok(http.patch(path, json={"timezone": "Asia/Tokyo", "starts_at": None, "ends_at": None}))
    ok(http.post(f"{path}/publish"), 201)
    history = ok(http.get(f"{path}/versions"))[:2]
    assert [v["number"] for v in history] == [1, 2]

    draft = ok(http.post(f"{path}/versions/1/restore"))
    assert (draft["status"], draft["number"], draft["based_on"]) == ("draft", None, 1)
    assert _rules(draft) == _rules(v1)  # the same rule ids, bodies and order
    assert added["id"] not in [r["id"] for r in draft["rules"]]
    assert (draft["timezone"], draft["starts_at"], draft["ends_at"]) == (
        "Europe/London",
        "2026-01-01T00:00:00Z",
        "2030-01-01T00:00:00Z",
    )
    assert ok(http.get(path))["timezone"] == "Europe/London"  # the programme shows its draft's schedule
    published = ok(http.post(f"{path}/publish"), 201)["version"]
    assert (published["number"], published["based_on"]) == (3, 1)
    assert _rules(published) == _rules(v1)
    assert (published["timezone"], published["starts_at"], published["ends_at"]) == (
        v1["timezone"],
        v1["starts_at"],
        v1["ends_at"],
    )
    versions = ok(http.get(f"{path}/versions"))
    assert versions[:2] == history  # the history is unchanged
    assert [r["actions"][0]["amount"]["fixed"] for r in versions[1]["rules"]] == ["7", "1"]
    customer = _customer(http)
    event = _send(http, customer)
    assert _rewarded_by(http, event, asset) == [(programme["id"], 3, "issued")]
    executions = _executions(http, event, asset)
    assert [(e["rule_id"], e["amount"]) for e in executions] == [(first_rule["id"], "5")]


def test_restore_refuses_unknown_versions_the_draft_and_unknown_programmes(http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, "1")
    path = f"/reward-programs/{programme['id']}/versions"
    _error(http.post(f"{path}/2/restore"), 404, "programme_version_not_found")
    _error(http.post(f"{path}/0/restore"), 404, "programme_version_not_found")
    _error(http.post(f"{path}/99999999999999999999/restore"), 404, "programme_version_not_found")
    for name in ("draft", "-1", "1.0", "v1"):
        error = _error(http.post(f"{path}/{name}/restore"), 422, "field_invalid")
        assert error["details"]["field"] == "version", name
    _error(http.post("/reward-programs/prg_missing/versions/1/restore"), 404, "programme_not_found")
    # "live" names the live version: restoring it discards the draft's edits.
    ok(http.patch(f"/reward-programs/{programme['id']}", json={"ends_at": "2020-01-01T00:00:00Z"}))
    assert ok(http.post(f"{path}/live/restore"))["ends_at"] is None


# --- permissions and tenants ---------------------------------------------------------------------------------


def test_each_operation_checks_its_permission(server: LiveServer, http: httpx.Client) -> None:
    asset = _asset(http)
    programme = _programme(http, asset, "1")
    base = f"/reward-programs/{programme['id']}"
    editor = ok(
        http.post("/developer/api-keys", json={"name": "editor", "permissions": ["rewards.view", "rewards.edit"]}),
        201,
    )
    viewer = ok(http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["rewards.view"]}), 201)
    as_editor = {**server.headers(), "Authorization": f"Bearer {editor['secret']}"}
    as_viewer = {**server.headers(), "Authorization": f"Bearer {viewer['secret']}"}
    with httpx.Client(base_url=server.base_url, headers=as_viewer, timeout=10) as viewer_http:
        for response in (
            viewer_http.patch(base, json={"name": "x"}),
            viewer_http.post(f"{base}/versions/1/restore"),
        ):
            assert _error(response, 403, "permission_denied")["details"]["permission"] == "rewards.edit"
    with httpx.Client(base_url=server.base_url, headers=as_editor, timeout=10) as editor_http:
        assert ok(editor_http.patch(base, json={"timezone": "Europe/Berlin"}))["timezone"] == "Europe/Berlin"
        assert ok(editor_http.post(f"{base}/versions/1/restore"))["based_on"] == 1
        for response in (editor_http.post(f"{base}/deactivate"), editor_http.post(f"{base}/activate")):
            assert _error(response, 403, "permission_denied")["details"]["permission"] == "rewards.activate"
    assert ok(http.get(base))["status"] == "active"
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=10).json()["paths"]
    assert document["/reward-programs/{program_id}"]["patch"]["x-permission"] == "rewards.edit"
    assert document["/reward-programs/{program_id}/deactivate"]["post"]["x-permission"] == "rewards.activate"
    assert document["/reward-programs/{program_id}/activate"]["post"]["x-idempotent"] == "optional"
    restore = document["/reward-programs/{program_id}/versions/{version}/restore"]["post"]
    assert {"programme_version_not_found", "programme_not_found"} <= set(restore["x-error-codes"])


def test_tenants_never_see_or_move_each_others_programmes(server: LiveServer, http: httpx.Client) -> None:
    asset = _asset(http)
    sandbox_programme = _programme(http, asset, "2")
    with live_client(server, environment="production") as production:
        production_asset = _asset(production)
        production_programme = _programme(production, production_asset, "20")
        base = f"/reward-programs/{sandbox_programme['id']}"
        _error(production.patch(base, json={"name": "stolen"}), 404, "programme_not_found")
        _error(production.post(f"{base}/deactivate"), 404, "programme_not_found")
        _error(production.post(f"{base}/versions/1/restore"), 404, "programme_not_found")
        # Deactivating the sandbox programme leaves production's rewarding.
        ok(http.post(f"{base}/deactivate"))
        production_customer = _customer(production)
        event = _send(production, production_customer)
        assert _rewarded_by(production, event, production_asset) == [(production_programme["id"], 1, "issued")]
        assert ok(production.get(f"/reward-programs/{production_programme['id']}"))["status"] == "active"
    assert ok(http.get(base))["name"] == sandbox_programme["name"]
    other_org = {**server.headers(), "X-Organization-ID": "org_someone_else"}
    _error(httpx.post(f"{server.base_url}{base}/activate", headers=other_org, timeout=10), 403, "organization_mismatch")
    assert ok(http.get(base))["status"] == "inactive"


# --- client and command line ---------------------------------------------------------------------------------


def test_client_and_command_line_drive_the_lifecycle(server: LiveServer, http: httpx.Client) -> None:
    asset = _asset(http)
    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as client:
        created = client.create_programme(
            "Via client", asset["id"], timezone="Europe/Madrid", starts_at="2026-05-01T00:00:00+02:00"
        )
        assert (created.timezone, created.starts_at) == ("Europe/Madrid", datetime(2026, 4, 30, 22, tzinfo=UTC))
        client.create_rule(created.id, EVENT, [{"type": "issue", "amount": {"fixed": "1"}}])
        client.publish(created.id)
        updated = client.update_programme(created.id, starts_at=None, ends_at="2031-01-01T00:00:00Z")
        assert (updated.starts_at, updated.ends_at) == (None, datetime(2031, 1, 1, tzinfo=UTC))
        assert client.deactivate_programme(created.id).status == "inactive"
        with pytest.raises(ConflictError) as refused:
            client.deactivate_programme(created.id)
        assert refused.value.code == "invalid_state_transition"
        assert client.activate_programme(created.id).status == "active"
        restored = client.restore_version(created.id, 1)
        assert (restored.starts_at, restored.ends_at, restored.based_on) == (created.starts_at, None, 1)

    def api(*args: str) -> Any:
        target = ["--base-url", server.base_url, "--org", server.organization_id, "--env", "sandbox"]
        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch.dict(os.environ, {"REWARDS_API_KEY": server.keys["sandbox"]}),
            redirect_stdout(out),
            redirect_stderr(err),
        ):
            status = main(["api", *args, *target])
        assert status == 0, err.getvalue()
        return json.loads(out.getvalue())

    programme_id = created.id
    shown = api("programmes", "update", programme_id, "--timezone", "Asia/Tokyo", "--clear-starts-at")
    assert (shown["timezone"], shown["starts_at"]) == ("Asia/Tokyo", None)
    assert api("programmes", "deactivate", programme_id)["status"] == "inactive"
    assert api("programmes", "activate", programme_id)["status"] == "active"
    assert api("programmes", "restore", programme_id, "--version", "1")["timezone"] == "Europe/Madrid"
    made = api("programmes", "create", "--name", "Via CLI", "--asset-id", asset["id"], "--timezone", "Africa/Nairobi")
    assert (made["timezone"], made["status"]) == ("Africa/Nairobi", "active")


# --- storage -------------------------------------------------------------------------------------------------


def test_migration_15_gives_existing_rows_utc_no_window_and_active(tmp_path: Path) -> None:
    path = tmp_path / "before.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
        "applied_at TIMESTAMP NOT NULL)"
    )
    for version, description, statements, *_ in sorted(MIGRATIONS):
        if version < 15:
            for statement in statements:
                con.execute(statement)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, utcnow()])
    now = utcnow()
    con.execute(
        "INSERT INTO programmes VALUES ('prg_1', 'org_1', 'sandbox', 'Old', 'ast_1', NULL, 1, 'ver_2', ?)", [now]
    )
    for version_id, number, status in (("ver_1", 1, "published"), ("ver_2", None, "draft")):
        con.execute(
            "INSERT INTO programme_versions VALUES (?, 'org_1', 'sandbox', 'prg_1', ?, ?, NULL, NULL, ?)",
            [version_id, number, status, now],
        )
    con.close()
    database = Database(path)
    try:
        store = reader(database).programmes
        scope = Scope("org_1", "sandbox")
        programme = store.get(scope, "prg_1")
        assert programme is not None
        assert (programme.status, programme.timezone, programme.starts_at, programme.ends_at) == (
            "active",
            "UTC",
            None,
            None,
        )
        assert [(v.timezone, v.starts_at, v.ends_at) for v in store.versions(scope, "prg_1")] == [
            ("UTC", None, None)
        ] * 2
        assert [row.id for row in store.live_versions(scope)] == ["ver_1"]
    finally:
        database.close()
