"""POST /v1/events served in front of FastAPI's own middleware stack (the hottest operation).

At thousands of events per second, FastAPI's per-request layers (server-error, telemetry and body-limit
middleware, the route table's linear match) cost as much as the operation. `ServiceApp.__call__` sends POST
/v1/events straight to a chain built once: the request log, the response headers (X-Request-ID, RateLimit-*),
then `EventsEndpoint`, which runs the same handler (`routes.submit_event`) with the same errors and envelope.
Every other request goes through FastAPI as usual; the route stays declared (and documented) in the router.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from rewards_lab.api.context import request_id_of
from rewards_lab.api.envelope import API_VERSION, failure
from rewards_lab.api.routes import submit_event
from rewards_lab.contract.errors import ServiceError

log = logging.getLogger(__name__)
EVENTS_PATH = f"/{API_VERSION}/events"


class EventsEndpoint:
    """The innermost ASGI app of the hot chain: the handler, and the envelope for any error it raises."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await submit_event(request)
        except ServiceError as error:
            response = failure(error, request_id_of(request))
        except Exception:  # noqa: BLE001 - never a stack trace to the client
            log.exception("unexpected error on POST %s", EVENTS_PATH)
            response = failure(ServiceError("internal_error"), request_id_of(request))
        await response(scope, receive, send)


class ServiceApp(FastAPI):
    """FastAPI, plus `hot_path`: the ASGI chain that answers POST /v1/events before FastAPI's stack."""

    hot_path: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.hot_path is not None
            and scope["type"] == "http"
            and scope["path"] == EVENTS_PATH
            and scope["method"] == "POST"
            and not self.root_path
        ):
            scope["app"] = self  # what Starlette sets: handlers reach app.state through the request
            await self.hot_path(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
