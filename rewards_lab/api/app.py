"""The FastAPI application: one exception handler renders every error in the seed's envelope."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards_lab.api import openapi_doc
from rewards_lab.api.address_gate import AddressGate
from rewards_lab.api.context import request_id_of
from rewards_lab.api.deprecations import RAW_HEADERS_BY_PATH
from rewards_lab.api.envelope import API_VERSION, failure
from rewards_lab.api.hot_path import EventsHotPath, ServiceApp
from rewards_lab.api.rate_limits import (
    PUBLIC_LIMIT_PER_MINUTE,
    UNAUTHENTICATED_LIMIT_PER_MINUTE,
    RateState,
    limiter_for,
)
from rewards_lab.api.request_log import RequestLogMiddleware
from rewards_lab.api.routes import REQUEST_MODELS, readiness_router, router
from rewards_lab.api.runtime import ServingRuntime
from rewards_lab.contract.errors import ServiceError
from rewards_lab.engine.event_processing import DEFAULT_BATCH_SIZE
from rewards_lab.security.login_guard import guard_for
from rewards_lab.security.sessions import DEFAULT_SESSION_LIFETIME_S
from rewards_lab.service.deliveries import DeliverySettings
from rewards_lab.service.health import DEFAULT_MIN_FREE_DISK_MB
from rewards_lab.service.retention import RetentionSettings
from rewards_lab.store.api import Store, as_duckdb
from rewards_lab.worker.admin_socket import AdminSocket
from rewards_lab.worker.deliveries import DeliveryWorker
from rewards_lab.worker.event_intake import EventIntake
from rewards_lab.worker.events import EventWorker
from rewards_lab.worker.expiry import INTERVAL_S as EXPIRY_INTERVAL_S
from rewards_lab.worker.expiry import ExpiryWorker
from rewards_lab.worker.request_log_writer import RequestLogWriter
from rewards_lab.worker.retention import RetentionWorker
from rewards_lab.worker.tiers import INTERVAL_S as TIER_INTERVAL_S
from rewards_lab.worker.tiers import TierWorker

# The background workers' kinds, as `create_app(run_worker=...)` names them.
BACKGROUND_WORKERS = ("events", "deliveries", "expiry", "retention", "tiers")

log = logging.getLogger(__name__)


class ResponseHeaders:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware): X-Request-ID and the RateLimit headers on every
    response, and `Deprecation`, `Sunset` and `Link` on every response of a deprecated path (api.deprecations).
    Requests that never authenticated are counted per client address at the Public plan's limit.

    It also answers what nothing inside answered: an exception that escapes the app before the response started
    becomes the `internal_error` envelope here, with these headers (left to Starlette's outermost error layer, it
    would be answered without them). A client that went away (`ClientDisconnect`) is no error and gets no answer:
    it passes on to `RequestLogMiddleware`, which logs it as 499."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":  # raw header pairs: no Request or MutableHeaders per call
                started = True
                state: dict[str, Any] = scope.setdefault("state", {})
                request_id: str = state.get("request_id") or request_id_of(Request(scope))
                rate: RateState | None = state.get("rate")
                if rate is None:
                    client = scope.get("client")
                    address = client[0] if client else "unknown"
                    rate = scope["app"].state.rate_limiter.charge(f"address/{address}", PUBLIC_LIMIT_PER_MINUTE)
                ours = [(b"x-request-id", request_id.encode("latin-1")), *rate.raw_headers()]
                ours += RAW_HEADERS_BY_PATH.get(scope["path"], [])
                names = {name for name, _ in ours}
                message["headers"] = [pair for pair in message.get("headers", ()) if pair[0] not in names] + ours
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except ClientDisconnect:
            raise
        except Exception:
            if started:  # too late for an envelope: the server closes the connection
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            request_id = request_id_of(Request(scope))
            await failure(ServiceError("internal_error"), request_id)(scope, receive, send_with_headers)


class MethodTable:
    """Path pattern -> the methods of its operations, over the routers mounted under /v1. Starlette's own 405
    names only the first route whose path matches, and routes of one path are separate routes here."""

    def __init__(self, *routers: APIRouter) -> None:
        by_pattern: dict[str, set[str]] = {}
        for mounted in routers:
            for route in mounted.routes:
                methods = getattr(route, "methods", None)
                path = getattr(route, "path", None)
                if methods and path is not None:
                    by_pattern.setdefault(f"/{API_VERSION}{path}", set()).update(methods)
        self.entries = [(compile_path(pattern)[0], sorted(methods)) for pattern, methods in by_pattern.items()]

    def allowed(self, path: str) -> list[str]:
        methods: set[str] = set()
        for regex, route_methods in self.entries:
            if regex.match(path):
                methods.update(route_methods)
        return sorted(methods)


def create_app(
    database: Store,
    *,
    run_worker: bool | Collection[str] = True,
    delivery_settings: DeliverySettings | None = None,
    session_lifetime_s: int = DEFAULT_SESSION_LIFETIME_S,
    worker_batch_size: int = DEFAULT_BATCH_SIZE,
    retention_settings: RetentionSettings | None = None,
    unauthenticated_limit_per_minute: int = UNAUTHENTICATED_LIMIT_PER_MINUTE,
    min_free_disk_bytes: int = DEFAULT_MIN_FREE_DISK_MB * 1_048_576,
    expiry_interval_s: float = EXPIRY_INTERVAL_S,
    tier_interval_s: float = TIER_INTERVAL_S,
    admin_socket: bool = False,
) -> FastAPI:
    """The service over `database`. `run_worker`: every background worker (True), none (False), or those of these
    kinds (`BACKGROUND_WORKERS`; `api.serving` chooses per process). `admin_socket` (serve, a database file): the
    operator's Unix socket beside the file, for online backups (`worker/admin_socket.py`)."""
    kinds = set(BACKGROUND_WORKERS if run_worker is True else () if run_worker is False else run_worker)
    if unknown := kinds - set(BACKGROUND_WORKERS):
        raise ValueError(f"no background worker of kind {sorted(unknown)}")
    worker = EventWorker(database, worker_batch_size) if "events" in kinds else None
    deliveries = DeliveryWorker(database, delivery_settings) if "deliveries" in kinds else None
    intake = EventIntake(database, on_stored=worker.notify if worker is not None else None)
    request_log = RequestLogWriter(database)
    if retention_settings is not None:
        retention_settings.apply_idempotency_window()
    retention = RetentionWorker(database, retention_settings) if "retention" in kinds else None
    expiry = ExpiryWorker(database, expiry_interval_s) if "expiry" in kinds else None
    tiers = TierWorker(database, tier_interval_s) if "tiers" in kinds else None
    admin = AdminSocket(as_duckdb(database, "the admin socket (online backups of the file)")) if admin_socket else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        intake.start()
        if worker is not None:
            worker.start()
        if deliveries is not None:
            deliveries.start()
        request_log.start()
        if retention is not None:
            retention.start()
        if expiry is not None:
            expiry.start()
        if tiers is not None:
            tiers.start()
        if admin is not None:
            admin.start()
        runtime = ServingRuntime()
        runtime.start()  # before the first request: start-up's heap frozen, the GIL handed over sooner
        try:
            yield
        finally:
            runtime.stop()
            if admin is not None:
                admin.stop()  # a backup in progress finishes first
            intake.stop()  # every event already queued is stored (and answered) before the worker stops
            if worker is not None:
                worker.stop()  # the batch in progress finishes (or is rolled back whole)
            if deliveries is not None:
                deliveries.stop()  # requests in flight finish and are recorded; pending ones wait in the DB
            if retention is not None:
                retention.stop()  # after the chunk in progress (each is its own transaction)
            if expiry is not None:
                expiry.stop()  # after the round in progress (one unit of work per tenant)
            if tiers is not None:
                tiers.stop()  # the same
            request_log.stop()  # writes what is still queued
            database.checkpoint()  # fold the write-ahead log into the file before the process ends

    app = ServiceApp(
        lifespan=lifespan,
        title="Rewards and Ledger Service API",
        version=API_VERSION,
        openapi_url=f"/{API_VERSION}/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.database = database
    app.state.worker = worker
    app.state.intake = intake
    app.state.delivery_worker = deliveries
    # In this process's memory, or in the database when several processes serve it (store/shared_state.py).
    app.state.rate_limiter = limiter_for(
        database.shared_state(), unauthenticated_limit_per_minute=unauthenticated_limit_per_minute
    )
    app.state.login_guard = guard_for(database.shared_state())
    app.state.session_lifetime_s = session_lifetime_s
    app.state.request_log = request_log
    app.state.retention_worker = retention
    app.state.expiry_worker = expiry
    app.state.tier_worker = tiers
    app.include_router(router, prefix=f"/{API_VERSION}")
    app.include_router(readiness_router, prefix=f"/{API_VERSION}")
    app.state.min_free_disk_bytes = min_free_disk_bytes
    methods = MethodTable(router)

    def openapi() -> dict[str, Any]:
        """FastAPI's document, plus the schemas of the bodies the handlers parse and of the typed responses."""
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, routes=app.routes)
            openapi_doc.finish(document, REQUEST_MODELS)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    app.hot_path = EventsHotPath(app.state, request_log)  # POST /v1/events, before FastAPI's stack
    app.add_middleware(AddressGate)  # inside ResponseHeaders: refuses spent addresses before authentication
    app.add_middleware(ResponseHeaders)  # added last, so outermost: its headers go on every response
    app.add_middleware(RequestLogMiddleware, writer=request_log)  # outermost of all: every status and duration

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, error: ServiceError) -> Response:
        return failure(error, request_id_of(request))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0] if error.errors() else {"loc": ("request",), "msg": "invalid request"}
        field = ".".join(str(part) for part in first["loc"][1:]) or str(first["loc"][0])
        return failure(ServiceError("field_invalid", f"{field}: {first['msg']}", field=field), request_id_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        if error.status_code == 405:
            allowed = methods.allowed(request.url.path)
            detail = f"{request.url.path} has no operation {request.method}; it has {', '.join(allowed)}"
            response = failure(ServiceError("method_not_allowed", detail, allowed=allowed), request_id_of(request))
            response.headers["Allow"] = ", ".join(allowed)
            return response
        if error.status_code == 404:
            detail = f"no operation {request.method} {request.url.path}"
            return failure(ServiceError("route_not_found", detail), request_id_of(request))
        return failure(ServiceError("internal_error"), request_id_of(request))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return failure(ServiceError("internal_error"), request_id_of(request))

    return app
