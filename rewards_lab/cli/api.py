"""`rewards-lab api RESOURCE ACTION ...`: the command line client the seed plans, one subcommand per operation.

Built on rewards_lab.client, so it inherits environment scoping (a sandbox key against production fails with
`environment_mismatch`). Prints the envelope's `data` as JSON (or a table); on failure prints the error's type,
code and message on stderr and exits 1. The API key comes from $REWARDS_API_KEY only.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from rewards_lab.cli.common import (
    EXIT_API_ERROR,
    EXIT_USAGE,
    UsageError,
    add_target_arguments,
    client_from,
    explain,
    fail,
)
from rewards_lab.contract.operations import OPERATIONS

Run = Callable[[Any, argparse.Namespace], Any]
Arg = tuple[tuple[str, ...], dict[str, Any]]


@dataclass(frozen=True)
class Command:
    """One subcommand: the operation of the registry it calls (`contract.operations`), which decides whether it
    takes `--idempotency-key`, pages (`--limit`, `--cursor`, `--all`) and needs an API key."""

    resource: str
    action: str
    operation: str
    help: str
    args: tuple[Arg, ...]
    run: Run

    @property
    def listing(self) -> bool:
        return OPERATIONS[self.operation].listing == "page"

    @property
    def needs_key(self) -> bool:
        return not OPERATIONS[self.operation].public

    @property
    def arguments(self) -> tuple[Arg, ...]:
        keyed = OPERATIONS[self.operation].idempotency != "none"
        return (*self.args, KEY) if keyed else self.args


def _a(*flags: str, **options: Any) -> Arg:
    return flags, options


def _json_arg(text: str) -> Any:
    from rewards_lab.contract import jsonutil

    try:
        return jsonutil.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


ID = _a("id", help="the resource's id")
KEY = _a("--idempotency-key", help="Idempotency-Key to send (default: a fresh one, reused on retries)")
PAGE = (
    _a("--limit", type=int, help="page size (1-100)"),
    _a("--cursor", help="cursor from a previous page"),
    _a("--all", action="store_true", help="follow the cursor through every page"),
)


def _page(**filters: str) -> tuple[Arg, ...]:
    return tuple(_a(f"--{name.replace('_', '-')}", dest=name, help=text) for name, text in filters.items()) + PAGE


def _filters(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    return {name: getattr(args, name) for name in names}


def _customer_edits(args: argparse.Namespace) -> dict[str, Any]:
    """The fields `customers update` sends: each one given, and null for each `--clear-...`."""
    edits: dict[str, Any] = {} if args.attributes is None else {"attributes": args.attributes}
    for name in ("email", "country"):
        given, clear = getattr(args, name), getattr(args, f"clear_{name}")
        if given is not None and clear:
            raise UsageError(f"--{name} and --clear-{name} contradict each other")
        if given is not None or clear:
            edits[name] = given
    return edits


RULE_ORDER = (
    _a("--priority", type=int, help="lower applies first (default 0); ties in creation order"),
    _a(
        "--stop-processing",
        action=argparse.BooleanOptionalAction,
        help="when the rule matches, the programme's later rules do not apply to the event",
    ),
)
RULE_NAME = _a("--name", help="a short human name, shown wherever the rule is listed (at most 120 characters)")


def _rule_name_update(args: argparse.Namespace) -> dict[str, Any]:
    """The name `rules update` sends: the one given, null with --clear-name, nothing otherwise."""
    if args.name is not None and args.clear_name:
        raise UsageError("--name and --clear-name contradict each other")
    if args.clear_name:
        return {"name": None}
    return {} if args.name is None else {"name": args.name}


SIMULATION = (
    _a("--event", type=_json_arg, required=True, help='flat JSON: {"type": "order.completed", "amount": 42}'),
    _a("--occurred-at", help="the event's time the rules read (RFC 3339; now when absent)"),
    _a("--customer-id", help="the customer whose attributes, country and segments the rules read"),
)
SCHEDULE = (
    _a("--timezone", help="IANA timezone of the draft, e.g. Europe/London"),
    _a("--starts-at", help="first rewarded event time, RFC 3339 with an offset"),
    _a("--ends-at", help="end of the window (exclusive), RFC 3339 with an offset"),
)
RULE_LIMITS = _a(
    "--limits",
    type=_json_arg,
    help='caps per customer, JSON: [{"period": "month", "max_amount": "500"}, {"period": "day", "max_count": 3}]',
)
SPENDING = (
    _a(
        "--limits",
        type=_json_arg,
        help='the draft\'s caps per customer across its rules, JSON: [{"period": "week", "max_amount": "1000"}]',
    ),
    _a("--budget", type=_json_arg, help='across all customers, JSON: {"period": "month", "max_amount": "10000"}'),
    _a(
        "--clawback",
        choices=["available", "negative", "none"],
        help="what a reversal takes when the points are spent (default available)",
    ),
    _a(
        "--expiry",
        type=_json_arg,
        help='when the draft\'s rewards expire, JSON: {"after_days": 365} or {"at_end_of": "quarter", "after": 1}',
    ),
)
EVENT_AGE = _a(
    "--max-event-age-days",
    type=int,
    help="how many days before its receipt a live event may have occurred and still be rewarded (default 30)",
)
GUARDS = _a(
    "--guards",
    type=_json_arg,
    help='the draft\'s forecast guards, JSON: [{"metric": "issued", "period": "month", "max": "120000"}]',
)
_CLEARABLE = ("starts_at", "ends_at", "limits", "budget", "expiry", "guards", "max_event_age_days")


def _programme_update(args: argparse.Namespace) -> dict[str, Any]:
    """The fields `programmes update` sends: those given; a cleared one as None (sent as null)."""
    names = (
        "name",
        "description",
        "timezone",
        "starts_at",
        "ends_at",
        "limits",
        "budget",
        "clawback",
        "expiry",
        "guards",
        "max_event_age_days",
    )
    fields = {name: getattr(args, name) for name in names}
    fields = {name: value for name, value in fields.items() if value is not None}
    for name in _CLEARABLE:
        if getattr(args, f"clear_{name}"):
            if name in fields:
                flag = name.replace("_", "-")
                raise UsageError(f"--{flag} and --clear-{flag} contradict each other")
            fields[name] = None
    return fields


def _event_age(args: argparse.Namespace) -> dict[str, Any]:
    """`programmes create`'s bound on an event's age: given, cleared (null: none), or left to the service."""
    if args.clear_max_event_age_days:
        if args.max_event_age_days is not None:
            raise UsageError("--max-event-age-days and --clear-max-event-age-days contradict each other")
        return {"max_event_age_days": None}
    return {} if args.max_event_age_days is None else {"max_event_age_days": args.max_event_age_days}


def _password() -> str:
    return os.environ.get("REWARDS_PASSWORD") or getpass.getpass("Password: ")


COMMANDS: tuple[Command, ...] = (
    # customers and wallets
    Command(
        "customers",
        "create",
        "create_customer",
        "create a customer keyed by your external id",
        (
            _a("--external-id", required=True),
            _a("--email"),
            _a("--country"),
            _a("--attributes", type=_json_arg, help='JSON object: {"tier": "gold", "lifetime_spend": 1250.50}'),
        ),
        lambda c, a: c.create_customer(
            a.external_id, email=a.email, country=a.country, attributes=a.attributes, idempotency_key=a.idempotency_key
        ),
    ),
    Command("customers", "get", "get_customer", "read a customer", (ID,), lambda c, a: c.get_customer(a.id)),
    Command(
        "customers",
        "update",
        "update_customer",
        "edit a customer's email, country or attributes (what is not given stays)",
        (
            _a("id", help="the customer's id or external id"),
            _a("--attributes", type=_json_arg, help='merge patch: {"tier": "gold", "old_key": null} (null removes)'),
            _a("--email"),
            _a("--clear-email", action="store_true", help="remove the email"),
            _a("--country"),
            _a("--clear-country", action="store_true", help="remove the country"),
        ),
        lambda c, a: c.update_customer(a.id, idempotency_key=a.idempotency_key, **_customer_edits(a)),
    ),
    Command(
        "customers",
        "list",
        "list_customers",
        "list customers",
        _page(external_id="only this external id"),
        lambda c, a: (c.list_customers, _filters(a, "external_id")),
    ),
    Command(
        "customers",
        "segments",
        "customer_segments",
        "derived segments of a customer",
        (ID,),
        lambda c, a: c.customer_segments(a.id),
    ),
    Command(
        "wallets",
        "create",
        "create_wallet",
        "create a wallet for a customer",
        (_a("--customer-id", required=True), _a("--type", default="customer"), _a("--transfer-policy")),
        lambda c, a: c.create_wallet(
            a.customer_id, type=a.type, transfer_policy=a.transfer_policy, idempotency_key=a.idempotency_key
        ),
    ),
    Command("wallets", "get", "get_wallet", "read a wallet", (ID,), lambda c, a: c.get_wallet(a.id)),
    Command(
        "wallets",
        "list",
        "list_wallets",
        "list wallets",
        _page(customer_id="of this customer", status="active or frozen"),
        lambda c, a: (c.list_wallets, _filters(a, "customer_id", "status")),
    ),
    Command(
        "wallets",
        "balances",
        "wallet_balances",
        "balances held by a wallet",
        (ID,),
        lambda c, a: c.wallet_balances(a.id),
    ),
    Command(
        "wallets",
        "lots",
        "list_wallet_lots",
        "a wallet's lots, oldest first (assets with an expiry)",
        (ID, *_page(asset_id="of this asset", status="open, spent or expired")),
        lambda c, a: (partial(c.list_wallet_lots, a.id), _filters(a, "asset_id", "status")),
    ),
    Command(
        "wallets",
        "freeze",
        "freeze_wallet",
        "freeze a wallet",
        (ID,),
        lambda c, a: c.freeze_wallet(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "wallets",
        "unfreeze",
        "unfreeze_wallet",
        "unfreeze a wallet",
        (ID,),
        lambda c, a: c.unfreeze_wallet(a.id, idempotency_key=a.idempotency_key),
    ),
    # assets and the ledger
    Command(
        "assets",
        "create",
        "create_asset",
        "create an asset (configured until activated)",
        (
            _a("--name", required=True),
            _a("--symbol", required=True),
            _a("--type", default="points"),
            _a("--decimals", type=int, required=True),
            _a("--supply-ceiling"),
            _a("--expiry", type=_json_arg, help='JSON: {"after_days": 365} or {"at_end_of": "year", "after": 0}'),
            _a("--value-per-unit", help="what one unit is worth in money, for liability reports"),
        ),
        lambda c, a: c.create_asset(
            a.name,
            a.symbol,
            a.type,
            a.decimals,
            supply_ceiling=a.supply_ceiling,
            expiry=a.expiry,
            value_per_unit=a.value_per_unit,
            idempotency_key=a.idempotency_key,
        ),
    ),
    Command("assets", "get", "get_asset", "read an asset", (ID,), lambda c, a: c.get_asset(a.id)),
    Command(
        "assets",
        "list",
        "list_assets",
        "list assets",
        _page(status="configured, active or paused"),
        lambda c, a: (c.list_assets, _filters(a, "status")),
    ),
    Command(
        "assets",
        "activate",
        "activate_asset",
        "activate an asset",
        (ID,),
        lambda c, a: c.activate_asset(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "assets",
        "pause",
        "pause_asset",
        "pause an asset",
        (ID,),
        lambda c, a: c.pause_asset(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "assets",
        "resume",
        "resume_asset",
        "resume a paused asset",
        (ID,),
        lambda c, a: c.resume_asset(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "assets",
        "issue",
        "issue",
        "issue an amount into a wallet (direct issuance)",
        (ID, _a("--wallet-id", required=True), _a("--amount", required=True), _a("--reason", required=True)),
        lambda c, a: c.issue(a.id, a.wallet_id, a.amount, a.reason, idempotency_key=a.idempotency_key),
    ),
    Command(
        "assets",
        "redeem",
        "redeem",
        "redeem an amount from a wallet",
        (ID, _a("--wallet-id", required=True), _a("--amount", required=True), _a("--reference", required=True)),
        lambda c, a: c.redeem(a.id, a.wallet_id, a.amount, a.reference, idempotency_key=a.idempotency_key),
    ),
    Command(
        "assets",
        "transfer",
        "transfer",
        "transfer an amount between wallets",
        (
            ID,
            _a("--from-wallet-id", required=True),
            _a("--to-wallet-id", required=True),
            _a("--amount", required=True),
            _a("--reference"),
        ),
        lambda c, a: c.transfer(
            a.id, a.from_wallet_id, a.to_wallet_id, a.amount, reference=a.reference, idempotency_key=a.idempotency_key
        ),
    ),
    Command(
        "transactions",
        "list",
        "list_transactions",
        "list ledger transactions",
        _page(wallet_id="touching this wallet", asset_id="of this asset", kind="issue, redemption, ..."),
        lambda c, a: (c.list_transactions, _filters(a, "wallet_id", "asset_id", "kind")),
    ),
    Command(
        "transactions",
        "get",
        "get_transaction",
        "read a ledger transaction",
        (ID,),
        lambda c, a: c.get_transaction(a.id),
    ),
    # programmes and rules
    Command(
        "programmes",
        "create",
        "create_programme",
        "create a reward programme",
        (
            _a("--name", required=True),
            _a("--asset-id", required=True),
            _a("--description"),
            *SCHEDULE,
            *SPENDING,
            GUARDS,
            EVENT_AGE,
            _a("--clear-max-event-age-days", action="store_true", help="no bound on a live event's age (backfills)"),
        ),
        lambda c, a: c.create_programme(
            a.name,
            a.asset_id,
            description=a.description,
            timezone=a.timezone,
            starts_at=a.starts_at,
            ends_at=a.ends_at,
            limits=a.limits,
            budget=a.budget,
            clawback=a.clawback,
            expiry=a.expiry,
            guards=a.guards,
            **_event_age(a),
            idempotency_key=a.idempotency_key,
        ),
    ),
    Command("programmes", "get", "get_programme", "read a programme", (ID,), lambda c, a: c.get_programme(a.id)),
    Command(
        "programmes",
        "update",
        "update_programme",
        "edit a programme and its draft's schedule, caps, budget, clawback, expiry, forecast guards and event age",
        (
            ID,
            _a("--name"),
            _a("--description"),
            *SCHEDULE,
            *SPENDING,
            _a("--clear-starts-at", action="store_true", help="remove the draft's start bound"),
            _a("--clear-ends-at", action="store_true", help="remove the draft's end bound"),
            _a("--clear-limits", action="store_true", help="remove the draft's caps"),
            _a("--clear-budget", action="store_true", help="remove the draft's budget"),
            _a("--clear-expiry", action="store_true", help="the draft's rewards expire as the asset's points do"),
            GUARDS,
            _a("--clear-guards", action="store_true", help="remove the draft's forecast guards"),
            EVENT_AGE,
            _a("--clear-max-event-age-days", action="store_true", help="no bound on a live event's age (backfills)"),
        ),
        lambda c, a: c.update_programme(a.id, **_programme_update(a), idempotency_key=a.idempotency_key),
    ),
    Command(
        "programmes",
        "deactivate",
        "deactivate_programme",
        "stop a programme rewarding events",
        (ID,),
        lambda c, a: c.deactivate_programme(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "programmes",
        "activate",
        "activate_programme",
        "let a deactivated programme reward events again",
        (ID,),
        lambda c, a: c.activate_programme(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "programmes",
        "list",
        "list_programmes",
        "list programmes",
        _page(asset_id="dealing in this asset"),
        lambda c, a: (c.list_programmes, _filters(a, "asset_id")),
    ),
    Command(
        "programmes",
        "versions",
        "list_versions",
        "versions of a programme with their rules",
        (ID,),
        lambda c, a: c.list_versions(a.id),
    ),
    Command(
        "programmes",
        "publish",
        "publish",
        "publish the draft version",
        (ID, _a("--guard-override", help="why it is published although a forecast guard failed (recorded)")),
        lambda c, a: c.publish(a.id, guard_override=a.guard_override, idempotency_key=a.idempotency_key),
    ),
    Command(
        "programmes",
        "restore",
        "restore_version",
        "make the draft a copy of a published version (publish it to roll back)",
        (ID, _a("--version", required=True, help="the published version's number, or live")),
        lambda c, a: c.restore_version(a.id, a.version, idempotency_key=a.idempotency_key),
    ),
    Command(
        "rules",
        "create",
        "create_rule",
        "add a rule to a programme's draft",
        (
            _a("--program-id", required=True),
            _a("--event-type", required=True),
            _a(
                "--actions",
                type=_json_arg,
                required=True,
                help='JSON, e.g. [{"type":"issue","amount":{"fixed":"5"}}] or '
                '[{"type":"reverse","original":{"field":"order_id"},"fraction":"0.5"}]',
            ),
            _a("--conditions", type=_json_arg, help='JSON, e.g. [{"field":"amount","operator":"gte","value":20}]'),
            *RULE_ORDER,
            RULE_LIMITS,
            RULE_NAME,
        ),
        lambda c, a: c.create_rule(
            a.program_id,
            a.event_type,
            a.actions,
            conditions=a.conditions,
            priority=a.priority,
            stop_processing=a.stop_processing,
            limits=a.limits,
            name=a.name,
            idempotency_key=a.idempotency_key,
        ),
    ),
    Command("rules", "get", "get_rule", "read a rule", (ID,), lambda c, a: c.get_rule(a.id)),
    Command(
        "rules",
        "update",
        "update_rule",
        "edit a rule of the draft",
        (
            ID,
            _a("--event-type"),
            _a("--actions", type=_json_arg),
            _a("--conditions", type=_json_arg),
            *RULE_ORDER,
            RULE_LIMITS,
            RULE_NAME,
            _a("--clear-name", action="store_true", help="remove the rule's name"),
        ),
        lambda c, a: c.update_rule(
            a.id,
            event_type=a.event_type,
            conditions=a.conditions,
            actions=a.actions,
            priority=a.priority,
            stop_processing=a.stop_processing,
            limits=a.limits,
            **_rule_name_update(a),
            idempotency_key=a.idempotency_key,
        ),
    ),
    Command(
        "rules",
        "delete",
        "delete_rule",
        "delete a rule from the draft",
        (ID,),
        lambda c, a: c.delete_rule(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "rules",
        "simulate",
        "simulate_rule",
        "what the rule would issue for one event (writes nothing)",
        (ID, *SIMULATION),
        lambda c, a: c.simulate_rule(a.id, a.event, occurred_at=a.occurred_at, customer_id=a.customer_id),
    ),
    Command(
        "programmes",
        "simulate",
        "simulate_programme",
        "what every rule of a version would issue for one event, in the order they apply (writes nothing)",
        (ID, *SIMULATION, _a("--version", help="draft (the default), live or a version number")),
        lambda c, a: c.simulate_programme(
            a.id, a.event, version=a.version, occurred_at=a.occurred_at, customer_id=a.customer_id
        ),
    ),
    # events and executions
    Command(
        "events",
        "send",
        "submit_event",
        "send a business event",
        (
            _a("--type", required=True),
            _a("--external-event-id", required=True),
            _a("--customer-id", required=True),
            _a("--data", type=_json_arg, help="JSON object of event data"),
            _a("--occurred-at"),
        ),
        lambda c, a: c.submit_event(a.type, a.external_event_id, a.customer_id, data=a.data, occurred_at=a.occurred_at),
    ),
    Command(
        "events", "get", "get_event", "read an event and its processing status", (ID,), lambda c, a: c.get_event(a.id)
    ),
    Command(
        "events",
        "list",
        "list_events",
        "list events with their processing status",
        _page(status="received, processed or failed", type="event type", customer_id="of this customer"),
        lambda c, a: (c.list_events, _filters(a, "status", "type", "customer_id")),
    ),
    Command("events", "replay", "replay_event", "reprocess a failed event", (ID,), lambda c, a: c.replay_event(a.id)),
    Command(
        "executions",
        "list",
        "list_executions",
        "list reward executions",
        _page(customer_id="of this customer", event_id="of this event", status="issued, failed, limited or reversed"),
        lambda c, a: (c.list_executions, _filters(a, "customer_id", "event_id", "status")),
    ),
    # webhooks, developer tools, sessions
    Command(
        "webhooks",
        "create",
        "create_webhook",
        "register a webhook endpoint (the signing secret is shown once)",
        (_a("--url", required=True), _a("--events", type=_csv, required=True, help="comma-separated kinds")),
        lambda c, a: c.create_webhook(a.url, a.events),
    ),
    Command("webhooks", "get", "get_webhook", "read a webhook endpoint", (ID,), lambda c, a: c.get_webhook(a.id)),
    Command(
        "webhooks",
        "list",
        "list_webhooks",
        "list webhook endpoints",
        _page(status="enabled or disabled"),
        lambda c, a: (c.list_webhooks, _filters(a, "status")),
    ),
    Command(
        "webhooks",
        "rotate-secret",
        "rotate_webhook_secret",
        "a new signing secret (shown once); the previous one keeps signing for the grace period",
        (ID, _a("--grace-period-s", type=int, help="seconds the previous secret still signs (default: a day)")),
        lambda c, a: c.rotate_webhook_secret(a.id, grace_period_s=a.grace_period_s),
    ),
    Command(
        "webhooks",
        "disable",
        "disable_webhook",
        "disable a webhook endpoint",
        (ID,),
        lambda c, a: c.disable_webhook(a.id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "webhooks",
        "test",
        "test_webhook",
        "send a test delivery to an endpoint",
        (ID,),
        lambda c, a: c.test_webhook(a.id),
    ),
    Command(
        "webhooks",
        "deliveries",
        "list_webhook_deliveries",
        "deliveries of an endpoint",
        (ID, *_page(status="delivery status")),
        lambda c, a: (partial(c.list_webhook_deliveries, a.id), _filters(a, "status")),
    ),
    Command(
        "webhooks",
        "delivery",
        "get_webhook_delivery",
        "read one delivery with its attempts",
        (ID, _a("delivery_id")),
        lambda c, a: c.get_webhook_delivery(a.id, a.delivery_id),
    ),
    Command(
        "webhooks",
        "replay",
        "replay_webhook_delivery",
        "replay a failed delivery",
        (ID, _a("delivery_id")),
        lambda c, a: c.replay_webhook_delivery(a.id, a.delivery_id, idempotency_key=a.idempotency_key),
    ),
    Command(
        "api-keys",
        "create",
        "create_api_key",
        "create an API key (the secret is shown once)",
        (_a("--name", required=True), _a("--permissions", type=_csv, required=True, help="comma-separated codes")),
        lambda c, a: c.create_api_key(a.name, a.permissions),
    ),
    Command(
        "api-keys",
        "revoke",
        "revoke_api_key",
        "revoke an API key (its history stays)",
        (ID,),
        lambda c, a: c.revoke_api_key(a.id),
    ),
    Command(
        "logs",
        "list",
        "list_request_logs",
        "request logs, newest first",
        _page(
            status="HTTP status or class (404, 4xx)",
            path="path prefix",
            request_id="one request",
            since="from this time (ISO 8601)",
            until="until this time (ISO 8601)",
            sdk_version="X-SDK-Version sent (none: requests without one)",
        ),
        lambda c, a: (c.list_logs, _filters(a, "status", "path", "request_id", "since", "until", "sdk_version")),
    ),
    Command(
        "audit",
        "list",
        "list_auth_audit",
        "the authentication audit (logins, logouts, API key changes, 401 and 403, guard overrides), newest first",
        _page(
            kind="login, logout, api_key_created, api_key_revoked, access_denied or guard_overridden",
            outcome="succeeded or failed",
            since="from this time (ISO 8601)",
            until="until this time (ISO 8601)",
        ),
        lambda c, a: (c.list_auth_audit, _filters(a, "kind", "outcome", "since", "until")),
    ),
    Command(
        "usage",
        "get",
        "api_usage",
        "API usage over a period",
        (_a("--since", help="from this time (ISO 8601)"), _a("--until", help="until this time (ISO 8601)")),
        lambda c, a: c.usage(since=a.since, until=a.until),
    ),
    Command(
        "auth",
        "login",
        "login",
        "log in a person (password from $REWARDS_PASSWORD or a prompt); prints the session",
        (_a("--email", required=True), _a("--totp-code", help="second factor, when the account requires one")),
        lambda c, a: c.login(a.email, _password(), totp_code=a.totp_code),
    ),
    Command("auth", "logout", "logout", "end the session held in $REWARDS_API_KEY", (), lambda c, a: c.logout()),
)


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_target_arguments(common)
    common.add_argument("--format", choices=["json", "table"], default="json", help="how to print data")
    resources = parser.add_subparsers(dest="resource", required=True, metavar="RESOURCE")
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for command in COMMANDS:
        if command.resource not in groups:
            group = resources.add_parser(command.resource, help=f"{command.resource} operations")
            groups[command.resource] = group.add_subparsers(dest="action", required=True, metavar="ACTION")
        leaf = groups[command.resource].add_parser(command.action, help=command.help, parents=[common])
        for flags, options in command.arguments:
            leaf.add_argument(*flags, **options)
        leaf.set_defaults(run=run, api_command=command)


def _plain(value: Any) -> Any:
    """Models and pages as plain data (Decimals stay exact; `jsonutil.dumps` writes them as numbers)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _execute(command: Command, client: Any, args: argparse.Namespace) -> Any:
    if not command.listing:
        return _plain(command.run(client, args))
    method, filters = command.run(client, args)
    if not args.all:
        page = method(**filters, limit=args.limit, cursor=args.cursor)
        if page.has_more:
            print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
        return _plain(page.data)
    items: list[Any] = []
    cursor = args.cursor
    while True:
        page = method(**filters, limit=args.limit, cursor=cursor)
        items += _plain(page.data)
        if not page.has_more or not page.next_cursor:
            return items
        cursor = page.next_cursor


def run(args: argparse.Namespace) -> int:
    from rewards_lab.cli.table import render
    from rewards_lab.client import ApiError
    from rewards_lab.contract import jsonutil

    command: Command = args.api_command
    try:
        with client_from(args, require_key=command.needs_key) as client:
            data = _execute(command, client, args)
    except UsageError as error:
        return fail(f"error: {error}", EXIT_USAGE)
    except ApiError as error:
        return fail(explain(error, args.env), EXIT_API_ERROR)
    print(render(data) if args.format == "table" else jsonutil.dumps(data))
    return 0
