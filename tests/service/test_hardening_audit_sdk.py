"""Issue 14, item 17: X-SDK-Version is recorded in the request log (validated, capped, null when absent), shown
and filtered in GET /developer/logs, and broken down in GET /developer/usage. Against a real server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.client import SDK_VERSION, RewardsClient
from rewards_lab.service.request_log import MAX_SDK_VERSION_LENGTH, sdk_version_from
from tests.live_server import LiveServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("sdk") / "sdk.duckdb", "Acme")
    yield live
    live.stop()


def _logged(http: httpx.Client, request_id: str) -> dict[str, Any]:
    """The request log is flushed at least every second: poll (bounded) for the entry."""
    for _ in range(50):
        found = http.get("/developer/logs", params={"request_id": request_id}).json()["data"]
        if found:
            entry: dict[str, Any] = found[0]
            return entry
        time.sleep(0.1)
    raise AssertionError(f"{request_id} never reached the request log")


def test_the_sdk_version_is_validated_and_capped() -> None:
    assert sdk_version_from("rewards-lab-python/0.1.0") == "rewards-lab-python/0.1.0"
    assert sdk_version_from("x" * MAX_SDK_VERSION_LENGTH) == "x" * MAX_SDK_VERSION_LENGTH
    for refused in ("", "x" * (MAX_SDK_VERSION_LENGTH + 1), "two words", "café/1", "<script>", "-leading", "none"):
        assert sdk_version_from(refused) is None, refused


def test_each_request_records_its_sdk_version_and_logs_filter_by_it(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        sent = {
            "sdk-plain": None,
            "sdk-old": "acme-node/1.2.3",
            "sdk-long": "x" * (MAX_SDK_VERSION_LENGTH + 1),
            "sdk-bad": "evil value; drop table",
        }
        for request_id, version in sent.items():
            extra = {"X-Request-ID": request_id, **({"X-SDK-Version": version} if version else {})}
            assert http.get("/customers", headers=extra).status_code == 200
        event = {"type": "order.completed", "external_event_id": "sdk-e1", "customer_id": "c-1", "data": {}}
        hot = http.post("/events", json=event, headers={"X-Request-ID": "sdk-hot", "X-SDK-Version": "acme-go/2.0"})
        assert hot.status_code == 202  # answered by the hot path
        stored = {request_id: _logged(http, request_id)["sdk_version"] for request_id in [*sent, "sdk-hot"]}
        assert stored == {
            "sdk-plain": None,
            "sdk-old": "acme-node/1.2.3",
            "sdk-long": None,  # over 64 characters: not stored (never truncated)
            "sdk-bad": None,
            "sdk-hot": "acme-go/2.0",
        }
        old = http.get("/developer/logs", params={"sdk_version": "acme-node/1.2.3"}).json()["data"]
        assert [e["request_id"] for e in old] == ["sdk-old"]
        without = http.get("/developer/logs", params={"sdk_version": "none"}).json()["data"]
        assert {"sdk-plain", "sdk-long", "sdk-bad"} <= {e["request_id"] for e in without}
        assert all(e["sdk_version"] is None for e in without)
        refused = http.get("/developer/logs", params={"sdk_version": "no spaces please"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "field_invalid"
        assert refused.json()["error"]["details"]["field"] == "sdk_version"


def test_usage_breaks_requests_down_by_sdk_version(tmp_path: Path) -> None:
    """A fresh tenant, so that every request in the usage is one this test made."""
    live = start_server(tmp_path / "usage.duckdb", "Acme")
    try:
        client = RewardsClient(live.base_url, live.keys["production"], live.organization_id, "production")
        with client:
            for _ in range(3):
                client.list_customers()
        headers = live.headers("production")
        with httpx.Client(base_url=live.base_url, headers=headers, timeout=10) as http:
            http.get("/customers/cus_missing", headers={"X-SDK-Version": "acme-node/1.2.3"})  # 404
            http.get("/customers", headers={"X-Request-ID": "usage-marker"})
            _logged(http, "usage-marker")
            # the marker is logged, so every request before it is too (the log keeps arrival order); the polls
            # of `_logged` (no version either) may or may not be in yet
            usage = http.get("/developer/usage").json()["data"]
            versions = {v["sdk_version"]: v for v in usage["sdk_versions"]}
            assert sum(v["total"] for v in versions.values()) == usage["requests"]["total"]
        assert versions[SDK_VERSION]["total"] == 3 and versions[SDK_VERSION]["by_status_class"] == {"2xx": 3}
        assert versions["acme-node/1.2.3"] == {
            "sdk_version": "acme-node/1.2.3",
            "total": 1,
            "by_status_class": {"4xx": 1},
            "last_seen_at": versions["acme-node/1.2.3"]["last_seen_at"],
        }
        assert versions["acme-node/1.2.3"]["last_seen_at"] is not None
        assert versions[None]["total"] >= 1  # the marker (and the polls logged so far) sent no version
        assert list(versions)[-1] is None  # requests without a version come last
    finally:
        live.stop()
