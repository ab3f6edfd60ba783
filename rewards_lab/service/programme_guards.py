"""A programme's forecast guards as stored, and the override a version is published with.

Guards belong to the draft, like its caps, and are frozen into each version published from it; the service
only keeps and shows them (the gate, `rewards_lab.lab.gate`, replays a history to evaluate them). An override
is recorded on the version it was given for and never copied to the next draft.
"""

from __future__ import annotations

from datetime import datetime

from rewards_lab.contract import jsonutil
from rewards_lab.contract.guard_requests import Guard, GuardOverride


def stored_guards(guards: list[Guard] | None) -> str | None:
    """The stored form (JSON list); None when there are none, as every version had before guards existed."""
    if not guards:
        return None
    return jsonutil.dumps([guard.model_dump(mode="json") for guard in guards])


def stored_override(override: GuardOverride, given_by: str, given_at: datetime) -> str:
    return jsonutil.dumps({"reason": override.reason, "given_by": given_by, "given_at": given_at.isoformat()})
