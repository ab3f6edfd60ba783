"""GET /v1/events/export over a real server and DuckDB file: pages by time and resumes, NDJSON and Parquet hold the
same rows, another tenant's (or environment's) events never appear, the permission and the range are checked, and
a long export does not hold up POST /events."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pyarrow.parquet as pq
import pytest

from rewards_lab.contract.errors import REGISTRY
from rewards_lab.store.database import Database
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, two_tenant_server, wait_until_serving

DAYS = 6
MARCH = {"since": "2026-03-01T00:00:00Z", "until": "2026-04-01T00:00:00Z"}  # the module's history (other tests add)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, object]]]:
    yield from two_tenant_server(tmp_path_factory.mktemp("export") / "export.duckdb")


def _post_events(http: httpx.Client, prefix: str, count: int) -> list[str]:
    """`count` events over DAYS days, three at each instant (ties order by external_event_id)."""
    ids = []
    for i in range(count):
        day, slot = divmod(i // 3, 4)
        body = {
            "type": "order.completed",
            "external_event_id": f"{prefix}-{count - i:03d}",  # ids against time order: the sort is not by id alone
            "customer_id": f"{prefix}-customer",
            "occurred_at": f"2026-03-{(day % DAYS) + 1:02d}T{10 + slot:02d}:00:00Z",
            "data": {"amount": 20 + i, "note": "x" * (i % 5), "big": 12345678901234567890},
        }
        response = http.post("/events", json=body)
        assert response.status_code == 202, response.text
        ids.append(body["external_event_id"])
    return ids


def _ndjson(content: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in content.decode().splitlines()]


@pytest.fixture(scope="module")
def history(live: tuple[LiveServer, dict[str, object]]) -> list[str]:
    server, other = live
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        ids = _post_events(http, "acme", 40)
    with httpx.Client(base_url=server.base_url, headers=server.headers("production"), timeout=10) as http:
        _post_events(http, "prod", 5)
    other_keys = other["api_keys"]
    assert isinstance(other_keys, dict)
    headers = {
        "Authorization": f"Bearer {other_keys['sandbox']}",
        "X-Organization-ID": str(other["organization_id"]),
        "X-Environment": "sandbox",
    }
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as http:
        _post_events(http, "other", 5)
    return ids


def _export(server: LiveServer, environment: str = "sandbox", **params: Any) -> httpx.Response:
    response = httpx.get(
        f"{server.base_url}/events/export", params=params, headers=server.headers(environment), timeout=30
    )
    assert response.status_code == 200, response.text
    return response


def test_pages_by_time_resume_after_the_last_event_and_cover_the_range_once(
    live: tuple[LiveServer, dict[str, object]], history: list[str]
) -> None:
    server, _ = live
    whole = _export(server, since="2026-03-01T00:00:00Z", until="2026-04-01T00:00:00Z")
    rows = _ndjson(whole.content)
    assert sorted(r["external_event_id"] for r in rows) == sorted(history)
    keys = [(r["occurred_at"], r["external_event_id"]) for r in rows]
    assert keys == sorted(keys)  # (occurred_at, external_event_id) order
    assert "X-Export-Next-After" not in whole.headers and whole.headers["X-Export-Rows"] == str(len(history))

    paged: list[dict[str, Any]] = []
    params: dict[str, Any] = {"since": "2026-03-01T00:00:00Z", "limit": 7}
    answers = 0
    while True:
        answer = _export(server, **params)
        answers += 1
        page = _ndjson(answer.content)
        assert len(page) == int(answer.headers["X-Export-Rows"]) <= 7
        paged += page
        after = answer.headers.get("X-Export-Next-After")
        if after is None:
            break
        assert unquote(after) == page[-1]["external_event_id"]
        params |= {
            "after": unquote(after),
            "until": answer.headers["X-Export-Until"],
        }  # until fixed by the first answer
    assert answers == -(-len(history) // 7)
    assert paged == rows

    # a narrower range: since inclusive, until exclusive, on occurred_at
    day = _ndjson(_export(server, since="2026-03-02T00:00:00Z", until="2026-03-03T00:00:00Z").content)
    assert day and {r["occurred_at"][:10] for r in day} == {"2026-03-02"}
    assert len(day) == sum(1 for r in rows if r["occurred_at"].startswith("2026-03-02"))


def test_ndjson_and_parquet_hold_the_same_rows_in_the_columns_the_replay_reads(
    live: tuple[LiveServer, dict[str, object]], history: list[str]
) -> None:
    server, _ = live
    lines = _ndjson(_export(server, include="executions", **MARCH).content)
    parquet = _export(server, format="parquet", include="executions", limit=1000, **MARCH)
    assert parquet.headers["content-type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(parquet.content))
    assert table.column_names[:5] == ["external_event_id", "type", "customer_id", "occurred_at", "data"]
    assert str(table.schema.field("occurred_at").type) == "timestamp[us, tz=UTC]"
    from_parquet = table.to_pylist()
    assert len(from_parquet) == len(lines) == len(history)
    for line, row in zip(lines, from_parquet, strict=True):
        assert row["external_event_id"] == line["external_event_id"]
        assert row["occurred_at"].isoformat().replace("+00:00", "Z") == line["occurred_at"]
        assert json.loads(row["data"]) == line["data"]
        assert json.loads(row["executions"]) == line["executions"] == []  # no programme: nothing issued
        assert (row["type"], row["customer_id"], row["status"]) == (line["type"], line["customer_id"], line["status"])
    # the data is the stored JSON text: a 20-digit integer stays exact (no float on the way)
    assert '"big":12345678901234567890' in _export(server, limit=1, **MARCH).text


def test_another_tenant_or_environment_never_appears(
    live: tuple[LiveServer, dict[str, object]], history: list[str]
) -> None:
    server, _ = live
    ids = {r["external_event_id"] for r in _ndjson(_export(server, **MARCH).content)}
    assert ids == set(history)
    production = {r["external_event_id"] for r in _ndjson(_export(server, "production").content)}
    assert production == {f"prod-{n:03d}" for n in range(1, 6)}
    # the other organization's ids cannot be resumed from either
    refused = httpx.get(
        f"{server.base_url}/events/export", params={"after": "other-001"}, headers=server.headers(), timeout=10
    )
    error = refused.json()["error"]
    assert refused.status_code == REGISTRY["field_invalid"].http_status
    assert (error["code"], error["details"]["field"]) == ("field_invalid", "after")


def test_a_key_without_events_view_is_refused(live: tuple[LiveServer, dict[str, object]]) -> None:
    server, _ = live
    created = httpx.post(
        f"{server.base_url}/developer/api-keys",
        json={"name": "writer only", "permissions": ["events.write"]},
        headers=server.headers(),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    key = created.json()["data"]["secret"]
    headers = {**server.headers(), "Authorization": f"Bearer {key}"}
    refused = httpx.get(f"{server.base_url}/events/export", headers=headers, timeout=10)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "permission_denied" and "events.view" in json.dumps(error["details"])


@pytest.mark.parametrize(
    ("params", "code", "field"),
    [
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "period_invalid", "until"),
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-02T00:00:00Z"}, "period_invalid", "until"),
        ({"since": "yesterday"}, "period_invalid", "since"),
        ({"until": "2026-13-01T00:00:00Z"}, "period_invalid", "until"),
        ({"format": "csv"}, "field_invalid", "format"),
        ({"include": "ledger"}, "field_invalid", "include"),
        ({"limit": "0"}, "field_invalid", "limit"),
        ({"limit": "100001"}, "field_invalid", "limit"),
        ({"limit": "\u00b2"}, "field_invalid", "limit"),  # a digit to str.isdigit, not to int()
        ({"after": "no-such-event"}, "field_invalid", "after"),
        ({"until": ""}, "period_invalid", "until"),  # given empty is given: not a date-time
        ({"format": ""}, "field_invalid", "format"),
        ({"after": ""}, "field_invalid", "after"),
    ],
)
def test_a_bad_request_names_its_code_and_field(
    live: tuple[LiveServer, dict[str, object]], params: dict[str, str], code: str, field: str
) -> None:
    server, _ = live
    refused = httpx.get(f"{server.base_url}/events/export", params=params, headers=server.headers(), timeout=10)
    assert refused.status_code == REGISTRY[code].http_status, refused.text  # 400 or 422
    error = refused.json()["error"]
    assert (error["code"], error["details"]["field"]) == (code, field)


def test_any_external_event_id_resumes_through_its_percent_encoded_header(
    live: tuple[LiveServer, dict[str, object]],
) -> None:
    server, _ = live
    odd = ["zz-\u00e9t\u00e9/\u2603 1", "zz-line\nbreak", "zz-plain"]  # beyond latin-1, a newline, plain
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        for name in odd:
            body = {"type": "t.x", "external_event_id": name, "customer_id": "c", "occurred_at": "2025-06-01T00:00:00Z"}
            assert http.post("/events", json=body).status_code == 202
    window = {"since": "2025-06-01T00:00:00Z", "until": "2025-06-02T00:00:00Z", "limit": 1}
    seen: list[str] = []
    while True:
        answer = _export(server, **window)
        seen += [r["external_event_id"] for r in _ndjson(answer.content)]
        following = answer.headers.get("X-Export-Next-After")
        if following is None:
            break
        assert following.isascii() and "\n" not in following
        window["after"] = unquote(following)
    assert seen == sorted(odd)


# an export in progress and the write path ---------------------------------------------------------------------
BULK = 60_000


def _server_with_bulk_history(db: Path) -> LiveServer:
    """A server whose file already holds BULK processed events (written before it starts: fast)."""
    boot = bootstrap(db, "Bulk")
    organization = str(boot["organization_id"])
    database = Database(db)
    try:
        with database.transaction() as tx:
            tx.execute(
                "INSERT INTO events BY NAME SELECT 'evt_bulk_' || i AS id, ? AS organization_id, "
                "'sandbox' AS environment, 'bulk-' || lpad(i::VARCHAR, 6, '0') AS external_event_id, "
                "'order.completed' AS type, 'bulk-customer' AS customer_id, "
                "TIMESTAMP '2026-01-01' + to_seconds(i) AS occurred_at, "
                "'{\"amount\": ' || (i % 100) || ', \"pad\": \"' || repeat('p', 200) || '\"}' AS data, "
                "'h' || i AS payload_hash, 'processed' AS status, 1 AS attempts, "
                "TIMESTAMP '2026-01-01' AS received_at FROM range(?) t(i)",
                [organization, BULK],
            )
    finally:
        database.close()
    port = free_port()
    log = (db.parent / "bulk.server.log").open("wb")
    process = spawn(cli("serve", "--db", str(db), "--port", str(port)), log)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(base_url, process, log)
    keys = boot["api_keys"]
    assert isinstance(keys, dict)
    return LiveServer(db, base_url, organization, keys, process, log, boot)


def test_an_export_in_progress_does_not_hold_up_new_events(tmp_path: Path) -> None:
    server = _server_with_bulk_history(tmp_path / "bulk.duckdb")
    try:
        with (
            httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as reader,
            httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as writer,
            reader.stream("GET", "/events/export", params={"limit": BULK}) as export,
        ):
            assert export.status_code == 200
            chunks = export.iter_bytes()
            received = [next(chunks)]  # the export has started; we read no further for now: it waits on us
            started = time.monotonic()
            body = {
                "type": "order.completed",
                "external_event_id": "during-export",
                "customer_id": "c1",
                "occurred_at": "2026-01-01T00:00:30Z",  # inside the range being exported
                "data": {"amount": 5},
            }
            posted = writer.post("/events", json=body)
            assert posted.status_code == 202, posted.text
            event_id = posted.json()["data"]["id"]
            while writer.get(f"/events/{event_id}").json()["data"]["status"] != "processed":
                assert time.monotonic() - started < 5, "the event waited for the export"
                time.sleep(0.02)
            assert time.monotonic() - started < 5
            received += list(chunks)
            rows = int(export.headers["X-Export-Rows"])
        exported = _ndjson(b"".join(received))  # the whole export came, after the event went through
        assert rows == len(exported) == BULK
        assert "during-export" not in {r["external_event_id"] for r in exported}  # it read its snapshot
        # the event posted meanwhile is in the next export
        again = httpx.get(
            f"{server.base_url}/events/export",
            params={"since": "2026-01-01T00:00:30Z", "until": "2026-01-01T00:00:31Z"},
            headers=server.headers(),
            timeout=30,
        )
        assert sorted(r["external_event_id"] for r in _ndjson(again.content)) == ["bulk-000030", "during-export"]
    finally:
        server.stop()
