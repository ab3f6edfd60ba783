"""How the operations read in the Python client and on `rewards-lab api`, where the registry says nothing.

A one-line summary each, a method name where it is not the operation's, the words and examples of parameters
the request models leave undescribed, and the few parameters taken in a handier form than the wire's.
Documentation and conveniences only: what is sent, and how, is `operation_parameters.py`'s.

A new operation or field needs no entry here (a missing summary is made from the operation's name, a missing
doc is the field's `description`); add one to say it better.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Convenience:
    """A parameter taken in another form than the wire's: its kind (`operation_parameters.Kind`) and its wire form."""

    kind: Literal["str", "int_or_str"]
    wire: Callable[[Any], Any]


def _override(reason: str) -> dict[str, str]:
    return {"reason": reason}


CONVENIENCES: Mapping[tuple[str, str], Convenience] = {
    # publish(..., guard_override="finance agreed") sends {"guard_override": {"reason": "finance agreed"}}
    ("publish", "guard_override"): Convenience("str", _override),
    ("restore_version", "version"): Convenience("int_or_str", str),  # 3 or "live"
    ("simulate_programme", "version"): Convenience("int_or_str", str),  # "draft", "live" or 3
}

# The client's name of an operation, where it is not the operation's own.
METHOD_NAMES: Mapping[str, str] = {"list_request_logs": "list_logs", "api_usage": "usage"}

SUMMARIES: Mapping[str, str] = {
    "create_customer": "create a customer keyed by your external id",
    "list_customers": "list customers",
    "get_customer": "read a customer",
    "update_customer": "edit a customer's email, country or attributes (what is not given stays)",
    "customer_segments": "derived segments of a customer",
    "customer_tier": "a customer's tier in a programme: progress and what the next level and keeping this one need",
    "customer_tier_history": "a customer's tier changes, oldest first",
    "create_wallet": "create a wallet for a customer",
    "list_wallets": "list wallets",
    "get_wallet": "read a wallet",
    "wallet_balances": "balances held by a wallet",
    "list_wallet_lots": "a wallet's lots, oldest first (assets with an expiry)",
    "freeze_wallet": "freeze a wallet",
    "unfreeze_wallet": "unfreeze a wallet",
    "create_asset": "create an asset (configured until activated)",
    "list_assets": "list assets",
    "get_asset": "read an asset",
    "activate_asset": "activate an asset",
    "pause_asset": "pause an asset",
    "resume_asset": "resume a paused asset",
    "issue": "issue an amount into a wallet (direct issuance)",
    "redeem": "redeem an amount from a wallet",
    "transfer": "transfer an amount between wallets",
    "list_transactions": "list ledger transactions",
    "get_transaction": "read a ledger transaction",
    "create_programme": "create a reward programme",
    "list_programmes": "list programmes",
    "get_programme": "read a programme",
    "update_programme": "edit a programme and its draft's schedule, caps, budget, clawback, expiry, forecast guards "
    "and event age (what is not given stays)",
    "deactivate_programme": "stop a programme rewarding events",
    "activate_programme": "let a deactivated programme reward events again",
    "list_versions": "versions of a programme with their rules",
    "publish": "publish the draft version",
    "forecast_programme": "check the draft's forecast guards on the stored events, without publishing",
    "restore_version": "make the draft a copy of a published version (publish it to roll back)",
    "create_rule": "add a rule to a programme's draft",
    "get_rule": "read a rule",
    "update_rule": "edit a rule of the draft (what is not given stays)",
    "delete_rule": "delete a rule from the draft",
    "simulate_rule": "what the rule would issue for one event (writes nothing)",
    "simulate_programme": "what every rule of a version would issue for one event, in the order they apply "
    "(writes nothing)",
    "list_events": "list events with their processing status",
    "get_event": "read an event and its processing status",
    "replay_event": "reprocess a failed event",
    "list_executions": "list reward executions",
    "create_webhook": "register a webhook endpoint (the signing secret is shown once)",
    "list_webhooks": "list webhook endpoints",
    "get_webhook": "read a webhook endpoint",
    "disable_webhook": "disable a webhook endpoint",
    "rotate_webhook_secret": "a new signing secret (shown once); the previous one keeps signing for the grace period",
    "test_webhook": "send a signed test delivery to an endpoint",
    "list_webhook_deliveries": "deliveries of an endpoint",
    "get_webhook_delivery": "read one delivery with its attempts",
    "replay_webhook_delivery": "replay a failed delivery",
    "submit_event": "send a business event",
    "create_api_key": "create an API key (the secret is shown once)",
    "list_api_keys": "list API keys (prefixes, never secrets)",
    "revoke_api_key": "revoke an API key (its history stays)",
    "knowledge_search": "search the documentation",
    "create_conversation": "start a support conversation",
    "conversation_message": "ask the assistant, in a conversation",
    "get_conversation": "show a conversation and its turns",
    "deprecated_search": "search the documentation",
    "deprecated_message": "ask the assistant",
    "login": "log in a person: a session, whose token is the bearer token of later requests",
    "logout": "end the session whose token is the client's key",
    "list_request_logs": "request logs, newest first",
    "api_usage": "API usage over a period",
    "list_auth_audit": "the authentication audit (logins, logouts, API key changes, 401 and 403, guard overrides), "
    "newest first",
}

_SINCE = {"since": "from this time (ISO 8601)", "until": "until this time (ISO 8601)"}
_SCHEDULE = {
    "timezone": "IANA timezone of the draft, e.g. Europe/London",
    "starts_at": "first rewarded event time, RFC 3339 with an offset",
    "ends_at": "end of the window (exclusive), RFC 3339 with an offset",
}
_SPENDING = {
    "limits": 'the draft\'s caps per customer across its rules, e.g. [{"period": "week", "max_amount": "1000"}]',
    "budget": 'across all customers, e.g. {"period": "month", "max_amount": "10000"}',
    "clawback": "what a reversal takes when the points are spent: available (the default), negative or none",
    "expiry": 'when the draft\'s rewards expire, e.g. {"after_days": 365} or {"at_end_of": "quarter", "after": 1}',
    "guards": 'the draft\'s forecast guards, e.g. [{"metric": "issued", "period": "month", "max": "120000"}]',
    "guard_window_days": "the days of stored events the server checks the guards on (1-365, default 90)",
    "max_event_age_days": "how many days before its receipt a live event may have occurred and still be rewarded "
    "(default 30)",
}
_RULE = {
    "actions": 'e.g. [{"type": "issue", "amount": {"fixed": "5"}}] or '
    '[{"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.5"}]',
    "conditions": 'e.g. [{"field": "amount", "operator": "gte", "value": 20}]',
    "priority": "lower applies first (default 0); ties in creation order",
    "stop_processing": "when the rule matches, the programme's later rules do not apply to the event",
    "limits": 'caps per customer, e.g. [{"period": "month", "max_amount": "500"}, {"period": "day", "max_count": 3}]',
    "name": "a short human name, shown wherever the rule is listed (at most 120 characters)",
}
_SIMULATION = {
    "event": 'the event\'s type and data fields as one flat object, e.g. {"type": "order.completed", "amount": 42}',
    "occurred_at": "the event's time the rules read (RFC 3339; now when absent)",
    "customer_id": "the customer whose attributes, country and segments the rules read",
}

# What a parameter means, where the request model does not say (or says it for another reader).
DOCS: Mapping[str, Mapping[str, str]] = {
    "create_customer": {
        "attributes": "facts the rules can read: strings, booleans and numbers (Decimal keeps digits exactly), "
        'e.g. {"tier": "gold", "lifetime_spend": 1250.50}',
    },
    "update_customer": {
        "customer_id": "the customer's id or external id",
        "attributes": 'an RFC 7396 merge patch, e.g. {"tier": "gold", "old_key": null} (null removes a key)',
    },
    "list_customers": {"external_id": "only this external id"},
    "customer_tier": {
        "customer_id": "the customer's id or external id",
        "program_id": "the programme (may be left out when only one programme has tiers)",
    },
    "customer_tier_history": {"customer_id": "the customer's id or external id", "program_id": "only this programme"},
    "list_wallets": {"customer_id": "of this customer", "status": "active or frozen"},
    "list_wallet_lots": {"asset_id": "of this asset", "status": "open, spent or expired"},
    "create_asset": {
        "expiry": 'when its points expire, e.g. {"after_days": 365} or {"at_end_of": "year", "after": 0}',
        "value_per_unit": "what one unit is worth in money, for liability reports",
    },
    "list_assets": {"status": "configured, active or paused"},
    "list_transactions": {
        "wallet_id": "touching this wallet",
        "asset_id": "of this asset",
        "kind": "issue, redemption, ...",
    },
    "create_programme": _SCHEDULE | _SPENDING,
    "update_programme": _SCHEDULE | _SPENDING,
    "list_programmes": {"asset_id": "dealing in this asset"},
    "publish": {"guard_override": "why it is published although a forecast guard failed (recorded)"},
    "restore_version": {"version": "the published version's number, or live"},
    "create_rule": _RULE,
    "update_rule": _RULE,
    "simulate_rule": _SIMULATION,
    "simulate_programme": _SIMULATION | {"version": "draft (the default), live or a version number"},
    "submit_event": {"data": 'the event\'s data fields, e.g. {"amount": 42.50}'},
    "list_events": {"status": "received, processed or failed", "type": "event type", "customer_id": "of this customer"},
    "list_executions": {
        "customer_id": "of this customer",
        "event_id": "of this event",
        "status": "issued, failed, limited or reversed",
    },
    "create_webhook": {"events": "the event kinds to deliver, e.g. reward.issued"},
    "list_webhooks": {"status": "enabled or disabled"},
    "list_api_keys": {"status": "active or revoked"},
    "rotate_webhook_secret": {"grace_period_s": "seconds the previous secret still signs (default: a day)"},
    "list_webhook_deliveries": {"status": "delivery status"},
    "create_api_key": {"permissions": "permission codes, e.g. customers.view"},
    "list_request_logs": {
        "status": "HTTP status or class (404, 4xx)",
        "path": "path prefix",
        "request_id": "one request",
        "sdk_version": "X-SDK-Version sent (none: requests without one)",
    }
    | _SINCE,
    "list_auth_audit": {
        "kind": "login, logout, api_key_created, api_key_revoked, access_denied or guard_overridden",
        "outcome": "succeeded or failed",
    }
    | _SINCE,
    "api_usage": _SINCE,
    "login": {"totp_code": "second factor, when the account requires one"},
}
