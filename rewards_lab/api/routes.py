"""The operations of /v1. Most are one row each in a table (`expose`): the handler is always the same (parse,
authorise, call one service function, wrap the envelope). The few that need more have a handler of their own.

Each operation declares its permission, whether it takes an Idempotency-Key, and the error codes it may return;
they travel in the OpenAPI document as `x-permission`, `x-idempotent` and `x-error-codes`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from rewards_lab.api.context import database_of, json_body, principal_of, request_id_of
from rewards_lab.api.deprecations import deprecated_operation
from rewards_lab.api.envelope import success
from rewards_lab.api.openapi_doc import idempotency_header, query_parameters, responds, responds_like
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import REGISTRY, ServiceError
from rewards_lab.contract.pagination import CURSOR_KEY_LABEL, DEFAULT_LIMIT, PageRequest
from rewards_lab.contract.permissions import Permission
from rewards_lab.service import (
    access,
    assets,
    customers,
    events,
    knowledge,
    ledger,
    presenters,
    programmes,
    segments,
    simulation,
)
from rewards_lab.service import webhooks as hooks
from rewards_lab.service.health import health

router = APIRouter()

AUTH_CODES = [
    "authentication_required",
    "credentials_invalid",
    "api_key_revoked",
    "session_expired",
    "session_revoked",
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
    keyed = {"idempotency_key_reused", "idempotency_key_invalid", "idempotency_request_in_progress"}
    codes = sorted(set(AUTH_CODES) | set(errors) | (keyed if idempotent != "none" else set()))
    if idempotent == "required":
        codes = sorted(set(codes) | {"idempotency_key_required"})
    assert set(codes) <= set(REGISTRY), set(codes) - set(REGISTRY)
    extra: dict[str, Any] = {"x-permission": permission.value, "x-idempotent": idempotent, "x-error-codes": codes}
    if idempotent != "none":
        extra["parameters"] = [idempotency_header(required=idempotent == "required")]
    if body is not None:
        REQUEST_MODELS[body.__name__] = body
        schema = {"$ref": f"#/components/schemas/{body.__name__}"}
        # A body whose every field has a default may be left out (parse_body reads no body as `{}`).
        required = any(field.is_required() for field in body.model_fields.values())
        extra["requestBody"] = {"required": required, "content": {"application/json": {"schema": schema}}}
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


MAX_LIMIT_TEXT_CHARS = 20  # a `limit` longer than this is no number the schema allows (1..100)
_INTEGRAL_RE = re.compile(r"[+-]?[0-9]+(\.0*)?")


def _limit(raw: str | None) -> int:
    """`limit` from the query: the document declares an integer, and JSON Schema counts `14.0` as the integer 14,
    so an integral decimal is accepted as well; range checks stay with `check_page_request`."""
    if raw is None:
        return DEFAULT_LIMIT
    if len(raw) > MAX_LIMIT_TEXT_CHARS or not _INTEGRAL_RE.fullmatch(raw):
        raise ServiceError("field_invalid", "limit must be a whole number", field="limit")
    return int(raw.partition(".")[0])


def _page(request: Request) -> PageRequest:
    """Cursor pagination from the query: `limit` (default 25, max 100), `cursor` (an empty one is no cursor: the
    first page), `sort`, `direction`."""
    query = request.query_params
    limit = _limit(query.get("limit"))
    cursor = query.get("cursor") or None
    direction = query.get("direction", "asc")
    key = database_of(request).secret_box.derive_key(CURSOR_KEY_LABEL)  # cursors signed under the database's key
    if direction == "asc":
        return PageRequest(limit, cursor, query.get("sort"), "asc", key)
    if direction == "desc":
        return PageRequest(limit, cursor, query.get("sort"), "desc", key)
    raise ServiceError("field_invalid", "direction must be asc or desc", field="direction")


def _list(page: Any, request: Request) -> Response:
    return success(page.data, request_id_of(request), next_cursor=page.next_cursor, has_more=page.has_more)


def expose(
    method: str,
    path: str,
    name: str,
    service: Callable[..., Any],
    permission: Permission,
    *,
    body: type[BaseModel] | None = None,
    idempotent: str = "none",
    errors: tuple[str, ...] = (),
    status: int = 200,
    listing: str | None = None,
    filters: tuple[str, ...] = (),
    sorts: tuple[str, ...] = (),
) -> None:
    """Register one operation whose handler is the same every time: authorise, read the path parameters and
    the body, call `service(database, scope, *path, [body], [page], **filters, [idempotency_key])` off the
    event loop, wrap the envelope. `listing` is "page" (cursor pagination) or "all" (a complete list)."""
    path_params = re.findall(r"{(\w+)}", path)

    async def endpoint(request: Request, **path_values: str) -> Response:
        principal = _authorised(request, permission)
        args: list[Any] = [path_values[param] for param in path_params]
        if body is not None:
            args.append(await json_body(request, body))
        kwargs: dict[str, Any] = {f: request.query_params.get(f) for f in filters}
        if listing == "page":
            args.append(_page(request))
        if idempotent != "none":
            kwargs["idempotency_key"] = _idempotency_key(request, required=idempotent == "required")
        result = await run_in_threadpool(service, database_of(request), principal.scope, *args, **kwargs)
        if listing == "page":
            return _list(result, request)
        if listing == "all":
            return success(result, request_id_of(request), next_cursor=None, has_more=False)
        return success(result, request_id_of(request), status)

    endpoint.__name__ = name
    parameters = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    parameters += [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=str) for p in path_params]
    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=Response)  # type: ignore[attr-defined]
    if listing == "page":
        errors = (*errors, *PAGE_CODES)
    extra = operation(body, permission, idempotent=idempotent, errors=errors) | responds_like(service, status)
    if listing or filters:
        extra["parameters"] = query_parameters(*filters, listing=listing == "page", sorts=sorts)["parameters"]
    router.add_api_route(path, endpoint, methods=[method], name=name, openapi_extra=extra)


PAGE_CODES = ("cursor_invalid", "sort_field_invalid")
AMOUNT_CODES = ("amount_invalid", "amount_not_positive", "amount_too_many_decimals", "amount_too_large")
LEDGER_CODES = (
    *BODY_CODES,
    "asset_not_found",
    "wallet_not_found",
    "asset_paused",
    "asset_not_active",
    "wallet_frozen",
    "insufficient_balance",
    *AMOUNT_CODES,
)
RULE_EDIT_CODES = ("rule_not_found", "programme_version_immutable", "rule_asset_mismatch", *AMOUNT_CODES)
P = Permission

# customers and wallets
expose(
    "POST",
    "/customers",
    "create_customer",
    customers.create_customer,
    P.CUSTOMERS_CREATE,
    body=rq.CustomerCreate,
    idempotent="optional",
    status=201,
    errors=(*BODY_CODES, "customer_email_invalid", "customer_already_exists"),
)
expose(
    "GET",
    "/customers",
    "list_customers",
    customers.list_customers,
    P.CUSTOMERS_VIEW,
    listing="page",
    sorts=customers.CUSTOMER_SORTS,
    filters=("external_id",),
)
expose(
    "GET",
    "/customers/{customer_id}",
    "get_customer",
    customers.get_customer,
    P.CUSTOMERS_VIEW,
    errors=("customer_not_found",),
)
expose(
    "GET",
    "/customers/{customer_id}/segments",
    "customer_segments",
    segments.customer_segments,
    P.CUSTOMERS_VIEW,
    errors=("customer_not_found",),
)
expose(
    "POST",
    "/wallets",
    "create_wallet",
    customers.create_wallet,
    P.CUSTOMERS_CREATE,
    body=rq.WalletCreate,
    idempotent="optional",
    status=201,
    errors=(*BODY_CODES, "customer_not_found"),
)
expose(
    "GET",
    "/wallets",
    "list_wallets",
    customers.list_wallets,
    P.WALLETS_VIEW,
    listing="page",
    sorts=customers.WALLET_SORTS,
    filters=("customer_id", "status"),
)
expose("GET", "/wallets/{wallet_id}", "get_wallet", customers.get_wallet, P.WALLETS_VIEW, errors=("wallet_not_found",))
expose(
    "GET",
    "/wallets/{wallet_id}/balances",
    "wallet_balances",
    ledger.wallet_balances,
    P.WALLETS_VIEW,
    errors=("wallet_not_found",),
)
for action, move in (("freeze", customers.freeze_wallet), ("unfreeze", customers.unfreeze_wallet)):
    expose(
        "POST",
        f"/wallets/{{wallet_id}}/{action}",
        f"{action}_wallet",
        move,
        P.WALLETS_MANAGE,
        idempotent="optional",
        errors=("wallet_not_found", "invalid_state_transition"),
    )

# assets and the ledger
expose(
    "POST",
    "/assets",
    "create_asset",
    assets.create_asset,
    P.ASSETS_EDIT,
    body=rq.AssetCreate,
    idempotent="optional",
    status=201,
    errors=(*BODY_CODES, *AMOUNT_CODES),
)
expose(
    "GET",
    "/assets",
    "list_assets",
    assets.list_assets,
    P.ASSETS_VIEW,
    listing="page",
    filters=("status",),
    sorts=assets.ASSET_SORTS,
)
expose("GET", "/assets/{asset_id}", "get_asset", assets.get_asset, P.ASSETS_VIEW, errors=("asset_not_found",))
expose(
    "POST",
    "/assets/{asset_id}/activate",
    "activate_asset",
    assets.activate_asset,
    P.ASSETS_EDIT,
    idempotent="optional",
    errors=("asset_not_found", "invalid_state_transition", "asset_symbol_taken"),
)
for action, asset_move in (("pause", assets.pause_asset), ("resume", assets.resume_asset)):
    expose(
        "POST",
        f"/assets/{{asset_id}}/{action}",
        f"{action}_asset",
        asset_move,
        P.ASSETS_EDIT,
        idempotent="optional",
        errors=("asset_not_found", "invalid_state_transition"),
    )
expose(
    "POST",
    "/assets/{asset_id}/issue",
    "issue",
    ledger.issue,
    P.LEDGER_ISSUE,
    body=rq.IssueRequest,
    idempotent="required",
    status=201,
    errors=tuple(c for c in (*LEDGER_CODES, "asset_supply_exhausted") if c != "insufficient_balance"),
)
expose(
    "POST",
    "/assets/{asset_id}/redemptions",
    "redeem",
    ledger.redeem,
    P.LEDGER_REDEEM,
    body=rq.RedemptionRequest,
    idempotent="required",
    status=201,
    errors=LEDGER_CODES,
)
expose(
    "POST",
    "/assets/{asset_id}/transfers",
    "transfer",
    ledger.transfer,
    P.LEDGER_TRANSFER,
    body=rq.TransferRequest,
    idempotent="required",
    status=201,
    errors=(*LEDGER_CODES, "transfer_same_wallet", "wallet_policy_violation"),
)
expose(
    "GET",
    "/transactions",
    "list_transactions",
    ledger.list_transactions,
    P.LEDGER_VIEW,
    listing="page",
    sorts=ledger.TRANSACTION_SORTS,
    filters=("wallet_id", "asset_id", "kind"),
)
expose(
    "GET",
    "/transactions/{transaction_id}",
    "get_transaction",
    ledger.get_transaction,
    P.LEDGER_VIEW,
    errors=("transaction_not_found",),
)

# programmes, versions and rules
expose(
    "POST",
    "/reward-programs",
    "create_programme",
    programmes.create_programme,
    P.REWARDS_EDIT,
    body=rq.ProgrammeCreate,
    idempotent="optional",
    status=201,
    errors=(*BODY_CODES, "asset_not_found"),
)
expose(
    "GET",
    "/reward-programs",
    "list_programmes",
    programmes.list_programmes,
    P.REWARDS_VIEW,
    listing="page",
    sorts=programmes.PROGRAMME_SORTS,
    filters=("asset_id",),
)
expose(
    "GET",
    "/reward-programs/{program_id}",
    "get_programme",
    programmes.get_programme,
    P.REWARDS_VIEW,
    errors=("programme_not_found",),
)
expose(
    "GET",
    "/reward-programs/{program_id}/versions",
    "list_versions",
    programmes.list_versions,
    P.REWARDS_VIEW,
    listing="all",
    errors=("programme_not_found",),
)
expose(
    "POST",
    "/reward-programs/{program_id}/publish",
    "publish",
    programmes.publish,
    P.REWARDS_ACTIVATE,
    idempotent="optional",
    status=201,
    errors=("programme_not_found", "programme_draft_empty"),
)
expose(
    "POST",
    "/reward-rules",
    "create_rule",
    programmes.create_rule,
    P.REWARDS_EDIT,
    body=rq.RuleCreate,
    idempotent="optional",
    status=201,
    errors=(*BODY_CODES, "programme_not_found", "asset_not_found", "rule_asset_mismatch", *AMOUNT_CODES),
)
expose("GET", "/reward-rules/{rule_id}", "get_rule", programmes.get_rule, P.REWARDS_VIEW, errors=("rule_not_found",))
expose(
    "PATCH",
    "/reward-rules/{rule_id}",
    "update_rule",
    programmes.update_rule,
    P.REWARDS_EDIT,
    body=rq.RuleUpdate,
    idempotent="optional",
    errors=(*BODY_CODES, *RULE_EDIT_CODES),
)
expose(
    "DELETE",
    "/reward-rules/{rule_id}",
    "delete_rule",
    programmes.delete_rule,
    P.REWARDS_EDIT,
    idempotent="optional",
    errors=("rule_not_found", "programme_version_immutable"),
)
expose(
    "POST",
    "/reward-rules/{rule_id}/simulate",
    "simulate_rule",
    simulation.simulate_rule,
    P.REWARDS_VIEW,
    body=rq.SimulationRequest,
    errors=(*BODY_CODES, "rule_not_found"),
)

# events and executions
expose(
    "GET",
    "/events",
    "list_events",
    events.list_events,
    P.EVENTS_VIEW,
    listing="page",
    sorts=events.EVENT_SORTS,
    filters=("status", "type", "customer_id"),
)
expose("GET", "/events/{event_id}", "get_event", events.get_event, P.EVENTS_VIEW, errors=("event_not_found",))
expose(
    "POST",
    "/events/{event_id}/replay",
    "replay_event",
    events.replay_event,
    P.EVENTS_WRITE,
    errors=("event_not_found", "event_not_replayable"),
)
expose(
    "GET",
    "/reward-executions",
    "list_executions",
    events.list_executions,
    P.REWARDS_VIEW,
    listing="page",
    sorts=events.EXECUTION_SORTS,
    filters=("customer_id", "event_id", "status"),
)

# webhook endpoints and their deliveries (service.webhooks; sent by worker.deliveries)
expose(
    "POST",
    "/webhooks",
    "create_webhook",
    hooks.create_webhook,
    P.WEBHOOKS_MANAGE,
    body=rq.WebhookCreate,
    status=201,
    errors=(*BODY_CODES, "webhook_url_invalid", "webhook_event_kind_invalid"),
)
expose(
    "GET",
    "/webhooks",
    "list_webhooks",
    hooks.list_webhooks,
    P.WEBHOOKS_VIEW,
    listing="page",
    filters=("status",),
    sorts=hooks.ENDPOINT_SORTS,
)
expose(
    "GET", "/webhooks/{webhook_id}", "get_webhook", hooks.get_webhook, P.WEBHOOKS_VIEW, errors=("webhook_not_found",)
)
expose(
    "DELETE",
    "/webhooks/{webhook_id}",
    "disable_webhook",
    hooks.disable_webhook,
    P.WEBHOOKS_MANAGE,
    idempotent="optional",
    errors=("webhook_not_found", "invalid_state_transition"),
)
expose(
    "POST",
    "/webhooks/{webhook_id}/rotate-secret",
    "rotate_webhook_secret",
    hooks.rotate_secret,
    P.WEBHOOKS_MANAGE,
    body=rq.WebhookSecretRotate,
    errors=(*BODY_CODES, "webhook_not_found", "invalid_state_transition"),
)
expose(
    "POST",
    "/webhooks/{webhook_id}/test",
    "test_webhook",
    hooks.send_test,
    P.WEBHOOKS_MANAGE,
    status=202,
    errors=("webhook_not_found", "invalid_state_transition"),
)
expose(
    "GET",
    "/webhooks/{webhook_id}/deliveries",
    "list_webhook_deliveries",
    hooks.list_deliveries,
    P.WEBHOOKS_VIEW,
    listing="page",
    sorts=hooks.DELIVERY_SORTS,
    filters=("status",),
    errors=("webhook_not_found",),
)
expose(
    "GET",
    "/webhooks/{webhook_id}/deliveries/{delivery_id}",
    "get_webhook_delivery",
    hooks.get_delivery,
    P.WEBHOOKS_VIEW,
    errors=("webhook_not_found", "webhook_delivery_not_found"),
)
expose(
    "POST",
    "/webhooks/{webhook_id}/deliveries/{delivery_id}/replay",
    "replay_webhook_delivery",
    hooks.replay_delivery,
    P.WEBHOOKS_MANAGE,
    idempotent="optional",
    status=202,
    errors=(
        "webhook_not_found",
        "webhook_delivery_not_found",
        "webhook_delivery_not_replayable",
        "invalid_state_transition",
    ),
)


# Operations with a handler of their own ------------------------------------------------------------------
@router.post(
    "/events",
    openapi_extra=operation(
        rq.EventCreate,
        Permission.EVENTS_WRITE,
        errors=(*BODY_CODES, "event_duplicate_mismatch", "event_payload_too_large"),
    ),
)
async def submit_event(request: Request) -> Response:
    # No docstring: FastAPI would publish it as the operation's description. api/hot_path.py answers this
    # operation in front of FastAPI with the same steps and functions; this route answers when the hot path is
    # off, and tests/test_hot_path.py holds the two equal.
    principal = _authorised(request, Permission.EVENTS_WRITE)
    body = await json_body(request, rq.EventCreate)
    stored = await request.app.state.intake.submit(principal.scope, events.prepare_event(body))  # after the commit
    return success(presenters.event_fields(stored), request_id_of(request), 202)


@router.post(
    "/developer/api-keys",
    openapi_extra=operation(
        rq.ApiKeyCreate,
        Permission.API_KEYS_MANAGE,
        idempotent="none",
        errors=(*BODY_CODES, "permission_unknown", "permission_escalation"),
    )
    | responds(201, r.ApiKeyCreated),
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
    openapi_extra=operation(Permission.API_KEYS_MANAGE, errors=("api_key_not_found", "api_key_already_revoked"))
    | responds(200, r.ApiKey),
)
async def revoke_api_key(request: Request, key_id: str) -> Response:
    principal = _authorised(request, Permission.API_KEYS_MANAGE)
    result = await run_in_threadpool(access.revoke_api_key, database_of(request), principal.scope, key_id)
    return success(result, request_id_of(request))


# AI: knowledge search and answers without a model (service.knowledge), and their deprecated predecessors (their
# Deprecation, Sunset and Link headers go on every answer of their paths: api.app.ResponseHeaders, api.deprecations).
AI_CODES = tuple(BODY_CODES)
HITS = list[r.KnowledgeHit]


def _deprecation_note(path: str) -> str:
    deprecation = deprecated_operation(path, "POST")
    assert deprecation is not None
    return deprecation.description()


@router.post(
    "/ai/knowledge/search",
    openapi_extra=operation(rq.KnowledgeSearch, Permission.AI_USE, errors=AI_CODES)
    | responds(200, list[r.KnowledgeHit]),
)
async def knowledge_search(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


@router.post(
    "/ai/conversations/{conversation_id}/messages",
    openapi_extra=operation(rq.MessageCreate, Permission.AI_USE, errors=AI_CODES) | responds(201, r.AssistantMessage),
)
async def conversation_message(request: Request, conversation_id: str) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return success(knowledge.answer(conversation_id, body.content), request_id_of(request), 201)


@router.post(
    "/ai/search",
    deprecated=True,
    description=_deprecation_note("/ai/search"),
    openapi_extra=operation(rq.KnowledgeSearch, Permission.AI_USE, errors=AI_CODES)
    | responds(200, list[r.KnowledgeHit]),
)
async def deprecated_search(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.KnowledgeSearch)
    return success(knowledge.search(body.query, body.limit), request_id_of(request), next_cursor=None, has_more=False)


@router.post(
    "/ai/messages",
    deprecated=True,
    description=_deprecation_note("/ai/messages"),
    openapi_extra=operation(rq.MessageCreate, Permission.AI_USE, errors=AI_CODES) | responds(201, r.AssistantMessage),
)
async def deprecated_message(request: Request) -> Response:
    _authorised(request, Permission.AI_USE)
    body = await json_body(request, rq.MessageCreate)
    return success(knowledge.answer(None, body.content), request_id_of(request), 201)


@router.get("/health", include_in_schema=False)
async def service_health(request: Request) -> Response:
    """For operators and load balancers: unauthenticated, no tenant data (queue depths, worker liveness).
    Outside the OpenAPI document, whose operations all declare a permission."""
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
