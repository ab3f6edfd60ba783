"""The limits on one tenant's programmes, in one place (issue 27): one tenant cannot outgrow the shared server.

A programme version holds at most `MAX_RULES_PER_VERSION` rules and `MAX_VERSION_RULES_BYTES` bytes of rule
definitions (`rule_definition_bytes`; its tiers object counts too, `tiers_definition_bytes`, issue 33). The API
(`POST /reward-rules`, `PATCH /reward-rules/{id}`, publish) and programme files check the same two limits with
`check_version_rules`, refused with `programme_limit_exceeded` whose details name the limit, its value and the
field. A simulation's explanation echoes every condition's threshold and the value it read, so it has bounds of its
own, `MAX_SIMULATION_RESPONSE_BYTES` and `MAX_SIMULATION_SECONDS` (`simulation_too_large`, `check_simulation`).
docs/rules.md ("Limits") lists them.
"""

from __future__ import annotations

from typing import Any

from rewards_lab.contract import jsonutil
from rewards_lab.contract.errors import ServiceError

MAX_RULES_PER_VERSION = 200  # what programme files always allowed
MAX_VERSION_RULES_BYTES = 1_048_576  # the rules' definitions together: as much as one request body
MAX_SIMULATION_RESPONSE_BYTES = 4_194_304  # an explanation's estimated JSON size
MAX_SIMULATION_SECONDS = 5.0  # evaluating and explaining one event


def rule_definition_bytes(event_type: str, conditions: Any, actions: Any, limits: Any) -> int:
    """The size a rule counts against MAX_VERSION_RULES_BYTES: its event type, conditions, actions and caps as
    canonical JSON (UTF-8 bytes), leaving out what a programme file cannot hold (an action's `asset_id`) and
    fields set to null, so that a rule measures the same in a file, in a request and as stored."""
    plain = [{k: v for k, v in action.items() if k != "asset_id" and v is not None} for action in actions]
    definition = {"event_type": event_type, "conditions": conditions, "actions": plain, "limits": limits or []}
    return len(jsonutil.canonical_text(definition).encode())


def tiers_definition_bytes(tiers: Any) -> int:
    """What a version's tiers object (its JSON form) counts against MAX_VERSION_RULES_BYTES, beside its rules'
    definitions: its canonical JSON in UTF-8 bytes (0 without tiers)."""
    return 0 if tiers is None else len(jsonutil.canonical_text(tiers).encode())


def check_version_rules(count: int, total_bytes: int, field: str = "rules") -> None:
    """Refuse a version whose rules would be more than MAX_RULES_PER_VERSION or MAX_VERSION_RULES_BYTES."""
    if count > MAX_RULES_PER_VERSION:
        raise ServiceError(
            "programme_limit_exceeded",
            f"a programme version holds at most {MAX_RULES_PER_VERSION} rules (this one would hold {count})",
            limit="rules_per_version",
            value=MAX_RULES_PER_VERSION,
            actual=count,
            field=field,
        )
    if total_bytes > MAX_VERSION_RULES_BYTES:
        raise ServiceError(
            "programme_limit_exceeded",
            f"a programme version's rules hold at most {MAX_VERSION_RULES_BYTES} bytes of definitions "
            f"(these would hold {total_bytes})",
            limit="version_rules_bytes",
            value=MAX_VERSION_RULES_BYTES,
            actual=total_bytes,
            field=field,
        )


def check_simulation(estimated_bytes: int, elapsed_s: float) -> None:
    """Refuse a simulation whose explanation grew past MAX_SIMULATION_RESPONSE_BYTES or took longer than
    MAX_SIMULATION_SECONDS (checked as it is built, so a refusal stops the work early)."""
    if estimated_bytes > MAX_SIMULATION_RESPONSE_BYTES:
        raise ServiceError(
            "simulation_too_large",
            f"the explanation would exceed {MAX_SIMULATION_RESPONSE_BYTES} bytes; simulate one rule, or an event "
            "with shorter values",
            limit="simulation_response_bytes",
            value=MAX_SIMULATION_RESPONSE_BYTES,
            field="event",
        )
    if elapsed_s > MAX_SIMULATION_SECONDS:
        raise ServiceError(
            "simulation_too_large",
            f"the simulation took longer than {MAX_SIMULATION_SECONDS} s; simulate one rule",
            limit="simulation_seconds",
            value=MAX_SIMULATION_SECONDS,
            field="event",
        )
