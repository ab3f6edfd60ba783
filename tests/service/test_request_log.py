"""The request log and API usage over HTTP: X-Request-ID echoed and findable, filters, cursors, tenancy, the
permission, and usage figures equal to what the test sent."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from rewards_lab.worker import request_log_writer
from tests.http_helpers import live_client, ok
from tests.live_server import LiveServer, bootstrap, start_server

OTHER: dict[str, Any] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("logs") / "logs.duckdb"
    OTHER.update(bootstrap(db, "Other"))  # a second organization in the same service
    live = start_server(db, "Acme")
    yield live
    live.stop()


def _wait_logged(http: httpx.Client, request_id: str, headers: dict[str, str]) -> dict[str, Any]:
    """The log is written by a background thread at least every second: poll for the entry."""
    for _ in range(50):
        found = ok(http.get("/developer/logs", params={"request_id": request_id}, headers=headers))
        if found:
            entry: dict[str, Any] = found[0]
            return entry
        time.sleep(0.1)
    raise AssertionError(f"{request_id} never reached the request log")


def test_the_request_id_is_echoed_and_findable_in_the_log(server: LiveServer) -> None:
    with live_client(server) as http:
        created = http.post("/customers", json={"external_id": "log-1"}, headers={"X-Request-ID": "client-abc.1"})
        assert created.status_code == 201 and created.headers["x-request-id"] == "client-abc.1"
        assert created.json()["meta"]["request_id"] == "client-abc.1"
        entry = _wait_logged(http, "client-abc.1", server.headers())
        assert entry["method"] == "POST" and entry["path"] == "/v1/customers" and entry["status"] == 201
        assert entry["operation"] == "/v1/customers" and entry["environment"] == "sandbox"
        assert entry["principal_id"].startswith("key_") and 0 <= entry["duration_ms"] < 10_000
        assert set(entry) == {
            "id", "request_id", "method", "path", "operation", "status", "duration_ms", "principal_id",
            "environment", "created_at", "sdk_version",
        }  # fmt: skip
        assert entry["sdk_version"] is None  # httpx sends no X-SDK-Version
        generated = http.get("/customers/cus_missing")
        made = generated.headers["x-request-id"]
        assert made.startswith("req_") and _wait_logged(http, made, server.headers())["status"] == 404


def test_logs_filter_by_status_path_and_time_and_page_with_cursors(server: LiveServer) -> None:
    with live_client(server) as http:
        for number in range(3):
            http.get(f"/wallets/wal_missing{number}")
        http.post("/customers", content=b"{not json")
        last = http.get("/assets", headers={"X-Request-ID": "filters-last"})
        _wait_logged(http, "filters-last", server.headers())

        def logs(**params: str) -> list[dict[str, Any]]:
            return list(ok(http.get("/developer/logs", params=params)))

        wallets = logs(path="/wallets/wal_missing")
        assert len(wallets) == 3 and {e["status"] for e in wallets} == {404}
        assert [e["path"] for e in wallets] == [f"/v1/wallets/wal_missing{n}" for n in (2, 1, 0)]  # newest first
        assert logs(path="/v1/wallets/wal_missing") == wallets
        assert {e["status"] for e in logs(status="4xx")} == {404, 422}
        assert {e["status"] for e in logs(status="422")} == {422}
        assert all(e["status"] // 100 == 2 for e in logs(status="2xx"))
        assert last.status_code == 200 and logs(path="/assets")[0]["request_id"] == "filters-last"
        future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        assert logs(**{"from": future}) == []
        assert len(logs(**{"to": future, "path": "/wallets/"})) == 3
        for bad in ({"status": "4x"}, {"status": "600"}, {"path": "wallets"}):
            response = http.get("/developer/logs", params=bad)
            assert response.status_code == 422 and response.json()["error"]["code"] == "field_invalid", bad
        assert http.get("/developer/logs", params={"from": "yesterday"}).json()["error"]["code"] == "period_invalid"
        # Cursor pagination over everything, two at a time: no entry twice, none missing.
        everything = logs(limit="100")
        seen: list[str] = []
        cursor: str | None = None
        while True:
            params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
            page = http.get("/developer/logs", params=params).json()
            seen += [e["id"] for e in page["data"]]
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
        assert len(seen) == len(set(seen)) and {e["id"] for e in everything} <= set(seen)


def test_another_tenant_sees_nothing_and_the_permission_is_checked(server: LiveServer) -> None:
    with live_client(server) as http:
        http.get("/customers", headers={"X-Request-ID": "tenant-check"})
        _wait_logged(http, "tenant-check", server.headers())
        other = {
            "Authorization": f"Bearer {OTHER['api_keys']['sandbox']}",
            "X-Organization-ID": OTHER["organization_id"],
            "X-Environment": "sandbox",
        }
        assert ok(http.get("/developer/logs", params={"request_id": "tenant-check"}, headers=other)) == []
        assert all(e["path"] == "/v1/developer/logs" for e in ok(http.get("/developer/logs", headers=other)))
        production = server.headers("production")
        assert ok(http.get("/developer/logs", params={"request_id": "tenant-check"}, headers=production)) == []
        limited = ok(http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}), 201)
        denied = http.get(
            "/developer/logs", headers={**server.headers(), "Authorization": f"Bearer {limited['secret']}"}
        )
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "permission_denied"
        denied = http.get(
            "/developer/usage", headers={**server.headers(), "Authorization": f"Bearer {limited['secret']}"}
        )
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "permission_denied"


def test_usage_counts_equal_what_was_sent(server: LiveServer) -> None:
    """The other organization's production environment is a tenant that only this test uses."""
    headers = {
        "Authorization": f"Bearer {OTHER['api_keys']['production']}",
        "X-Organization-ID": OTHER["organization_id"],
        "X-Environment": "production",
    }
    sent: Counter[tuple[str, str, str]] = Counter()
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as http:

        def call(method: str, path: str, operation: str, **kwargs: Any) -> httpx.Response:
            response = http.request(method, path, **kwargs)
            sent[(method, f"/v1{operation}", f"{response.status_code // 100}xx")] += 1
            return response

        for number in range(3):
            call("POST", "/customers", "/customers", json={"external_id": f"usage-{number}"})
        for _ in range(2):
            call("GET", "/customers/cus_nope", "/customers/{customer_id}")
        event = {"type": "order.completed", "external_event_id": "usage-e1", "customer_id": "usage-0", "data": {}}
        call("POST", "/events", "/events", json=event)
        call("POST", "/customers", "/customers", json={"external_id": "usage-0"})  # 409: already exists
        call("GET", "/customers", "/customers", headers={"X-Request-ID": "usage-last"})
        for _ in range(50):
            polled = call("GET", "/developer/logs?request_id=usage-last", "/developer/logs")
            if polled.json()["data"]:
                break
            time.sleep(0.1)
        # The poll that found the marker is itself logged by the next flush (at most a second away).
        time.sleep(2 * request_log_writer.FLUSH_INTERVAL_S)
        usage = ok(http.get("/developer/usage"))
    today = datetime.now(UTC).date()
    assert usage["period_to"] == today.isoformat()
    assert usage["period_from"] == (today - timedelta(days=29)).isoformat() and len(usage["days"]) == 30
    total = sum(sent.values())
    classes = Counter[str]()
    for (_, _, status_class), count in sent.items():
        classes[status_class] += count
    assert usage["requests"] == {"total": total, "by_status_class": dict(sorted(classes.items()))}
    assert usage["days"][-1] == {
        "date": today.isoformat(),
        "total": total,
        "by_status_class": usage["requests"]["by_status_class"],
    }
    assert all(day["total"] == 0 for day in usage["days"][:-1])
    operations = {(o["method"], o["operation"], o["status_class"]): o["requests"] for o in usage["operations"]}
    assert operations == dict(sent)
    assert usage["business"] == {"events_received": 1, "rewards_issued": 0}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as http:
        tomorrow = (today + timedelta(days=1)).isoformat()
        empty = ok(http.get("/developer/usage", params={"from": tomorrow, "to": tomorrow}))
        assert empty["requests"]["total"] == 0 and len(empty["days"]) == 1
        for bad in ({"from": "2026-13-01"}, {"from": tomorrow, "to": today.isoformat()}, {"from": "2020-01-01"}):
            response = http.get("/developer/usage", params=bad)
            assert response.status_code == 422 and response.json()["error"]["code"] == "period_invalid", bad
