"""A programme's spending settings (caps per customer, budget, clawback) as checked, and its budget's consumption.

They belong to the draft, like its schedule, and are frozen into each version published from it; the counters
they are checked against (`store.limit_usage`) belong to the programme, so publishing a new version neither
resets a customer's caps nor the budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.limits import Budget, Limit
from rewards_lab.domain.money import format_amount, parse_amount
from rewards_lab.domain.settings import Spending
from rewards_lab.engine.postings import asset_row
from rewards_lab.store.interfaces import ProgrammeRow, Repositories

BUDGET_PERIODS_SHOWN = 12


def checked_limits(
    uow: Repositories, scope: Scope, asset_id: str, limits: Sequence[Limit], field: str
) -> tuple[Limit, ...]:
    """Caps as kept: an amount cap must fit the programme's asset's decimals (as its amounts must)."""
    decimals = int(asset_row(uow, scope, asset_id).decimals)
    for index, limit in enumerate(limits):
        if limit.max_amount is not None:
            parse_amount(limit.max_amount, decimals, f"{field}[{index}].max_amount")
    return tuple(limits)


def checked_spending(uow: Repositories, scope: Scope, asset_id: str, spending: Spending) -> Spending:
    """A version's programme-wide caps, budget, clawback, the expiry of its rewards and how old a live event may
    be, as kept: the amounts of its caps and budget must fit the programme's asset's decimals. The store keeps
    the defaults (no caps, no budget, clawback "available", no expiry, no bound) as no settings at all."""
    checked_limits(uow, scope, asset_id, spending.limits, "limits")
    if spending.budget is not None:
        decimals = int(asset_row(uow, scope, asset_id).decimals)
        parse_amount(spending.budget.max_amount, decimals, "budget.max_amount")
    return spending


def budget_consumption(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> list[r.BudgetConsumption]:
    """What the programme issued against its budget per period, newest first, beside the live version's budget
    (or the draft's, before the first publication)."""
    budget = _budget_in_force(uow, scope, programme)
    if budget is None:
        return []
    decimals = int(asset_row(uow, scope, programme.asset_id).decimals)
    maximum = parse_amount(budget.max_amount, decimals, "budget.max_amount")
    period = budget.period
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


def _budget_in_force(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> Budget | None:
    spending = programme.spending
    if programme.current_version is not None:
        live = uow.programmes.get_version_by_number(scope, programme.id, programme.current_version)
        spending = live.spending if live is not None else spending
    return spending.budget
