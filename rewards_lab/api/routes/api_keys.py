"""API keys: creating one (its secret shown once), listing them (prefixes only) and revoking one."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, json_body, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.api.routes._binding import Endpoint, authorised, serve
from rewards_lab.contract import requests as rq
from rewards_lab.contract.operations import operation
from rewards_lab.contract.permissions import Permission
from rewards_lab.security import access

assert operation("list_api_keys").sorts == access.API_KEY_SORTS


async def create_api_key(request: Request) -> Response:
    # The creator is passed along: a key may not hold permissions its creator lacks.
    principal = authorised(request, Permission.API_KEYS_MANAGE)
    body = await json_body(request, rq.ApiKeyCreate)
    result = await run_in_threadpool(
        access.create_api_key, database_of(request), principal.scope, body.name, body.permissions, creator=principal
    )
    return success(result, request_id_of(request), 201)


async def revoke_api_key(request: Request, key_id: str) -> Response:
    principal = authorised(request, Permission.API_KEYS_MANAGE)
    result = await run_in_threadpool(access.revoke_api_key, database_of(request), principal.scope, key_id)
    return success(result, request_id_of(request))


BINDINGS: dict[str, Endpoint] = {
    "create_api_key": create_api_key,
    "list_api_keys": serve("list_api_keys", access.list_api_keys)[1],
    "revoke_api_key": revoke_api_key,
}
