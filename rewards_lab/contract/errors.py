"""The error registry: every code the service can return, its type, and the type's HTTP status.

Nothing in the package raises a code that is not registered here (`ServiceError.__init__` checks), and every
operation declares the codes it may return (see `contract.operations`). Clients switch on `type` for behaviour
and on `code` for the message, as the seed says.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorType(StrEnum):
    VALIDATION = "validation_error"
    AUTHENTICATION = "authentication_error"
    AUTHORIZATION = "authorization_error"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"  # the path exists; the method is not one of its operations
    CONFLICT = "conflict"
    IDEMPOTENCY = "idempotency_error"
    RATE_LIMIT = "rate_limit_error"
    SERVICE = "service_error"


HTTP_STATUS_BY_TYPE: dict[ErrorType, int] = {
    ErrorType.VALIDATION: 422,
    ErrorType.AUTHENTICATION: 401,
    ErrorType.AUTHORIZATION: 403,
    ErrorType.NOT_FOUND: 404,
    ErrorType.METHOD_NOT_ALLOWED: 405,
    ErrorType.CONFLICT: 409,
    ErrorType.IDEMPOTENCY: 409,
    ErrorType.RATE_LIMIT: 429,
    ErrorType.SERVICE: 500,
}

# The one code whose status is not its type's: a body over the limit is refused as RFC 9110's 413 (Content Too
# Large), which proxies and HTTP clients understand without reading the envelope (docs/decisions.md, "Contract
# and errors").
HTTP_STATUS_BY_CODE: dict[str, int] = {"request_too_large": 413}


@dataclass(frozen=True, slots=True)
class ErrorCode:
    code: str
    type: ErrorType
    message: str

    @property
    def http_status(self) -> int:
        return HTTP_STATUS_BY_CODE.get(self.code, HTTP_STATUS_BY_TYPE[self.type])


def _codes(error_type: ErrorType, entries: dict[str, str]) -> dict[str, ErrorCode]:
    return {code: ErrorCode(code, error_type, message) for code, message in entries.items()}


REGISTRY: dict[str, ErrorCode] = {
    **_codes(
        ErrorType.VALIDATION,
        {
            "request_malformed": "The request body is not valid JSON.",
            "request_too_large": "The request body is larger than the service accepts.",
            "field_required": "A required field is missing.",
            "field_invalid": "A field has a value of the wrong type or outside its allowed range.",
            "field_unknown": "The request has a field the operation does not accept.",
            "customer_email_invalid": "The email address is not valid.",
            "amount_invalid": "The amount is not a decimal string.",
            "amount_not_positive": "The amount must be greater than zero.",
            "amount_too_many_decimals": "The amount has more decimal places than the asset allows.",
            "amount_too_large": "The amount is larger than the ledger can hold.",
            "ledger_unbalanced": "The ledger posting does not net to zero per asset.",
            "transfer_same_wallet": "A transfer needs two different wallets.",
            "rule_asset_mismatch": "A rule action issues an asset other than the programme's.",
            "beneficiary_missing": "The event has no customer reference in the field the action's beneficiary names.",
            "beneficiary_not_found": "No customer has the id or external id the action's beneficiary names.",
            "original_missing": "The event has no event reference in the field the reverse action's original names.",
            "original_not_found": "No event has the external_event_id the reverse action names as its original.",
            "fraction_invalid": "The reverse action's fraction cannot be read from the events (missing or negative).",
            "original_customer_mismatch": "The refund's customer is not the original event's customer.",
            "event_too_old": "The event occurred longer before its receipt than its programme rewards events.",
            "programme_draft_empty": "The draft version has no rules to publish.",
            "programme_limit_exceeded": "The programme version would exceed a limit on its rules (details.limit).",
            "simulation_too_large": "The simulation's explanation would exceed a limit (details.limit).",
            "idempotency_key_required": "This operation requires an Idempotency-Key header.",
            "idempotency_key_invalid": "The Idempotency-Key header is empty or too long.",
            "cursor_invalid": "The pagination cursor is not one this service issued for this list.",
            "sort_field_invalid": "The list cannot be sorted by that field.",
            "event_payload_too_large": "The event data is larger than the service accepts.",
            "webhook_url_invalid": "The webhook URL is not allowed in this environment.",
            "webhook_event_kind_invalid": "The webhook subscribes to an unknown event kind.",
            "period_invalid": "The reporting period is invalid.",
            "permission_unknown": "The permission code is not one the service defines.",
            "forecast_too_large": "The forecast window holds more events than the server replays (details.limit); "
            "shorten guard_window_days.",
            "forecast_timeout": "The forecast did not finish within the server's time limit; shorten "
            "guard_window_days.",
        },
    ),
    **_codes(
        ErrorType.AUTHENTICATION,
        {
            "authentication_required": "The request carries no credentials.",
            "credentials_invalid": "The credentials are not valid.",
            "api_key_revoked": "The API key has been revoked.",
            "session_expired": "The session has expired; log in again.",
            "session_revoked": "The session has ended (logged out); log in again.",
            "second_factor_required": "This account requires a second factor.",
            "second_factor_invalid": "The second factor is not valid.",
        },
    ),
    **_codes(
        ErrorType.AUTHORIZATION,
        {
            "permission_denied": "The caller lacks the permission this operation requires.",
            "organization_mismatch": "X-Organization-ID does not match the authenticated principal.",
            "environment_mismatch": "X-Environment does not match the environment of the API key.",
            "wallet_policy_violation": "The wallet's transfer policy does not allow this transfer.",
            "permission_escalation": "A key cannot hold permissions its creator does not hold.",
        },
    ),
    **_codes(
        ErrorType.NOT_FOUND,
        {
            "route_not_found": "No operation exists at this method and path.",
            "organization_not_found": "The organization does not exist.",
            "customer_not_found": "The customer does not exist in this organization and environment.",
            "wallet_not_found": "The wallet does not exist in this organization and environment.",
            "asset_not_found": "The asset does not exist in this organization and environment.",
            "programme_not_found": "The reward programme does not exist in this organization and environment.",
            "programme_version_not_found": "The programme version does not exist.",
            "tiers_not_defined": "The programme's live version defines no tiers.",
            "rule_not_found": "The reward rule does not exist in this organization and environment.",
            "event_not_found": "The event does not exist in this organization and environment.",
            "execution_not_found": "The reward execution does not exist.",
            "transaction_not_found": "The ledger transaction does not exist.",
            "webhook_not_found": "The webhook endpoint does not exist.",
            "webhook_delivery_not_found": "The webhook delivery does not exist.",
            "api_key_not_found": "The API key does not exist.",
            "conversation_not_found": "The conversation does not exist.",
        },
    ),
    **_codes(
        ErrorType.METHOD_NOT_ALLOWED,
        {"method_not_allowed": "The path exists but has no operation for this method; the Allow header lists them."},
    ),
    **_codes(
        ErrorType.CONFLICT,
        {
            "asset_paused": "The asset is paused; resume it before transacting.",
            "asset_not_active": "The asset is not active; activate it before transacting.",
            "asset_symbol_taken": "Another active asset in this environment already uses the symbol.",
            "asset_supply_exhausted": "Issuing this amount would exceed the asset's supply ceiling.",
            "wallet_frozen": "The wallet is frozen and cannot transact.",
            "insufficient_balance": "The wallet holds too little of the asset.",
            "invalid_state_transition": "The resource is not in a state that allows this transition.",
            "customer_already_exists": "A customer with this external_id already exists.",
            "event_duplicate_mismatch": "An event with this external_event_id exists with a different payload.",
            "event_not_replayable": "Only a failed event can be replayed.",
            "programme_version_immutable": "A published programme version cannot be changed.",
            "forecast_guard_failed": "A forecast guard of the draft fails on the stored history (details.checks); "
            "publishing past it needs a guard_override and rewards.guards.override.",
            "programme_draft_changed": "The draft changed while its forecast ran; publish again.",
            "webhook_delivery_not_replayable": "Only a failed delivery can be replayed.",
            "api_key_already_revoked": "The API key is already revoked.",
        },
    ),
    **_codes(
        ErrorType.IDEMPOTENCY,
        {
            "idempotency_key_reused": "The Idempotency-Key was used with a different request body.",
            "idempotency_request_in_progress": "A request with this Idempotency-Key is still in progress.",
        },
    ),
    **_codes(
        ErrorType.RATE_LIMIT,
        {"rate_limit_exceeded": "Too many requests; back off and retry after RateLimit-Reset seconds."},
    ),
    **_codes(
        ErrorType.SERVICE,
        {
            "internal_error": "The request could not be completed; retry with backoff.",
            "service_unavailable": "The service is shutting down or overloaded; retry with backoff.",
        },
    ),
}


class ServiceError(Exception):
    """An error with a registered code; the API renders it as the seed's failure envelope."""

    def __init__(self, code: str, message: str | None = None, **details: Any) -> None:
        if code not in REGISTRY:
            raise LookupError(f"unregistered error code {code!r}")
        self.error = REGISTRY[code]
        self.code = code
        self.message = message or self.error.message
        self.details: dict[str, Any] = details
        super().__init__(f"{code}: {self.message}")

    @property
    def type(self) -> ErrorType:
        return self.error.type

    @property
    def http_status(self) -> int:
        return self.error.http_status

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type.value, "code": self.code, "message": self.message, "details": self.details}
