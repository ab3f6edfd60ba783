"""A programme's spending settings (caps per customer, budget, clawback) as stored, and its budget's consumption.

They belong to the draft, like its schedule, and are frozen into each version published from it; the counters
they are checked against (`store.limit_usage`) belong to the programme, so publishing a new version neither
resets a customer's caps nor the budget.
"""

from __future__ import annotations

from typing import Any

from rewards_lab import presenters
from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.expiry_requests import ExpiryAfterDays, ExpiryAtEndOf
from rewards_lab.contract.limit_requests import DEFAULT_CLAWBACK, AmountLimit, Budget, Limit
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount, parse_amount
from rewards_lab.engine.postings import asset_row
from rewards_lab.store.interfaces import ProgrammeRow, Repositories

BUDGET_PERIODS_SHOWN = 12


def stored_limits(
    uow: Repositories, scope: Scope, asset_id: str, limits: list[Limit], field: str
) -> list[dict[str, Any]]:
    """Caps as stored: an amount cap must fit the programme's asset's decimals (as its amounts must)."""
    decimals = int(asset_row(uow, scope, asset_id).decimals)
    for index, limit in enumerate(limits):
        if isinstance(limit, AmountLimit):
            parse_amount(limit.max_amount, decimals, f"{field}[{index}].max_amount")
    return [limit.model_dump(mode="json") for limit in limits]


def checked_spending(
    uow: Repositories,
    scope: Scope,
    asset_id: str,
    limits: list[Limit],
    budget: Budget | None,
    clawback: str | None,
    expiry: ExpiryAfterDays | ExpiryAtEndOf | None = None,
    max_event_age_days: int | None = None,
) -> str | None:
    """The stored form (JSON) of a version's programme-wide caps, budget, clawback, the expiry of its rewards and
    how old a live event may be; None when all are the defaults of a version stored before they existed (no caps,
    no budget, clawback "available", no expiry of its own, no bound on an event's age)."""
    stored_caps = stored_limits(uow, scope, asset_id, limits, "limits")
    stored_budget = None
    if budget is not None:
        decimals = int(asset_row(uow, scope, asset_id).decimals)
        parse_amount(budget.max_amount, decimals, "budget.max_amount")
        stored_budget = budget.model_dump(mode="json")
    policy = clawback or DEFAULT_CLAWBACK
    stored_expiry = None if expiry is None else expiry.model_dump(mode="json")
    defaults = not stored_caps and stored_budget is None and policy == DEFAULT_CLAWBACK and stored_expiry is None
    if defaults and max_event_age_days is None:
        return None
    settings: dict[str, Any] = {"limits": stored_caps, "budget": stored_budget, "clawback": policy}
    if stored_expiry is not None:
        settings["expiry"] = stored_expiry
    if max_event_age_days is not None:  # absent: no bound (as every version stored before issue 27)
        settings["max_event_age_days"] = max_event_age_days
    return jsonutil.dumps(settings)


def budget_consumption(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> list[r.BudgetConsumption]:
    """What the programme issued against its budget per period, newest first, beside the live version's budget
    (or the draft's, before the first publication)."""
    budget = _budget_in_force(uow, scope, programme)
    if budget is None:
        return []
    decimals = int(asset_row(uow, scope, programme.asset_id).decimals)
    maximum = parse_amount(str(budget["max_amount"]), decimals, "budget.max_amount")
    period = str(budget["period"])
    shown = []
    for start, usage in uow.limit_usage.periods(scope, programme.id, f"budget:{period}", BUDGET_PERIODS_SHOWN):
        shown.append(
            r.BudgetConsumption(
                period=period,
                period_start=start,
                max_amount=format_amount(maximum, decimals),
                consumed=format_amount(usage.amount_minor, decimals),
                remaining=format_amount(max(0, maximum - usage.amount_minor), decimals),
            )
        )
    return shown


def _budget_in_force(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> dict[str, Any] | None:
    text = programme.spending
    if programme.current_version is not None:
        live = uow.programmes.get_version_by_number(scope, programme.id, programme.current_version)
        text = live.spending if live is not None else text
    budget: dict[str, Any] | None = presenters.spending_of(text)["budget"]
    return budget
