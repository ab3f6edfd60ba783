"""Tiers in a simulation (issue 33, T5; reports/i33-tiers-plan.md section 4.6). Writes nothing.

When the simulated version has tiers, the event's customer holds a tier: the one the request names (`tier`: as if
the customer held that level, its progress at the level's entry), else the named customer's tier at the event's
time (`engine.tier_status`: stored state, reviews due by then applied), else the base. Its conditions read it
(`customer.tier`, `.tier_rank`, `.tier_progress`), and actions that multiply by tier use each recipient's
multiplier (a beneficiary's own tier; a reference naming nobody multiplies by 1, as the worker). The response's
`tier` block says what the event would add to the metric (points: what it would issue to the event's customer in
the programme's asset; `sum`/`count`: the event's own count) and where that leaves the customer. Reversals are not
counted there (the worker counts them on the original's day).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.conditions import TierFacts
from rewards_lab.domain.money import format_amount, to_decimal
from rewards_lab.domain.settings import Tiers
from rewards_lab.domain.tiers import ONE, TierModel, qualified_rank
from rewards_lab.engine.tier_book import event_metric_amount
from rewards_lab.engine.tier_status import model_of, read_tier
from rewards_lab.store.interfaces import Repositories, VersionRow


@dataclass(frozen=True, slots=True)
class SimulatedTier:
    """The event's customer's tier in the simulated version's programme, and how recipients are multiplied."""

    tiers: Tiers
    model: TierModel
    rank: int
    progress: int  # minor units of the metric
    asset_id: str
    beneficiaries: dict[str, Decimal]  # reference -> multiplier, read when first asked

    @property
    def facts(self) -> TierFacts:
        return TierFacts(self.model.level(self.rank).code, self.rank, to_decimal(self.progress, self.model.decimals))


def simulated_tier(
    uow: Repositories,
    scope: Scope,
    version: VersionRow,
    asset_id: str,
    level: str | None,
    customer_id: str | None,
    at: datetime,
) -> SimulatedTier | None:
    """The event's customer's tier (None: the version has no tiers; a named level it lacks is `field_invalid`)."""
    tiers = version.tiers
    if tiers is None:
        if level is not None:
            raise ServiceError("field_invalid", "tier needs a version with tiers", field="tier")
        return None
    model = model_of(uow, scope, version, tiers, asset_id)
    if level is not None:
        ranks = {lv.code: lv.rank for lv in model.levels}
        if level not in ranks:
            raise ServiceError(
                "field_invalid", f"tier must be one of {', '.join(ranks)}", field="tier", allowed=list(ranks)
            )
        rank = ranks[level]
        return SimulatedTier(tiers, model, rank, model.level(rank).entry, asset_id, {})
    if customer_id is None:
        return SimulatedTier(tiers, model, 1, 0, asset_id, {})
    reading = read_tier(uow, scope, version, asset_id, customer_id, _naive(at))
    return SimulatedTier(tiers, model, reading.state.rank, reading.progress, asset_id, {})


def multipliers_of(uow: Repositories, scope: Scope, version: VersionRow, tier: SimulatedTier, at: datetime) -> Any:
    """recipient -> multiplier: None is the event's customer (its simulated tier), else a beneficiary's reference
    (its own tier at `at`, read once)."""

    def of(recipient: Any) -> Decimal:
        if recipient is None:
            return tier.model.multiplier(tier.rank)
        reference = str(recipient)
        if reference not in tier.beneficiaries:
            row = uow.customers.resolve_many(scope, [reference]).get(reference)
            if row is None:
                tier.beneficiaries[reference] = ONE
            else:
                reading = read_tier(uow, scope, version, tier.asset_id, row.id, _naive(at))
                tier.beneficiaries[reference] = tier.model.multiplier(reading.state.rank)
        return tier.beneficiaries[reference]

    return of


def tier_block(
    tier: SimulatedTier, simulation: r.Simulation, event_type: str, data: dict[str, Any], at: datetime
) -> r.SimulationTier:
    """The response's `tier`: the tier at entry, what the event adds to the metric, the progress and tier after."""
    model = tier.model
    if tier.tiers.metric_type == "points":
        added = sum(
            int(Decimal(action.amount).scaleb(model.decimals))
            for rule in simulation.rules
            if rule.matched
            for action in rule.actions
            if action.issues
            and action.beneficiary is None
            and action.reversal is None
            and action.error_code is None
            and action.asset_id == tier.asset_id
        )
    else:
        added = event_metric_amount(tier.tiers.metric, event_type, data, at, model.timezone)
    after = tier.progress + added
    rank_after = max(tier.rank, qualified_rank(model, after)) if added > 0 else tier.rank
    return r.SimulationTier(
        code=model.level(tier.rank).code,
        rank=tier.rank,
        progress=format_amount(tier.progress, model.decimals),
        multiplier=str(model.multiplier(tier.rank)),
        contributes=format_amount(added, model.decimals),
        after=r.SimulationTierAfter(progress=format_amount(after, model.decimals), tier=model.level(rank_after).code),
    )


def _naive(at: datetime) -> datetime:
    """A naive UTC instant (how `domain.tiers` keeps them)."""
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo is not None else at
