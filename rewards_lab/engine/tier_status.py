"""A customer's tier as a reader sees it (issue 33, T5): `GET /customers/{id}/tier` and simulation.

Read outside any batch: the stored state (`customer_tiers`) with the reviews and grace ends due by `at` applied, as
the next event of the customer would find it (`domain.tiers.apply_due`, on a copy: nothing is written; the event
worker or the tier worker records them), and the metric per local day (`tier_days`). A customer the programme has
not met is at the base, enrolled (for its windows) on the day of `at`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from rewards_lab.contract.scope import Scope
from rewards_lab.domain.settings import Tiers
from rewards_lab.domain.tiers import (
    TierModel,
    TierState,
    apply_due,
    enrol,
    local_day,
    review_window,
    tier_model,
    upgrade_window,
)
from rewards_lab.engine.postings import asset_row
from rewards_lab.engine.tier_book import metric_key_of, state_of
from rewards_lab.store.interfaces import Repositories, VersionRow
from rewards_lab.store.tiers import TierStateRow


@dataclass(frozen=True, slots=True)
class TierReading:
    """One customer's tier in one programme at `at`: the state (due reviews applied) and the metric's days."""

    program_id: str
    version: VersionRow
    tiers: Tiers
    model: TierModel
    state: TierState
    stored: TierStateRow | None
    days: dict[date, int]
    at: datetime

    def metric(self, first: date, last: date) -> int:
        return sum(amount for day, amount in self.days.items() if first <= day <= last)

    @property
    def upgrade_window(self) -> tuple[date, date]:
        """The days an event now would qualify over (a lifetime window starts at `date.min`)."""
        return upgrade_window(self.model, local_day(self.at, self.model.timezone), self.state.enrolled)

    @property
    def progress(self) -> int:
        """The upgrade window's metric (what `customer.tier_progress` reads), in the metric's minor units."""
        return self.metric(*self.upgrade_window)

    @property
    def keep_window(self) -> tuple[date, date] | None:
        """The days whose metric decides whether the current level is kept: the next review's window (in grace:
        the upgrade window, which retention is judged on); None at the base or without reviews."""
        if self.state.in_grace:
            return self.upgrade_window
        if self.state.rank == 1 or self.state.review_at is None:
            return None
        day = local_day(self.state.review_at, self.model.timezone)
        return review_window(self.model, day, self.state.enrolled)


def model_of(uow: Repositories, scope: Scope, version: VersionRow, tiers: Tiers, asset_id: str) -> TierModel:
    return tier_model(tiers, int(asset_row(uow, scope, asset_id).decimals), version.timezone)


def read_tier(
    uow: Repositories, scope: Scope, version: VersionRow, asset_id: str, customer_id: str, at: datetime
) -> TierReading:
    """The customer's tier in the programme of `version` (which has tiers) at the naive UTC instant `at`."""
    tiers = version.tiers
    assert tiers is not None
    model = model_of(uow, scope, version, tiers, asset_id)
    program_id = version.program_id
    stored = uow.tiers.load(scope, program_id, [customer_id]).get(customer_id)
    days = uow.tiers.days(scope, program_id, metric_key_of(tiers), [customer_id]).get(customer_id, {})
    state = enrol(model, at) if stored is None else state_of(model, stored)
    reading = TierReading(program_id, version, tiers, model, state, stored, days, at)
    due, _ = apply_due(model, state, at, reading.metric)
    return TierReading(program_id, version, tiers, model, due, stored, days, at)
