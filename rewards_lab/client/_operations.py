"""The seed's operations as `Call` builders: path, body, idempotency and the model `data` parses into.

Shared by both clients (each method of `RewardsClient` and `AsyncRewardsClient` is one of these). Writes that
the seed makes idempotent (creations, state moves, financial writes) carry an Idempotency-Key; simulate sends
none (the seed says so), events are deduplicated by `external_event_id` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from rewards_lab.client._core import Call, Page
from rewards_lab.contract import developer as d
from rewards_lab.contract import resources as r

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


def _write(
    path: str, parse: Callable[[Any], T], body: Any = None, key: str | None = None, method: str = "POST"
) -> Call[T]:
    return Call(method, path, parse, body=body, idempotent=True, idempotency_key=key, resendable=True)


def _get(route: str, parse: Callable[[Any], T], /, **params: Any) -> Call[T]:
    return Call("GET", route, parse, params=params, resendable=True)


def _list(
    route: str, parse: Callable[[Any], T], limit: int | None, cursor: str | None, /, **params: Any
) -> Call[Page[T]]:
    query = {"limit": limit, "cursor": cursor, **params}
    return Call("GET", route, _page(parse), params=query, resendable=True, listing=True)


# customers and wallets
def create_customer(
    external_id: str, *, email: str | None = None, country: str | None = None, idempotency_key: str | None = None
) -> Call[r.Customer]:
    body = _without_none(external_id=external_id, email=email, country=country)
    return _write("/customers", _model(r.Customer), body, idempotency_key)


def get_customer(customer_id: str) -> Call[r.Customer]:
    return _get(f"/customers/{_id(customer_id)}", _model(r.Customer))


def list_customers(
    *, external_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Customer]]:
    return _list("/customers", _model(r.Customer), limit, cursor, external_id=external_id)


def customer_segments(customer_id: str) -> Call[r.CustomerSegments]:
    return _get(f"/customers/{_id(customer_id)}/segments", _model(r.CustomerSegments))


def create_wallet(
    customer_id: str, *, type: str = "customer", transfer_policy: str | None = None, idempotency_key: str | None = None
) -> Call[r.Wallet]:
    body = _without_none(customer_id=customer_id, type=type, transfer_policy=transfer_policy)
    return _write("/wallets", _model(r.Wallet), body, idempotency_key)


def get_wallet(wallet_id: str) -> Call[r.Wallet]:
    return _get(f"/wallets/{_id(wallet_id)}", _model(r.Wallet))


def list_wallets(
    *, customer_id: str | None = None, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Wallet]]:
    return _list("/wallets", _model(r.Wallet), limit, cursor, customer_id=customer_id, status=status)


def wallet_balances(wallet_id: str) -> Call[r.WalletBalances]:
    return _get(f"/wallets/{_id(wallet_id)}/balances", _model(r.WalletBalances))


def freeze_wallet(wallet_id: str, *, idempotency_key: str | None = None) -> Call[r.Wallet]:
    return _write(f"/wallets/{_id(wallet_id)}/freeze", _model(r.Wallet), None, idempotency_key)


def unfreeze_wallet(wallet_id: str, *, idempotency_key: str | None = None) -> Call[r.Wallet]:
    return _write(f"/wallets/{_id(wallet_id)}/unfreeze", _model(r.Wallet), None, idempotency_key)


# assets and the ledger
def create_asset(
    name: str,
    symbol: str,
    type: str,
    decimals: int,
    *,
    supply_ceiling: str | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Asset]:
    body = _without_none(name=name, symbol=symbol, type=type, decimals=decimals, supply_ceiling=supply_ceiling)
    return _write("/assets", _model(r.Asset), body, idempotency_key)


def get_asset(asset_id: str) -> Call[r.Asset]:
    return _get(f"/assets/{_id(asset_id)}", _model(r.Asset))


def list_assets(
    *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Asset]]:
    return _list("/assets", _model(r.Asset), limit, cursor, status=status)


def _asset_move(asset_id: str, move: str, idempotency_key: str | None) -> Call[r.Asset]:
    return _write(f"/assets/{_id(asset_id)}/{move}", _model(r.Asset), None, idempotency_key)


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
    return _write(f"/assets/{_id(asset_id)}/issue", _model(r.LedgerTransaction), body, idempotency_key)


def redeem(
    asset_id: str, wallet_id: str, amount: str, reference: str, *, idempotency_key: str | None = None
) -> Call[r.LedgerTransaction]:
    body = {"wallet_id": wallet_id, "amount": amount, "reference": reference}
    return _write(f"/assets/{_id(asset_id)}/redemptions", _model(r.LedgerTransaction), body, idempotency_key)


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
    return _write(f"/assets/{_id(asset_id)}/transfers", _model(r.LedgerTransaction), body, idempotency_key)


def list_transactions(
    *,
    wallet_id: str | None = None,
    asset_id: str | None = None,
    kind: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.LedgerTransaction]]:
    return _list(
        "/transactions", _model(r.LedgerTransaction), limit, cursor, wallet_id=wallet_id, asset_id=asset_id, kind=kind
    )


def get_transaction(transaction_id: str) -> Call[r.LedgerTransaction]:
    return _get(f"/transactions/{_id(transaction_id)}", _model(r.LedgerTransaction))


# programmes, versions, rules
def create_programme(
    name: str, asset_id: str, *, description: str | None = None, idempotency_key: str | None = None
) -> Call[r.Programme]:
    body = _without_none(name=name, asset_id=asset_id, description=description)
    return _write("/reward-programs", _model(r.Programme), body, idempotency_key)


def get_programme(program_id: str) -> Call[r.Programme]:
    return _get(f"/reward-programs/{_id(program_id)}", _model(r.Programme))


def list_programmes(
    *, asset_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.Programme]]:
    return _list("/reward-programs", _model(r.Programme), limit, cursor, asset_id=asset_id)


def _versions(data: Any) -> list[r.ProgrammeVersion]:
    if not isinstance(data, list):
        raise TypeError("versions must be a list")
    return [r.ProgrammeVersion.model_validate(item) for item in data]


def list_versions(program_id: str) -> Call[list[r.ProgrammeVersion]]:
    return _get(f"/reward-programs/{_id(program_id)}/versions", _versions)


def publish(program_id: str, *, idempotency_key: str | None = None) -> Call[r.PublishResult]:
    return _write(f"/reward-programs/{_id(program_id)}/publish", _model(r.PublishResult), None, idempotency_key)


def create_rule(
    program_id: str,
    event_type: str,
    actions: Sequence[Json],
    *,
    conditions: Sequence[Json] | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Rule]:
    body: Json = {"program_id": program_id, "event_type": event_type, "actions": list(actions)}
    if conditions is not None:
        body["conditions"] = list(conditions)
    return _write("/reward-rules", _model(r.Rule), body, idempotency_key)


def get_rule(rule_id: str) -> Call[r.Rule]:
    return _get(f"/reward-rules/{_id(rule_id)}", _model(r.Rule))


def update_rule(
    rule_id: str,
    *,
    event_type: str | None = None,
    conditions: Sequence[Json] | None = None,
    actions: Sequence[Json] | None = None,
    idempotency_key: str | None = None,
) -> Call[r.Rule]:
    body = _without_none(
        event_type=event_type,
        conditions=list(conditions) if conditions is not None else None,
        actions=list(actions) if actions is not None else None,
    )
    return _write(f"/reward-rules/{_id(rule_id)}", _model(r.Rule), body, idempotency_key, "PATCH")


def delete_rule(rule_id: str, *, idempotency_key: str | None = None) -> Call[Any]:
    return _write(f"/reward-rules/{_id(rule_id)}", _raw, None, idempotency_key, "DELETE")


def simulate_rule(rule_id: str, event: Json) -> Call[r.Simulation]:
    """Writes nothing on the service, so it is safe to resend and carries no Idempotency-Key (the seed's rule)."""
    return Call(
        "POST", f"/reward-rules/{_id(rule_id)}/simulate", _model(r.Simulation), body={"event": event}, resendable=True
    )


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
    return Call("POST", "/events", _model(r.Event), body=body, resendable=True)


def get_event(event_id: str) -> Call[r.Event]:
    return _get(f"/events/{_id(event_id)}", _model(r.Event))


def list_events(
    *,
    status: str | None = None,
    type: str | None = None,
    customer_id: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.Event]]:
    return _list("/events", _model(r.Event), limit, cursor, status=status, type=type, customer_id=customer_id)


def replay_event(event_id: str) -> Call[r.Event]:
    """Creates no duplicate issuance (the seed's rule), so it is safe to resend."""
    return Call("POST", f"/events/{_id(event_id)}/replay", _model(r.Event), resendable=True)


def list_executions(
    *,
    customer_id: str | None = None,
    event_id: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[r.RewardExecution]]:
    return _list(
        "/reward-executions",
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
    return Call("POST", "/webhooks", _model(r.WebhookEndpointCreated), body={"url": url, "events": list(events)})


def get_webhook(webhook_id: str) -> Call[r.WebhookEndpoint]:
    return _get(f"/webhooks/{_id(webhook_id)}", _model(r.WebhookEndpoint))


def list_webhooks(
    *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.WebhookEndpoint]]:
    return _list("/webhooks", _model(r.WebhookEndpoint), limit, cursor, status=status)


def disable_webhook(webhook_id: str, *, idempotency_key: str | None = None) -> Call[r.WebhookEndpoint]:
    return _write(f"/webhooks/{_id(webhook_id)}", _model(r.WebhookEndpoint), None, idempotency_key, "DELETE")


def rotate_webhook_secret(webhook_id: str, *, grace_period_s: int | None = None) -> Call[r.WebhookSecretRotated]:
    """A new signing secret, in the result once; the previous one keeps signing for `grace_period_s` (server
    default: a day). Not resent without an answer (a resend would rotate again and end the first new secret)."""
    body = {} if grace_period_s is None else {"grace_period_s": grace_period_s}
    return Call("POST", f"/webhooks/{_id(webhook_id)}/rotate-secret", _model(r.WebhookSecretRotated), body=body)


def test_webhook(webhook_id: str) -> Call[r.WebhookDelivery]:
    """Queues a signed test delivery; the result is the delivery record."""
    return Call("POST", f"/webhooks/{_id(webhook_id)}/test", _model(r.WebhookDelivery))


def list_webhook_deliveries(
    webhook_id: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[r.WebhookDelivery]]:
    return _list(f"/webhooks/{_id(webhook_id)}/deliveries", _model(r.WebhookDelivery), limit, cursor, status=status)


def get_webhook_delivery(webhook_id: str, delivery_id: str) -> Call[r.WebhookDelivery]:
    return _get(f"/webhooks/{_id(webhook_id)}/deliveries/{_id(delivery_id)}", _model(r.WebhookDelivery))


def replay_webhook_delivery(
    webhook_id: str, delivery_id: str, *, idempotency_key: str | None = None
) -> Call[r.WebhookDelivery]:
    path = f"/webhooks/{_id(webhook_id)}/deliveries/{_id(delivery_id)}/replay"
    return _write(path, _model(r.WebhookDelivery), None, idempotency_key)


# developer: API keys, logs, usage; sessions
def create_api_key(name: str, permissions: Sequence[str]) -> Call[r.ApiKeyCreated]:
    """Not resent without an answer: a second key would be made. The secret is shown once."""
    body = {"name": name, "permissions": list(permissions)}
    return Call("POST", "/developer/api-keys", _model(r.ApiKeyCreated), body=body)


def revoke_api_key(key_id: str) -> Call[r.ApiKey]:
    return Call("DELETE", f"/developer/api-keys/{_id(key_id)}", _model(r.ApiKey), resendable=True)


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
    return _list("/developer/logs", _model(d.RequestLogEntry), limit, cursor, **filters)


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
    return _list("/developer/audit", _model(d.AuthAuditEntry), limit, cursor, **filters)


def usage(*, since: str | None = None, until: str | None = None) -> Call[d.Usage]:
    return _get("/developer/usage", _model(d.Usage), **{"from": since, "to": until})


def login(email: str, password: str, *, totp_code: str | None = None) -> Call[d.SessionCreated]:
    """A session for a person; send it as the bearer token of later requests. The client may hold no key yet."""
    body = _without_none(email=email, password=password, totp_code=totp_code)
    return Call("POST", "/auth/login", _model(d.SessionCreated), body=body)


def logout() -> Call[d.Session]:
    return Call("POST", "/auth/logout", _model(d.Session))


# AI (the deprecated pair announces itself with Deprecation and Sunset)
def knowledge_search(query: str, *, limit: int | None = None) -> Call[Page[r.KnowledgeHit]]:
    body = _without_none(query=query, limit=limit)
    return Call("POST", "/ai/knowledge/search", _page(_model(r.KnowledgeHit)), body=body, resendable=True, listing=True)


def conversation_message(conversation_id: str, content: str) -> Call[r.AssistantMessage]:
    path = f"/ai/conversations/{_id(conversation_id)}/messages"
    return Call("POST", path, _model(r.AssistantMessage), body={"content": content})


def deprecated_search(query: str, *, limit: int | None = None) -> Call[Page[r.KnowledgeHit]]:
    body = _without_none(query=query, limit=limit)
    return Call("POST", "/ai/search", _page(_model(r.KnowledgeHit)), body=body, resendable=True, listing=True)


def deprecated_message(content: str) -> Call[r.AssistantMessage]:
    return Call("POST", "/ai/messages", _model(r.AssistantMessage), body={"content": content})
