"""Route handlers: parse, authorise, call one service function, wrap the envelope. Nothing else.

Each operation declares its permission, whether it takes an Idempotency-Key, and the error codes it may return;
they travel in the OpenAPI document as `x-permission`, `x-idempotent` and `x-error-codes`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, json_body, principal_of, request_id_of
from rewards_lab.api.envelope import success
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import REGISTRY, ServiceError
from rewards_lab.contract.pagination import DEFAULT_LIMIT, PageRequest
from rewards_lab.contract.permissions import Permission
from rewards_lab.service import access, assets, customers, events, knowledge, ledger, programmes, segments, simulation

router = APIRouter()

AUTH_CODES = [
    "authentication_required",
    "credentials_invalid",
    "api_key_revoked",
    "organization_mismatch",
    "environment_mismatch",
    "permission_denied",
    "field_required",
    "field_invalid",
]
BODY_CODES = ["request_malformed", "request_too_large", "field_unknown"]


REQUEST_MODELS: dict[str, type[BaseModel]] = {}


def operation(
    body: type[BaseModel] | Permission | None = None,
    permission: Permission | None = None,
    *,
    idempotent: str = "none",
    errors: tuple[str, ...] = (),
) -> dict[str, Any]:
    """OpenAPI extensions of an operation. `idempotent` is "required", "optional" or "none"; `body` is the
    request model (its JSON Schema lands in components.schemas)."""
    if isinstance(body, Permission):
        body, permission = None, body
    assert permission is not None
    codes = sorted(set(AUTH_CODES) | set(errors) | ({"idempotency_key_reused"} if idempotent != "none" else set()))
    if idempotent == "required":
        codes = sorted(set(codes) | {"idempotency_key_required"})
    assert set(codes) <= set(REGISTRY), set(codes) - set(REGISTRY)
    extra: dict[str, Any] = {"x-permission": permission.value, "x-idempotent": idempotent, "x-error-codes": codes}
    if body is not None:
        REQUEST_MODELS[body.__name__] = body
        schema = {"$ref": f"#/components/schemas/{body.__name__}"}
        extra["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    return extra


def _authorised(request: Request, permission: Permission) -> access.Principal:
    principal = principal_of(request)
    principal.require(permission.value)
    return principal


def _idempotency_key(request: Request, *, required: bool) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None and required:
        raise ServiceError("idempotency_key_required", field="Idempotency-Key")
    return key


@router.post(
    "/customers",
    openapi_extra=operation(
        rq.CustomerCreate,
        Permission.CUSTOMERS_CREATE,
        idempotent="optional",
        errors=(*BODY_CODES, "customer_email_invalid", "customer_already_exists"),
    ),
)
async def create_customer(request: Request) -> Response:
    principal = _authorised(request, Permission.CUSTOMERS_CREATE)
    body = await json_body(request, rq.CustomerCreate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        customers.create_customer, database_of(request), principal.scope, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.get(
    "/customers/{customer_id}", openapi_extra=operation(Permission.CUSTOMERS_VIEW, errors=("customer_not_found",))
)
async def get_customer(request: Request, customer_id: str) -> Response:
    principal = _authorised(request, Permission.CUSTOMERS_VIEW)
    result = await run_in_threadpool(customers.get_customer, database_of(request), principal.scope, customer_id)
    return success(result, request_id_of(request))


@router.post(
    "/wallets",
    openapi_extra=operation(
        rq.WalletCreate, Permission.CUSTOMERS_CREATE, idempotent="optional", errors=(*BODY_CODES, "customer_not_found")
    ),
)
async def create_wallet(request: Request) -> Response:
    principal = _authorised(request, Permission.CUSTOMERS_CREATE)
    body = await json_body(request, rq.WalletCreate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        customers.create_wallet, database_of(request), principal.scope, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.get(
    "/wallets/{wallet_id}/balances", openapi_extra=operation(Permission.WALLETS_VIEW, errors=("wallet_not_found",))
)
async def wallet_balances(request: Request, wallet_id: str) -> Response:
    principal = _authorised(request, Permission.WALLETS_VIEW)
    result = await run_in_threadpool(ledger.wallet_balances, database_of(request), principal.scope, wallet_id)
    return success(result, request_id_of(request))


@router.post(
    "/assets",
    openapi_extra=operation(
        rq.AssetCreate,
        Permission.ASSETS_EDIT,
        idempotent="optional",
        errors=(*BODY_CODES, "amount_invalid", "amount_not_positive", "amount_too_many_decimals", "amount_too_large"),
    ),
)
async def create_asset(request: Request) -> Response:
    principal = _authorised(request, Permission.ASSETS_EDIT)
    body = await json_body(request, rq.AssetCreate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        assets.create_asset, database_of(request), principal.scope, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.post(
    "/assets/{asset_id}/activate",
    openapi_extra=operation(
        Permission.ASSETS_EDIT,
        idempotent="optional",
        errors=("asset_not_found", "invalid_state_transition", "asset_symbol_taken"),
    ),
)
async def activate_asset(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.ASSETS_EDIT)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        assets.activate_asset, database_of(request), principal.scope, asset_id, idempotency_key=key
    )
    return success(result, request_id_of(request))


@router.post(
    "/assets/{asset_id}/issue",
    openapi_extra=operation(
        rq.IssueRequest,
        Permission.LEDGER_ISSUE,
        idempotent="required",
        errors=(
            *BODY_CODES,
            "asset_not_found",
            "wallet_not_found",
            "asset_paused",
            "asset_not_active",
            "wallet_frozen",
            "asset_supply_exhausted",
            "amount_invalid",
            "amount_not_positive",
            "amount_too_many_decimals",
            "amount_too_large",
        ),
    ),
)
async def issue(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.LEDGER_ISSUE)
    body = await json_body(request, rq.IssueRequest)
    key = _idempotency_key(request, required=True)
    result = await run_in_threadpool(
        ledger.issue, database_of(request), principal.scope, asset_id, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.post(
    "/events",
    openapi_extra=operation(
        rq.EventCreate,
        Permission.EVENTS_WRITE,
        errors=(*BODY_CODES, "event_duplicate_mismatch", "event_payload_too_large"),
    ),
)
async def submit_event(request: Request) -> Response:
    principal = _authorised(request, Permission.EVENTS_WRITE)
    body = await json_body(request, rq.EventCreate)
    result = await run_in_threadpool(events.submit_event, database_of(request), principal.scope, body)
    worker = request.app.state.worker
    if worker is not None:
        worker.notify()
    return success(result, request_id_of(request), 202)


@router.get("/events/{event_id}", openapi_extra=operation(Permission.EVENTS_VIEW, errors=("event_not_found",)))
async def get_event(request: Request, event_id: str) -> Response:
    principal = _authorised(request, Permission.EVENTS_VIEW)
    result = await run_in_threadpool(events.get_event, database_of(request), principal.scope, event_id)
    return success(result, request_id_of(request))


@router.post(
    "/reward-programs",
    openapi_extra=operation(
        rq.ProgrammeCreate, Permission.REWARDS_EDIT, idempotent="optional", errors=(*BODY_CODES, "asset_not_found")
    ),
)
async def create_programme(request: Request) -> Response:
    principal = _authorised(request, Permission.REWARDS_EDIT)
    body = await json_body(request, rq.ProgrammeCreate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        programmes.create_programme, database_of(request), principal.scope, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.post(
    "/reward-rules",
    openapi_extra=operation(
        rq.RuleCreate,
        Permission.REWARDS_EDIT,
        idempotent="optional",
        errors=(
            *BODY_CODES,
            "programme_not_found",
            "asset_not_found",
            "rule_asset_mismatch",
            "amount_invalid",
            "amount_not_positive",
            "amount_too_many_decimals",
            "amount_too_large",
        ),
    ),
)
async def create_rule(request: Request) -> Response:
    principal = _authorised(request, Permission.REWARDS_EDIT)
    body = await json_body(request, rq.RuleCreate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        programmes.create_rule, database_of(request), principal.scope, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.post(
    "/reward-rules/{rule_id}/simulate",
    openapi_extra=operation(rq.SimulationRequest, Permission.REWARDS_VIEW, errors=(*BODY_CODES, "rule_not_found")),
)
async def simulate_rule(request: Request, rule_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    body = await json_body(request, rq.SimulationRequest)
    result = await run_in_threadpool(simulation.simulate_rule, database_of(request), principal.scope, rule_id, body)
    return success(result, request_id_of(request))


@router.post(
    "/reward-programs/{program_id}/publish",
    openapi_extra=operation(
        Permission.REWARDS_ACTIVATE, idempotent="optional", errors=("programme_not_found", "programme_draft_empty")
    ),
)
async def publish(request: Request, program_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_ACTIVATE)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        programmes.publish, database_of(request), principal.scope, program_id, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


def _page(request: Request) -> PageRequest:
    """Cursor pagination from the query: `limit` (default 25, max 100), `cursor`, `sort`, `direction`."""
    query = request.query_params
    raw_limit = query.get("limit")
    try:
        limit = int(raw_limit) if raw_limit is not None else DEFAULT_LIMIT
    except ValueError:
        raise ServiceError("field_invalid", "limit must be a whole number", field="limit") from None
    direction = query.get("direction", "asc")
    if direction == "asc":
        return PageRequest(limit=limit, cursor=query.get("cursor"), sort=query.get("sort"), direction="asc")
    if direction == "desc":
        return PageRequest(limit=limit, cursor=query.get("cursor"), sort=query.get("sort"), direction="desc")
    raise ServiceError("field_invalid", "direction must be asc or desc", field="direction")


def _list(page: Any, request: Request) -> Response:
    return success(page.data, request_id_of(request), next_cursor=page.next_cursor, has_more=page.has_more)


PAGE_CODES = ("cursor_invalid", "sort_field_invalid")


@router.get("/events", openapi_extra=operation(Permission.EVENTS_VIEW, errors=PAGE_CODES))
async def list_events(request: Request) -> Response:
    principal = _authorised(request, Permission.EVENTS_VIEW)
    query = request.query_params
    page = await run_in_threadpool(
        events.list_events,
        database_of(request),
        principal.scope,
        _page(request),
        status=query.get("status"),
        type=query.get("type"),
        customer_id=query.get("customer_id"),
    )
    return _list(page, request)


@router.post(
    "/events/{event_id}/replay",
    openapi_extra=operation(Permission.EVENTS_WRITE, errors=("event_not_found", "event_not_replayable")),
)
async def replay_event(request: Request, event_id: str) -> Response:
    principal = _authorised(request, Permission.EVENTS_WRITE)
    result = await run_in_threadpool(events.replay_event, database_of(request), principal.scope, event_id)
    return success(result, request_id_of(request))


@router.get("/reward-executions", openapi_extra=operation(Permission.REWARDS_VIEW, errors=PAGE_CODES))
async def list_executions(request: Request) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    query = request.query_params
    page = await run_in_threadpool(
        events.list_executions,
        database_of(request),
        principal.scope,
        _page(request),
        customer_id=query.get("customer_id"),
        event_id=query.get("event_id"),
        status=query.get("status"),
    )
    return _list(page, request)


@router.get(
    "/customers/{customer_id}/segments",
    openapi_extra=operation(Permission.CUSTOMERS_VIEW, errors=("customer_not_found",)),
)
async def customer_segments(request: Request, customer_id: str) -> Response:
    principal = _authorised(request, Permission.CUSTOMERS_VIEW)
    result = await run_in_threadpool(segments.customer_segments, database_of(request), principal.scope, customer_id)
    return success(result, request_id_of(request))


LEDGER_CODES = (
    *BODY_CODES,
    "asset_not_found",
    "wallet_not_found",
    "asset_paused",
    "asset_not_active",
    "wallet_frozen",
    "insufficient_balance",
    "amount_invalid",
    "amount_not_positive",
    "amount_too_many_decimals",
    "amount_too_large",
)


@router.post(
    "/assets/{asset_id}/redemptions",
    openapi_extra=operation(rq.RedemptionRequest, Permission.LEDGER_REDEEM, idempotent="required", errors=LEDGER_CODES),
)
async def redeem(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.LEDGER_REDEEM)
    body = await json_body(request, rq.RedemptionRequest)
    key = _idempotency_key(request, required=True)
    result = await run_in_threadpool(
        ledger.redeem, database_of(request), principal.scope, asset_id, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.post(
    "/assets/{asset_id}/transfers",
    openapi_extra=operation(
        rq.TransferRequest,
        Permission.LEDGER_TRANSFER,
        idempotent="required",
        errors=(*LEDGER_CODES, "transfer_same_wallet", "wallet_policy_violation"),
    ),
)
async def transfer(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.LEDGER_TRANSFER)
    body = await json_body(request, rq.TransferRequest)
    key = _idempotency_key(request, required=True)
    result = await run_in_threadpool(
        ledger.transfer, database_of(request), principal.scope, asset_id, body, idempotency_key=key
    )
    return success(result, request_id_of(request), 201)


@router.get("/customers", openapi_extra=operation(Permission.CUSTOMERS_VIEW, errors=PAGE_CODES))
async def list_customers(request: Request) -> Response:
    principal = _authorised(request, Permission.CUSTOMERS_VIEW)
    page = await run_in_threadpool(
        customers.list_customers,
        database_of(request),
        principal.scope,
        _page(request),
        external_id=request.query_params.get("external_id"),
    )
    return _list(page, request)


@router.get("/wallets", openapi_extra=operation(Permission.WALLETS_VIEW, errors=PAGE_CODES))
async def list_wallets(request: Request) -> Response:
    principal = _authorised(request, Permission.WALLETS_VIEW)
    query = request.query_params
    page = await run_in_threadpool(
        customers.list_wallets,
        database_of(request),
        principal.scope,
        _page(request),
        customer_id=query.get("customer_id"),
        status=query.get("status"),
    )
    return _list(page, request)


@router.get("/wallets/{wallet_id}", openapi_extra=operation(Permission.WALLETS_VIEW, errors=("wallet_not_found",)))
async def get_wallet(request: Request, wallet_id: str) -> Response:
    principal = _authorised(request, Permission.WALLETS_VIEW)
    result = await run_in_threadpool(customers.get_wallet, database_of(request), principal.scope, wallet_id)
    return success(result, request_id_of(request))


async def _wallet_move(request: Request, wallet_id: str, action: str) -> Response:
    principal = _authorised(request, Permission.WALLETS_MANAGE)
    key = _idempotency_key(request, required=False)
    move = customers.freeze_wallet if action == "freeze" else customers.unfreeze_wallet
    result = await run_in_threadpool(move, database_of(request), principal.scope, wallet_id, idempotency_key=key)
    return success(result, request_id_of(request))


WALLET_MOVE = operation(
    Permission.WALLETS_MANAGE, idempotent="optional", errors=("wallet_not_found", "invalid_state_transition")
)


@router.post("/wallets/{wallet_id}/freeze", openapi_extra=WALLET_MOVE)
async def freeze_wallet(request: Request, wallet_id: str) -> Response:
    return await _wallet_move(request, wallet_id, "freeze")


@router.post("/wallets/{wallet_id}/unfreeze", openapi_extra=WALLET_MOVE)
async def unfreeze_wallet(request: Request, wallet_id: str) -> Response:
    return await _wallet_move(request, wallet_id, "unfreeze")


@router.get("/assets", openapi_extra=operation(Permission.ASSETS_VIEW, errors=PAGE_CODES))
async def list_assets(request: Request) -> Response:
    principal = _authorised(request, Permission.ASSETS_VIEW)
    page = await run_in_threadpool(
        assets.list_assets,
        database_of(request),
        principal.scope,
        _page(request),
        status=request.query_params.get("status"),
    )
    return _list(page, request)


@router.get("/assets/{asset_id}", openapi_extra=operation(Permission.ASSETS_VIEW, errors=("asset_not_found",)))
async def get_asset(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.ASSETS_VIEW)
    result = await run_in_threadpool(assets.get_asset, database_of(request), principal.scope, asset_id)
    return success(result, request_id_of(request))


ASSET_MOVE = operation(
    Permission.ASSETS_EDIT, idempotent="optional", errors=("asset_not_found", "invalid_state_transition")
)


@router.post("/assets/{asset_id}/pause", openapi_extra=ASSET_MOVE)
async def pause_asset(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.ASSETS_EDIT)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        assets.pause_asset, database_of(request), principal.scope, asset_id, idempotency_key=key
    )
    return success(result, request_id_of(request))


@router.post("/assets/{asset_id}/resume", openapi_extra=ASSET_MOVE)
async def resume_asset(request: Request, asset_id: str) -> Response:
    principal = _authorised(request, Permission.ASSETS_EDIT)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        assets.resume_asset, database_of(request), principal.scope, asset_id, idempotency_key=key
    )
    return success(result, request_id_of(request))


@router.get("/reward-programs", openapi_extra=operation(Permission.REWARDS_VIEW, errors=PAGE_CODES))
async def list_programmes(request: Request) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    page = await run_in_threadpool(
        programmes.list_programmes,
        database_of(request),
        principal.scope,
        _page(request),
        asset_id=request.query_params.get("asset_id"),
    )
    return _list(page, request)


@router.get(
    "/reward-programs/{program_id}", openapi_extra=operation(Permission.REWARDS_VIEW, errors=("programme_not_found",))
)
async def get_programme(request: Request, program_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    result = await run_in_threadpool(programmes.get_programme, database_of(request), principal.scope, program_id)
    return success(result, request_id_of(request))


@router.get(
    "/reward-programs/{program_id}/versions",
    openapi_extra=operation(Permission.REWARDS_VIEW, errors=("programme_not_found",)),
)
async def list_versions(request: Request, program_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    result = await run_in_threadpool(programmes.list_versions, database_of(request), principal.scope, program_id)
    return success(result, request_id_of(request), next_cursor=None, has_more=False)


@router.get("/reward-rules/{rule_id}", openapi_extra=operation(Permission.REWARDS_VIEW, errors=("rule_not_found",)))
async def get_rule(request: Request, rule_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_VIEW)
    result = await run_in_threadpool(programmes.get_rule, database_of(request), principal.scope, rule_id)
    return success(result, request_id_of(request))


@router.get("/transactions", openapi_extra=operation(Permission.LEDGER_VIEW, errors=PAGE_CODES))
async def list_transactions(request: Request) -> Response:
    principal = _authorised(request, Permission.LEDGER_VIEW)
    query = request.query_params
    page = await run_in_threadpool(
        ledger.list_transactions,
        database_of(request),
        principal.scope,
        _page(request),
        wallet_id=query.get("wallet_id"),
        asset_id=query.get("asset_id"),
        kind=query.get("kind"),
    )
    return _list(page, request)


@router.get(
    "/transactions/{transaction_id}", openapi_extra=operation(Permission.LEDGER_VIEW, errors=("transaction_not_found",))
)
async def get_transaction(request: Request, transaction_id: str) -> Response:
    principal = _authorised(request, Permission.LEDGER_VIEW)
    result = await run_in_threadpool(ledger.get_transaction, database_of(request), principal.scope, transaction_id)
    return success(result, request_id_of(request))


@router.post(
    "/developer/api-keys",
    openapi_extra=operation(
        rq.ApiKeyCreate,
        Permission.API_KEYS_MANAGE,
        idempotent="none",
        errors=(*BODY_CODES, "permission_unknown", "permission_escalation"),
    ),
)
async def create_api_key(request: Request) -> Response:
    principal = _authorised(request, Permission.API_KEYS_MANAGE)
    body = await json_body(request, rq.ApiKeyCreate)
    result = await run_in_threadpool(
        access.create_api_key, database_of(request), principal.scope, body.name, body.permissions, creator=principal
    )
    return success(result, request_id_of(request), 201)


@router.delete(
    "/developer/api-keys/{key_id}",
    openapi_extra=operation(Permission.API_KEYS_MANAGE, errors=("api_key_not_found", "api_key_already_revoked")),
)
async def revoke_api_key(request: Request, key_id: str) -> Response:
    principal = _authorised(request, Permission.API_KEYS_MANAGE)
    result = await run_in_threadpool(access.revoke_api_key, database_of(request), principal.scope, key_id)
    return success(result, request_id_of(request))


# AI: knowledge search and answers without a model (service.knowledge), and their deprecated predecessors.
SUNSET = "Sat, 06 Feb 2027 00:00:00 GMT"
AI_CODES = tuple(BODY_CODES)


def _deprecated(response: Response, successor: str) -> Response:
    response.headers["Deprecation"] = "true"
    response.headers["Sunset"] = SUNSET
    response.headers["Link"] = f'</v1{successor}>; rel="successor-version"'
    return response


@router.post("/ai/knowledge/search", openapi_extra=operation(rq.KnowledgeSearch, Permission.AI_USE, errors=AI_CODES))
async def knowledge_search(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


@router.post(
    "/ai/conversations/{conversation_id}/messages",
    openapi_extra=operation(rq.MessageCreate, Permission.AI_USE, errors=AI_CODES),
)
async def conversation_message(request: Request, conversation_id: str) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return success(knowledge.answer(conversation_id, body.content), request_id_of(request), 201)


@router.post(
    "/ai/search", deprecated=True, openapi_extra=operation(rq.KnowledgeSearch, Permission.AI_USE, errors=AI_CODES)
)
async def deprecated_search(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    response = success(
        knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False
    )
    return _deprecated(response, "/ai/knowledge/search")


@router.post(
    "/ai/messages", deprecated=True, openapi_extra=operation(rq.MessageCreate, Permission.AI_USE, errors=AI_CODES)
)
async def deprecated_message(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return _deprecated(
        success(knowledge.answer(None, body.content), request_id_of(request), 201), "/ai/conversations/{id}/messages"
    )


RULE_EDIT_CODES = (
    "rule_not_found",
    "programme_version_immutable",
    "rule_asset_mismatch",
    "amount_invalid",
    "amount_not_positive",
    "amount_too_many_decimals",
    "amount_too_large",
)


@router.patch(
    "/reward-rules/{rule_id}",
    openapi_extra=operation(
        rq.RuleUpdate, Permission.REWARDS_EDIT, idempotent="optional", errors=(*BODY_CODES, *RULE_EDIT_CODES)
    ),
)
async def update_rule(request: Request, rule_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_EDIT)
    body = await json_body(request, rq.RuleUpdate)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        programmes.update_rule, database_of(request), principal.scope, rule_id, body, idempotency_key=key
    )
    return success(result, request_id_of(request))


@router.delete(
    "/reward-rules/{rule_id}",
    openapi_extra=operation(
        Permission.REWARDS_EDIT, idempotent="optional", errors=("rule_not_found", "programme_version_immutable")
    ),
)
async def delete_rule(request: Request, rule_id: str) -> Response:
    principal = _authorised(request, Permission.REWARDS_EDIT)
    key = _idempotency_key(request, required=False)
    result = await run_in_threadpool(
        programmes.delete_rule, database_of(request), principal.scope, rule_id, idempotency_key=key
    )
    return success(result, request_id_of(request))
