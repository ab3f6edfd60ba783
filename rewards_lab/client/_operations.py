"""The seed's operations as `Call` builders: the body and the model `data` parses into; method, path and
idempotency come from the operation registry (`contract.operations`), which the server is built from too.

Shared by both clients (each method of `RewardsClient` and `AsyncRewardsClient` is one of these). Writes that
the seed makes idempotent (creations, state moves, financial writes) carry an Idempotency-Key; simulate sends
none (the seed says so), events are deduplicated by `external_event_id` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from rewards_lab.client._core import Call, Page
from rewards_lab.contract import developer as d
from rewards_lab.contract import resources as r
from rewards_lab.contract.operations import OPERATIONS

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Json = dict[str, Any]


def _model(model: type[M]) -> Callable[[Any], M]:
    return model.model_validate


def _raw(data: Any) -> Any:
    return data


def _id(value: str) -> str:
    return quote(value, safe="")


def _without_none(**fields: Any) -> Json:
    return {name: value for name, value in fields.items() if value is not None}


def _page(parse: Callable[[Any], T]) -> Callable[[Any], Page[T]]:
    """A list envelope (`data`, `next_cursor`, `has_more`) as a Page of parsed items."""

    def parse_page(body: Any) -> Page[T]:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise TypeError("a list operation returned no list")
        next_cursor = body.get("next_cursor")
        return Page(
            [parse(item) for item in data],
            next_cursor if isinstance(next_cursor, str) else None,
            body.get("has_more") is True,
        )

    return parse_page


def _call(
    name: str,
    parse: Callable[[Any], T],
    *path_values: str,
    body: Any = None,
    key: str | None = None,
    params: Json | None = None,
    resendable: bool = False,
    listing: bool = False,
) -> Call[T]:
    """A call of the registry's operation `name` (contract.operations): its method, its path with the values
    filled in (each escaped), its idempotency. Reads and keyed writes may be resent when no answer came back;
    `resendable` marks the other operations that may (deduplicated or free of side effects)."""
    op = OPERATIONS[name]
    values = {param: _id(value) for param, value in zip(op.path_parameters, path_values, strict=True)}
    keyed = op.idempotency != "none"
    return Call(
        op.method,
        op.path.format_map(values),
        parse,
        params=params,
        body=body,
        idempotent=keyed,
        idempotency_key=key,
        resendable=resendable or keyed or op.method == "GET",
        listing=listing,
    )


def _write(name: str, parse: Callable[[Any], T], *path_values: str, body: Any = None, key: str | None) -> Call[T]:
    return _call(name, parse, *path_values, body=body, key=key)


def _get(name: str, parse: Callable[[Any], T], /, *path_values: str, **params: Any) -> Call[T]:
    return _call(name, parse, *path_values, params=params)


def _list(
    name: str, parse: Callable[[Any], T], limit: int | None, cursor: str | None, /, *path_values: str, **params: Any
) -> Call[Page[T]]:
    query = {"limit": limit, "cursor": cursor, **params}
    return _call(name, _page(parse), *path_values, params=query, listing=True)


# customers and wallets
def create_customer(
    external_id: str,
    *,
    email: str | None = None,
    country: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Customer]:
    """`attributes`: strings, booleans and numbers (pass Decimal to keep digits exactly)."""
    body = _without_none(
        external_id=external_id, email=email, country=country, attributes=dict(attributes) if attributes else None
    )
    return _write("create_customer", _model(r.Customer), body=body, key=idempotency_key)


class Unset(Enum):
    """The default of a field a PATCH leaves out (None sends null, which clears it)."""

    UNSET = "unset"


UNSET = Unset.UNSET


def update_customer(
    customer_id: str,
    *,
    attributes: Mapping[str, Any] | None | Unset = UNSET,
    email: str | None | Unset = UNSET,
    country: str | None | Unset = UNSET,
    idempotency_key: str | None = None,
) -> Call[r.Customer]:
    """Edit a customer (by id or external_id): a field left out stays; None clears `email` or `country`.
    `attributes` is merged (RFC 7396): a key mapped to None is removed; `attributes=None` removes them all."""
    fields = {"attributes": attributes, "email": email, "country": country}
    body = {
        name: dict(value) if isinstance(value, Mapping) else value
        for name, value in fields.items()
        if value is not UNSET
    }
    return _write("update_customer", _model(r.Customer), customer_id, body=body, key=idempotency_key)


def get_customer(customer_id: str) -> Call[r.Customer]:
    return _get("get_customer", _model(r.Customer), customer_id)


def list_customers(
    *, external_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Customer]]:
    return _list("list_customers", _model(r.Customer), limit, cursor, external_id=external_id)


def customer_segments(customer_id: str) -> Call[r.CustomerSegments]:
    return _get("customer_segments", _model(r.CustomerSegments), customer_id)


def create_wallet(
    customer_id: str, *, type: str = "customer", transfer_policy: str | None = None, idempotency_key: str | None = None
) -> Call[r.Wallet]:
    body = _without_none(customer_id=customer_id, type=type, transfer_policy=transfer_policy)
    return _write("create_wallet", _model(r.Wallet), body=body, key=idempotency_key)


def get_wallet(wallet_id: str) -> Call[r.Wallet]:
    return _get("get_wallet", _model(r.Wallet), wallet_id)


def list_wallets(
    *, customer_id: str | None = None, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Wallet]]:
    return _list("list_wallets", _model(r.Wallet), limit, cursor, customer_id=customer_id, status=status)


def wallet_balances(wallet_id: str) -> Call[r.WalletBalances]:
    return _get("wallet_balances", _model(r.WalletBalances), wallet_id)


def list_wallet_lots(
    wallet_id: str,
    *,
    asset_id: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.Lot]]:
    """The wallet's lots oldest first (`status`: open, spent or expired)."""
    return _list("list_wallet_lots", _model(r.Lot), limit, cursor, wallet_id, asset_id=asset_id, status=status)


def freeze_wallet(wallet_id: str, *, idempotency_key: str | None = None) -> Call[r.Wallet]:
    return _write("freeze_wallet", _model(r.Wallet), wallet_id, key=idempotency_key)


def unfreeze_wallet(wallet_id: str, *, idempotency_key: str | None = None) -> Call[r.Wallet]:
    return _write("unfreeze_wallet", _model(r.Wallet), wallet_id, key=idempotency_key)


# assets and the ledger
def create_asset(
    name: str,
    symbol: str,
    type: str,
    decimals: int,
    *,
    supply_ceiling: str | None = None,
    expiry: Json | None = None,
    value_per_unit: str | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Asset]:
    """`expiry` (`{"after_days": 365}` or `{"at_end_of": "quarter", "after": 1}`) makes its points expire;
    `value_per_unit` values one unit in money for liability reports."""
    body = _without_none(
        name=name,
        symbol=symbol,
        type=type,
        decimals=decimals,
        supply_ceiling=supply_ceiling,
        expiry=expiry,
        value_per_unit=value_per_unit,
    )
    return _write("create_asset", _model(r.Asset), body=body, key=idempotency_key)


def get_asset(asset_id: str) -> Call[r.Asset]:
    return _get("get_asset", _model(r.Asset), asset_id)


def list_assets(
    *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Asset]]:
    return _list("list_assets", _model(r.Asset), limit, cursor, status=status)


def _asset_move(asset_id: str, move: str, idempotency_key: str | None) -> Call[r.Asset]:
    return _write(f"{move}_asset", _model(r.Asset), asset_id, key=idempotency_key)


def activate_asset(asset_id: str, *, idempotency_key: str | None = None) -> Call[r.Asset]:
    return _asset_move(asset_id, "activate", idempotency_key)


def pause_asset(asset_id: str, *, idempotency_key: str | None = None) -> Call[r.Asset]:
    return _asset_move(asset_id, "pause", idempotency_key)


def resume_asset(asset_id: str, *, idempotency_key: str | None = None) -> Call[r.Asset]:
    return _asset_move(asset_id, "resume", idempotency_key)


def issue(
    asset_id: str, wallet_id: str, amount: str, reason: str, *, idempotency_key: str | None = None
) -> Call[r.LedgerTransaction]:
    body = {"wallet_id": wallet_id, "amount": amount, "reason": reason}
    return _write("issue", _model(r.LedgerTransaction), asset_id, body=body, key=idempotency_key)


def redeem(
    asset_id: str, wallet_id: str, amount: str, reference: str, *, idempotency_key: str | None = None
) -> Call[r.LedgerTransaction]:
    body = {"wallet_id": wallet_id, "amount": amount, "reference": reference}
    return _write("redeem", _model(r.LedgerTransaction), asset_id, body=body, key=idempotency_key)


def transfer(
    asset_id: str,
    from_wallet_id: str,
    to_wallet_id: str,
    amount: str,
    *,
    reference: str | None = None,
    idempotency_key: str | None = None,
) -> Call[r.LedgerTransaction]:
    body = _without_none(from_wallet_id=from_wallet_id, to_wallet_id=to_wallet_id, amount=amount, reference=reference)
    return _write("transfer", _model(r.LedgerTransaction), asset_id, body=body, key=idempotency_key)


def list_transactions(
    *,
    wallet_id: str | None = None,
    asset_id: str | None = None,
    kind: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.LedgerTransaction]]:
    return _list(
        "list_transactions",
        _model(r.LedgerTransaction),
        limit,
        cursor,
        wallet_id=wallet_id,
        asset_id=asset_id,
        kind=kind,
    )


def get_transaction(transaction_id: str) -> Call[r.LedgerTransaction]:
    return _get("get_transaction", _model(r.LedgerTransaction), transaction_id)


# programmes, versions, rules
# A field create_programme or update_programme leaves out of the body (None sends null: clears it).
_UNCHANGED: Any = object()


def create_programme(
    name: str,
    asset_id: str,
    *,
    description: str | None = None,
    timezone: str | None = None,
    starts_at: str | None = None,
    ends_at: str | None = None,
    limits: Sequence[Json] | None = None,
    budget: Json | None = None,
    clawback: str | None = None,
    expiry: Json | None = None,
    guards: Sequence[Json] | None = None,
    max_event_age_days: int | None = _UNCHANGED,
    idempotency_key: str | None = None,
) -> Call[r.Programme]:
    """`timezone` (IANA), `starts_at` and `ends_at` (RFC 3339 with an offset) set the first draft's schedule;
    `limits` (caps per customer: `[{"period": "month", "max_amount": "500"}]`), `budget`
    (`{"period": "month", "max_amount": "10000"}`) and `clawback` (available, negative or none) its spending;
    `expiry` when its rewards expire (as for an asset); `guards` its forecast guards
    (`[{"metric": "issued", "period": "month", "max": "120000"}]`); `max_event_age_days` how many days before
    its receipt a live event may have occurred (not given: the service's default; None sends null: no bound)."""
    body = _without_none(
        name=name,
        asset_id=asset_id,
        description=description,
        timezone=timezone,
        starts_at=starts_at,
        ends_at=ends_at,
        limits=None if limits is None else list(limits),
        budget=budget,
        clawback=clawback,
        expiry=expiry,
        guards=None if guards is None else list(guards),
    )
    if max_event_age_days is not _UNCHANGED:
        body["max_event_age_days"] = max_event_age_days
    return _write("create_programme", _model(r.Programme), body=body, key=idempotency_key)


def get_programme(program_id: str) -> Call[r.Programme]:
    return _get("get_programme", _model(r.Programme), program_id)


def list_programmes(
    *, asset_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Programme]]:
    return _list("list_programmes", _model(r.Programme), limit, cursor, asset_id=asset_id)


def update_programme(
    program_id: str,
    *,
    name: str | None = None,
    description: str | None = _UNCHANGED,
    timezone: str | None = _UNCHANGED,
    starts_at: str | None = _UNCHANGED,
    ends_at: str | None = _UNCHANGED,
    limits: Sequence[Json] | None = _UNCHANGED,
    budget: Json | None = _UNCHANGED,
    clawback: str | None = _UNCHANGED,
    expiry: Json | None = _UNCHANGED,
    guards: Sequence[Json] | None = _UNCHANGED,
    max_event_age_days: int | None = _UNCHANGED,
    idempotency_key: str | None = None,
) -> Call[r.Programme]:
    """Edit the programme and its draft's schedule, caps, budget, clawback, expiry, forecast guards and how old a
    live event may be. Only the fields given are sent; None sends null, which clears a bound, the description,
    the caps, the budget, the expiry, the guards or the bound on an event's age (timezone: back to UTC; clawback:
    back to available)."""
    body: Json = _without_none(name=name)
    fields = {
        "description": description,
        "timezone": timezone,
        "starts_at": starts_at,
        "ends_at": ends_at,
        "limits": list(limits) if limits is not None and limits is not _UNCHANGED else limits,
        "budget": budget,
        "clawback": clawback,
        "expiry": expiry,
        "guards": list(guards) if guards is not None and guards is not _UNCHANGED else guards,
        "max_event_age_days": max_event_age_days,
    }
    body |= {field: value for field, value in fields.items() if value is not _UNCHANGED}
    return _write("update_programme", _model(r.Programme), program_id, body=body, key=idempotency_key)


def deactivate_programme(program_id: str, *, idempotency_key: str | None = None) -> Call[r.Programme]:
    return _write("deactivate_programme", _model(r.Programme), program_id, key=idempotency_key)


def activate_programme(program_id: str, *, idempotency_key: str | None = None) -> Call[r.Programme]:
    return _write("activate_programme", _model(r.Programme), program_id, key=idempotency_key)


def restore_version(
    program_id: str, version: int | str, *, idempotency_key: str | None = None
) -> Call[r.ProgrammeVersion]:
    """Make the draft a copy of published version `version` (a number, or "live"); publish to make it live."""
    return _write("restore_version", _model(r.ProgrammeVersion), program_id, str(version), key=idempotency_key)


def _versions(data: Any) -> list[r.ProgrammeVersion]:
    if not isinstance(data, list):
        raise TypeError("versions must be a list")
    return [r.ProgrammeVersion.model_validate(item) for item in data]


def list_versions(program_id: str) -> Call[list[r.ProgrammeVersion]]:
    return _get("list_versions", _versions, program_id)


def publish(
    program_id: str, *, guard_override: str | None = None, idempotency_key: str | None = None
) -> Call[r.PublishResult]:
    """Publish the draft; `guard_override` (a reason) records that it is published although a forecast guard
    failed. Without it no body is sent, as before overrides existed."""
    body = None if guard_override is None else {"guard_override": {"reason": guard_override}}
    return _write("publish", _model(r.PublishResult), program_id, body=body, key=idempotency_key)


def create_rule(
    program_id: str,
    event_type: str,
    actions: Sequence[Json],
    *,
    conditions: Sequence[Json] | None = None,
    priority: int | None = None,
    stop_processing: bool | None = None,
    limits: Sequence[Json] | None = None,
    name: str | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Rule]:
    """`priority` (lower applies first), `stop_processing`, `limits` (caps per customer:
    `[{"period": "day", "max_count": 3}]`) and `name` (a short human name) are sent only when given (the service
    defaults them to 0, false, none and no name). `actions` may hold reverse actions:
    `{"type": "reverse", "original": {"field": "order_id"}}`."""
    body: Json = {"program_id": program_id, "event_type": event_type, "actions": list(actions)}
    if conditions is not None:
        body["conditions"] = list(conditions)
    body.update(_without_none(priority=priority, stop_processing=stop_processing, name=name))
    if limits is not None:
        body["limits"] = list(limits)
    return _write("create_rule", _model(r.Rule), body=body, key=idempotency_key)


def get_rule(rule_id: str) -> Call[r.Rule]:
    return _get("get_rule", _model(r.Rule), rule_id)


def update_rule(
    rule_id: str,
    *,
    event_type: str | None = None,
    conditions: Sequence[Json] | None = None,
    actions: Sequence[Json] | None = None,
    priority: int | None = None,
    stop_processing: bool | None = None,
    limits: Sequence[Json] | None = None,
    name: str | None = _UNCHANGED,
    idempotency_key: str | None = None,
) -> Call[r.Rule]:
    """Only the fields given are sent; `limits=[]` removes the rule's caps, `name=None` its name."""
    body = _without_none(
        event_type=event_type,
        conditions=list(conditions) if conditions is not None else None,
        actions=list(actions) if actions is not None else None,
        priority=priority,
        stop_processing=stop_processing,
        limits=list(limits) if limits is not None else None,
    )
    if name is not _UNCHANGED:
        body["name"] = name
    return _write("update_rule", _model(r.Rule), rule_id, body=body, key=idempotency_key)


def delete_rule(rule_id: str, *, idempotency_key: str | None = None) -> Call[Any]:
    return _write("delete_rule", _raw, rule_id, key=idempotency_key)


def _simulation_body(event: Json, occurred_at: str | None, customer_id: str | None) -> Json:
    return {"event": event, **_without_none(occurred_at=occurred_at, customer_id=customer_id)}


def simulate_rule(
    rule_id: str, event: Json, *, occurred_at: str | None = None, customer_id: str | None = None
) -> Call[r.Simulation]:
    """Writes nothing on the service, so it is safe to resend and carries no Idempotency-Key (the seed's rule).
    `occurred_at` and `customer_id` give the time and the customer the rules read (`occurred_at.*`, `customer.*`)."""
    body = _simulation_body(event, occurred_at, customer_id)
    return _call("simulate_rule", _model(r.Simulation), rule_id, body=body, resendable=True)


def simulate_programme(
    program_id: str,
    event: Json,
    *,
    version: int | str | None = None,
    occurred_at: str | None = None,
    customer_id: str | None = None,
) -> Call[r.Simulation]:
    """Every rule of a version (`draft` by default, `live` or a number) against one event, in the order they
    apply, with the reasons. Writes nothing."""
    body = _simulation_body(event, occurred_at, customer_id)
    params = _without_none(version=None if version is None else str(version))
    return _call("simulate_programme", _model(r.Simulation), program_id, body=body, params=params, resendable=True)


# events and executions
def submit_event(
    type: str,
    external_event_id: str,
    customer_id: str,
    *,
    data: Json | None = None,
    occurred_at: str | None = None,
) -> Call[r.Event]:
    """Deduplicated on `external_event_id`, so resending after a lost answer returns the original result."""
    body = _without_none(
        type=type, external_event_id=external_event_id, customer_id=customer_id, occurred_at=occurred_at, data=data
    )
    return _call("submit_event", _model(r.Event), body=body, resendable=True)


def get_event(event_id: str) -> Call[r.Event]:
    return _get("get_event", _model(r.Event), event_id)


def list_events(
    *,
    status: str | None = None,
    type: str | None = None,
    customer_id: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.Event]]:
    return _list("list_events", _model(r.Event), limit, cursor, status=status, type=type, customer_id=customer_id)


def replay_event(event_id: str) -> Call[r.Event]:
    """Creates no duplicate issuance (the seed's rule), so it is safe to resend."""
    return _call("replay_event", _model(r.Event), event_id, resendable=True)


def list_executions(
    *,
    customer_id: str | None = None,
    event_id: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.RewardExecution]]:
    return _list(
        "list_executions",
        _model(r.RewardExecution),
        limit,
        cursor,
        customer_id=customer_id,
        event_id=event_id,
        status=status,
    )


# webhooks
def create_webhook(url: str, events: Sequence[str]) -> Call[r.WebhookEndpointCreated]:
    """The signing secret is in the result once, at creation; not resent without an answer (a second endpoint
    with another secret would be made)."""
    return _call("create_webhook", _model(r.WebhookEndpointCreated), body={"url": url, "events": list(events)})


def get_webhook(webhook_id: str) -> Call[r.WebhookEndpoint]:
    return _get("get_webhook", _model(r.WebhookEndpoint), webhook_id)


def list_webhooks(
    *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.WebhookEndpoint]]:
    return _list("list_webhooks", _model(r.WebhookEndpoint), limit, cursor, status=status)


def disable_webhook(webhook_id: str, *, idempotency_key: str | None = None) -> Call[r.WebhookEndpoint]:
    return _write("disable_webhook", _model(r.WebhookEndpoint), webhook_id, key=idempotency_key)


def rotate_webhook_secret(webhook_id: str, *, grace_period_s: int | None = None) -> Call[r.WebhookSecretRotated]:
    """A new signing secret, in the result once; the previous one keeps signing for `grace_period_s` (server
    default: a day). Not resent without an answer (a resend would rotate again and end the first new secret)."""
    body = {} if grace_period_s is None else {"grace_period_s": grace_period_s}
    return _call("rotate_webhook_secret", _model(r.WebhookSecretRotated), webhook_id, body=body)


def test_webhook(webhook_id: str) -> Call[r.WebhookDelivery]:
    """Queues a signed test delivery; the result is the delivery record."""
    return _call("test_webhook", _model(r.WebhookDelivery), webhook_id)


def list_webhook_deliveries(
    webhook_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.WebhookDelivery]]:
    return _list("list_webhook_deliveries", _model(r.WebhookDelivery), limit, cursor, webhook_id, status=status)


def get_webhook_delivery(webhook_id: str, delivery_id: str) -> Call[r.WebhookDelivery]:
    return _get("get_webhook_delivery", _model(r.WebhookDelivery), webhook_id, delivery_id)


def replay_webhook_delivery(
    webhook_id: str, delivery_id: str, *, idempotency_key: str | None = None
) -> Call[r.WebhookDelivery]:
    return _write("replay_webhook_delivery", _model(r.WebhookDelivery), webhook_id, delivery_id, key=idempotency_key)


# developer: API keys, logs, usage; sessions
def create_api_key(name: str, permissions: Sequence[str]) -> Call[r.ApiKeyCreated]:
    """Not resent without an answer: a second key would be made. The secret is shown once."""
    body = {"name": name, "permissions": list(permissions)}
    return _call("create_api_key", _model(r.ApiKeyCreated), body=body)


def revoke_api_key(key_id: str) -> Call[r.ApiKey]:
    return _call("revoke_api_key", _model(r.ApiKey), key_id, resendable=True)


def list_logs(
    *,
    status: str | None = None,
    path: str | None = None,
    request_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    sdk_version: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[d.RequestLogEntry]]:
    """Request logs, filterable by status (exact, or a class such as 4xx), path and SDK version (`none`: requests
    without one); `since`/`until` are sent as the query's `from` and `to`."""
    filters = {
        "status": status,
        "path": path,
        "request_id": request_id,
        "from": since,
        "to": until,
        "sdk_version": sdk_version,
    }
    return _list("list_request_logs", _model(d.RequestLogEntry), limit, cursor, **filters)


def list_auth_audit(
    *,
    kind: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[d.AuthAuditEntry]]:
    """The durable audit of authentication events (logins, logouts, API key changes, 401 and 403), newest first."""
    filters = {"kind": kind, "outcome": outcome, "from": since, "to": until}
    return _list("list_auth_audit", _model(d.AuthAuditEntry), limit, cursor, **filters)


def usage(*, since: str | None = None, until: str | None = None) -> Call[d.Usage]:
    return _get("api_usage", _model(d.Usage), **{"from": since, "to": until})


def login(email: str, password: str, *, totp_code: str | None = None) -> Call[d.SessionCreated]:
    """A session for a person; send it as the bearer token of later requests. The client may hold no key yet."""
    body = _without_none(email=email, password=password, totp_code=totp_code)
    return _call("login", _model(d.SessionCreated), body=body)


def logout() -> Call[d.Session]:
    return _call("logout", _model(d.Session))


# AI (the deprecated pair announces itself with Deprecation and Sunset)
def knowledge_search(query: str, *, limit: int | None = None) -> Call[Page[r.KnowledgeHit]]:
    body = _without_none(query=query, limit=limit)
    return _call("knowledge_search", _page(_model(r.KnowledgeHit)), body=body, resendable=True, listing=True)


def conversation_message(conversation_id: str, content: str) -> Call[r.AssistantMessage]:
    return _call("conversation_message", _model(r.AssistantMessage), conversation_id, body={"content": content})


def deprecated_search(query: str, *, limit: int | None = None) -> Call[Page[r.KnowledgeHit]]:
    body = _without_none(query=query, limit=limit)
    return _call("deprecated_search", _page(_model(r.KnowledgeHit)), body=body, resendable=True, listing=True)


def deprecated_message(content: str) -> Call[r.AssistantMessage]:
    return _call("deprecated_message", _model(r.AssistantMessage), body={"content": content})
