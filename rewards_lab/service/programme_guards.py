"""A programme's forecast guards, and the override a version is published with.

Guards belong to the draft, like its caps, and are frozen into each version published from it with the days of
history they are checked on (`guard_window_days`). Publishing checks them on the stored events
(`service.programme_forecast`). An override is recorded on the version it was given for and never copied to
the next draft, and in the audit trail (`record_override`), in the same transaction as the publish: who gave it,
for which version, and why. Using one past a failed guard, and removing or loosening guards (`loosens`), take
`rewards.guards.override` (`require_override`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, GuardOverride
from rewards_lab.contract.permissions import Permission
from rewards_lab.contract.scope import Scope
from rewards_lab.domain import settings
from rewards_lab.security import auth_audit
from rewards_lab.store.interfaces import Repositories


def record_override(
    uow: Repositories, scope: Scope, version_id: str, override: GuardOverride, given_by: str, given_at: datetime
) -> None:
    """Record the override on the version and in the audit trail (`guard_overridden`: the actor, the version as
    its subject, the reason given). Past a failed guard it took `rewards.guards.override` (`require_override`)."""
    uow.programmes.record_guard_override(scope, version_id, settings.GuardOverride(override.reason, given_by, given_at))
    auth_audit.add(
        uow,
        auth_audit.AuditEvent(
            "guard_overridden",
            "succeeded",
            scope.organization_id,
            scope.environment,
            reason=override.reason,
            status=201,
            actor_id=given_by,
            subject_id=version_id,
        ),
    )


def require_override(may_override: bool, what: str) -> None:
    """Refuse (403, `permission_denied` naming the permission) a caller that may not override the gate."""
    if not may_override:
        permission = Permission.REWARDS_GUARDS_OVERRIDE.value
        raise ServiceError("permission_denied", f"{what} requires '{permission}'", permission=permission)


def _stricter_or_equal(new: settings.Guard, old: settings.Guard) -> bool:
    """`new` checks the same thing as `old`, at least as strictly."""
    if isinstance(old, settings.IssuedGuard):
        return (
            isinstance(new, settings.IssuedGuard) and new.period == old.period and Decimal(new.max) <= Decimal(old.max)
        )
    if isinstance(old, settings.LiabilityDeltaGuard):
        return isinstance(new, settings.LiabilityDeltaGuard) and Decimal(new.max) <= Decimal(old.max)
    return isinstance(new, settings.CeilingGuard) and new.min >= old.min


def loosens(
    old: Sequence[settings.Guard], old_days: int | None, new: Sequence[settings.Guard], new_days: int | None
) -> bool:
    """True when the new guards let through something the old ones refused: a guard removed (none as strict
    left for it: an issued max raised, a liability max raised, a ceiling min lowered) or the window shortened."""
    if (new_days or DEFAULT_GUARD_WINDOW_DAYS) < (old_days or DEFAULT_GUARD_WINDOW_DAYS) and old:
        return True
    return any(not any(_stricter_or_equal(guard, before) for guard in new) for before in old)
