"""The rows an engine cannot read exactly in SQL, evaluated by the live engine's own rule evaluation.

Both engines use it: DuckDB on the driver for the few exotic rows, Spark inside `mapInArrow` on the executors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.replay.compiler import TOO_LARGE


def slot_amounts(
    specs: Sequence[RuleSpec], first_slot: Sequence[int], events: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[list[tuple[int, int]]]:
    """Per event (type, data): (slot, m) of every action that issues something or is refused as too large
    (m = TOO_LARGE), in processing order."""
    result = []
    for matches in evaluate(specs, events):
        amounts = []
        for verdict in matches:
            for action in verdict.actions:
                if not action.issues and action.error_code is None:
                    continue
                slot = first_slot[int(verdict.rule_id)] + action.action_index
                amounts.append((slot, TOO_LARGE if action.error_code is not None else action.amount_minor))
        result.append(amounts)
    return result
