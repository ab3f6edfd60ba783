"""The seed's last gaps over a real server on 127.0.0.1: API keys listed (prefixes only, paged, per tenant and
environment, revoked ones kept), programme versions paged, and `idempotency_request_in_progress` for a second
request that arrives while the first with the same Idempotency-Key is still in progress."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.http_helpers import ok, refused
from tests.live_server import LiveServer, two_tenant_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    yield from two_tenant_server(tmp_path_factory.mktemp("seed_gaps") / "service.duckdb")


def _envelope(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert response.status_code == 200, body
    assert set(body) >= {"data", "next_cursor", "has_more"}, body
    return body


def _pages(http: httpx.Client, path: str, **query: Any) -> list[dict[str, Any]]:
    """Every page of a list, following `next_cursor`; each page's body is checked against its `has_more`."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        body = _envelope(http.get(path, params={**query, **({"cursor": cursor} if cursor else {})}))
        pages.append(body)
        assert (body["next_cursor"] is not None) == body["has_more"]
        if not body["has_more"]:
            return pages
        cursor = body["next_cursor"]
        assert len(pages) < 50, "the cursor never ended"


def test_api_keys_list_pages_prefixes_only_and_keeps_revoked_keys(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        made = [
            ok(http.post("/developer/api-keys", json={"name": f"list-{n}", "permissions": ["customers.view"]}), 201)
            for n in range(3)
        ]
        revoked = ok(http.delete(f"/developer/api-keys/{made[1]['id']}"), 200)
        pages = _pages(http, "/developer/api-keys", limit=2)
        listed = [key for page in pages for key in page["data"]]
        raw = http.get("/developer/api-keys", params={"limit": 100}).text

    assert all(len(page["data"]) <= 2 for page in pages) and len(pages) >= 2
    ids = [key["id"] for key in listed]
    assert len(ids) == len(set(ids)), "a key appeared on two pages"
    assert {key["id"] for key in made} <= set(ids)
    # bootstrap's own sandbox key is listed too; the production key is not (another environment)
    assert len(listed) == len(made) + 1 and all(key["environment"] == "sandbox" for key in listed)
    created = [key["created_at"] for key in listed]
    assert created == sorted(created), "the default order is created_at, oldest first"
    by_id = {key["id"]: key for key in listed}
    for key in made:
        shown = by_id[key["id"]]
        assert set(shown) == {"id", "name", "prefix", "environment", "permissions", "created_at", "revoked_at"}
        assert shown["prefix"] == key["prefix"] and key["secret"].startswith(shown["prefix"])
        assert key["secret"] not in raw, "a secret appeared in the list"
        assert key["secret"][len(key["prefix"]) :] not in raw
    assert live.keys["sandbox"] not in raw and live.keys["production"] not in raw
    assert by_id[made[1]["id"]]["revoked_at"] == revoked["revoked_at"] is not None  # history kept
    assert by_id[made[0]["id"]]["revoked_at"] is None


def test_api_keys_filter_sort_and_refusals(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, other = server
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        one = ok(http.post("/developer/api-keys", json={"name": "zz-filter", "permissions": ["customers.view"]}), 201)
        ok(http.delete(f"/developer/api-keys/{one['id']}"), 200)
        revoked = [k for page in _pages(http, "/developer/api-keys", status="revoked") for k in page["data"]]
        active = [k for page in _pages(http, "/developer/api-keys", status="active") for k in page["data"]]
        assert one["id"] in {k["id"] for k in revoked} and all(k["revoked_at"] for k in revoked)
        assert one["id"] not in {k["id"] for k in active} and not any(k["revoked_at"] for k in active)
        by_name = [
            k["name"]
            for page in _pages(http, "/developer/api-keys", sort="name", direction="desc")
            for k in page["data"]
        ]
        assert by_name == sorted(by_name, reverse=True) and "zz-filter" == by_name[0]
        refused(http.get("/developer/api-keys", params={"status": "lost"}), 422, "field_invalid")
        refused(http.get("/developer/api-keys", params={"sort": "prefix"}), 422, "sort_field_invalid")
        first = _envelope(http.get("/developer/api-keys", params={"limit": 1}))
        refused(
            http.get("/developer/api-keys", params={"cursor": first["next_cursor"], "sort": "name"}),
            422,
            "cursor_invalid",
        )
        viewer = ok(http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}), 201)
        ours = {k["id"] for page in _pages(http, "/developer/api-keys") for k in page["data"]}

    as_viewer = {**live.headers(), "Authorization": f"Bearer {viewer['secret']}"}
    denied = refused(
        httpx.get(f"{live.base_url}/developer/api-keys", headers=as_viewer, timeout=10), 403, "permission_denied"
    )
    assert denied["details"]["permission"] == "developers.api_keys.manage"

    keys = other["api_keys"]
    assert isinstance(keys, dict)
    as_other = {
        "Authorization": f"Bearer {keys['sandbox']}",
        "X-Organization-ID": str(other["organization_id"]),
        "X-Environment": "sandbox",
    }
    with httpx.Client(base_url=live.base_url, headers=as_other, timeout=10) as http:
        theirs = {k["id"] for page in _pages(http, "/developer/api-keys") for k in page["data"]}
    assert theirs and theirs.isdisjoint(ours), "another organization's keys are visible"
    with httpx.Client(base_url=live.base_url, headers=live.headers("production"), timeout=10) as http:
        production = [k for page in _pages(http, "/developer/api-keys") for k in page["data"]]
    assert production and {k["environment"] for k in production} == {"production"}
    assert not {k["id"] for k in production} & ours


def test_programme_versions_page_like_every_list(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        asset = ok(http.post("/assets", json={"name": "Pages", "symbol": "PAGE", "type": "points", "decimals": 0}), 201)
        ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        programme = ok(http.post("/reward-programs", json={"name": "Paged", "asset_id": asset["id"]}), 201)
        rule = {
            "program_id": programme["id"],
            "event_type": "order.completed",
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        }
        ok(http.post("/reward-rules", json=rule), 201)
        for number in (1, 2, 3):
            published = ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
            assert published["version"]["number"] == number
        path = f"/reward-programs/{programme['id']}/versions"
        whole = _envelope(http.get(path))  # today's request: no limit, no cursor
        pages = _pages(http, path, limit=2)
        backwards = _pages(http, path, limit=3, direction="desc")
        refused(http.get(path, params={"sort": "created_at"}), 422, "sort_field_invalid")
        refused(http.get(path, params={"limit": 0}), 422, "field_invalid")
        refused(
            http.get(
                f"/reward-programs/{programme['id']}/versions",
                params={"cursor": pages[0]["next_cursor"], "direction": "desc"},
            ),
            422,
            "cursor_invalid",
        )

    numbers = [v["number"] for v in whole["data"]]
    assert numbers == [1, 2, 3, None] and whole["has_more"] is False and whole["next_cursor"] is None
    assert [[v["number"] for v in page["data"]] for page in pages] == [[1, 2], [3, None]]
    assert [[v["number"] for v in page["data"]] for page in backwards] == [[None, 3, 2], [1]]
    assert [v["status"] for v in whole["data"]] == ["published", "published", "published", "draft"]
    assert all(len(v["rules"]) == 1 for v in whole["data"])


def _head(live: LiveServer, path: str, key: str, length: int) -> bytes:
    """A request head that asks `Expect: 100-continue`: the server answers `100 Continue` only once the handler
    reads the body, that is after it has claimed the Idempotency-Key (api.in_flight)."""
    host = urlsplit(live.base_url).netloc
    lines = [
        f"POST /v1{path} HTTP/1.1",
        f"Host: {host}",
        *(f"{name}: {value}" for name, value in live.headers(**{"Idempotency-Key": key}).items()),
        "Content-Type: application/json",
        f"Content-Length: {length}",
        "Expect: 100-continue",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_until(sock: socket.socket, marker: bytes, buffer: bytes = b"") -> bytes:
    while marker not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {buffer!r}"
        buffer += chunk
    return buffer


def _response(sock: socket.socket) -> tuple[int, bytes]:
    raw = _read_until(sock, b"\r\n\r\n")
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return status, rest[:length]


def test_a_second_request_with_a_key_in_flight_is_refused(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    key = f"in-flight-{time.time_ns()}"
    body = b'{"external_id": "in-flight-customer"}'
    address = urlsplit(live.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as first:
        first.sendall(_head(live, "/customers", key, len(body)))
        continued = _read_until(first, b"\r\n\r\n")
        assert continued.startswith(b"HTTP/1.1 100 Continue"), continued  # the first holds the key, body unsent
        with httpx.Client(base_url=live.base_url, timeout=10) as http:
            second = http.post("/customers", content=body, headers=live.headers(**{"Idempotency-Key": key}))
            answered = refused(second, 409, "idempotency_request_in_progress")
            assert answered["type"] == "idempotency_error" and answered["details"]["field"] == "Idempotency-Key"
            # another key is not held up, nor a request with no key
            ok(
                http.post(
                    "/customers",
                    json={"external_id": "bystander"},
                    headers=live.headers(**{"Idempotency-Key": key + "-b"}),
                ),
                201,
            )
        first.sendall(body)
        status, answer = _response(first)
    assert status == 201, answer
    created = httpx.Response(201, content=answer).json()["data"]
    with httpx.Client(base_url=live.base_url, headers=live.headers(**{"Idempotency-Key": key}), timeout=10) as http:
        again = ok(http.post("/customers", content=body), 201)  # released: the retry gets the first's answer
        assert again == created
        refused(http.post("/customers", json={"external_id": "other"}), 409, "idempotency_key_reused")


def test_a_key_is_released_when_its_request_fails_or_is_abandoned(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    key = f"abandoned-{time.time_ns()}"
    body = b'{"external_id": "abandoned-customer"}'
    address = urlsplit(live.base_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as first:
        first.sendall(_head(live, "/customers", key, len(body)))
        assert _read_until(first, b"\r\n\r\n").startswith(b"HTTP/1.1 100 Continue")
        # the client goes away without its body: the handler sees a disconnect and lets the key go
    headers = live.headers(**{"Idempotency-Key": key})
    deadline = time.monotonic() + 10
    with httpx.Client(base_url=live.base_url, headers=headers, timeout=10) as http:
        while True:
            answer = http.post("/customers", content=body)
            if answer.status_code != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer.status_code == 201, answer.json()
        # a request that fails after claiming the key (a refused body) releases it too
        failing = f"failing-{time.time_ns()}"
        refused(http.post("/customers", content=b"{", headers={"Idempotency-Key": failing}), 422, "request_malformed")
        ok(http.post("/customers", json={"external_id": "after-failure"}, headers={"Idempotency-Key": failing}), 201)
