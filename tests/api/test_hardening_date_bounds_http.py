"""Client-supplied dates and date-times at both ends of the calendar (year 1 and year 9999) never give a 500:
the `from`/`to` of logs, audit and usage, an event's `occurred_at` (and the listing that sorts and pages by it),
and a rotation's grace period. Each is answered over HTTP by a real server: a 200, or a 4xx in the envelope with a
registered code naming the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.requests import WEBHOOK_ROTATION_MAX_GRACE_S
from tests.http_helpers import live_client
from tests.live_server import LiveServer, start_server

TIMEOUT_S = 15.0
FIRST_DAY, LAST_DAY = "0001-01-01", "9999-12-31"
EARLIEST = ("0001-01-01T00:00:00", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+00:00", "0001-01-01")
LATEST = ("9999-12-31T23:59:59.999999", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59.999999+00:00", "9999-12-31")
BEYOND = ("0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59")  # valid text, outside years 1-9999 in UTC


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    live: LiveServer = start_server(tmp_path_factory.mktemp("bounds") / "service.duckdb")
    try:
        with live_client(live, timeout=TIMEOUT_S) as client:
            yield client
    finally:
        live.stop()


def _answered(response: httpx.Response, field: str | None = None) -> dict[str, Any]:
    """A 200, or a 4xx in the envelope with a registered code (and `details.field` == field when refused)."""
    body: dict[str, Any] = response.json()
    assert response.status_code < 500, (response.request.url, body)
    if response.status_code >= 400:
        assert set(body) == {"error", "meta"}, body
        error = body["error"]
        assert error["code"] in REGISTRY and response.status_code < 500, body
        if field is not None:
            assert error["details"]["field"] == field, body
    return body


def _refused(response: httpx.Response, code: str, field: str) -> None:
    body = _answered(response, field)
    assert response.status_code == 422 and body["error"]["code"] == code, body


def test_usage_at_both_ends_of_the_calendar(http: httpx.Client) -> None:
    # `to` alone: the default 30 days before it would fall before year 1
    _refused(http.get("/developer/usage", params={"to": FIRST_DAY}), "period_invalid", "to")
    _refused(http.get("/developer/usage", params={"to": "0001-01-29"}), "period_invalid", "to")
    first_whole = _answered(http.get("/developer/usage", params={"to": "0001-01-30"}))["data"]
    assert (first_whole["period_from"], first_whole["period_to"]) == (FIRST_DAY, "0001-01-30")
    both = _answered(http.get("/developer/usage", params={"from": FIRST_DAY, "to": FIRST_DAY}))["data"]
    assert (both["period_from"], both["period_to"]) == (FIRST_DAY, FIRST_DAY) and len(both["days"]) == 1
    last = _answered(http.get("/developer/usage", params={"to": LAST_DAY}))["data"]
    assert (last["period_from"], last["period_to"]) == ("9999-12-02", LAST_DAY)
    both = _answered(http.get("/developer/usage", params={"from": LAST_DAY, "to": LAST_DAY}))["data"]
    assert len(both["days"]) == 1
    _refused(http.get("/developer/usage", params={"from": FIRST_DAY}), "period_invalid", "from")  # too long
    _refused(http.get("/developer/usage", params={"from": LAST_DAY}), "period_invalid", "to")  # after today
    _refused(http.get("/developer/usage", params={"to": "10000-01-01"}), "period_invalid", "to")
    _refused(http.get("/developer/usage", params={"from": "0000-12-31"}), "period_invalid", "from")


@pytest.mark.parametrize("path", ["/developer/logs", "/developer/audit"])
def test_logs_and_audit_at_both_ends_of_the_calendar(http: httpx.Client, path: str) -> None:
    for earliest in EARLIEST:
        _answered(http.get(path, params={"from": earliest}))
        _answered(http.get(path, params={"to": earliest}))
        for latest in LATEST:
            listed = _answered(http.get(path, params={"from": earliest, "to": latest}))
            assert "data" in listed, listed
    for latest in LATEST:
        _answered(http.get(path, params={"from": latest}))
        _answered(http.get(path, params={"to": latest}))
    for beyond in BEYOND:
        _refused(http.get(path, params={"from": beyond}), "period_invalid", "from")
        _refused(http.get(path, params={"to": beyond}), "period_invalid", "to")
    _refused(http.get(path, params={"from": "10000-01-01T00:00:00"}), "period_invalid", "from")


def test_events_at_both_ends_of_the_calendar_are_stored_listed_and_paged(http: httpx.Client) -> None:
    customer = http.post("/customers", json={"external_id": "bounds-1"}).json()["data"]
    for n, instant in enumerate(("0001-01-01T00:00:00Z", "0001-01-01T23:59:00+23:59")):
        body = {"type": "bounds", "external_event_id": f"b-{n}", "customer_id": "bounds-1", "occurred_at": instant}
        assert http.post("/events", json=body).status_code in (200, 201, 202)
    # the last instant of year 9999 is in the future: refused at intake since issue 27
    body = {"type": "bounds", "external_event_id": "b-9999", "customer_id": "bounds-1"}
    _refused(
        http.post("/events", json={**body, "occurred_at": "9999-12-31T23:59:59.999999Z"}),
        "field_invalid",
        "occurred_at",
    )
    for beyond in BEYOND:
        body = {"type": "bounds", "external_event_id": beyond, "customer_id": "bounds-1", "occurred_at": beyond}
        _refused(http.post("/events", json=body), "field_invalid", "occurred_at")
    seen: list[str] = []
    for direction in ("asc", "desc"):
        cursor: str | None = None
        for _ in range(5):  # one event per page: the cursor carries each end's date-time
            params = {
                "sort": "occurred_at",
                "direction": direction,
                "limit": "1",
                **({"cursor": cursor} if cursor else {}),
            }
            page = _answered(http.get("/events", params=params))
            assert "data" in page, page
            seen += [event["occurred_at"] for event in page["data"]]
            cursor = page["meta"].get("next_cursor")
            if not cursor:
                break
    assert "0001-01-01T00:00:00Z" in seen, seen
    deadline = time.monotonic() + TIMEOUT_S  # the worker evaluates them like any other event
    events = _answered(http.get("/events"))["data"]
    while any(e["status"] == "received" for e in events):
        assert time.monotonic() < deadline, events
        time.sleep(0.05)
        events = _answered(http.get("/events"))["data"]
    assert all(e["status"] != "failed" for e in events), events
    # the segments compare the last event's time with now (year 1 included)
    segments = _answered(http.get(f"/customers/{customer['id']}/segments"))["data"]
    assert segments["customer_id"] == customer["id"]


def test_a_rotation_grace_period_at_its_bounds(http: httpx.Client) -> None:
    hook = http.post("/webhooks", json={"url": "https://hooks.example.com/h", "events": ["reward.issued"]})
    webhook_id = _answered(hook)["data"]["id"]
    rotate = f"/webhooks/{webhook_id}/rotate-secret"
    _answered(http.post(rotate, json={"grace_period_s": WEBHOOK_ROTATION_MAX_GRACE_S}))
    _answered(http.post(rotate, json={"grace_period_s": 0}))
    for too_far in (WEBHOOK_ROTATION_MAX_GRACE_S + 1, 10**18, 10**400, -1):
        _refused(http.post(rotate, json={"grace_period_s": too_far}), "field_invalid", "grace_period_s")
