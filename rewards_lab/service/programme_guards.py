"""A programme's forecast guards, and the override a version is published with.

Guards belong to the draft, like its caps, and are frozen into each version published from it; the service
only keeps and shows them (the gate, `rewards_lab.forecasting.gate`, replays a history to evaluate them). An override
is recorded on the version it was given for and never copied to the next draft, and in the audit trail
(`record_override`), in the same transaction as the publish: who gave it, for which version, and why.
"""

from __future__ import annotations

from datetime import datetime

from rewards_lab.contract.guard_requests import GuardOverride
from rewards_lab.contract.scope import Scope
from rewards_lab.domain import settings
from rewards_lab.security import auth_audit
from rewards_lab.store.interfaces import Repositories


def record_override(
    uow: Repositories, scope: Scope, version_id: str, override: GuardOverride, given_by: str, given_at: datetime
) -> None:
    """Record the override on the version and in the audit trail (`guard_overridden`: the actor, the version as
    its subject, the reason given). Overriding has no permission of its own yet (publishing needs
    `rewards.activate`), so the audit is what tells an operator who published past a failed guard."""
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
