"""The error registry in both directions, and every code the engine can return reached by a real scenario."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from unittest import mock

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import HTTP_STATUS_BY_TYPE, REGISTRY, ErrorType, ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.validation import validate
from rewards_lab.domain.ledger import Entry, Posting, check_balanced
from rewards_lab.domain.posting_decision import PostingDecision
from rewards_lab.domain.posting_policy import PostingRequest
from rewards_lab.engine import event_processing, simulation
from rewards_lab.engine.postings import load_state
from rewards_lab.service import (
    assets,
    conversations,
    customer_tiers,
    customers,
    event_intake,
    event_queries,
    ledger,
    programme_forecast,
    programmes,
)
from rewards_lab.store.uow import unit_of_work
from tests.conftest import World

PACKAGE = Path(__file__).resolve().parents[2] / "rewards_lab"
SEED_CODES = {
    "customer_email_invalid",
    "organization_mismatch",
    "environment_mismatch",
    "asset_paused",
    "wallet_frozen",
    "insufficient_balance",
    "asset_supply_exhausted",
    "idempotency_key_reused",
    "rate_limit_exceeded",
}
# Codes that only the HTTP layer can produce (authentication, headers, routing, webhooks, keys, rate limits).
HTTP_ONLY = {
    "request_malformed",
    "request_too_large",
    "idempotency_key_required",
    "webhook_url_invalid",
    "webhook_event_kind_invalid",
    "period_invalid",
    "permission_unknown",
    "authentication_required",
    "credentials_invalid",
    "api_key_revoked",
    "session_expired",
    "session_revoked",
    "second_factor_required",
    "second_factor_invalid",
    "permission_denied",
    "organization_mismatch",
    "environment_mismatch",
    "permission_escalation",
    "route_not_found",
    "method_not_allowed",
    "organization_not_found",
    "execution_not_found",
    "webhook_not_found",
    "webhook_delivery_not_found",
    "api_key_not_found",
    "webhook_delivery_not_replayable",
    "api_key_already_revoked",
    "idempotency_request_in_progress",
    "rate_limit_exceeded",
    "service_unavailable",
}


def _raises(code: str, action: Callable[[], object]) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()
    assert caught.value.code == code, caught.value.to_dict()
    return caught.value


def _funded(world: World, amount: str = "10.00", **asset_fields: object) -> tuple[str, str]:
    asset = world.asset(**asset_fields)
    wallet = world.wallet()
    ledger.issue(world.db, world.scope, asset.id, rq.IssueRequest(wallet_id=wallet.id, amount=amount, reason="grant"))
    return asset.id, wallet.id


def _event(external_id: str, amount: object, customer: str = "customer-1") -> rq.EventCreate:
    return validate(
        rq.EventCreate,
        {
            "type": "order.completed",
            "external_event_id": external_id,
            "customer_id": customer,
            "data": {"amount": amount},
        },
    )


# Each scenario drives the engine, through its public functions, into exactly one code.
def s_field_required(w: World) -> ServiceError:
    return _raises("field_required", lambda: validate(rq.CustomerCreate, {}))


def s_field_unknown(w: World) -> ServiceError:
    error = _raises("field_unknown", lambda: validate(rq.CustomerCreate, {"external_id": "x", "nickname": "y"}))
    assert error.details["field"] == "nickname"
    return error


def s_field_invalid(w: World) -> ServiceError:
    body = {"name": "S", "symbol": "S", "type": "points", "decimals": 9}
    error = _raises("field_invalid", lambda: validate(rq.AssetCreate, body))
    assert error.details["field"] == "decimals"
    return error


def s_customer_email_invalid(w: World) -> ServiceError:
    error = _raises("customer_email_invalid", lambda: w.customer(email="not-an-address"))
    assert error.details["field"] == "email"
    return error


def s_amount_invalid(w: World) -> ServiceError:
    return _raises(
        "amount_invalid", lambda: validate(rq.IssueRequest, {"wallet_id": "w", "amount": "1e3", "reason": "r"})
    )


def s_amount_not_positive(w: World) -> ServiceError:
    asset, wallet = w.asset(), w.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="0.00", reason="r")
    return _raises("amount_not_positive", lambda: ledger.issue(w.db, w.scope, asset.id, body))


def s_amount_too_many_decimals(w: World) -> ServiceError:
    asset, wallet = w.asset(), w.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="1.001", reason="r")
    error = _raises("amount_too_many_decimals", lambda: ledger.issue(w.db, w.scope, asset.id, body))
    assert error.details == {"field": "amount", "decimals": 2}
    return error


def s_amount_too_large(w: World) -> ServiceError:
    asset, wallet = w.asset(), w.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="100000000000000000000", reason="r")
    return _raises("amount_too_large", lambda: ledger.issue(w.db, w.scope, asset.id, body))


def s_ledger_unbalanced(w: World) -> ServiceError:
    entries = [Entry("a", "ast", -5), Entry("b", "ast", 4)]
    return _raises("ledger_unbalanced", lambda: check_balanced("txn_x", entries))


def s_transfer_same_wallet(w: World) -> ServiceError:
    asset_id, wallet_id = _funded(w)
    body = rq.TransferRequest(from_wallet_id=wallet_id, to_wallet_id=wallet_id, amount="1.00")
    return _raises("transfer_same_wallet", lambda: ledger.transfer(w.db, w.scope, asset_id, body))


def s_rule_asset_mismatch(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    other = w.asset(symbol="GEM")
    body = {
        "program_id": programme.id,
        "event_type": "order.completed",
        "actions": [{"type": "issue", "asset_id": other.id, "amount": {"fixed": "1"}}],
    }
    return _raises("rule_asset_mismatch", lambda: programmes.create_rule(w.db, w.scope, validate(rq.RuleCreate, body)))


def s_programme_draft_empty(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    return _raises("programme_draft_empty", lambda: programmes.publish(w.db, w.scope, programme.id))


def _guarded_with_events(w: World, amount: str = "1000") -> str:
    """A draft of at most 1 a day issuing `amount` per event, and two stored events of the last hour."""
    asset = w.asset()
    guards = [{"metric": "issued", "period": "day", "max": "1"}]
    body = validate(rq.ProgrammeCreate, {"name": "Guarded", "asset_id": asset.id, "guards": guards})
    programme = programmes.create_programme(w.db, w.scope, body)
    w.rule(programme, amount={"fixed": amount})
    for n in range(2):
        event = {"type": "order.completed", "external_event_id": f"g{n}", "customer_id": "c1"}
        event_intake.submit_event(w.db, w.scope, validate(rq.EventCreate, event))
    return programme.id


def s_forecast_guard_failed(w: World) -> ServiceError:
    program_id = _guarded_with_events(w)
    return _raises("forecast_guard_failed", lambda: programmes.publish(w.db, w.scope, program_id))


def s_forecast_too_large(w: World) -> ServiceError:
    program_id = _guarded_with_events(w)
    limits = programme_forecast.ForecastLimits(max_events=1)
    return _raises(
        "forecast_too_large", lambda: programme_forecast.evaluate_draft(w.db, w.scope, program_id, limits=limits)
    )


def s_forecast_timeout(w: World) -> ServiceError:
    program_id = _guarded_with_events(w)
    limits = programme_forecast.ForecastLimits(timeout_s=1e-9)
    return _raises(
        "forecast_timeout", lambda: programme_forecast.evaluate_draft(w.db, w.scope, program_id, limits=limits)
    )


def s_programme_draft_changed(w: World) -> ServiceError:
    program_id = _guarded_with_events(w, "0.01")
    stale = programme_forecast.evaluate_draft(w.db, w.scope, program_id)
    w.rule(programmes.get_programme(w.db, w.scope, program_id))
    with mock.patch.object(programmes, "guarded_forecast", return_value=stale):
        return _raises("programme_draft_changed", lambda: programmes.publish(w.db, w.scope, program_id))


def _wide_rule(program_id: str, field: str = "sku") -> dict[str, object]:
    """A rule of about 400 kB (20 conditions, each a list of 100 strings of 200 characters)."""
    values = [f"{index:03d}" + "x" * 197 for index in range(100)]
    conditions = [{"field": f"{field}{n}", "operator": "in", "value": values} for n in range(20)]
    actions = [{"type": "issue", "amount": {"fixed": "1"}}]
    return {"program_id": program_id, "event_type": "order.completed", "conditions": conditions, "actions": actions}


def s_programme_limit_exceeded(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    for _ in range(2):
        programmes.create_rule(w.db, w.scope, validate(rq.RuleCreate, _wide_rule(programme.id)))
    third = validate(rq.RuleCreate, _wide_rule(programme.id))
    return _raises("programme_limit_exceeded", lambda: programmes.create_rule(w.db, w.scope, third))


def s_simulation_too_large(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    conditions = [{"field": "note", "operator": "exists"} for _ in range(20)]
    for _ in range(14):  # 14 rules x 20 conditions, each echoing the 16 kB value it read: over 4 MiB
        w.rule(programme, conditions=conditions)
    event = validate(rq.SimulationRequest, {"event": {"type": "order.completed", "note": "n" * 16_384}})
    return _raises("simulation_too_large", lambda: simulation.simulate_programme(w.db, w.scope, programme.id, event))


def s_idempotency_key_invalid(w: World) -> ServiceError:
    body = rq.CustomerCreate(external_id="x")
    return _raises(
        "idempotency_key_invalid", lambda: customers.create_customer(w.db, w.scope, body, idempotency_key="k" * 300)
    )


def s_cursor_invalid(w: World) -> ServiceError:
    return _raises("cursor_invalid", lambda: customers.list_customers(w.db, w.scope, PageRequest(cursor="bogus!")))


def s_sort_field_invalid(w: World) -> ServiceError:
    return _raises("sort_field_invalid", lambda: customers.list_customers(w.db, w.scope, PageRequest(sort="email")))


def s_event_payload_too_large(w: World) -> ServiceError:
    return _raises(
        "event_payload_too_large", lambda: event_intake.submit_event(w.db, w.scope, _event("big", "x" * 20_000))
    )


def s_wallet_policy_violation(w: World) -> ServiceError:
    asset_id, giver = _funded(w)
    closed = w.wallet(transfer_policy="closed")
    body = rq.TransferRequest(from_wallet_id=giver, to_wallet_id=closed.id, amount="1.00")
    return _raises("wallet_policy_violation", lambda: ledger.transfer(w.db, w.scope, asset_id, body))


def s_customer_not_found(w: World) -> ServiceError:
    return _raises("customer_not_found", lambda: customers.get_customer(w.db, w.scope, "cus_missing"))


def s_wallet_not_found(w: World) -> ServiceError:
    return _raises("wallet_not_found", lambda: ledger.wallet_balances(w.db, w.scope, "wal_missing"))


def s_asset_not_found(w: World) -> ServiceError:
    return _raises("asset_not_found", lambda: assets.activate_asset(w.db, w.scope, "ast_missing"))


def s_programme_not_found(w: World) -> ServiceError:
    return _raises("programme_not_found", lambda: programmes.publish(w.db, w.scope, "prg_missing"))


def s_tiers_not_defined(w: World) -> ServiceError:
    """A customer's tier in a programme with no tiers (none has a live version at all here)."""
    customer = w.customer()
    return _raises("tiers_not_defined", lambda: customer_tiers.customer_tier(w.db, w.scope, customer.id))


def s_programme_version_not_found(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    return _raises("programme_version_not_found", lambda: programmes.get_version(w.db, w.scope, programme.id, 7))


def s_rule_not_found(w: World) -> ServiceError:
    body = rq.SimulationRequest(event={"type": "x"})
    return _raises("rule_not_found", lambda: simulation.simulate_rule(w.db, w.scope, "rul_missing", body))


def s_event_not_found(w: World) -> ServiceError:
    return _raises("event_not_found", lambda: event_processing.replay_event(w.db, w.scope, "evt_missing"))


def s_transaction_not_found(w: World) -> ServiceError:
    return _raises("transaction_not_found", lambda: ledger.get_transaction(w.db, w.scope, "txn_missing"))


def s_asset_paused(w: World) -> ServiceError:
    asset_id, wallet_id = _funded(w)
    assets.pause_asset(w.db, w.scope, asset_id)
    body = rq.RedemptionRequest(wallet_id=wallet_id, amount="1.00", reference="order-9")
    return _raises("asset_paused", lambda: ledger.redeem(w.db, w.scope, asset_id, body))


def s_asset_not_active(w: World) -> ServiceError:
    asset, wallet = w.asset(activate=False), w.wallet()
    body = rq.IssueRequest(wallet_id=wallet.id, amount="1.00", reason="r")
    return _raises("asset_not_active", lambda: ledger.issue(w.db, w.scope, asset.id, body))


def s_asset_symbol_taken(w: World) -> ServiceError:
    w.asset(symbol="STAR")
    twin = w.asset(symbol="STAR", activate=False)
    return _raises("asset_symbol_taken", lambda: assets.activate_asset(w.db, w.scope, twin.id))


def s_asset_supply_exhausted(w: World) -> ServiceError:
    asset_id, wallet_id = _funded(w, "9.00", supply_ceiling="10.00")
    body = rq.IssueRequest(wallet_id=wallet_id, amount="1.01", reason="r")
    return _raises("asset_supply_exhausted", lambda: ledger.issue(w.db, w.scope, asset_id, body))


def s_wallet_frozen(w: World) -> ServiceError:
    asset_id, wallet_id = _funded(w)
    customers.freeze_wallet(w.db, w.scope, wallet_id)
    body = rq.RedemptionRequest(wallet_id=wallet_id, amount="1.00", reference="r")
    return _raises("wallet_frozen", lambda: ledger.redeem(w.db, w.scope, asset_id, body))


def s_insufficient_balance(w: World) -> ServiceError:
    asset_id, wallet_id = _funded(w, "5.00")
    body = rq.RedemptionRequest(wallet_id=wallet_id, amount="5.01", reference="r")
    return _raises("insufficient_balance", lambda: ledger.redeem(w.db, w.scope, asset_id, body))


def s_invalid_state_transition(w: World) -> ServiceError:
    asset = w.asset()
    error = _raises("invalid_state_transition", lambda: assets.activate_asset(w.db, w.scope, asset.id))
    assert error.details["state"] == "active"
    return error


def s_customer_already_exists(w: World) -> ServiceError:
    w.customer("dup")
    return _raises("customer_already_exists", lambda: w.customer("dup"))


def s_event_duplicate_mismatch(w: World) -> ServiceError:
    event_intake.submit_event(w.db, w.scope, _event("e-1", Decimal("10")))
    return _raises(
        "event_duplicate_mismatch", lambda: event_intake.submit_event(w.db, w.scope, _event("e-1", Decimal("11")))
    )


def s_event_not_replayable(w: World) -> ServiceError:
    event = event_intake.submit_event(w.db, w.scope, _event("e-2", Decimal("10")))
    return _raises("event_not_replayable", lambda: event_processing.replay_event(w.db, w.scope, event.id))


def s_programme_version_immutable(w: World) -> ServiceError:
    programme = w.programme(w.asset())
    rule = w.rule(programme)
    programmes.publish(w.db, w.scope, programme.id)
    programmes.delete_rule(w.db, w.scope, rule.id)  # gone from the draft, still in version 1
    body = rq.RuleUpdate(event_type="match.completed")
    return _raises("programme_version_immutable", lambda: programmes.update_rule(w.db, w.scope, rule.id, body))


def _referral_failure(w: World, data: dict[str, object]) -> ServiceError:
    """A referral rule whose beneficiary the event does not name usably: the event fails with the action's code
    (what GET /events/{id} shows), the rest of the event is unaffected."""
    w.wallet(w.customer("customer-1"))
    programme = w.programme(w.asset())
    body = {
        "program_id": programme.id,
        "event_type": "order.completed",
        "actions": [{"type": "issue", "amount": {"fixed": "1"}, "beneficiary": {"field": "referrer_id"}}],
    }
    programmes.create_rule(w.db, w.scope, validate(rq.RuleCreate, body))
    programmes.publish(w.db, w.scope, programme.id)
    event = validate(
        rq.EventCreate,
        {"type": "order.completed", "external_event_id": "e-ref", "customer_id": "customer-1", "data": data},
    )
    created = event_intake.submit_event(w.db, w.scope, event)
    event_processing.process_all(w.db)
    failed = event_queries.get_event(w.db, w.scope, created.id)
    assert failed.status == "failed" and failed.error is not None
    return ServiceError(failed.error.code, failed.error.message)


def s_beneficiary_missing(w: World) -> ServiceError:
    return _referral_failure(w, {"amount": 5})


def s_beneficiary_not_found(w: World) -> ServiceError:
    return _referral_failure(w, {"amount": 5, "referrer_id": "nobody"})


def _refund_failure(
    w: World, data: dict[str, object], fraction: object = None, *, waited: bool = False
) -> ServiceError:
    """A refund rule whose reverse action the refund event does not feed usably: the event fails with the
    action's code (`waited`: its original never came, and its wait is over)."""
    w.wallet(w.customer("customer-1"))
    programme = w.programme(w.asset())
    action: dict[str, object] = {"type": "reverse", "original": {"field": "order_id"}}
    if fraction is not None:
        action["fraction"] = fraction
    body = {"program_id": programme.id, "event_type": "order.refunded", "actions": [action]}
    programmes.create_rule(w.db, w.scope, validate(rq.RuleCreate, body))
    programmes.publish(w.db, w.scope, programme.id)
    event = validate(
        rq.EventCreate,
        {"type": "order.refunded", "external_event_id": "r-1", "customer_id": "customer-1", "data": data},
    )
    created = event_intake.submit_event(w.db, w.scope, event)
    event_processing.process_all(w.db)
    if waited:
        with unit_of_work(w.db) as uow:
            uow.events.wait(w.scope, {created.id: str(data["order_id"])}, datetime(2000, 1, 1))
        event_processing.process_all(w.db)
    failed = event_queries.get_event(w.db, w.scope, created.id)
    assert failed.status == "failed" and failed.error is not None
    return ServiceError(failed.error.code, failed.error.message)


def s_original_not_found(w: World) -> ServiceError:
    return _refund_failure(w, {"order_id": "never-sent"}, waited=True)


def s_original_missing(w: World) -> ServiceError:
    return _refund_failure(w, {"refund_amount": 5})


def s_fraction_invalid(w: World) -> ServiceError:
    return _refund_failure(w, {"order_id": "o-1", "refund_amount": -5}, {"field": "refund_amount", "of": "amount"})


def s_original_customer_mismatch(w: World) -> ServiceError:
    """Another customer's refund of an order (issue 27): nothing is taken back; the refund fails."""
    w.wallet(w.customer("customer-1"))
    w.wallet(w.customer("customer-2"))
    programme = w.programme(w.asset())
    earn = {"type": "issue", "amount": {"fixed": "5"}}
    reverse = {"type": "reverse", "original": {"field": "order_id"}}
    for event_type, action in (("order.completed", earn), ("order.refunded", reverse)):
        body = {"program_id": programme.id, "event_type": event_type, "actions": [action]}
        programmes.create_rule(w.db, w.scope, validate(rq.RuleCreate, body))
    programmes.publish(w.db, w.scope, programme.id)
    event_intake.submit_event(w.db, w.scope, _event("o-1", 10))
    event_processing.process_all(w.db)
    refund = {
        "type": "order.refunded",
        "external_event_id": "r-1",
        "customer_id": "customer-2",
        "data": {"order_id": "o-1"},
    }
    created = event_intake.submit_event(w.db, w.scope, validate(rq.EventCreate, refund))
    event_processing.process_all(w.db)
    failed = event_queries.get_event(w.db, w.scope, created.id)
    assert failed.status == "failed" and failed.error is not None
    return ServiceError(failed.error.code, failed.error.message)


def s_event_too_old(w: World) -> ServiceError:
    """An event that occurred longer before its receipt than the programme's bound (30 days by default): it is
    processed, and its execution says why it issued nothing."""
    w.wallet(w.customer("customer-1"))
    programme = w.programme(w.asset())
    w.rule(programme)
    programmes.publish(w.db, w.scope, programme.id)
    old = (datetime.now(UTC) - timedelta(days=31)).isoformat()
    body = {"type": "order.completed", "external_event_id": "e-old", "customer_id": "customer-1", "occurred_at": old}
    created = event_intake.submit_event(w.db, w.scope, validate(rq.EventCreate, body))
    event_processing.process_all(w.db)
    assert event_queries.get_event(w.db, w.scope, created.id).status == "processed"
    page = event_queries.list_executions(w.db, w.scope, PageRequest(limit=10), event_id=created.id)
    (execution,) = page.data
    assert (execution.status, execution.amount) == ("limited", "0.00")
    assert execution.error_code is not None
    return ServiceError(execution.error_code)


def s_idempotency_key_reused(w: World) -> ServiceError:
    customers.create_customer(w.db, w.scope, rq.CustomerCreate(external_id="a"), idempotency_key="k-1")
    other = rq.CustomerCreate(external_id="b")
    return _raises(
        "idempotency_key_reused", lambda: customers.create_customer(w.db, w.scope, other, idempotency_key="k-1")
    )


def s_internal_error(w: World) -> ServiceError:
    """A posting that skips the policy and overdraws a wallet is refused by the store's own check."""
    asset_id, wallet_id = _funded(w, "1.00")
    asset_row = assets.get_asset(w.db, w.scope, asset_id)
    assert asset_row.outstanding_supply == "1.00"

    def overdraw() -> None:
        with unit_of_work(w.db) as uow:
            account = uow.assets.get(w.scope, asset_id)
            assert account is not None
            txn = new_id("transaction")  # a real id: the ledger reads its creation time
            posting = Posting(txn, "redemption", asset_id, 500, wallet_id, account.redemption_account_id)
            state = load_state(uow, w.scope, [PostingRequest(txn, "redemption", asset_id, 500, wallet_id)])
            uow.ledger.write_postings(w.scope, PostingDecision([posting], []), state)

    error = _raises("internal_error", overdraw)
    assert error.details["invariant"] == "balance_below_floor"
    assert ledger.wallet_balances(w.db, w.scope, wallet_id).balances[0].balance == "1.00"  # rolled back
    return error


def s_conversation_not_found(w: World) -> ServiceError:
    """A service id (`cnv_`) the tenant does not hold: only a client's own name is created by its first message."""
    return _raises("conversation_not_found", lambda: conversations.get_conversation(w.db, w.scope, "cnv_unknown"))


SCENARIOS: dict[str, Callable[[World], ServiceError]] = {
    name.removeprefix("s_"): function for name, function in globals().items() if name.startswith("s_")
}


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_engine_reaches_code(code: str, world: World) -> None:
    error = SCENARIOS[code](world)
    assert error.code == code
    assert error.type == REGISTRY[code].type
    body = error.to_dict()
    assert set(body) == {"type", "code", "message", "details"} and body["message"]


def test_every_registered_code_is_reached_by_the_engine_or_reserved_for_http() -> None:
    assert set(SCENARIOS) | HTTP_ONLY == set(REGISTRY), {
        "unreached": sorted(set(REGISTRY) - set(SCENARIOS) - HTTP_ONLY),
        "unknown": sorted((set(SCENARIOS) | HTTP_ONLY) - set(REGISTRY)),
    }
    assert set(SCENARIOS).isdisjoint(HTTP_ONLY - {"rate_limit_exceeded"})


def test_seed_codes_are_registered_with_the_seed_types() -> None:
    assert SEED_CODES <= set(REGISTRY)
    assert REGISTRY["customer_email_invalid"].type is ErrorType.VALIDATION
    assert REGISTRY["organization_mismatch"].type is ErrorType.AUTHORIZATION
    assert REGISTRY["asset_paused"].type is ErrorType.CONFLICT
    assert REGISTRY["wallet_frozen"].type is ErrorType.CONFLICT
    assert REGISTRY["insufficient_balance"].type is ErrorType.CONFLICT
    assert REGISTRY["idempotency_key_reused"].type is ErrorType.IDEMPOTENCY
    assert REGISTRY["rate_limit_exceeded"].type is ErrorType.RATE_LIMIT
    assert {t: HTTP_STATUS_BY_TYPE[t] for t in ErrorType} == {
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


def test_the_package_raises_only_registered_codes() -> None:
    raised: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        raised |= set(re.findall(r'ServiceError\(\s*"([a-z_]+)"', path.read_text()))
    assert raised, "the scan found no ServiceError at all"
    assert raised <= set(REGISTRY), sorted(raised - set(REGISTRY))


def test_unregistered_codes_cannot_be_raised() -> None:
    with pytest.raises(LookupError):
        ServiceError("made_up_code")
