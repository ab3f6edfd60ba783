"""POST /v1/events answers the same through the hot path as through the declared FastAPI route, errors included."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from rewards_lab.api.app import create_app
from rewards_lab.api.hot_path import EventsHotPath
from rewards_lab.contract.scope import Scope
from rewards_lab.security import access
from rewards_lab.service.request_log import LogRecord
from rewards_lab.store.database import Database

_VOLATILE = re.compile(r'"(evt_[0-9a-z]+|req_[0-9a-f]{32}|\d{4}-\d\d-\d\dT[0-9:.]+Z)"')
_BODY = {"type": "order.completed", "external_event_id": "e-1", "customer_id": "c1", "data": {"amount": 42.50}}


def _serve(app: FastAPI, work: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    """Run `work` against the app in process (the intake thread running, as the lifespan would start it)."""

    async def main() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await work(client)

    app.state.intake.start()
    try:
        asyncio.run(main())
    finally:
        app.state.intake.stop()


def _cases(key: str, read_only: str, scope: Scope) -> list[tuple[str, dict[str, str], bytes]]:
    good = {"Authorization": f"Bearer {key}", "X-Organization-ID": scope.organization_id, "X-Environment": "sandbox"}
    json_body = b'{"type": "order.completed", "external_event_id": "%s", "customer_id": "c1", "data": {"n": 1.10}}'
    return [
        ("no key", {}, b"{}"),
        ("not bearer", {**good, "Authorization": f"Basic {key}"}, b"{}"),
        ("unknown key", {**good, "Authorization": "Bearer rlk_sand_nope"}, b"{}"),
        ("no organization", {k: v for k, v in good.items() if k != "X-Organization-ID"}, b"{}"),
        ("other organization", {**good, "X-Organization-ID": "org_other"}, b"{}"),
        ("bad environment", {**good, "X-Environment": "staging"}, b"{}"),
        ("other environment", {**good, "X-Environment": "production"}, b"{}"),
        ("no permission", {**good, "Authorization": f"Bearer {read_only}"}, json_body % b"p-1"),
        ("not json", good, b"{not json"),
        ("not an object", good, b"[1, 2]"),
        ("too large", good, b"x" * 1_048_577),
        ("empty", good, b""),
        ("missing field", good, b'{"type": "order.completed"}'),
        ("unknown field", good, b'{"type": "a.b", "external_event_id": "u", "customer_id": "c", "colour": "red"}'),
        ("bad type", good, b'{"type": "Not A Type!", "external_event_id": "u", "customer_id": "c"}'),
        ("bad time", good, b'{"type": "a.b", "external_event_id": "u", "customer_id": "c", "occurred_at": "x"}'),
        ("accepted", {**good, "X-Request-ID": "trace-1"}, json_body % b"ok-%s"),
        ("duplicate header", {**good, "X-Request-ID": "trace-2"}, json_body % b"dup"),
        ("retry", good, json_body % b"dup"),
        ("mismatch", good, b'{"type": "order.completed", "external_event_id": "dup", "customer_id": "c2"}'),
    ]


async def _answer(client: httpx.AsyncClient, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], str]:
    response = await client.post("/v1/events", headers=headers, content=body)
    kept = {k: v for k, v in response.headers.items() if k not in {"ratelimit-remaining", "ratelimit-reset"}}
    if kept.get("x-request-id", "").startswith("req_"):
        kept["x-request-id"] = "req_"
    return response.status_code, kept, _VOLATILE.sub('"~"', response.text)


@pytest.mark.parametrize("hot", [True, False])
def test_requests_are_logged_the_same_way(db: Database, scope: Scope, hot: bool) -> None:
    key = access.create_api_key(db, scope, "k", ["events.write"]).secret
    app = create_app(db, run_worker=False)
    assert isinstance(app.hot_path, EventsHotPath)  # type: ignore[attr-defined]
    if not hot:
        app.hot_path = None  # type: ignore[attr-defined]
    records: list[LogRecord] = []
    app.state.request_log.record = records.append
    headers = {"Authorization": f"Bearer {key}", "X-Organization-ID": scope.organization_id, "X-Environment": "sandbox"}

    async def work(client: httpx.AsyncClient) -> None:
        await client.post("/v1/events", headers=headers, json=_BODY)
        await client.post("/v1/events", headers={**headers, "X-Request-ID": "mine"}, content=b"{")

    _serve(app, work)
    first, second = records
    assert first[:3] == (scope.organization_id, "sandbox", first.request_id) and first.status == 202
    assert (first.method, first.path, first.operation) == ("POST", "/v1/events", "/v1/events")
    assert second.request_id == "mine" and second.status == 422 and second.principal_id == first.principal_id


def test_every_answer_equals_the_declared_routes(db: Database, scope: Scope) -> None:
    key = access.create_api_key(db, scope, "k", ["events.write"]).secret
    read_only = access.create_api_key(db, scope, "r", ["events.view"]).secret
    app = create_app(db, run_worker=False)
    hot_path = app.hot_path  # type: ignore[attr-defined]

    async def work(client: httpx.AsyncClient) -> None:
        for name, headers, body in _cases(key, read_only, scope):
            app.hot_path = hot_path  # type: ignore[attr-defined]
            fast = await _answer(client, headers, body.replace(b"%s", b"hot"))
            fast = (fast[0], fast[1], fast[2].replace("ok-hot", "ok-~"))
            app.hot_path = None  # type: ignore[attr-defined]
            slow = await _answer(client, headers, body.replace(b"%s", b"rte"))
            slow = (slow[0], slow[1], slow[2].replace("ok-rte", "ok-~"))
            assert fast == slow, name
            assert fast[1]["content-type"] == "application/json" and "ratelimit-limit" in fast[1], name

    _serve(app, work)


def test_a_client_that_goes_away_is_logged_and_answered_like_the_route(db: Database, scope: Scope) -> None:
    """A disconnect before the body: both paths send nothing and log 499 (no internal_error, no stack trace)."""
    app = create_app(db, run_worker=False)
    key = access.create_api_key(db, scope, "k", ["events.write"]).secret
    records: list[LogRecord] = []
    app.state.request_log.record = records.append
    headers = [
        (b"authorization", f"Bearer {key}".encode()),
        (b"x-organization-id", scope.organization_id.encode()),
        (b"x-environment", b"sandbox"),
    ]
    answers: list[dict[str, Any]] = []

    async def run(hot: bool) -> None:
        app.hot_path = hot_path if hot else None  # type: ignore[attr-defined]

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            answers.append(message)

        scope_ = {"type": "http", "method": "POST", "path": "/v1/events", "headers": headers, "query_string": b""}
        scope_ |= {"root_path": "", "client": ("127.0.0.1", 1), "server": ("t", 80), "scheme": "http"}
        await app(scope_, receive, send)  # neither path lets ClientDisconnect escape to the server

    hot_path = app.hot_path  # type: ignore[attr-defined]

    async def work(_: httpx.AsyncClient) -> None:
        await run(True)
        await run(False)

    _serve(app, work)
    assert answers == []
    assert [(record.status, record.operation) for record in records] == [(499, "/v1/events")] * 2


def test_httpx_sees_one_envelope(db: Database, scope: Scope) -> None:
    key = access.create_api_key(db, scope, "k", ["events.write"]).secret
    headers = {"Authorization": f"Bearer {key}", "X-Organization-ID": scope.organization_id, "X-Environment": "sandbox"}
    answers: list[httpx.Response] = []

    async def work(client: httpx.AsyncClient) -> None:
        answers.append(await client.post("/v1/events", headers=headers, json=_BODY))

    _serve(create_app(db, run_worker=False), work)
    (response,) = answers
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"data", "meta"} and body["meta"]["version"] == "v1"
    assert body["meta"]["request_id"] == response.headers["x-request-id"]
    assert body["data"]["data"] == {"amount": 42.5} and body["data"]["status"] == "received"
