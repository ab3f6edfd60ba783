"""Reward programmes, their versions and rules, and rule simulation."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api import in_flight
from rewards_lab.api.context import database_of, json_body, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised, idempotency_key, may_override, serve
from rewards_lab.contract.guard_requests import PublishRequest
from rewards_lab.contract.operations import operation
from rewards_lab.contract.permissions import Permission
from rewards_lab.engine import simulation
from rewards_lab.service import programme_forecast, programme_lifecycle, programmes

assert operation("list_programmes").sorts == programmes.PROGRAMME_SORTS
assert operation("list_versions").sorts == programmes.VERSION_SORTS


async def publish(request: Request, program_id: str) -> Response:
    # Who publishes is passed along: a guard override is recorded with the key or account that gave it.
    principal = authorised(request, Permission.REWARDS_ACTIVATE)
    key = idempotency_key(request, required=False)
    with in_flight.holding(database_of(request), principal.scope, key):
        body = await json_body(request, PublishRequest)
        result = await run_in_threadpool(
            programmes.publish,
            database_of(request),
            principal.scope,
            program_id,
            body,
            idempotency_key=key,
            actor=principal.actor_id,
            may_override=may_override(principal),
        )
    return success(result, request_id_of(request), 201)


BINDINGS: dict[str, Endpoint] = dict(
    [
        serve("create_programme", programmes.create_programme),
        serve("list_programmes", programmes.list_programmes),
        serve("get_programme", programmes.get_programme),
        serve("update_programme", programme_lifecycle.update_programme),
        serve("deactivate_programme", programme_lifecycle.deactivate_programme),
        serve("activate_programme", programme_lifecycle.activate_programme),
        serve("list_versions", programmes.list_versions),
        ("publish", publish),
        serve("forecast_programme", programme_forecast.forecast_programme),
        serve("restore_version", programme_lifecycle.restore_version),
        serve("create_rule", programmes.create_rule),
        serve("get_rule", programmes.get_rule),
        serve("update_rule", programmes.update_rule),
        serve("delete_rule", programmes.delete_rule),
        serve("simulate_rule", simulation.simulate_rule),
        serve("simulate_programme", simulation.simulate_programme),
    ]
)
