"""The operations of /v1, declared once: everything else derives from this table.

Each `Operation` is pure data (no handler): method and path, the permission it requires, whether it takes an
Idempotency-Key, the error codes it may return, its request and response models, its query parameters and
pagination, its deprecation. The server binds each entry to a handler (`api.routes`), the OpenAPI document is
built from those routes (and with it the Postman collection and the TypeScript types), and the Python client's
methods and `rewards-lab api`'s commands and flags are derived from each entry and its request model
(`contract/operation_parameters.py`). The order of the table is the order of the document's paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from rewards_lab.contract import developer as d
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.guard_requests import PublishRequest
from rewards_lab.contract.permissions import Permission

Idempotency = Literal["required", "optional", "none"]
Listing = Literal["page"]  # every list pages the same way (the seed); none answers its whole list at once
Shape = Literal["one", "list"]

# Codes of every operation that acts for a principal: authentication, authorisation and the scope headers.
AUTH_CODES = (
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
)
BODY_CODES = ("request_malformed", "request_too_large", "field_unknown")
PAGE_CODES = ("cursor_invalid", "sort_field_invalid")
KEYED_CODES = ("idempotency_key_reused", "idempotency_key_invalid", "idempotency_request_in_progress")
# What publishing a draft with forecast guards may add (service.programme_forecast).
FORECAST_CODES = ("forecast_guard_failed", "programme_draft_changed", "forecast_too_large", "forecast_timeout")
AMOUNT_CODES = ("amount_invalid", "amount_not_positive", "amount_too_many_decimals", "amount_too_large")
LOGIN_CODES = (
    *BODY_CODES,
    "field_invalid",
    "field_required",
    "credentials_invalid",
    "second_factor_required",
    "second_factor_invalid",
    "organization_mismatch",
    "rate_limit_exceeded",
)
# The values the audit log filters on (service.auth_audit checks its own against these when the routes load).
AUDIT_KINDS = ("login", "logout", "api_key_created", "api_key_revoked", "access_denied", "guard_overridden")
AUDIT_OUTCOMES = ("succeeded", "failed")
_DATE_TIME = {"type": "string", "format": "date-time"}
_DATE = {"type": "string", "format": "date"}
# GET /events/export: its query parameters, formats (and their media types) and page size
EXPORT_FILTERS = ("since", "until", "format", "include", "after", "limit")
EXPORT_MEDIA = {"ndjson": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}
EXPORT_FORMATS = tuple(EXPORT_MEDIA)
EXPORT_DEFAULT_LIMIT = 10_000
EXPORT_MAX_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of /v1. `permission` None with `public` False: any live session (logout); `public`: no
    credentials at all (login, health). `errors` are the codes particular to the operation; `error_codes` adds
    those every operation of its kind may return."""

    name: str  # the handler's name: the document's summary and operationId derive from it
    method: str
    path: str  # relative to /v1
    permission: Permission | None
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    shape: Shape = "one"  # "list": the data is a list (a list envelope with next_cursor and has_more)
    status: int = 200
    idempotency: Idempotency = "none"
    listing: Listing | None = None  # "page": cursor pagination
    filters: tuple[str, ...] = ()  # query parameters besides the pagination ones
    filter_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # strings unless named here
    sorts: tuple[str, ...] = ()  # the fields a page sorts by, the first the default
    errors: tuple[str, ...] = ()
    public: bool = False
    documented: bool = True  # health probes stay outside the OpenAPI document
    description: str | None = None
    replacement: str | None = None  # deprecated: the operation to use instead ("POST /ai/knowledge/search")
    # Safe to send again when no answer came back, though it takes no Idempotency-Key: the service deduplicates
    # it (events, by external_event_id) or it changes nothing (simulations, searches). Reads and keyed writes are.
    resendable: bool = False
    # The body's fields where null is not absence, and what null does ("remove the draft's budget"): absent
    # leaves them as they are (or to the default), null clears them. Elsewhere null is the same as absent.
    nulls: Mapping[str, str] = field(default_factory=dict)
    # The success answer is a file in one of these media types (streamed), not the JSON envelope; failures
    # still answer in the envelope.
    media: tuple[str, ...] = ()

    @property
    def path_parameters(self) -> tuple[str, ...]:
        return tuple(re.findall(r"{(\w+)}", self.path))

    @property
    def response_shape(self) -> Shape:
        return "list" if self.listing is not None else self.shape

    @property
    def deprecated(self) -> bool:
        return self.replacement is not None

    @property
    def error_codes(self) -> list[str]:
        """Every code the operation declares (sorted), beyond the two any operation may return."""
        particular = set(self.errors) | (set(PAGE_CODES) if self.listing == "page" else set())
        if self.public:
            return sorted(particular)
        codes = set(AUTH_CODES) | particular
        if self.idempotency != "none":
            codes |= set(KEYED_CODES)
        if self.idempotency == "required":
            codes.add("idempotency_key_required")
        return sorted(codes)


P = Permission

_TABLE: tuple[Operation, ...] = (
    # customers and wallets
    Operation(
        "create_customer",
        "POST",
        "/customers",
        P.CUSTOMERS_CREATE,
        request=rq.CustomerCreate,
        response=r.Customer,
        status=201,
        idempotency="optional",
        errors=(*BODY_CODES, "customer_email_invalid", "customer_already_exists"),
    ),
    Operation(
        "list_customers",
        "GET",
        "/customers",
        P.CUSTOMERS_VIEW,
        response=r.Customer,
        listing="page",
        filters=("external_id",),
        sorts=("created_at", "external_id"),
    ),
    Operation(
        "get_customer",
        "GET",
        "/customers/{customer_id}",
        P.CUSTOMERS_VIEW,
        response=r.Customer,
        errors=("customer_not_found",),
    ),
    Operation(
        "update_customer",
        "PATCH",
        "/customers/{customer_id}",
        P.CUSTOMERS_UPDATE,
        request=rq.CustomerUpdate,
        response=r.Customer,
        idempotency="optional",
        errors=(*BODY_CODES, "customer_not_found", "customer_email_invalid"),
        nulls={"attributes": "remove every attribute", "email": "remove the email", "country": "remove the country"},
        description="Edits a customer named by its id or external_id: `email` and `country` (null clears one) and "
        "`attributes`, an RFC 7396 merge patch (a key set to null is removed; `attributes` set to null removes "
        "them all). The attribute limits apply to the merged result.",
    ),
    Operation(
        "customer_segments",
        "GET",
        "/customers/{customer_id}/segments",
        P.CUSTOMERS_VIEW,
        response=r.CustomerSegments,
        errors=("customer_not_found",),
    ),
    Operation(
        "customer_tier",
        "GET",
        "/customers/{customer_id}/tier",
        P.CUSTOMERS_VIEW,
        response=r.TierStatus,
        filters=("program_id",),
        errors=("customer_not_found", "programme_not_found", "tiers_not_defined"),
        description="The customer's tier in a programme whose live version defines tiers: the level, the progress "
        "on the qualifying metric over the upgrade window, what the next level needs, what keeping the current "
        "level needs by its next review, the review's time and any grace. `program_id` may be left out when exactly "
        "one programme of the tenant has tiers in its live version. Reviews already due are applied to the answer "
        "(as the next event would see them). A customer the programme has not met is at the base level.",
    ),
    Operation(
        "customer_tier_history",
        "GET",
        "/customers/{customer_id}/tier/history",
        P.CUSTOMERS_VIEW,
        response=r.TierChange,
        listing="page",
        filters=("program_id",),
        sorts=("at",),
        errors=("customer_not_found", "programme_not_found"),
        description="The customer's tier history (upgrades, reviews kept, grace started, downgrades), in every "
        "programme or in `program_id`'s, ordered by `at` (`direction=desc`: newest first).",
    ),
    Operation(
        "create_wallet",
        "POST",
        "/wallets",
        P.CUSTOMERS_CREATE,
        request=rq.WalletCreate,
        response=r.Wallet,
        status=201,
        idempotency="optional",
        errors=(*BODY_CODES, "customer_not_found"),
    ),
    Operation(
        "list_wallets",
        "GET",
        "/wallets",
        P.WALLETS_VIEW,
        response=r.Wallet,
        listing="page",
        filters=("customer_id", "status"),
        sorts=("created_at",),
    ),
    Operation(
        "get_wallet", "GET", "/wallets/{wallet_id}", P.WALLETS_VIEW, response=r.Wallet, errors=("wallet_not_found",)
    ),
    Operation(
        "wallet_balances",
        "GET",
        "/wallets/{wallet_id}/balances",
        P.WALLETS_VIEW,
        response=r.WalletBalances,
        errors=("wallet_not_found",),
    ),
    Operation(
        "list_wallet_lots",
        "GET",
        "/wallets/{wallet_id}/lots",
        P.WALLETS_VIEW,
        response=r.Lot,
        listing="page",
        filters=("asset_id", "status"),
        filter_schemas={"status": {"type": "string", "enum": ["open", "spent", "expired"]}},
        sorts=("issued_at",),
        errors=("wallet_not_found",),
        description="The wallet's lots, oldest first (the order debits take from them): each credit of an asset "
        "with an expiry, what remains of it and when it expires.",
    ),
    Operation(
        "freeze_wallet",
        "POST",
        "/wallets/{wallet_id}/freeze",
        P.WALLETS_MANAGE,
        response=r.Wallet,
        idempotency="optional",
        errors=("wallet_not_found", "invalid_state_transition"),
    ),
    Operation(
        "unfreeze_wallet",
        "POST",
        "/wallets/{wallet_id}/unfreeze",
        P.WALLETS_MANAGE,
        response=r.Wallet,
        idempotency="optional",
        errors=("wallet_not_found", "invalid_state_transition"),
    ),
    # assets and the ledger
    Operation(
        "create_asset",
        "POST",
        "/assets",
        P.ASSETS_EDIT,
        request=rq.AssetCreate,
        response=r.Asset,
        status=201,
        idempotency="optional",
        errors=(*BODY_CODES, *AMOUNT_CODES),
    ),
    Operation(
        "list_assets",
        "GET",
        "/assets",
        P.ASSETS_VIEW,
        response=r.Asset,
        listing="page",
        filters=("status",),
        sorts=("created_at", "symbol", "name"),
    ),
    Operation("get_asset", "GET", "/assets/{asset_id}", P.ASSETS_VIEW, response=r.Asset, errors=("asset_not_found",)),
    Operation(
        "activate_asset",
        "POST",
        "/assets/{asset_id}/activate",
        P.ASSETS_EDIT,
        response=r.Asset,
        idempotency="optional",
        errors=("asset_not_found", "invalid_state_transition", "asset_symbol_taken"),
    ),
    Operation(
        "pause_asset",
        "POST",
        "/assets/{asset_id}/pause",
        P.ASSETS_EDIT,
        response=r.Asset,
        idempotency="optional",
        errors=("asset_not_found", "invalid_state_transition"),
    ),
    Operation(
        "resume_asset",
        "POST",
        "/assets/{asset_id}/resume",
        P.ASSETS_EDIT,
        response=r.Asset,
        idempotency="optional",
        errors=("asset_not_found", "invalid_state_transition"),
    ),
    Operation(
        "issue",
        "POST",
        "/assets/{asset_id}/issue",
        P.LEDGER_ISSUE,
        request=rq.IssueRequest,
        response=r.LedgerTransaction,
        status=201,
        idempotency="required",
        errors=(
            *BODY_CODES,
            "asset_not_found",
            "wallet_not_found",
            "asset_paused",
            "asset_not_active",
            "wallet_frozen",
            *AMOUNT_CODES,
            "asset_supply_exhausted",
        ),
    ),
    Operation(
        "redeem",
        "POST",
        "/assets/{asset_id}/redemptions",
        P.LEDGER_REDEEM,
        request=rq.RedemptionRequest,
        response=r.LedgerTransaction,
        status=201,
        idempotency="required",
        errors=(
            *BODY_CODES,
            "asset_not_found",
            "wallet_not_found",
            "asset_paused",
            "asset_not_active",
            "wallet_frozen",
            "insufficient_balance",
            *AMOUNT_CODES,
        ),
    ),
    Operation(
        "transfer",
        "POST",
        "/assets/{asset_id}/transfers",
        P.LEDGER_TRANSFER,
        request=rq.TransferRequest,
        response=r.LedgerTransaction,
        status=201,
        idempotency="required",
        errors=(
            *BODY_CODES,
            "asset_not_found",
            "wallet_not_found",
            "asset_paused",
            "asset_not_active",
            "wallet_frozen",
            "insufficient_balance",
            *AMOUNT_CODES,
            "transfer_same_wallet",
            "wallet_policy_violation",
        ),
    ),
    Operation(
        "list_transactions",
        "GET",
        "/transactions",
        P.LEDGER_VIEW,
        response=r.LedgerTransaction,
        listing="page",
        filters=("wallet_id", "asset_id", "kind"),
        sorts=("created_at", "amount_minor"),
    ),
    Operation(
        "get_transaction",
        "GET",
        "/transactions/{transaction_id}",
        P.LEDGER_VIEW,
        response=r.LedgerTransaction,
        errors=("transaction_not_found",),
    ),
    # programmes, versions and rules
    Operation(
        "create_programme",
        "POST",
        "/reward-programs",
        P.REWARDS_EDIT,
        request=rq.ProgrammeCreate,
        response=r.Programme,
        status=201,
        idempotency="optional",
        # amounts: caps, budget and tier thresholds; the version's size: its tiers
        errors=(*BODY_CODES, "asset_not_found", *AMOUNT_CODES, "programme_limit_exceeded"),
        nulls={"max_event_age_days": "no bound on a live event's age (backfills)"},
    ),
    Operation(
        "list_programmes",
        "GET",
        "/reward-programs",
        P.REWARDS_VIEW,
        response=r.Programme,
        listing="page",
        filters=("asset_id",),
        sorts=("created_at", "name"),
    ),
    Operation(
        "get_programme",
        "GET",
        "/reward-programs/{program_id}",
        P.REWARDS_VIEW,
        response=r.Programme,
        errors=("programme_not_found",),
    ),
    Operation(
        "update_programme",
        "PATCH",
        "/reward-programs/{program_id}",
        P.REWARDS_EDIT,
        request=rq.ProgrammeUpdate,
        response=r.Programme,
        idempotency="optional",
        errors=(*BODY_CODES, "programme_not_found", *AMOUNT_CODES, "programme_limit_exceeded"),
        nulls={
            "description": "remove the description",
            "timezone": "back to UTC",
            "starts_at": "remove the draft's start bound",
            "ends_at": "remove the draft's end bound",
            "limits": "remove the draft's caps",
            "budget": "remove the draft's budget",
            "clawback": "back to available",
            "expiry": "the draft's rewards expire as the asset's points do",
            "max_event_age_days": "no bound on a live event's age (backfills)",
            "guards": "remove the draft's forecast guards",
            "tiers": "remove the draft's tiers (refused while a draft rule uses them)",
        },
        description=(
            "Edits the programme's name and description and its DRAFT version's schedule (timezone, starts_at, "
            "ends_at), caps per customer (limits), budget and clawback policy; published versions keep theirs "
            "until the next publication. Removing or loosening the forecast guards (a guard removed, a max raised, "
            "a min lowered, guard_window_days shortened) needs the permission rewards.guards.override. Tiers "
            "(status levels) are stored and versioned with the draft but not yet applied to rewards."
        ),
    ),
    Operation(
        "deactivate_programme",
        "POST",
        "/reward-programs/{program_id}/deactivate",
        P.REWARDS_ACTIVATE,
        response=r.Programme,
        idempotency="optional",
        errors=("programme_not_found", "invalid_state_transition"),
        description="An inactive programme rewards no event processed while it is inactive.",
    ),
    Operation(
        "activate_programme",
        "POST",
        "/reward-programs/{program_id}/activate",
        P.REWARDS_ACTIVATE,
        response=r.Programme,
        idempotency="optional",
        errors=("programme_not_found", "invalid_state_transition"),
    ),
    Operation(
        "list_versions",
        "GET",
        "/reward-programs/{program_id}/versions",
        P.REWARDS_VIEW,
        response=r.ProgrammeVersion,
        listing="page",
        sorts=("number",),
        errors=("programme_not_found",),
        description="The programme's versions in the order they were made: published ones by number, the draft "
        "last. Paged like every list (`limit` 25 by default).",
    ),
    Operation(
        "publish",
        "POST",
        "/reward-programs/{program_id}/publish",
        P.REWARDS_ACTIVATE,
        request=PublishRequest,
        response=r.PublishResult,
        status=201,
        idempotency="optional",
        errors=(*BODY_CODES, "programme_not_found", "programme_draft_empty", *FORECAST_CODES),
        description=(
            "Freezes the draft as the next version. A draft with forecast guards is first checked on the stored "
            "events of its last guard_window_days (as POST /reward-programs/{program_id}/forecast shows); a failing "
            "draft is refused with forecast_guard_failed (409, the guard table in details.checks). The body is "
            "optional: `guard_override` (a reason) publishes past a failed guard, which needs the permission "
            "rewards.guards.override, and is recorded on the version and in the audit trail with the key or "
            "account that gave it."
        ),
    ),
    Operation(
        "forecast_programme",
        "POST",
        "/reward-programs/{program_id}/forecast",
        P.REWARDS_EDIT,
        response=r.ForecastResult,
        errors=("programme_not_found", "programme_draft_empty", "forecast_too_large", "forecast_timeout"),
        description=(
            "Checks the draft's forecast guards as publishing would, without publishing: the tenant's stored "
            "events of the last guard_window_days replayed through the draft and the live version. A failing "
            'draft is a 200 with passed false; figures are decimal strings ("never": the ceiling never runs out).'
        ),
    ),
    Operation(
        "restore_version",
        "POST",
        "/reward-programs/{program_id}/versions/{version}/restore",
        P.REWARDS_EDIT,
        response=r.ProgrammeVersion,
        idempotency="optional",
        errors=("programme_not_found", "programme_version_not_found"),
        description=(
            "Makes the draft a copy of a published version (its rules, with their ids, and its schedule), to be "
            "published as a new version; the history is never changed."
        ),
    ),
    Operation(
        "create_rule",
        "POST",
        "/reward-rules",
        P.REWARDS_EDIT,
        request=rq.RuleCreate,
        response=r.Rule,
        status=201,
        idempotency="optional",
        errors=(*BODY_CODES, "programme_not_found", "asset_not_found", "rule_asset_mismatch", *AMOUNT_CODES),
    ),
    Operation(
        "get_rule", "GET", "/reward-rules/{rule_id}", P.REWARDS_VIEW, response=r.Rule, errors=("rule_not_found",)
    ),
    Operation(
        "update_rule",
        "PATCH",
        "/reward-rules/{rule_id}",
        P.REWARDS_EDIT,
        request=rq.RuleUpdate,
        response=r.Rule,
        idempotency="optional",
        errors=(*BODY_CODES, "rule_not_found", "programme_version_immutable", "rule_asset_mismatch", *AMOUNT_CODES),
        nulls={"name": "remove the rule's name"},
    ),
    Operation(
        "delete_rule",
        "DELETE",
        "/reward-rules/{rule_id}",
        P.REWARDS_EDIT,
        response=r.Rule,
        idempotency="optional",
        errors=("rule_not_found", "programme_version_immutable"),
    ),
    Operation(
        "simulate_rule",
        "POST",
        "/reward-rules/{rule_id}/simulate",
        P.REWARDS_VIEW,
        request=rq.SimulationRequest,
        response=r.Simulation,
        errors=(*BODY_CODES, "rule_not_found", "customer_not_found"),
        resendable=True,
    ),
    Operation(
        "simulate_programme",
        "POST",
        "/reward-programs/{program_id}/simulate",
        P.REWARDS_VIEW,
        request=rq.SimulationRequest,
        response=r.Simulation,
        filters=("version",),
        filter_schemas={
            "version": {
                "description": "The version to simulate: `draft` (the default), `live` or a version number.",
                "type": "string",
                "pattern": "^(draft|live|[1-9][0-9]{0,8})$",
            }
        },
        errors=(*BODY_CODES, "programme_not_found", "programme_version_not_found", "customer_not_found"),
        resendable=True,
        description="Every rule of a programme version against one event, in the order the rules apply, with "
        "the reason of every condition, group, priority stop and beneficiary.",
    ),
    # events and executions
    Operation(
        "list_events",
        "GET",
        "/events",
        P.EVENTS_VIEW,
        response=r.Event,
        listing="page",
        filters=("status", "type", "customer_id"),
        sorts=("received_at", "occurred_at"),
    ),
    # before /events/{event_id}: routes match in the table's order
    Operation(
        "export_events",
        "GET",
        "/events/export",
        P.EVENTS_VIEW,
        filters=EXPORT_FILTERS,
        filter_schemas={
            "since": _DATE_TIME,
            "until": _DATE_TIME,
            "format": {"type": "string", "enum": list(EXPORT_FORMATS), "default": "ndjson"},
            "include": {"type": "string", "enum": ["executions"]},
            "after": {"type": "string", "minLength": 1, "maxLength": 255},
            "limit": {"type": "integer", "minimum": 1, "maximum": EXPORT_MAX_LIMIT, "default": EXPORT_DEFAULT_LIMIT},
        },
        errors=("period_invalid",),
        media=tuple(EXPORT_MEDIA.values()),
        description="The tenant's events with since <= occurred_at < until (since: the first event, until: now), in "
        "(occurred_at, external_event_id) order, as a file the replay reads (docs/replay.md, histories from a "
        "deployment): NDJSON or Parquet, with each event's reward executions when include=executions. At most "
        "`limit` events per answer: `X-Export-Next-After` names the last one when more follow (pass it as "
        "`after`, with the `X-Export-Until` of the first answer as `until`). Read from a snapshot, off the write "
        "path.",
    ),
    Operation("get_event", "GET", "/events/{event_id}", P.EVENTS_VIEW, response=r.Event, errors=("event_not_found",)),
    Operation(
        "replay_event",
        "POST",
        "/events/{event_id}/replay",
        P.EVENTS_WRITE,
        response=r.Event,
        errors=("event_not_found", "event_not_replayable"),
        resendable=True,  # creates no duplicate issuance
    ),
    Operation(
        "list_executions",
        "GET",
        "/reward-executions",
        P.REWARDS_VIEW,
        response=r.RewardExecution,
        listing="page",
        filters=("customer_id", "event_id", "status"),
        sorts=("created_at",),
    ),
    # webhook endpoints and their deliveries
    Operation(
        "create_webhook",
        "POST",
        "/webhooks",
        P.WEBHOOKS_MANAGE,
        request=rq.WebhookCreate,
        response=r.WebhookEndpointCreated,
        status=201,
        errors=(*BODY_CODES, "webhook_url_invalid", "webhook_event_kind_invalid"),
    ),
    Operation(
        "list_webhooks",
        "GET",
        "/webhooks",
        P.WEBHOOKS_VIEW,
        response=r.WebhookEndpoint,
        listing="page",
        filters=("status",),
        sorts=("created_at",),
    ),
    Operation(
        "get_webhook",
        "GET",
        "/webhooks/{webhook_id}",
        P.WEBHOOKS_VIEW,
        response=r.WebhookEndpoint,
        errors=("webhook_not_found",),
    ),
    Operation(
        "disable_webhook",
        "DELETE",
        "/webhooks/{webhook_id}",
        P.WEBHOOKS_MANAGE,
        response=r.WebhookEndpoint,
        idempotency="optional",
        errors=("webhook_not_found", "invalid_state_transition"),
    ),
    Operation(
        "rotate_webhook_secret",
        "POST",
        "/webhooks/{webhook_id}/rotate-secret",
        P.WEBHOOKS_MANAGE,
        request=rq.WebhookSecretRotate,
        response=r.WebhookSecretRotated,
        errors=(*BODY_CODES, "webhook_not_found", "invalid_state_transition"),
    ),
    Operation(
        "test_webhook",
        "POST",
        "/webhooks/{webhook_id}/test",
        P.WEBHOOKS_MANAGE,
        response=r.WebhookDelivery,
        status=202,
        errors=("webhook_not_found", "invalid_state_transition"),
    ),
    Operation(
        "list_webhook_deliveries",
        "GET",
        "/webhooks/{webhook_id}/deliveries",
        P.WEBHOOKS_VIEW,
        response=r.WebhookDelivery,
        listing="page",
        filters=("status",),
        sorts=("created_at",),
        errors=("webhook_not_found",),
    ),
    Operation(
        "get_webhook_delivery",
        "GET",
        "/webhooks/{webhook_id}/deliveries/{delivery_id}",
        P.WEBHOOKS_VIEW,
        response=r.WebhookDelivery,
        errors=("webhook_not_found", "webhook_delivery_not_found"),
    ),
    Operation(
        "replay_webhook_delivery",
        "POST",
        "/webhooks/{webhook_id}/deliveries/{delivery_id}/replay",
        P.WEBHOOKS_MANAGE,
        response=r.WebhookDelivery,
        status=202,
        idempotency="optional",
        errors=(
            "webhook_not_found",
            "webhook_delivery_not_found",
            "webhook_delivery_not_replayable",
            "invalid_state_transition",
        ),
    ),
    # the POST /events hot path (api.hot_path answers it in front of FastAPI; the route is its fallback)
    Operation(
        "submit_event",
        "POST",
        "/events",
        P.EVENTS_WRITE,
        request=rq.EventCreate,
        response=r.Event,
        status=202,
        errors=(*BODY_CODES, "event_duplicate_mismatch", "event_payload_too_large"),
        resendable=True,  # deduplicated on external_event_id: a resend returns the original
    ),
    # API keys
    Operation(
        "create_api_key",
        "POST",
        "/developer/api-keys",
        P.API_KEYS_MANAGE,
        request=rq.ApiKeyCreate,
        response=r.ApiKeyCreated,
        status=201,
        errors=(*BODY_CODES, "permission_unknown", "permission_escalation"),
    ),
    Operation(
        "list_api_keys",
        "GET",
        "/developer/api-keys",
        P.API_KEYS_MANAGE,
        response=r.ApiKey,
        listing="page",
        filters=("status",),
        filter_schemas={"status": {"type": "string", "enum": ["active", "revoked"]}},
        sorts=("created_at", "name"),
        description="The keys of this organization and environment, revoked ones included (with `revoked_at`): "
        "each key's prefix and metadata, never its secret, which is shown once, at creation.",
    ),
    Operation(
        "revoke_api_key",
        "DELETE",
        "/developer/api-keys/{key_id}",
        P.API_KEYS_MANAGE,
        response=r.ApiKey,
        errors=("api_key_not_found", "api_key_already_revoked"),
        resendable=True,
    ),
    # AI: knowledge search and answers without a model, and their deprecated predecessors
    Operation(
        "knowledge_search",
        "POST",
        "/ai/knowledge/search",
        P.AI_USE,
        request=rq.KnowledgeSearch,
        response=r.KnowledgeHit,
        shape="list",
        errors=BODY_CODES,
        resendable=True,
    ),
    Operation(
        "create_conversation",
        "POST",
        "/ai/conversations",
        P.AI_USE,
        response=r.Conversation,
        status=201,
        description="A new support conversation with an id the service gives (`cnv_...`), no turns yet.",
    ),
    Operation(
        "conversation_message",
        "POST",
        "/ai/conversations/{conversation_id}/messages",
        P.AI_USE,
        request=rq.MessageCreate,
        response=r.AssistantMessage,
        status=201,
        errors=(*BODY_CODES, "conversation_not_found"),
        description="Asks a question in a conversation and stores the question and its answer. The answer comes "
        "from the tenant's records (an event's outcome, a customer's balance and next expiry, the programme version "
        "live at a time) and the documentation, cites every source, and reads what the earlier turns named when "
        "the question does not say. A `cnv_` id must be one `POST /ai/conversations` gave; any other id is the "
        "client's own name, which its first message creates.",
    ),
    Operation(
        "get_conversation",
        "GET",
        "/ai/conversations/{conversation_id}",
        P.AI_USE,
        response=r.Conversation,
        errors=("conversation_not_found",),
        description="A conversation with every question and answer, in order.",
    ),
    Operation(
        "deprecated_search",
        "POST",
        "/ai/search",
        P.AI_USE,
        request=rq.KnowledgeSearch,
        response=r.KnowledgeHit,
        shape="list",
        errors=BODY_CODES,
        resendable=True,
        replacement="POST /ai/knowledge/search",
    ),
    Operation(
        "deprecated_message",
        "POST",
        "/ai/messages",
        P.AI_USE,
        request=rq.MessageCreate,
        response=r.AssistantMessage,
        status=201,
        errors=BODY_CODES,
        replacement="POST /ai/conversations/{conversation_id}/messages",
    ),
    # liveness, for operators and load balancers: unauthenticated, no tenant data
    Operation("service_health", "GET", "/health", None, public=True, documented=False),
    # people and developers: sessions, the request log, API usage, the authentication audit
    Operation(
        "login",
        "POST",
        "/auth/login",
        None,
        request=d.LoginRequest,
        response=d.SessionCreated,
        status=201,
        errors=LOGIN_CODES,
        public=True,
    ),
    Operation(
        "logout", "POST", "/auth/logout", None, response=d.Session, errors=("session_expired", "session_revoked")
    ),
    Operation(
        "list_request_logs",
        "GET",
        "/developer/logs",
        P.LOGS_VIEW,
        response=d.RequestLogEntry,
        listing="page",
        filters=("status", "path", "request_id", "from", "to", "sdk_version"),
        filter_schemas={
            "status": {"type": "string", "pattern": "^[1-5]([0-9]{2}|[xX]{2})$"},
            "path": {"type": "string", "pattern": "^/"},
            "from": _DATE_TIME,
            "to": _DATE_TIME,
            "sdk_version": {"type": "string", "pattern": "^(none|[A-Za-z0-9][A-Za-z0-9._/+-]{0,63})$"},
        },
        sorts=("created_at",),
        errors=("period_invalid",),
    ),
    Operation(
        "api_usage",
        "GET",
        "/developer/usage",
        P.USAGE_VIEW,
        response=d.Usage,
        filters=("from", "to"),
        filter_schemas={"from": _DATE, "to": _DATE},
        errors=("period_invalid",),
    ),
    Operation(
        "list_auth_audit",
        "GET",
        "/developer/audit",
        P.LOGS_VIEW,
        response=d.AuthAuditEntry,
        listing="page",
        filters=("kind", "outcome", "from", "to"),
        filter_schemas={
            "kind": {"type": "string", "enum": list(AUDIT_KINDS)},
            "outcome": {"type": "string", "enum": list(AUDIT_OUTCOMES)},
        },
        sorts=("created_at",),
        errors=("period_invalid",),
        description="Authentication events (logins, logouts, API key changes, 401 and 403 answers) and guard "
        "overrides given at publish, durable and complete.",
    ),
    # readiness: 503 with Retry-After when not ready
    Operation("service_readiness", "GET", "/health/ready", None, public=True, documented=False),
)
OPERATIONS: dict[str, Operation] = {operation.name: operation for operation in _TABLE}
assert len(OPERATIONS) == len(_TABLE), "operation names are unique"
assert all(set(op.error_codes) <= set(REGISTRY) for op in _TABLE), "every declared code is registered"
assert all(op.request is not None and set(op.nulls) <= set(op.request.model_fields) for op in _TABLE if op.nulls), (
    "nulls name fields of the body"
)


def operation(name: str) -> Operation:
    return OPERATIONS[name]
