"""GET /v1/health (liveness) and GET /v1/health/ready (readiness), for operators and load balancers.

Unauthenticated and without tenant data (queue depths, worker liveness), and outside the OpenAPI document, whose
operations all act for a principal. Readiness answers 200 with the report when ready; 503 with the same report
(its `failing` names the checks) and `Retry-After` when not. Probes are counted per address in their own budget
(`rate_limits.HEALTH_LIMIT_PER_MINUTE`): each one writes a row.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint
from rewards_lab.service.health import health, readiness

NOT_READY_RETRY_AFTER_S = 5


async def service_health(request: Request) -> Response:
    workers: dict[str, tuple[bool, Any]] = {}
    for name, worker in (
        ("events", request.app.state.worker),
        ("deliveries", request.app.state.delivery_worker),
        ("retention", getattr(request.app.state, "retention_worker", None)),
    ):
        if worker is not None:
            workers[name] = (worker.alive, getattr(worker, "last_cycle_at", None))
    intake = getattr(request.app.state, "intake", None)
    waiting = intake.depth() if intake is not None else 0
    request_log = request.app.state.request_log
    result = await run_in_threadpool(
        health, database_of(request), workers, waiting, request_log_dropped=request_log.dropped
    )
    return success(result, request_id_of(request))


async def service_readiness(request: Request) -> Response:
    workers: dict[str, tuple[bool, Any]] = {}
    for name, worker in (("events", request.app.state.worker), ("deliveries", request.app.state.delivery_worker)):
        if worker is not None:
            workers[name] = (worker.alive, getattr(worker, "last_cycle_at", None))
    report = await run_in_threadpool(
        readiness, database_of(request), workers, min_free_disk_bytes=request.app.state.min_free_disk_bytes
    )
    if report.status == "ready":
        return success(report, request_id_of(request))
    response = success(report, request_id_of(request), 503)
    response.headers["Retry-After"] = str(NOT_READY_RETRY_AFTER_S)
    return response


BINDINGS: dict[str, Endpoint] = {"service_health": service_health, "service_readiness": service_readiness}
