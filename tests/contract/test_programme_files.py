"""Programme files: the shipped examples load; errors name file, rule and field; save round-trips; diff."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from rewards_lab.contract.programme_file import (
    ProgrammeFileError,
    diff_programmes,
    dumps_programme,
    load_programme,
    loads_programme,
    save_programme,
)
from rewards_lab.contract.requests import PerRateAmount

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "data" / "programmes").glob("*.json"))
RULE_1_ASSET = "rules[1].actions[0].asset_id"
SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


def test_there_are_example_programmes_and_each_loads_and_round_trips(tmp_path: Path) -> None:
    assert len(EXAMPLES) >= 3
    for path in EXAMPLES:
        definition = load_programme(path)
        copy = save_programme(definition, tmp_path / path.name)
        assert load_programme(copy) == definition
        assert copy.read_text() == dumps_programme(definition)


def test_numbers_are_kept_exactly() -> None:
    text = SPRING.read_text().replace('"rate": 0.05', '"rate": 0.0123456789')
    definition = loads_programme(text)
    amount = definition.rules[0].actions[0].amount
    assert isinstance(amount, PerRateAmount)
    assert amount.rate == Decimal("0.0123456789")
    assert '"rate": 0.0123456789' in dumps_programme(definition)


@pytest.mark.parametrize(
    ("old", "new", "code", "field"),
    [
        ('"rate": 0.05', '"rate": -1', "field_invalid", "rules[0].actions[0].amount.rate"),
        ('"operator": "gte"', '"operator": "like"', "field_invalid", "rules[0].conditions[0].operator"),
        ('"operator": "gte"', '"operator": "starts_with"', "field_invalid", "rules[0].conditions[0].value"),
        ('"issue", "amount": {"fixed"', '"issue", "asset_id": "a", "amount": {"fixed"', "field_unknown", RULE_1_ASSET),
        ('"decimals": 2', '"decimals": 9', "field_invalid", "asset.decimals"),
        ('"name": "Spring launch",', "", "field_required", "programme.name"),
    ],
)
def test_errors_name_the_file_the_rule_and_the_field(old: str, new: str, code: str, field: str) -> None:
    text = SPRING.read_text()
    assert old in text
    with pytest.raises(ProgrammeFileError) as caught:
        loads_programme(text.replace(old, new, 1), "spring.json")
    assert caught.value.details["file"] == "spring.json"
    assert caught.value.details["field"] == field
    assert caught.value.code == code
    assert caught.value.message.startswith(f"spring.json: {field}")


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "programme": {"name": "x"},\n  oops\n}\n')
    with pytest.raises(ProgrammeFileError) as caught:
        load_programme(broken)
    assert caught.value.code == "request_malformed"
    assert caught.value.details["line"] == 3


def test_diff_shows_field_and_rule_changes_and_ignores_reordering() -> None:
    old = load_programme(SPRING)
    assert diff_programmes(old, old).is_empty
    reordered = old.model_copy(update={"rules": list(reversed(old.rules))})
    assert diff_programmes(old, reordered).is_empty
    text = SPRING.read_text().replace('"rate": 0.05', '"rate": 0.06')
    text = text.replace('"supply_ceiling": "1000000"', '"supply_ceiling": "2000000"')
    new = loads_programme(text)
    diff = diff_programmes(old, new)
    assert diff.asset_changes == {"supply_ceiling": ("1000000", "2000000")}
    assert [(change.kind, change.index) for change in diff.rule_changes] == [("removed", 0), ("added", 0)]
    assert '"rate": 0.06' in diff.text and '"rate": 0.05' in diff.text
    assert any(line.startswith("+ rules[0]") for line in diff.summary())


def test_text_operators_load_from_a_programme_file() -> None:
    """starts_with / ends_with / contains on a string are programme-file conditions like any other."""
    text = SPRING.read_text().replace(
        '{"field": "amount", "operator": "gte", "value": 20}',
        '{"field": "email", "operator": "ends_with", "value": "@shop.fr"}, '
        '{"field": "coupon", "operator": "starts_with", "value": "SPRING"}, '
        '{"field": "coupon", "operator": "contains", "value": "20"}',
    )
    conditions = loads_programme(text).rules[0].conditions
    assert [(c.field, str(c.operator), c.value) for c in conditions] == [  # type: ignore[union-attr]
        ("email", "ends_with", "@shop.fr"),
        ("coupon", "starts_with", "SPRING"),
        ("coupon", "contains", "20"),
    ]
    assert "ends_with" in dumps_programme(loads_programme(text))
