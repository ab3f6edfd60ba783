"""Settings as a request carries them (the contract's models) made the domain's typed settings, which the store keeps.

Caps, budgets and clawback (`contract.limit_requests`), expiry (`contract.expiry_requests`) and forecast guards
(`contract.guard_requests`) arrive validated; these functions only change their form. What they must also fit (an
amount the asset's decimals can hold) is checked where they are used (`service.programme_spending`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rewards_lab.contract import guard_requests as gq
from rewards_lab.contract import limit_requests as lq
from rewards_lab.contract.expiry_requests import ExpiryAfterDays, ExpiryAtEndOf
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import Budget, Limit
from rewards_lab.domain.settings import (
    CeilingGuard,
    Guard,
    IssuedGuard,
    LiabilityDeltaGuard,
    Spending,
    clawback_of,
)


def limit_of(limit: lq.AmountLimit | lq.CountLimit) -> Limit:
    if isinstance(limit, lq.CountLimit):
        return Limit(limit.period, max_count=limit.max_count)
    return Limit(limit.period, max_amount=limit.max_amount)


def limits_of(limits: Sequence[lq.AmountLimit | lq.CountLimit] | None) -> tuple[Limit, ...]:
    return tuple(limit_of(limit) for limit in limits or ())


def budget_of(budget: lq.Budget | None) -> Budget | None:
    return None if budget is None else Budget(budget.period, budget.max_amount)


def expiry_of(expiry: ExpiryAfterDays | ExpiryAtEndOf | None) -> ExpiryPolicy | None:
    if expiry is None:
        return None
    if isinstance(expiry, ExpiryAfterDays):
        return ExpiryPolicy(after_days=expiry.after_days)
    return ExpiryPolicy(at_end_of=expiry.at_end_of, after=expiry.after)


def spending_of(
    limits: Sequence[lq.AmountLimit | lq.CountLimit] | None,
    budget: lq.Budget | None,
    clawback: str | None,
    expiry: ExpiryAfterDays | ExpiryAtEndOf | None = None,
    max_event_age_days: int | None = None,
) -> Spending:
    """A programme's spending settings as requested (clawback None: the default)."""
    return Spending(limits_of(limits), budget_of(budget), clawback_of(clawback), expiry_of(expiry), max_event_age_days)


def guard_of(guard: gq.IssuedGuard | gq.LiabilityDeltaGuard | gq.CeilingGuard) -> Guard:
    if isinstance(guard, gq.IssuedGuard):
        return IssuedGuard(guard.period, guard.max)
    if isinstance(guard, gq.LiabilityDeltaGuard):
        return LiabilityDeltaGuard(guard.max)
    return CeilingGuard(guard.min)


def guards_of(guards: Sequence[gq.IssuedGuard | gq.LiabilityDeltaGuard | gq.CeilingGuard] | None) -> tuple[Guard, ...]:
    """A draft's forecast guards (None: none, as every version had before guards existed)."""
    return tuple(guard_of(guard) for guard in guards or ())
