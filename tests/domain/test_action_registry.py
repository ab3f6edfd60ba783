"""The action registry (domain/actions.py): one entry per action type, and its pieces agree with each other: the
contract's model takes the stored action, `matches` finds its entry, `build` makes the spec whose entry it is, its
outcome and reason, its SQL form, its description in the lab, the rule builder's label and push verification's
probes (fields the action reads)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from rewards_lab.domain.actions import ACTIONS, ActionKind, action_kind
from rewards_lab.lab.widgets import ACTION_KINDS

STORED: dict[str, list[dict[str, Any]]] = {
    "fixed": [
        {"type": "issue", "amount": {"fixed": "2.50"}},
        {"type": "issue", "amount": {"fixed": "10"}, "beneficiary": {"field": "referrer_id"}},
    ],
    "per": [
        {"type": "issue", "amount": {"per": "amount", "rate": Decimal("0.05")}},
        {"type": "issue", "amount": {"per": "amount", "rate": Decimal("1")}, "beneficiary": {"field": "ref"}},
    ],
    "reverse": [
        {"type": "reverse", "original": {"field": "order_id"}},
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": Decimal("0.5")},
        {"type": "reverse", "original": {"field": "order_id"}, "fraction": {"field": "refund", "of": "amount"}},
    ],
}


class _Forms:
    """An AmountSql that says which form an entry picked."""

    def fixed(self, minor: int) -> tuple[str, int]:
        return ("fixed", minor)

    def product(self, field: str, rate: Decimal) -> tuple[str, str, Decimal]:
        return ("product", field, rate)

    def nothing(self) -> tuple[str]:
        return ("nothing",)


def _validated(kind: ActionKind, stored: dict[str, Any]) -> Any:
    """The stored action through its entry's contract model (an amount's model takes the amount)."""
    body = stored if kind.name == "reverse" else stored["amount"]
    return kind.model.model_validate(body)


def test_every_action_type_is_one_entry_the_rule_builder_offers() -> None:
    assert set(STORED) == set(ACTIONS)
    assert ACTION_KINDS == [(kind.label, name) for name, kind in ACTIONS.items()]
    for name, kind in ACTIONS.items():
        assert kind.name == name and kind.label


@pytest.mark.parametrize(("name", "stored"), [(name, action) for name, actions in STORED.items() for action in actions])
def test_each_entry_agrees_with_itself(name: str, stored: dict[str, Any]) -> None:
    kind = action_kind(stored)
    assert kind is ACTIONS[name]
    _validated(kind, stored)  # the contract's model takes it
    spec = kind.build(stored, "ast", 2, "actions[0]")
    assert spec.entry is kind  # the spec evaluates with its entry
    form = kind.sql(spec, _Forms())
    if name == "fixed":
        assert form == ("fixed", 250 if stored["amount"]["fixed"] == "2.50" else 1000)
    elif name == "per":
        assert form == ("product", "amount", stored["amount"]["rate"])
    else:
        assert form == ("nothing",)  # a reversal issues nothing itself: the replay's reversal pass takes back
    assert kind.describe(stored)
    reads = {field for field in (spec.per, spec.reference_field) if field}
    assert {probe.field for probe in kind.probes(stored)} == reads  # push verification tries every field it reads
    number = Decimal("42.50")
    outcome = spec.outcome(0, number if spec.per else None, "cus_1" if spec.reference_field else None)
    reason = kind.reason(spec, outcome, number if spec.per else None, "cus_1")
    assert reason and outcome.error_code is None
    if name == "reverse":
        assert outcome.reversal is not None and outcome.reversal.original == "cus_1"
    else:
        assert outcome.issues and (spec.beneficiary is None) == (outcome.beneficiary is None)


def test_an_unknown_action_shape_matches_no_entry() -> None:
    with pytest.raises(ValueError, match="no action type"):
        action_kind({"type": "issue", "amount": {"percent": 5}})
