"""The limit-usage repository as the services see it: what a programme has given per counter, customer and
period (caps and budgets, issue 18)."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from rewards_lab.contract.scope import Scope


class UsageKey(NamedTuple):
    """One counter: a programme's cap of a rule ("rule:<id>:<period>"), of the programme ("programme:<period>")
    or its budget ("budget:<period>"), for one customer ('' for a budget) and one period (its first day)."""

    program_id: str
    counter: str
    customer_id: str
    period_start: str


class Usage(NamedTuple):
    """What a counter holds: the amount given (minor units, net of reversals) and the number of rewards."""

    amount_minor: int
    rewards: int


class LimitUsageStore(Protocol):
    """What the services need of the usage counters (DuckDB: store.limit_usage.LimitUsageRepository)."""

    def load(self, scope: Scope, keys: list[UsageKey]) -> dict[UsageKey, Usage]: ...

    def save(self, scope: Scope, values: dict[UsageKey, Usage]) -> None: ...

    def periods(self, scope: Scope, program_id: str, counter: str, limit: int) -> list[tuple[str, Usage]]: ...
