"""Rows of the store as the contract's resources (the only place that shapes a response)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from rewards_lab.contract import attributes, jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import CapCut, Limit
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.records import ReversalRecord
from rewards_lab.domain.settings import Guard, GuardOverride, Spending, Tiers
from rewards_lab.store.interfaces import (
    AssetRow,
    CustomerRow,
    ProgrammeRow,
    RuleRow,
    StoredEvent,
    StoredExecution,
    TransactionRow,
    VersionRow,
    WalletRow,
)
from rewards_lab.store.queries import RowPage


@overload
def utc(value: datetime) -> datetime: ...
@overload
def utc(value: None) -> None: ...
def utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


ItemT = TypeVar("ItemT", bound=BaseModel)
RowT = TypeVar("RowT")


def page(model: type[r.Page[ItemT]], rows: RowPage[RowT], present: Callable[[RowT], ItemT]) -> r.Page[ItemT]:
    """A page of a list operation: its rows presented one by one, with the store's cursor."""
    return model(data=[present(row) for row in rows.rows], next_cursor=rows.next_cursor, has_more=rows.has_more)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC)


def customer(row: CustomerRow) -> r.Customer:
    return r.Customer(
        id=row.id,
        external_id=row.external_id,
        email=row.email,
        country=row.country,
        created_at=_utc(row.created_at),
        attributes=attributes.from_json(row.attributes),
    )


def wallet(row: WalletRow) -> r.Wallet:
    return r.Wallet(
        id=row.id,
        customer_id=row.customer_id,
        type=row.type,
        status=row.status,
        transfer_policy=row.transfer_policy,
        created_at=_utc(row.created_at),
    )


def asset(row: AssetRow) -> r.Asset:
    decimals = int(row.decimals)
    ceiling = row.supply_ceiling_minor
    issued, redeemed, expired = int(row.issued_minor), int(row.redeemed_minor), int(row.expired_minor)
    return r.Asset(
        id=row.id,
        name=row.name,
        symbol=row.symbol,
        type=row.type,
        decimals=decimals,
        supply_ceiling=None if ceiling is None else format_amount(int(ceiling), decimals),
        status=row.status,
        issued=format_amount(issued, decimals),
        redeemed=format_amount(redeemed, decimals),
        outstanding_supply=format_amount(issued - redeemed - expired, decimals),
        created_at=_utc(row.created_at),
        activated_at=utc(row.activated_at),
        expiry=expiry(row.expiry),
        value_per_unit=row.value_per_unit,
        expired=format_amount(expired, decimals),
    )


def rule(row: RuleRow) -> r.Rule:
    return r.Rule(
        id=row.id,
        name=row.name,
        program_id=row.program_id,
        version=row.version_number,
        event_type=row.event_type,
        conditions=row.condition_items(),
        actions=row.action_items(),
        priority=row.priority,
        stop_processing=row.stop_processing,
        limits=limits(row.limits),
        created_at=_utc(row.created_at),
    )


def version(row: VersionRow, rules: list[RuleRow]) -> r.ProgrammeVersion:
    return version_of(row, [rule(x) for x in rules])


def version_of(row: VersionRow, rules: list[r.Rule]) -> r.ProgrammeVersion:
    """The version with its rules already presented (publishing presents them before it takes the write lock)."""
    return r.ProgrammeVersion(
        id=row.id,
        program_id=row.program_id,
        number=row.number,
        status=row.status,
        based_on=row.based_on,
        published_at=utc(row.published_at),
        rules=rules,
        timezone=row.timezone,
        starts_at=utc(row.starts_at),
        ends_at=utc(row.ends_at),
        **spending(row.spending),
        guards=guards(row.guards),
        guard_window_days=row.guard_window_days or DEFAULT_GUARD_WINDOW_DAYS,
        guard_override=guard_override(row.guard_override),
        tiers=tiers(row.tiers),
    )


def programme(row: ProgrammeRow, consumption: list[r.BudgetConsumption] | None = None) -> r.Programme:
    return r.Programme(
        id=row.id,
        name=row.name,
        asset_id=row.asset_id,
        description=row.description,
        current_version=row.current_version,
        draft_version_id=row.draft_version_id,
        created_at=_utc(row.created_at),
        status=row.status,
        timezone=row.timezone,
        starts_at=utc(row.starts_at),
        ends_at=utc(row.ends_at),
        **spending(row.spending),
        guards=guards(row.guards),
        guard_window_days=row.guard_window_days or DEFAULT_GUARD_WINDOW_DAYS,
        tiers=tiers(row.tiers),
        budget_consumption=consumption or [],
    )


def event(row: StoredEvent) -> r.Event:
    error = None
    if row.error_code:
        error = r.EventError(code=row.error_code, message=row.error_message or "")
    return r.Event(
        id=row.id,
        external_event_id=row.external_event_id,
        type=row.type,
        customer_id=row.customer_id,
        occurred_at=utc(row.occurred_at),
        data=row.data_value(),
        status=row.status,
        error=error,
        attempts=int(row.attempts),
        received_at=_utc(row.received_at),
        processed_at=utc(row.processed_at),
        waiting_for=row.waiting_for if row.status == "received" else None,
        wait_until=utc(row.wait_until) if row.status == "received" and row.waiting_for else None,
    )


def event_fields(row: StoredEvent) -> dict[str, Any]:
    """What `event(row)` dumps to, as a plain dict, with `data` passed on as the stored JSON text: the POST
    /events hot path writes this without building the model or parsing `data` back (tests hold the two equal)."""
    return {
        "id": row.id,
        "external_event_id": row.external_event_id,
        "type": row.type,
        "customer_id": row.customer_id,
        "occurred_at": _iso_z(row.occurred_at),
        "data": jsonutil.raw(row.data),
        "status": row.status,
        "error": {"code": row.error_code, "message": row.error_message or ""} if row.error_code else None,
        "attempts": int(row.attempts),
        "received_at": _iso_z(row.received_at),
        "processed_at": _iso_z(row.processed_at),
    }


def event_text(row: StoredEvent) -> str:
    """`jsonutil.dumps(event_fields(row))`, written directly for the hot path's usual answer (a stored event
    without an error): the encoder's set-up and the dict cost more than the writing. Tests hold the two equal."""
    if row.error_code or type(row.attempts) is not int:
        return jsonutil.dumps(event_fields(row))
    string = jsonutil.string
    return (
        f'{{"id":{string(row.id)},"external_event_id":{string(row.external_event_id)},'
        f'"type":{string(row.type)},"customer_id":{string(row.customer_id)},'
        f'"occurred_at":{_time_text(row.occurred_at)},"data":{row.data},'
        f'"status":{string(row.status)},"error":null,"attempts":{row.attempts},'
        f'"received_at":{_time_text(row.received_at)},"processed_at":{_time_text(row.processed_at)}}}'
    )


def _time_text(value: datetime | None) -> str:
    """`_iso_z` as JSON text (a string, or null)."""
    text = _iso_z(value)
    return "null" if text is None else f'"{text}"'


def _iso_z(value: datetime | None) -> str | None:
    """A stored (naive UTC) time as `jsonutil.dumps` writes the aware one: ISO 8601 with Z."""
    return None if value is None else value.isoformat() + "Z"


def execution(row: StoredExecution, decimals: int) -> r.RewardExecution:
    return r.RewardExecution(
        id=row.id,
        event_id=row.event_id,
        external_event_id=row.external_event_id,
        customer_id=row.customer_id,
        program_id=row.program_id,
        program_version=row.version_number,
        rule_id=row.rule_id,
        action_index=row.action_index,
        asset_id=row.asset_id,
        wallet_id=row.wallet_id,
        amount=format_amount(int(row.amount_minor), decimals),
        status=row.status,
        error_code=row.error_code,
        transaction_id=row.transaction_id,
        inputs=row.inputs_value(),
        created_at=_utc(row.created_at),
        updated_at=_utc(row.updated_at),
        requested_amount=None if row.requested_minor is None else format_amount(int(row.requested_minor), decimals),
        limited=None if row.limited is None else limit_cut(row.limited, decimals),
        reversed_amount=format_amount(int(row.reversed_minor or 0), decimals) if row.status == "issued" else None,
        reversal=None if row.reversal is None else reversal(row.reversal, decimals),
    )


def reversal(record: ReversalRecord, decimals: int) -> r.Reversal:
    """A reverse action's detail (minor units) as shown: per reward its target, what the wallet gave and the
    shortfall, and the totals."""
    rewards = []
    target = shortfall = 0
    for item in record.rewards:
        due, taken = item.target_minor, item.taken_minor
        target, shortfall = target + due, shortfall + due - taken
        rewards.append(
            r.ReversedReward(
                original_execution_id=item.original_execution_id,
                original_transaction_id=item.original_transaction_id,
                customer_id=item.customer_id,
                wallet_id=item.wallet_id,
                target=format_amount(due, decimals),
                amount=format_amount(taken, decimals),
                shortfall=format_amount(due - taken, decimals),
                transaction_id=item.transaction_id,
            )
        )
    return r.Reversal(
        original_event_id=record.original_event_id,
        original_external_event_id=record.original_external_event_id,
        fraction=None if record.fraction is None else str(record.fraction),
        clawback=record.clawback,
        target=format_amount(target, decimals),
        shortfall=format_amount(shortfall, decimals),
        rewards=rewards,
    )


def limit_cut(cut: CapCut, decimals: int) -> r.LimitCut:
    """A cut (amounts in minor units) as shown."""
    maximum = cut.max_amount_minor
    return r.LimitCut(
        scope=cut.scope,
        period=cut.period,
        period_start=cut.period_start,
        max_amount=None if maximum is None else format_amount(maximum, decimals),
        max_count=cut.max_count,
        cut=format_amount(cut.cut_minor, decimals),
    )


_GIVING = ("redemption", "reversal", "expire")  # kinds whose wallet gives


def transaction(row: TransactionRow, decimals: int) -> r.LedgerTransaction:
    """A transaction with its two entries (legs): the source gives the amount, the destination receives it."""
    kind = row.kind
    source, destination = row.source_account_id, row.destination_account_id
    amount = int(row.amount_minor)
    return r.LedgerTransaction(
        id=row.id,
        kind=kind,
        asset_id=row.asset_id,
        amount=format_amount(amount, decimals),
        wallet_id=destination if kind in ("issue", "reward") else source if kind in _GIVING else None,
        from_wallet_id=source if kind == "transfer" else None,
        to_wallet_id=destination if kind == "transfer" else None,
        memo=row.memo,
        entries=[
            r.Entry(account_id=source, amount=format_amount(-amount, decimals)),
            r.Entry(account_id=destination, amount=format_amount(amount, decimals)),
        ],
        created_at=_utc(row.created_at),
    )


def json_value(value: Any) -> Any:
    """Decimals as exact strings, for provenance records."""
    return str(value) if isinstance(value, Decimal) else value


def limits(declared: Sequence[Limit]) -> list[dict[str, Any]]:
    """Caps in the contract's form (the resource validates them)."""
    return [limit.as_json() for limit in declared]


def expiry(policy: ExpiryPolicy | None) -> dict[str, Any] | None:
    """An expiry policy in the contract's form (None: none)."""
    return None if policy is None else policy.as_json()


def spending(settings: Spending) -> dict[str, Any]:
    """A version's spending settings as the fields of a programme or version: limits, budget, clawback, expiry
    and the bound on a live event's age."""
    return {
        "limits": limits(settings.limits),
        "budget": None if settings.budget is None else settings.budget.as_json(),
        "clawback": settings.clawback,
        "expiry": expiry(settings.expiry),
        "max_event_age_days": settings.max_event_age_days,
    }


def tiers(model: Tiers | None) -> dict[str, Any] | None:
    """A version's tiers, as the contract validates them (None: none)."""
    return None if model is None else model.as_json()


def guards(declared: Sequence[Guard]) -> list[dict[str, Any]]:
    """A version's forecast guards, as the contract validates them."""
    return [guard.as_json() for guard in declared]


def guard_override(override: GuardOverride | None) -> r.GuardOverrideRecord | None:
    """The override a version was published with despite a failed guard (None: none)."""
    if override is None:
        return None
    return r.GuardOverrideRecord(reason=override.reason, given_by=override.given_by, given_at=override.given_at)
