"""Checks of the /v1 JSON envelope and a client on a live server, shared by the HTTP tests.

`ok` wants one exact status (200 unless told); `tests.webhook_receiver.ok` accepts any 2xx when no status is
given: the webhook tests keep theirs.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.live_server import LiveServer

POLL_TIMEOUT_S = 15.0
ERROR_FIELDS = {"type", "code", "message", "details"}


def live_client(server: LiveServer, timeout: float = 10, environment: str = "sandbox") -> httpx.Client:
    """An httpx client on the server's /v1 with the environment key's headers (open it in a `with`)."""
    return httpx.Client(base_url=server.base_url, headers=server.headers(environment), timeout=timeout)


def ok(response: httpx.Response, status: int = 200) -> Any:
    """The envelope's `data`, once the status is exactly `status` (the body is the failure message)."""
    body = response.json()
    assert response.status_code == status, body
    return body["data"]


def refused(response: httpx.Response, status: int, code: str, *, exact_fields: bool = False) -> dict[str, Any]:
    """The envelope's `error`, once the status is `status` and its code `code` (and, with `exact_fields`, it
    holds exactly type, code, message and details)."""
    body = response.json()
    assert response.status_code == status, body
    if exact_fields:
        assert set(body["error"]) == ERROR_FIELDS
    assert body["error"]["code"] == code, body
    error: dict[str, Any] = body["error"]
    return error


def settled(http: httpx.Client, event_id: str) -> dict[str, Any]:
    """The event once the worker has taken it out of `received` (bounded wait: the worker runs beside intake)."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while True:
        event: dict[str, Any] = ok(http.get(f"/events/{event_id}"))
        if event["status"] != "received":
            return event
        assert time.monotonic() < deadline, "the event was never processed"
        time.sleep(0.05)
