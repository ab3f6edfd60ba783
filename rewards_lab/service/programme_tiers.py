"""A draft's tiers (issue 33, T2): stored and versioned with the programme, measured against the version's size
limit, and the rules that may use them.

Tiers are frozen per version like guards (`programme_versions.tiers`). A rule may read `customer.tier*` or multiply
by tier only in a programme with tiers (the live engine applies them since T3). Removing tiers from a draft whose
rules use them is refused, so the draft stays consistent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewards_lab import presenters
from rewards_lab.contract import tier_requests as tq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_limits import tiers_definition_bytes
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.settings import Tiers
from rewards_lab.engine.postings import asset_row
from rewards_lab.store.interfaces import Repositories


def tiers_of(requested: tq.Tiers | None) -> Tiers | None:
    """The domain's tier model of a validated request (None: no tiers)."""
    return None if requested is None else Tiers.of(requested.model_dump(mode="json"))


def checked_tiers(uow: Repositories, scope: Scope, asset_id: str, requested: tq.Tiers | None) -> Tiers | None:
    """The requested tiers as stored; a `points` metric's thresholds must fit the asset's decimals."""
    if requested is not None:
        tq.check_threshold_places(requested, int(asset_row(uow, scope, asset_id).decimals), "tiers")
    return tiers_of(requested)


def tier_bytes(tiers: Tiers | None) -> int:
    """What the tiers count against the version's size limit, as a programme file's tiers count
    (`ProgrammeDefinition`): the canonical JSON of the stored object."""
    return 0 if tiers is None else tiers_definition_bytes(tiers.as_json())


def check_tier_rules(
    conditions: Sequence[Any], actions: Sequence[Any], stop_processing: bool, *, has_tiers: bool
) -> None:
    """A rule that uses tiers (reads `customer.tier*` or multiplies) needs the programme to have tiers; a
    `customer.tier_progress` condition must be a top-level one of a rule without `stop_processing`
    (`contract.tier_requests.check_rule_tiers`, naming the element). The live engine applies them (issue 33, T3)."""
    tq.check_rule_tiers(conditions, actions, stop_processing, has_tiers=has_tiers)


def check_tiers_removable(uow: Repositories, scope: Scope, draft_id: str) -> None:
    """Removing a draft's tiers is refused while one of its rules uses them (`field_invalid` on `tiers`, the rule
    and the element named in the details)."""
    for row in uow.programmes.rules_of(scope, [draft_id]):
        rule = presenters.rule(row)
        for where, what in tq.rule_tier_uses(rule.conditions, rule.actions):
            message = f"rule {rule.id} {what} ({where}): remove that use before the tiers"
            raise ServiceError("field_invalid", message, field="tiers", rule_id=rule.id, rule_field=where)
