"""Tiers on a programme (issue 33, T1): the model loads from programme files and round-trips, every refusal names
its element, rules use tiers only when the programme has them, the tiers count toward the version's size, and
programme files without tiers keep their text and fingerprints."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.contract import jsonutil, programme_limits
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import (
    ProgrammeFileError,
    diff_programmes,
    dumps_programme,
    load_programme,
    loads_programme,
    parse_programme,
)
from rewards_lab.contract.tier_requests import MAX_LEVELS, Tiers, check_rule_tiers
from rewards_lab.contract.validation import validate
from rewards_lab.domain.settings import Tiers as TierSettings
from rewards_lab.domain.tiers import tier_model

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "data" / "programmes").glob("*.json"))


def tiered() -> dict[str, Any]:
    """The plan's example (reports/i33-tiers-plan.md 2.1)."""
    return {
        "programme": {
            "name": "Coffee club with tiers",
            "timezone": "Europe/London",
            "tiers": {
                "metric": {"type": "points"},
                "window": {"type": "rolling", "days": 365},
                "review": {"at": "calendar", "period": "year"},
                "downgrade": {"to": "one_level", "grace_days": 30},
                "levels": [
                    {"code": "member", "name": "Member"},
                    {"code": "silver", "name": "Silver", "entry": "500", "retain": "400", "multiplier": "1.25"},
                    {"code": "gold", "name": "Gold", "entry": "2000", "retain": "1500", "multiplier": "1.5"},
                ],
            },
        },
        "asset": {"name": "Coffee beans", "symbol": "BEAN", "type": "points", "decimals": 0},
        "rules": [
            {
                "name": "Points on orders",
                "event_type": "order.completed",
                "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 1}, "multiply": "tier"}],
            },
            {
                "name": "Gold weekend bonus",
                "event_type": "order.completed",
                "conditions": [
                    {"field": "customer.tier", "operator": "eq", "value": "gold"},
                    {"field": "occurred_at.weekday", "operator": "between", "value": [6, 7]},
                ],
                "actions": [{"type": "issue", "amount": {"fixed": "20"}}],
            },
        ],
    }


def tiers_of(data: dict[str, Any]) -> dict[str, Any]:
    tiers: dict[str, Any] = data["programme"]["tiers"]
    return tiers


def refusal(change: Callable[[dict[str, Any]], object]) -> ProgrammeFileError:
    data = tiered()
    change(data)
    with pytest.raises(ProgrammeFileError) as caught:
        parse_programme(jsonutil.loads(jsonutil.dumps(data)), "tiers.json")
    return caught.value


def test_the_plans_example_loads_and_round_trips_exactly() -> None:
    definition = parse_programme(tiered())
    tiers = definition.programme.tiers
    assert tiers is not None and tiers.codes() == ["member", "silver", "gold"]
    assert tiers.levels[1].kept_at == "400" and tiers.levels[2].multiplier == "1.5"
    assert definition.rules[0].actions[0].multiply == "tier"  # type: ignore[union-attr]
    text = dumps_programme(definition)
    assert loads_programme(text) == definition and dumps_programme(loads_programme(text)) == text
    assert jsonutil.loads(text)["programme"]["tiers"] == jsonutil.loads(jsonutil.dumps(tiers_of(tiered())))


def test_defaults_are_not_written_and_numbers_become_decimal_strings() -> None:
    data = tiered()
    tiers_of(data)["review"] = {"at": "window_end"}
    tiers_of(data)["downgrade"] = {"to": "earned"}
    tiers_of(data)["levels"][1].update(entry=500, multiplier=jsonutil.loads("1.25"))
    written = jsonutil.loads(dumps_programme(parse_programme(jsonutil.loads(jsonutil.dumps(data)))))
    tiers = written["programme"]["tiers"]
    assert "review" not in tiers and "downgrade" not in tiers
    assert tiers["levels"][1] == {
        "code": "silver",
        "name": "Silver",
        "entry": "500",
        "retain": "400",
        "multiplier": "1.25",
    }


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        (lambda d: tiers_of(d)["levels"][2].update(retain="2500"), "field_invalid", "levels[2].retain"),
        (lambda d: tiers_of(d)["levels"][2].update(entry="500"), "field_invalid", "levels[2].entry"),
        (lambda d: tiers_of(d)["levels"][2].update(retain="300"), "field_invalid", "levels[2].retain"),
        (lambda d: tiers_of(d)["levels"][2].update(code="silver"), "field_invalid", "levels[2].code"),
        (lambda d: tiers_of(d)["levels"][2].update(code="Gold"), "field_invalid", "levels[2].code"),
        (lambda d: tiers_of(d)["levels"][2].update(name="   "), "field_invalid", "levels[2].name"),
        (lambda d: tiers_of(d)["levels"][2].update(name="x" * 61), "field_invalid", "levels[2].name"),
        (lambda d: tiers_of(d)["levels"][0].update(entry="1"), "field_invalid", "levels[0].entry"),
        (lambda d: tiers_of(d)["levels"][0].update(retain="1"), "field_invalid", "levels[0].retain"),
        (lambda d: tiers_of(d)["levels"][1].pop("entry"), "field_required", "levels[1].entry"),
        (lambda d: tiers_of(d)["levels"][1].update(entry="0", retain="0"), "field_invalid", "levels[1].entry"),
        (lambda d: tiers_of(d)["levels"][1].update(entry="-5"), "field_invalid", "levels[1].entry"),
        (lambda d: tiers_of(d)["levels"][1].update(entry="1e3"), "field_invalid", "levels[1].entry"),
        (lambda d: tiers_of(d)["levels"][1].update(multiplier="0"), "field_invalid", "levels[1].multiplier"),
        (lambda d: tiers_of(d)["levels"][1].update(multiplier="100.01"), "field_invalid", "levels[1].multiplier"),
        (lambda d: tiers_of(d)["levels"][1].update(multiplier="1.23456"), "field_invalid", "levels[1].multiplier"),
        (lambda d: tiers_of(d)["levels"][1].update(bonus="5"), "field_unknown", "levels[1].bonus"),
        (lambda d: tiers_of(d).update(levels=tiers_of(d)["levels"][:1]), "field_invalid", "levels"),
        (
            lambda d: tiers_of(d)["levels"].extend({"code": f"l{i}", "name": "L"} for i in range(8)),
            "field_invalid",
            "levels",
        ),
        (lambda d: tiers_of(d).update(metric={"type": "spend"}), "field_invalid", "metric"),
        (lambda d: tiers_of(d).update(window={"type": "rolling", "days": 0}), "field_invalid", "window.days"),
        (lambda d: tiers_of(d).update(window={"type": "rolling", "days": 1097}), "field_invalid", "window.days"),
        (lambda d: tiers_of(d).update(window={"type": "calendar", "period": "week"}), "field_invalid", "window.period"),
        (lambda d: tiers_of(d).update(window={"type": "forever"}), "field_invalid", "window"),
        (lambda d: tiers_of(d).update(window={"type": "lifetime"}), "field_invalid", "review"),
        (lambda d: tiers_of(d).update(window={"type": "anniversary"}), "field_invalid", "review.at"),
        (lambda d: tiers_of(d).update(window={"type": "calendar", "period": "month"}), "field_invalid", "review.at"),
        (lambda d: tiers_of(d).update(review={"at": "calendar"}), "field_required", "review.period"),
        (lambda d: tiers_of(d).update(review={"at": "window_end", "period": "year"}), "field_invalid", "review.period"),
        (lambda d: tiers_of(d)["downgrade"].update(to="two_levels"), "field_invalid", "downgrade.to"),
        (lambda d: tiers_of(d)["downgrade"].update(grace_days=366), "field_invalid", "downgrade.grace_days"),
        (lambda d: tiers_of(d)["downgrade"].update(grace_days=-1), "field_invalid", "downgrade.grace_days"),
    ],
)
def test_refusals_name_the_element_of_the_tiers(
    change: Callable[[dict[str, Any]], object], code: str, field: str
) -> None:
    error = refusal(change)
    assert (error.code, error.details["field"]) == (code, f"programme.tiers.{field}")
    assert error.message.startswith(f"tiers.json: programme.tiers.{field}")


def test_a_lifetime_window_takes_no_downgrade_and_is_accepted_without() -> None:
    def lifetime(data: dict[str, Any], *, downgrade: bool) -> None:
        tiers_of(data).update(window={"type": "lifetime"})
        tiers_of(data).pop("review")
        if not downgrade:
            tiers_of(data).pop("downgrade")

    error = refusal(lambda d: lifetime(d, downgrade=True))
    assert error.details["field"] == "programme.tiers.downgrade"
    data = tiered()
    lifetime(data, downgrade=False)
    assert parse_programme(data).programme.tiers is not None


def test_a_calendar_review_of_a_calendar_windows_own_period_is_accepted() -> None:
    data = tiered()
    tiers_of(data).update(window={"type": "calendar", "period": "year"})
    assert parse_programme(data).programme.tiers is not None


def test_thresholds_have_the_places_of_their_metric() -> None:
    error = refusal(lambda d: tiers_of(d)["levels"][1].update(entry="500.5"))
    assert (error.code, error.details["field"], error.details["decimals"]) == (
        "amount_too_many_decimals",
        "programme.tiers.levels[1].entry",
        0,
    )
    count = {"type": "count", "event_type": "order.completed"}
    error = refusal(lambda d: (tiers_of(d).update(metric=count), tiers_of(d)["levels"][2].update(retain="1500.5")))
    assert error.details["field"] == "programme.tiers.levels[2].retain"
    spend = {"type": "sum", "event_type": "order.completed", "field": "amount", "decimals": 1}
    error = refusal(lambda d: (tiers_of(d).update(metric=spend), tiers_of(d)["levels"][1].update(entry="500.25")))
    assert error.details["field"] == "programme.tiers.levels[1].entry"
    data = tiered()
    tiers_of(data).update(metric=spend)
    tiers_of(data)["levels"][1].update(entry="500.5", retain="400.1")
    assert parse_programme(data).programme.tiers is not None


@pytest.mark.parametrize(
    ("metric", "field"),
    [
        (
            {
                "type": "count",
                "event_type": "order.completed",
                "conditions": [{"not": {"field": "customer.tier_rank", "operator": "gte", "value": 2}}],
            },
            "metric.conditions[0].not.field",
        ),
        (
            {
                "type": "sum",
                "event_type": "order.completed",
                "field": "amount",
                "less": {
                    "event_type": "order.refunded",
                    "field": "amount",
                    "conditions": [{"field": "customer.tier", "operator": "eq", "value": "gold"}],
                },
            },
            "metric.less.conditions[0].field",
        ),
        ({"type": "sum", "event_type": "order.completed", "field": "customer.tier_progress"}, "metric.field"),
        ({"type": "sum", "event_type": "order.completed", "field": "amount", "decimals": 9}, "metric.decimals"),
        ({"type": "count", "event_type": "order.completed", "field": "amount"}, "metric.field"),
        ({"type": "points", "event_type": "order.completed"}, "metric.event_type"),
    ],
)
def test_a_metric_never_reads_the_tiers_and_has_only_its_own_fields(metric: dict[str, Any], field: str) -> None:
    error = refusal(lambda d: tiers_of(d).update(metric=metric))
    assert error.details["field"] == f"programme.tiers.{field}"


def test_rules_use_tiers_only_in_a_programme_that_has_them() -> None:
    error = refusal(lambda d: d["programme"].pop("tiers"))
    assert (error.code, error.details["field"]) == ("field_invalid", "rules[0].actions[0].multiply")
    assert "defines no tiers" in error.message

    def conditions_only(data: dict[str, Any]) -> None:
        data["programme"].pop("tiers")
        data["rules"][0]["actions"][0].pop("multiply")

    assert refusal(conditions_only).details["field"] == "rules[1].conditions[0].field"
    error = refusal(lambda d: d["rules"][0]["actions"][0].update(multiply="segment"))
    assert error.details["field"] == "rules[0].actions[0].multiply"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda d: d["rules"][1]["conditions"].append(
                {"any": [{"field": "customer.tier_progress", "operator": "gte", "value": 100}]}
            ),
            "rules[1].conditions[2].any[0].field",
        ),
        (
            lambda d: d["rules"][1].update(
                stop_processing=True,
                conditions=[{"field": "customer.tier_progress", "operator": "gte", "value": 100}],
            ),
            "rules[1].conditions[0].field",
        ),
    ],
)
def test_tier_progress_is_read_only_at_the_top_of_a_rule_that_does_not_stop(
    change: Callable[[dict[str, Any]], object], field: str
) -> None:
    assert refusal(change).details["field"] == field
    data = tiered()
    data["rules"][1]["conditions"].append({"field": "customer.tier_progress", "operator": "gte", "value": 100})
    data["rules"][1]["stop_processing"] = False
    assert parse_programme(data).rules[1].conditions[2].field == "customer.tier_progress"  # type: ignore[union-attr]


def test_check_rule_tiers_refuses_what_the_api_must_not_store() -> None:
    rule = parse_programme(tiered()).rules[0]
    check_rule_tiers(rule.conditions, rule.actions, False, has_tiers=True)
    with pytest.raises(ServiceError) as caught:
        check_rule_tiers(rule.conditions, rule.actions, False, has_tiers=False)
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", "actions[0].multiply")


def test_the_tiers_count_toward_the_versions_size(monkeypatch: pytest.MonkeyPatch) -> None:
    data = tiered()
    plain = parse_programme(data)
    rules_bytes = sum(rule.definition_bytes() for rule in plain.rules)
    tiers = plain.programme.tiers
    assert tiers is not None
    tier_bytes = programme_limits.tiers_definition_bytes(tiers.model_dump(mode="json"))
    assert tier_bytes == len(jsonutil.canonical_text(tiers.model_dump(mode="json")).encode()) > 0
    monkeypatch.setattr(programme_limits, "MAX_VERSION_RULES_BYTES", rules_bytes + tier_bytes)
    assert parse_programme(data).programme.tiers == tiers
    monkeypatch.setattr(programme_limits, "MAX_VERSION_RULES_BYTES", rules_bytes + tier_bytes - 1)
    with pytest.raises(ProgrammeFileError) as caught:
        parse_programme(data)
    assert (caught.value.code, caught.value.details["limit"]) == ("programme_limit_exceeded", "version_rules_bytes")


def test_the_domain_settings_round_trip_the_stored_form() -> None:
    for change in (
        lambda d: None,
        lambda d: tiers_of(d).update(
            metric={
                "type": "sum",
                "event_type": "order.completed",
                "field": "amount",
                "decimals": 1,
                "conditions": [{"field": "channel", "operator": "eq", "value": "web"}],
                "less": {"event_type": "order.refunded", "field": "amount"},
            },
            review=None,
            downgrade={"grace_days": 7},
        ),
        lambda d: tiers_of(d).update(window={"type": "anniversary"}, review=None, downgrade=None),
    ):
        data = tiered()
        change(data)
        for key in [k for k, v in tiers_of(data).items() if v is None]:
            tiers_of(data).pop(key)
        stored = validate(Tiers, tiers_of(data)).model_dump(mode="json")
        settings = TierSettings.of(stored)
        assert settings is not None and settings.as_json() == stored
    assert TierSettings.of(None) is None


def test_files_without_tiers_keep_their_text_and_fingerprints() -> None:
    """The new fields write nothing when absent: every shipped file dumps, and every rule fingerprints, exactly as
    the same model without them does."""
    assert EXAMPLES
    for path in EXAMPLES:
        definition = load_programme(path)
        assert definition.programme.tiers is None
        without = {
            "programme": {"tiers"},
            "rules": {"__all__": {"actions": {"__all__": {"multiply"}}}},
        }
        assert definition.model_dump(mode="json") == definition.model_dump(mode="json", exclude=without)
        text = dumps_programme(definition)
        assert '"tiers"' not in text and '"multiply"' not in text
        for rule in definition.rules:
            old = rule.model_dump(mode="json", exclude={"name": True, "actions": {"__all__": {"multiply"}}})
            assert rule.fingerprint() == jsonutil.canonical_hash(old)


def test_multiply_is_part_of_what_a_rule_does_and_absent_when_not_written() -> None:
    definition = parse_programme(tiered())
    rule = definition.rules[0]
    plain_action = rule.actions[0].model_copy(update={"multiply": None})
    plain = rule.model_copy(update={"actions": [plain_action]})
    assert plain.fingerprint() != rule.fingerprint()
    assert "multiply" not in jsonutil.dumps(plain.payload())
    edited = copy.deepcopy(tiered())
    edited["rules"][0]["actions"][0].pop("multiply")
    diff = diff_programmes(definition, parse_programme(edited))
    assert [change.kind for change in diff.rule_changes] == ["removed", "added"]
    retiered = copy.deepcopy(tiered())
    tiers_of(retiered)["levels"][1]["entry"] = "600"
    assert set(diff_programmes(definition, parse_programme(retiered)).programme_changes) == {"tiers"}


@settings(max_examples=200, deadline=None)
@given(
    ladder=st.lists(
        st.tuples(st.integers(1, 60), st.one_of(st.none(), st.integers(1, 60))), min_size=1, max_size=MAX_LEVELS - 1
    )
)
def test_a_ladder_is_accepted_exactly_when_its_thresholds_are_ordered(ladder: list[tuple[int, int | None]]) -> None:
    levels: list[dict[str, Any]] = [{"code": "base", "name": "Base"}]
    for index, (entry, retain) in enumerate(ladder, start=1):
        level = {"code": f"l{index}", "name": f"Level {index}", "entry": str(entry)}
        levels.append(level if retain is None else {**level, "retain": str(retain)})
    entries = [entry for entry, _ in ladder]
    kept = [entry if retain is None else retain for entry, retain in ladder]
    ordered = (
        all(a < b for a, b in zip(entries, entries[1:], strict=False))
        and all(k <= e for k, e in zip(kept, entries, strict=True))
        and all(a <= b for a, b in zip(kept, kept[1:], strict=False))
    )
    body = {"metric": {"type": "count", "event_type": "order.completed"}, "window": {"type": "lifetime"}}
    try:
        tiers = validate(Tiers, {**body, "levels": levels})
    except ServiceError as error:
        assert not ordered and error.code == "field_invalid"
        assert str(error.details["field"]).startswith("levels[")
        return
    assert ordered
    settings_ = TierSettings.of(tiers.model_dump(mode="json"))
    assert settings_ is not None
    model = tier_model(settings_, 0)
    assert [level.entry for level in model.levels] == [0, *entries]
    assert [level.keep for level in model.levels] == [0, *kept]
