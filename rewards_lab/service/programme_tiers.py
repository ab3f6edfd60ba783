"""A draft's tiers (issue 33, T2): stored and versioned with the programme, measured against the version's size
limit, and what /v1 refuses until the live engine applies them.

Tiers are frozen per version like guards (`programme_versions.tiers`). Until the live engine keeps tier state and
multiplies (T3), a programme may hold tiers, but no rule on /v1 may use them: such a rule would be stored and then
run unmultiplied, or never match. Removing tiers from a draft whose rules use them is refused too (such rules come
only from the store, e.g. a version written before this refusal was lifted, but the draft must stay consistent).
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


def refuse_tier_rules(
    conditions: Sequence[Any], actions: Sequence[Any], stop_processing: bool, *, has_tiers: bool
) -> None:
    """A rule that uses tiers: refused without them (naming the element, `contract.tier_requests`), and refused
    with them too until the live engine applies tiers (issue 33, T3), naming the first use."""
    tq.check_rule_tiers(conditions, actions, stop_processing, has_tiers=has_tiers)
    for where, what in tq.rule_tier_uses(conditions, actions):
        message = f"the rule {what}; tiers are stored but not yet applied to rewards, so no rule may use them yet"
        raise ServiceError("field_invalid", message, field=where)


def check_tiers_removable(uow: Repositories, scope: Scope, draft_id: str) -> None:
    """Removing a draft's tiers is refused while one of its rules uses them (`field_invalid` on `tiers`, the rule
    and the element named in the details)."""
    for row in uow.programmes.rules_of(scope, [draft_id]):
        rule = presenters.rule(row)
        for where, what in tq.rule_tier_uses(rule.conditions, rule.actions):
            message = f"rule {rule.id} {what} ({where}): remove that use before the tiers"
            raise ServiceError("field_invalid", message, field="tiers", rule_id=rule.id, rule_field=where)
