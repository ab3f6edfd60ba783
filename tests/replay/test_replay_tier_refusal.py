"""Until the replay computes tiers (issue 33, T6), a rule that reads a tier or multiplies by one is refused by the
replay, naming the element, on every path (both engines compile through `compile_programme`): replaying it would
read every customer as having no tier, a silently wrong forecast. A programme whose tiers no rule uses replays
exactly as without them."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import parse_programme
from rewards_lab.replay.compiler import refuse_tier_rules
from rewards_lab.replay.engine import replay
from tests.contract.test_tier_requests import tiered

EVENTS = pd.DataFrame(
    {
        "type": ["order.completed"] * 3,
        "customer_id": ["c1", "c2", "c1"],
        "occurred_at": [datetime(2026, 3, day, 12, tzinfo=UTC) for day in (2, 7, 8)],
        "external_event_id": ["e1", "e2", "e3"],
        "amount": [30, 12, 50],
    }
)


def _without(data: dict[str, Any], *rules: int) -> dict[str, Any]:
    kept = copy.deepcopy(data)
    kept["rules"] = [rule for index, rule in enumerate(kept["rules"]) if index not in rules]
    return kept


@pytest.mark.parametrize(
    ("drop", "field"),
    [((), "rules[0].actions[0].multiply"), ((0,), "rules[0].conditions[0]")],
    ids=["multiply", "tier condition"],
)
def test_a_rule_using_tiers_is_refused_by_the_replay_naming_it(drop: tuple[int, ...], field: str) -> None:
    definition = parse_programme(_without(tiered(), *drop))
    with pytest.raises(ServiceError) as caught:
        replay(EVENTS, definition)
    assert caught.value.code == "field_invalid"
    assert str(caught.value.details["field"]).startswith(field), caught.value.details
    assert "replay does not compute tiers yet" in caught.value.message


def test_tiers_no_rule_uses_replay_as_the_same_programme_without_them() -> None:
    data = _without(tiered(), 1)
    del data["rules"][0]["actions"][0]["multiply"]
    with_tiers = parse_programme(data)
    refuse_tier_rules(with_tiers)  # nothing refused
    plain = copy.deepcopy(data)
    del plain["programme"]["tiers"]
    expected = replay(EVENTS, parse_programme(plain)).totals()
    assert replay(EVENTS, with_tiers).totals() == expected
    assert expected["issued"] == 92
