"""GET /v1/health/ready: readiness for load balancers and orchestrators (GET /v1/health stays liveness).

Unauthenticated and without tenant data, like /v1/health, and like it outside the OpenAPI document (whose
operations all act for a principal). 200 with the report when ready; 503 with the same report (its `failing`
names the checks) and `Retry-After` when not. Probes are counted per address in their own budget
(`rate_limits.HEALTH_LIMIT_PER_MINUTE`): each one writes a row.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.service.health import readiness

router = APIRouter()
NOT_READY_RETRY_AFTER_S = 5


@router.get("/health/ready", include_in_schema=False)
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
