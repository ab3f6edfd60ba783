"""The routes of /v1, one module per resource, each binding operations of the registry (`contract.operations`)
to their handlers. Path, method, permission, idempotency, error codes, models and query parameters come from the
registry; a module only says which service function (or handler) answers which operation.

Routes are added in the registry's order (the order of the document's paths). `router` holds every operation
but readiness, which stays on `readiness_router`, outside the table of methods behind 405 answers.
"""

from __future__ import annotations

from fastapi import APIRouter

from rewards_lab.api.deprecations import deprecated_operation
from rewards_lab.api.routes import (
    ai,
    api_keys,
    assets,
    auth,
    customers,
    developer,
    events,
    health,
    ledger,
    programmes,
    wallets,
    webhooks,
)
from rewards_lab.api.routes._binding import REQUEST_MODELS, Endpoint, openapi_extra
from rewards_lab.contract.operations import OPERATIONS, Operation

__all__ = ["REQUEST_MODELS", "readiness_router", "router"]

BINDINGS: dict[str, Endpoint] = {
    **customers.BINDINGS,
    **wallets.BINDINGS,
    **assets.BINDINGS,
    **ledger.BINDINGS,
    **programmes.BINDINGS,
    **events.BINDINGS,
    **webhooks.BINDINGS,
    **api_keys.BINDINGS,
    **ai.BINDINGS,
    **auth.BINDINGS,
    **developer.BINDINGS,
    **health.BINDINGS,
}
assert BINDINGS.keys() == OPERATIONS.keys(), set(BINDINGS) ^ set(OPERATIONS)
READINESS = "service_readiness"

router = APIRouter()
readiness_router = APIRouter()


def _description(op: Operation) -> str | None:
    deprecation = deprecated_operation(op.path, op.method)
    return deprecation.description() if deprecation is not None else op.description


for op in OPERATIONS.values():
    (readiness_router if op.name == READINESS else router).add_api_route(
        op.path,
        BINDINGS[op.name],
        methods=[op.method],
        name=op.name,
        include_in_schema=op.documented,
        deprecated=op.deprecated or None,
        description=_description(op),
        openapi_extra=openapi_extra(op) if op.documented else None,
    )
