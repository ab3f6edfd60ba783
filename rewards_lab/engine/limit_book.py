"""Caps and budgets in the event worker: the counters a batch needs, decided in processing order and saved in
the batch's transaction (`domain.limits` holds what a cap means)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rewards_lab.contract.scope import Scope
from rewards_lab.domain.limits import Allowance, CapCheck, Grant
from rewards_lab.store.interfaces import Repositories, Usage, UsageKey


class LimitBook:
    """The batch's `Allowance`, loaded from the store for the counters it will check, saved back once."""

    def __init__(self, uow: Repositories, scope: Scope, keys: Iterable[Sequence[str]]) -> None:
        self.uow, self.scope = uow, scope
        wanted = sorted({UsageKey(*key) for key in keys})
        loaded = uow.limit_usage.load(scope, wanted) if wanted else {}
        self.allowance = Allowance(
            {
                (k.program_id, k.counter, k.customer_id, k.period_start): (v.amount_minor, v.rewards)
                for k, v in loaded.items()
            }
        )

    def grant(self, requested_minor: int, checks: Sequence[CapCheck]) -> Grant:
        return self.allowance.grant(requested_minor, checks)

    def refused(self, grant: Grant) -> Grant:
        return self.allowance.refused(grant)

    def give_back(self, keys: Iterable[Sequence[str]], amount_minor: int, *, whole: bool) -> None:
        self.allowance.give_back(keys, amount_minor, whole=whole)

    def save(self) -> None:
        changed: dict[UsageKey, Usage] = {}
        for key in self.allowance.changed:
            amount, count = self.allowance.used(key)
            changed[UsageKey(*key)] = Usage(amount, count)
        self.uow.limit_usage.save(self.scope, changed)
