"""A programme's caps, budget and clawback as a replay checks them (`domain.limits` holds what they mean).

A reward is checked against its rule's caps (in their order), then its programme's, then the budget; each check
is a bit of the reward's `mask` (bit i: the rule's i-th cap, bit 5 + i: the programme's i-th cap, bit 10: the
budget), set when that check's counter can bind. A counter (a cap's key: customer and period start, or the period
start alone for the budget) can bind only when the rewards it counts ask for more than its `max_amount` or are
more than its `max_count`: usage never exceeds what was asked, so any other counter lets every reward through
whole. Rewards with no bit set keep the amount their rule computed (set-based SQL); the others go through the
sequential pass (`replay.sequential`), which checks only the bits that are set: a counter that cannot bind never
cuts, never skips and is never the cap a cut names, so leaving it out changes nothing.

A `Grouping` is one family of counters (a rule's caps of one period, the programme's of one period, the budget):
the replay aggregates the candidate rewards per grouping and key to find the keys that can bind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rewards_lab.contract.limit_requests import MAX_LIMITS
from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.domain.limits import PERIODS, Cap, Scope, budget_of, caps_of, check_rank, per_customer
from rewards_lab.domain.rules import RuleSpec

PROGRAMME_ID = "programme"  # the counters' programme (one programme per replay)
PROGRAMME_BIT = MAX_LIMITS  # bit of the programme's first cap
BUDGET_BIT = 2 * MAX_LIMITS  # bit of the budget


@dataclass(frozen=True)
class Grouping:
    """One family of counters: rewards of `rule_index` (None: of every rule) grouped by (customer, period start),
    or by period start alone for the budget; `caps` share its counters, `bits` are their checks' bits."""

    name: str
    scope: Scope
    rule_index: int | None
    period: str
    caps: tuple[Cap, ...]
    bits: int

    @property
    def per_customer(self) -> bool:
        return per_customer(self.scope)


@dataclass(frozen=True)
class LimitsPlan:
    """The caps of every rule (by rule index), the programme's caps and budget, and the clawback policy."""

    rule_caps: dict[int, tuple[Cap, ...]]
    programme_caps: tuple[Cap, ...]
    budget: tuple[Cap, ...]
    clawback: str

    @property
    def capped(self) -> bool:
        """Whether any reward is checked against a cap or a budget."""
        return bool(self.programme_caps or self.budget or any(self.rule_caps.values()))

    @property
    def periods(self) -> list[str]:
        """The periods some cap or the budget counts in, in PERIODS order."""
        used = {cap.period for caps in self.rule_caps.values() for cap in caps}
        used |= {cap.period for cap in (*self.programme_caps, *self.budget)}
        return [period for period in PERIODS if period in used]

    def checks(self, rule_index: int) -> list[tuple[int, Cap]]:
        """(bit, cap) of every check a reward of the rule goes through, in the domain's order (`check_rank`)."""
        found = [(1 << i, cap) for i, cap in enumerate(self.rule_caps.get(rule_index, ()))]
        found += [(1 << (PROGRAMME_BIT + i), cap) for i, cap in enumerate(self.programme_caps)]
        found += [(1 << BUDGET_BIT, cap) for cap in self.budget]
        return sorted(found, key=lambda check: check_rank(check[1]))

    def groupings(self) -> list[Grouping]:
        found: list[Grouping] = []
        for rule_index, caps in sorted(self.rule_caps.items()):
            found += _grouped(f"r{rule_index}", "rule", rule_index, caps, 0)
        found += _grouped("p", "programme", None, self.programme_caps, PROGRAMME_BIT)
        found += _grouped("b", "budget", None, self.budget, BUDGET_BIT)
        return found


def _grouped(prefix: str, scope: Scope, rule_index: int | None, caps: tuple[Cap, ...], first: int) -> list[Grouping]:
    by_period: dict[str, list[int]] = {}
    for i, cap in enumerate(caps):
        by_period.setdefault(cap.period, []).append(i)
    return [
        Grouping(
            f"{prefix}_{period}",
            scope,
            rule_index,
            period,
            tuple(caps[i] for i in indices),
            sum(1 << (first + i) for i in indices),
        )
        for period, indices in by_period.items()
    ]


def limits_plan(definition: ProgrammeDefinition, specs: list[RuleSpec]) -> LimitsPlan:
    info, decimals = definition.programme, definition.asset.decimals
    programme_caps = caps_of([_stored(limit) for limit in info.limits], "programme", decimals)
    budget = budget_of(_stored(info.budget) if info.budget is not None else None, decimals)
    rule_caps = {int(spec.rule_id): spec.limits for spec in specs if spec.limits}
    return LimitsPlan(rule_caps, programme_caps, budget, info.clawback)


def _stored(model: Any) -> dict[str, Any]:
    stored: dict[str, Any] = model.model_dump(mode="json")
    return stored


def has_features(definition: ProgrammeDefinition) -> bool:
    """Whether a programme has caps, a budget or reverse actions (else a replay runs exactly as before them)."""
    info = definition.programme
    if info.limits or info.budget is not None:
        return True
    return any(rule.limits or any(a.type == "reverse" for a in rule.actions) for rule in definition.rules)
