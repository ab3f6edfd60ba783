"""The FastAPI application: one exception handler renders every error in the seed's envelope."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from rewards_lab.api import openapi_doc
from rewards_lab.api.context import request_id_of
from rewards_lab.api.developer_routes import router as developer_router
from rewards_lab.api.envelope import API_VERSION, failure
from rewards_lab.api.rate_limits import PUBLIC_LIMIT_PER_MINUTE, RateLimiter, RateState
from rewards_lab.api.request_log import RequestLogMiddleware
from rewards_lab.api.routes import REQUEST_MODELS, router
from rewards_lab.contract.errors import ServiceError
from rewards_lab.service.login_guard import LoginGuard
from rewards_lab.service.request_log import RequestLogWriter
from rewards_lab.service.sessions import DEFAULT_SESSION_LIFETIME_S
from rewards_lab.store.database import Database
from rewards_lab.worker.events import EventWorker

log = logging.getLogger(__name__)


def create_app(
    database: Database, *, run_worker: bool = True, session_lifetime_s: int = DEFAULT_SESSION_LIFETIME_S
) -> FastAPI:
    worker = EventWorker(database) if run_worker else None
    request_log = RequestLogWriter(database)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if worker is not None:
            worker.start()
        request_log.start()
        try:
            yield
        finally:
            if worker is not None:
                worker.stop()  # the batch in progress finishes (or is rolled back whole)
            request_log.stop()  # writes what is still queued
            database.checkpoint()  # fold the write-ahead log into the file before the process ends

    app = FastAPI(
        lifespan=lifespan,
        title="Rewards and Ledger Service API",
        version=API_VERSION,
        openapi_url=f"/{API_VERSION}/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.database = database
    app.state.worker = worker
    app.state.rate_limiter = RateLimiter()
    app.state.login_guard = LoginGuard()
    app.state.session_lifetime_s = session_lifetime_s
    app.state.request_log = request_log
    app.include_router(router, prefix=f"/{API_VERSION}")
    app.include_router(developer_router, prefix=f"/{API_VERSION}")

    def openapi() -> dict[str, Any]:
        """FastAPI's document, plus the schemas of the bodies the handlers parse and of the typed responses."""
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, routes=app.routes)
            openapi_doc.finish(document, REQUEST_MODELS)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.middleware("http")
    async def echo_request_id(request: Request, call_next):  # type: ignore[no-untyped-def]
        request_id = request_id_of(request)
        response: Response = await call_next(request)
        response.headers["X-Request-ID"] = request_id
        rate: RateState | None = getattr(request.state, "rate", None)
        if rate is None:  # never authenticated: counted per client address at the Public plan's limit
            client = request.client.host if request.client else "unknown"
            rate = request.app.state.rate_limiter.charge(f"address/{client}", PUBLIC_LIMIT_PER_MINUTE)
        response.headers.update(rate.headers())
        return response

    app.add_middleware(RequestLogMiddleware, writer=request_log)  # outermost: sees every status and duration

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
        if error.status_code in (404, 405):
            detail = f"no operation {request.method} {request.url.path}"
            return failure(ServiceError("route_not_found", detail), request_id_of(request))
        return failure(ServiceError("internal_error"), request_id_of(request))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return failure(ServiceError("internal_error"), request_id_of(request))

    return app
