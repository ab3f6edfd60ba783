"""Caps and budgets: how much of a reward its programme's limits still allow (pure; no I/O).

A cap (`limits` of a rule or of a programme) bounds what one customer, the reward's recipient, receives in a
calendar period of the programme's timezone; a budget bounds what the programme gives in a period across all
customers. Each is a counter per (programme, counter, customer, period start) holding the amount given and the
number of rewards, net of reversals. A reward is checked, in processing order, against its rule's caps (in their
order), then its programme's caps, then the budget:

- an amount cap (`max_amount`) lets through at most what remains of it; the reward is cut to the smallest
  remainder (amounts are whole minor units, so what remains is already rounded down to the asset's decimals);
- a count cap (`max_count`) that is reached lets nothing through (the reward is skipped);
- what is let through counts in every counter checked (once per counter, when a rule's amount and count caps share
  a period); a reward the ledger then refuses (a frozen wallet, the supply ceiling) gives it straight back
  (`give_back(..., whole=True)`), so it counts nowhere, before the next reward is decided;
- a reward cut to nothing counts nowhere.

A reversal gives back to the counters its original counted in what the wallet actually gave (not its target: points
spent before the refund stay counted), and the reward itself once all of it has been taken back, over all its
reversals (issue 27). `Allowance` is the running state a batch (or a replay) decides against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, NamedTuple, cast, get_args
from zoneinfo import ZoneInfo

from rewards_lab.contract.limit_requests import Period
from rewards_lab.domain.formulas import W, remainder
from rewards_lab.domain.money import parse_amount

Scope = Literal["rule", "programme", "budget"]
CounterKey = tuple[str, str, str, str]  # (programme, counter, customer ('' for a budget), period start ISO date)
PERIODS: tuple[str, ...] = get_args(Period)  # the periods a cap or budget counts in, shortest first
LIFETIME_START = date(1970, 1, 1)  # the one period of `lifetime`; day numbers (`day_number`) count from it
# Day number 0 is a Thursday: (n + EPOCH_WEEKDAY) % 7 is day n's weekday (Monday 0), which the replay's SQL reads.
EPOCH_WEEKDAY = LIFETIME_START.weekday()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def per_customer(scope: Scope) -> bool:
    """Whether counters of a scope are one per customer (a cap), or one for the whole programme (a budget)."""
    return scope != "budget"


@dataclass(frozen=True, slots=True)
class Cap:
    """One cap or budget as the engine checks it (amounts in the programme asset's minor units)."""

    scope: Scope
    period: str
    max_amount_minor: int | None = None
    max_count: int | None = None

    @property
    def per_customer(self) -> bool:
        return per_customer(self.scope)

    def counter(self, rule_id: str) -> str:
        return f"rule:{rule_id}:{self.period}" if self.scope == "rule" else f"{self.scope}:{self.period}"

    def key(self, program_id: str, rule_id: str, customer_id: str, start: date) -> CounterKey:
        holder = customer_id if self.per_customer else ""
        return (program_id, self.counter(rule_id), holder, start.isoformat())


class CapCut(NamedTuple):
    """What cut a reward, and by how much (minor units)."""

    scope: Scope
    period: str
    period_start: date
    max_amount_minor: int | None
    max_count: int | None
    cut_minor: int


class Grant(NamedTuple):
    """What a reward may give (minor units), the cap that cut it (None: nothing did) and the counters it counted
    in (empty when it gives nothing)."""

    amount_minor: int
    cut: CapCut | None
    keys: tuple[CounterKey, ...]


@dataclass(frozen=True, slots=True)
class Limit:
    """A cap as a programme or rule declares it (per customer, per calendar period): `max_amount` (a decimal
    string of the programme's asset, as given) or `max_count`. `cap` makes it a Cap once the decimals are known."""

    period: str
    max_amount: str | None = None
    max_count: int | None = None

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Limit:
        """A cap from its JSON form (`{"per": "customer", "period": ..., "max_amount" | "max_count": ...}`)."""
        amount, count = stored.get("max_amount"), stored.get("max_count")
        return cls(
            str(stored["period"]), None if amount is None else str(amount), None if count is None else int(count)
        )

    def as_json(self) -> dict[str, Any]:
        """The JSON form a request carries and the store keeps (`of` reads it back)."""
        if self.max_amount is not None:
            return {"per": "customer", "period": self.period, "max_amount": self.max_amount}
        return {"per": "customer", "period": self.period, "max_count": self.max_count}

    def cap(self, scope: Scope, decimals: int, field: str = "limits[0]") -> Cap:
        """As the engine checks it: the amount in minor units of an asset of `decimals` (ServiceError when the
        amount does not fit them; `field` names it)."""
        minor = None if self.max_amount is None else parse_amount(self.max_amount, decimals, f"{field}.max_amount")
        return Cap(scope, self.period, minor, self.max_count)


@dataclass(frozen=True, slots=True)
class Budget:
    """What a programme may issue in a calendar period across all customers (a decimal string, as given)."""

    period: str
    max_amount: str

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> Budget:
        return cls(str(stored["period"]), str(stored["max_amount"]))

    def as_json(self) -> dict[str, Any]:
        return {"period": self.period, "max_amount": self.max_amount}

    def cap(self, decimals: int) -> Cap:
        return Cap("budget", self.period, parse_amount(self.max_amount, decimals, "budget"))


def limit_caps(limits: Sequence[Limit], scope: Scope, decimals: int, field: str = "limits") -> tuple[Cap, ...]:
    """Declared caps as Caps; amounts in minor units of the programme's asset."""
    return tuple(limit.cap(scope, decimals, f"{field}[{index}]") for index, limit in enumerate(limits))


def caps_of(stored: Sequence[Mapping[str, Any]], scope: Scope, decimals: int, field: str = "limits") -> tuple[Cap, ...]:
    """Caps in their JSON form as Caps (the replay reads its programme file's caps so)."""
    return limit_caps([Limit.of(item) for item in stored], scope, decimals, field)


def budget_of(stored: Mapping[str, Any] | None, decimals: int) -> tuple[Cap, ...]:
    return () if not stored else (Budget.of(stored).cap(decimals),)


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def day_number(day: date) -> int:
    """Days since LIFETIME_START (negative before it): how the replay carries a period's first day."""
    return (day - LIFETIME_START).days


def day_of(number: int) -> date:
    """The date of a day number."""
    return LIFETIME_START + timedelta(days=number)


def week_start(number: W) -> W:
    """The day number of the Monday opening the ISO week that holds day `number` (a formula: the replay renders
    it over its columns, `domain.formulas`)."""
    return cast(W, number - remainder(number + EPOCH_WEEKDAY, 7))


def period_start(period: str, at_us: int, timezone: str) -> date:
    """The first day of the calendar period holding an instant (epoch microseconds), in a timezone: weeks start on
    Monday (ISO); `lifetime` is one period, 1970-01-01."""
    if period == "lifetime":
        return LIFETIME_START
    day = (_EPOCH + timedelta(microseconds=at_us)).astimezone(_zone(timezone)).date()
    if period == "day":
        return day
    if period == "week":
        return day_of(week_start(day_number(day)))
    if period == "month":
        return day.replace(day=1)
    if period == "year":
        return day.replace(month=1, day=1)
    raise ValueError(f"unknown period {period!r}")


@dataclass(frozen=True, slots=True)
class CapCheck:
    """A cap to check for one reward, and its counter."""

    cap: Cap
    key: CounterKey
    start: date


CHECK_ORDER: tuple[Scope, ...] = ("rule", "programme", "budget")


def check_rank(cap: Cap) -> int:
    """Where a cap comes among one reward's checks: its rule's caps, then its programme's, then the budget (each in
    declared order). The order decides which cap a cut names when several bind; the worker, simulation and both
    replays sort by it."""
    return CHECK_ORDER.index(cap.scope)


def checks_for(
    program_id: str,
    rule_id: str,
    customer_id: str,
    at_us: int,
    timezone: str,
    rule_caps: Iterable[Cap],
    programme_caps: Iterable[Cap],
) -> list[CapCheck]:
    """The caps one reward is checked against, in `check_rank` order, each with its counter."""
    checks = []
    for cap in sorted((*rule_caps, *programme_caps), key=check_rank):
        start = period_start(cap.period, at_us, timezone)
        checks.append(CapCheck(cap, cap.key(program_id, rule_id, customer_id, start), start))
    return checks


class Allowance:
    """The counters a batch touches, as they run: `grant` decides a reward and counts it, `give_back` returns
    what a reversal took back."""

    def __init__(self, usage: Mapping[CounterKey, tuple[int, int]] | None = None) -> None:
        self.usage: dict[CounterKey, tuple[int, int]] = {k: (int(v[0]), int(v[1])) for k, v in (usage or {}).items()}
        self.changed: set[CounterKey] = set()

    def used(self, key: CounterKey) -> tuple[int, int]:
        return self.usage.get(key, (0, 0))

    def grant(self, requested_minor: int, checks: Sequence[CapCheck]) -> Grant:
        allowed, binding, reached = requested_minor, None, None
        for check in checks:
            amount, count = self.used(check.key)
            if check.cap.max_count is not None and count >= check.cap.max_count and reached is None:
                reached = check
            if check.cap.max_amount_minor is not None:
                remaining = max(0, check.cap.max_amount_minor - amount)
                if remaining < allowed:
                    allowed, binding = remaining, check
        if reached is not None:
            allowed, binding = 0, reached
        keys = tuple(dict.fromkeys(check.key for check in checks)) if allowed > 0 else ()
        for key in keys:
            amount, count = self.used(key)
            self.usage[key] = (amount + allowed, count + 1)
            self.changed.add(key)
        cut = None
        if binding is not None and allowed < requested_minor:
            cap = binding.cap
            cut = CapCut(
                cap.scope, cap.period, binding.start, cap.max_amount_minor, cap.max_count, requested_minor - allowed
            )
        return Grant(allowed, cut, keys)

    def refused(self, grant: Grant) -> Grant:
        """A granted reward the ledger then refused (a frozen wallet, the supply ceiling) gives its grant straight
        back: it counts nowhere. Returns the grant counting in no counter."""
        self.give_back(grant.keys, grant.amount_minor, whole=True)
        return grant._replace(keys=())

    def give_back(self, keys: Iterable[Sequence[str]], amount_minor: int, *, whole: bool) -> None:
        """A reversal took `amount_minor` back from a reward that counted in `keys` (what the wallet gave; as
        stored: lists are taken as keys; `whole`: all of the reward has now been taken back, so it no longer
        counts either)."""
        for stored in keys:
            key = (stored[0], stored[1], stored[2], stored[3])
            amount, count = self.used(key)
            self.usage[key] = (max(0, amount - amount_minor), max(0, count - (1 if whole else 0)))
            self.changed.add(key)
