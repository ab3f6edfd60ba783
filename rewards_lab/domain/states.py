"""State machines: which transitions each resource allows. Anything else is `invalid_state_transition`."""

from __future__ import annotations

from rewards_lab.contract.errors import ServiceError

ASSET_TRANSITIONS: dict[str, dict[str, str]] = {
    "activate": {"configured": "active"},
    "pause": {"active": "paused"},
    "resume": {"paused": "active"},
}
WALLET_TRANSITIONS: dict[str, dict[str, str]] = {
    "freeze": {"active": "frozen"},
    "unfreeze": {"frozen": "active"},
}
# As the asset's moves: repeating a move (deactivating an inactive programme) is a refused transition.
PROGRAMME_TRANSITIONS: dict[str, dict[str, str]] = {
    "deactivate": {"active": "inactive"},
    "activate": {"inactive": "active"},
}


def next_state(resource: str, transitions: dict[str, dict[str, str]], action: str, current: str) -> str:
    allowed = transitions[action]
    if current not in allowed:
        raise ServiceError(
            "invalid_state_transition",
            f"cannot {action} a {resource} that is {current}",
            resource=resource,
            action=action,
            state=current,
            allowed_from=sorted(allowed),
        )
    return allowed[current]


def asset_transition(action: str, current: str) -> str:
    return next_state("asset", ASSET_TRANSITIONS, action, current)


def wallet_transition(action: str, current: str) -> str:
    return next_state("wallet", WALLET_TRANSITIONS, action, current)


def programme_transition(action: str, current: str) -> str:
    return next_state("programme", PROGRAMME_TRANSITIONS, action, current)
