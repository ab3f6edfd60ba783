"""Tiers stored and versioned with the programme (issue 33, T2): on create and PATCH of the draft, frozen by
publishing, copied by restoring; refused where they do not fit (thresholds, the version's size, removal under a
rule that uses them); rules may use tiers only in a programme with tiers (the live engine applies them, T3)."""

from __future__ import annotations

from typing import Any

import pytest

from rewards_lab.contract import programme_limits
from rewards_lab.contract import requests as rq
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_limits import tiers_definition_bytes
from rewards_lab.contract.validation import validate
from rewards_lab.engine.rule_book import programme_row
from rewards_lab.service import programme_lifecycle, programmes
from rewards_lab.service.programme_forecast import definition_of
from rewards_lab.store.api import reader, unit_of_work
from rewards_lab.store.interfaces import RuleBody
from tests.conftest import World
from tests.contract.test_tier_requests import tiered, tiers_of

TIERS: dict[str, Any] = tiers_of(tiered())  # the plan's example (reports/i33-tiers-plan.md 2.1)
COUNT_TIERS: dict[str, Any] = {
    "metric": {"type": "count", "event_type": "order.completed"},
    "window": {"type": "lifetime"},
    "levels": [{"code": "new", "name": "New"}, {"code": "regular", "name": "Regular", "entry": "3"}],
}
ISSUE = {"type": "issue", "amount": {"fixed": "1"}}


def _create(world: World, asset: Any = None, **fields: Any) -> Any:
    asset = asset or world.asset()
    body = validate(rq.ProgrammeCreate, {"name": "Tiered", "asset_id": asset.id, **fields})
    return programmes.create_programme(world.db, world.scope, body)


def _patch(world: World, program_id: str, body: dict[str, Any]) -> Any:
    return programme_lifecycle.update_programme(world.db, world.scope, program_id, validate(rq.ProgrammeUpdate, body))


def _stored_tiers(world: World, version_id: str) -> Any:
    con = reader(world.db).programmes.con  # type: ignore[attr-defined]
    return con.execute("SELECT tiers FROM programme_versions WHERE id = ?", [version_id]).fetchone()[0]


def test_tiers_are_stored_with_the_draft_and_frozen_by_publishing(world: World) -> None:
    created = _create(world, tiers=TIERS)
    assert created.model_dump(mode="json")["tiers"] == TIERS
    again = programmes.get_programme(world.db, world.scope, created.id)
    assert again.model_dump(mode="json")["tiers"] == TIERS  # read back from the store
    assert _stored_tiers(world, created.draft_version_id) is not None

    world.rule(again)
    published = programmes.publish(world.db, world.scope, created.id)
    assert published.version.model_dump(mode="json")["tiers"] == TIERS
    assert programmes.get_version(world.db, world.scope, created.id, 1).model_dump(mode="json")["tiers"] == TIERS
    draft = programmes.get_version(world.db, world.scope, created.id, "draft")
    assert draft.model_dump(mode="json")["tiers"] == TIERS  # the next draft starts as a copy

    changed = _patch(world, created.id, {"tiers": COUNT_TIERS})
    assert changed.model_dump(mode="json")["tiers"] == COUNT_TIERS
    assert programmes.get_version(world.db, world.scope, created.id, 1).model_dump(mode="json")["tiers"] == TIERS

    removed = _patch(world, created.id, {"tiers": None})
    assert removed.tiers is None and _stored_tiers(world, removed.draft_version_id) is None
    kept = _patch(world, created.id, {"name": "Renamed"})  # absent: the draft's tiers stay as they are
    assert kept.tiers is None

    restored = programme_lifecycle.restore_version(world.db, world.scope, created.id, "1")
    assert restored.model_dump(mode="json")["tiers"] == TIERS
    programmes.publish(world.db, world.scope, created.id)
    versions = programmes.all_versions(world.db, world.scope, created.id)
    assert [v.number for v in versions] == [1, 2, None]
    assert [v.model_dump(mode="json")["tiers"] for v in versions] == [TIERS, TIERS, TIERS]
    # The definition the gates replay and the workbench exports carries them, as a programme file would.
    uow = reader(world.db)
    definition = definition_of(uow, world.scope, programme_row(uow, world.scope, created.id), versions[1].id)
    assert definition.model_dump(mode="json")["programme"]["tiers"] == TIERS


def test_a_programme_without_tiers_stores_null_and_shows_none(world: World) -> None:
    created = _create(world)
    assert created.tiers is None and _stored_tiers(world, created.draft_version_id) is None
    world.rule(created)
    published = programmes.publish(world.db, world.scope, created.id)
    assert published.version.tiers is None
    assert programmes.get_version(world.db, world.scope, created.id, "draft").tiers is None


def test_defaults_are_not_stored_and_the_written_form_reads_back(world: World) -> None:
    spelled = {**COUNT_TIERS, "downgrade": {"to": "earned", "grace_days": 0}, "review": {"at": "window_end"}}
    spelled["window"] = {"type": "rolling", "days": 30}
    created = _create(world, tiers=spelled)
    shown = created.model_dump(mode="json")["tiers"]
    assert "downgrade" not in shown and "review" not in shown and shown["window"] == {"type": "rolling", "days": 30}


def test_points_thresholds_must_fit_the_asset(world: World) -> None:
    asset = world.asset(decimals=0)
    levels = [TIERS["levels"][0], {**TIERS["levels"][1], "entry": "500.5"}, TIERS["levels"][2]]
    body = validate(rq.ProgrammeCreate, {"name": "T", "asset_id": asset.id, "tiers": {**TIERS, "levels": levels}})
    with pytest.raises(ServiceError) as caught:
        programmes.create_programme(world.db, world.scope, body)
    assert (caught.value.code, caught.value.details["field"]) == ("amount_too_many_decimals", "tiers.levels[1].entry")

    programme = world.programme(asset)
    with pytest.raises(ServiceError) as caught:
        _patch(world, programme.id, {"tiers": {**TIERS, "levels": levels}})
    assert caught.value.details["field"] == "tiers.levels[1].entry"
    assert programmes.get_programme(world.db, world.scope, programme.id).tiers is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"actions": [{**ISSUE, "multiply": "tier"}]}, "actions[0].multiply"),
        (
            {"conditions": [{"field": "customer.tier", "operator": "eq", "value": "gold"}], "actions": [ISSUE]},
            "conditions[0].field",
        ),
    ],
)
def test_rules_that_use_tiers_are_taken_with_tiers_and_refused_without(
    world: World, body: dict[str, Any], field: str
) -> None:
    asset = world.asset()
    programme = _create(world, asset, tiers=TIERS)
    create = validate(rq.RuleCreate, {"program_id": programme.id, "event_type": "order.completed", **body})
    programmes.create_rule(world.db, world.scope, create)
    assert len(programmes.get_version(world.db, world.scope, programme.id).rules) == 1
    plain = _create(world, asset)
    create = validate(rq.RuleCreate, {"program_id": plain.id, "event_type": "order.completed", **body})
    with pytest.raises(ServiceError) as caught:
        programmes.create_rule(world.db, world.scope, create)
    assert (caught.value.code, caught.value.details["field"]) == ("field_invalid", field)
    assert "defines no tiers" in caught.value.message
    assert programmes.get_version(world.db, world.scope, plain.id).rules == []


def test_removing_tiers_under_a_rule_that_uses_them_is_refused(world: World) -> None:
    programme = _create(world, tiers=TIERS)
    # Written to the store directly (as /v1 would store it, above).
    conditions = [{"field": "customer.tier", "operator": "eq", "value": "gold"}]
    body = RuleBody("order.completed", conditions, [{**ISSUE, "asset_id": programme.asset_id}], 0, False, ())
    with unit_of_work(world.db) as uow:
        uow.programmes.add_rule(world.scope, "rule_tiered", programme.draft_version_id, programme.id, body, 0)
    with pytest.raises(ServiceError) as caught:
        _patch(world, programme.id, {"tiers": None})
    error = caught.value
    assert (error.code, error.details["field"], error.details["rule_id"]) == ("field_invalid", "tiers", "rule_tiered")
    assert error.details["rule_field"] == "conditions[0].field"
    assert programmes.get_programme(world.db, world.scope, programme.id).model_dump(mode="json")["tiers"] == TIERS
    _patch(world, programme.id, {"tiers": COUNT_TIERS})  # changing them is fine: the rule still has tiers


def test_the_tiers_bytes_count_in_the_version_size(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    asset = world.asset()
    tiered, plain = _create(world, asset, tiers=TIERS), world.programme(asset)
    world.rule(plain)
    tier_size = tiers_definition_bytes(TIERS)
    # Room for two such rules (world.rule's shape) without tiers, not for one beside the tiers.
    rule_bytes = programme_limits.rule_definition_bytes(
        "order.completed", [], [{**ISSUE, "amount": {"fixed": "10.00"}, "asset_id": plain.asset_id}], []
    )
    assert tier_size > rule_bytes
    monkeypatch.setattr(programme_limits, "MAX_VERSION_RULES_BYTES", 2 * rule_bytes)
    world.rule(plain)  # two rules fit
    with pytest.raises(ServiceError) as caught:
        world.rule(tiered)
    assert (caught.value.code, caught.value.details["limit"]) == ("programme_limit_exceeded", "version_rules_bytes")

    monkeypatch.setattr(programme_limits, "MAX_VERSION_RULES_BYTES", rule_bytes + tier_size)
    world.rule(tiered)  # exactly at the limit
    longer = [*TIERS["levels"][:2], {**TIERS["levels"][2], "name": "Gold members"}]
    with pytest.raises(ServiceError) as caught:  # a larger tiers object no longer fits beside the rule
        _patch(world, tiered.id, {"tiers": {**TIERS, "levels": longer}})
    assert (caught.value.code, caught.value.details["field"]) == ("programme_limit_exceeded", "tiers")
    monkeypatch.setattr(programme_limits, "MAX_VERSION_RULES_BYTES", rule_bytes + tier_size - 1)
    with pytest.raises(ServiceError) as caught:  # publishing measures the same
        programmes.publish(world.db, world.scope, tiered.id)
    assert caught.value.code == "programme_limit_exceeded"
    assert programmes.get_programme(world.db, world.scope, tiered.id).current_version is None


def test_a_guarded_programme_with_tiers_is_checked_and_published(world: World) -> None:
    """The server's gate replays the draft's definition, tiers included (no rule uses them: the same forecast)."""
    guards = [{"metric": "issued", "period": "week", "max": "500"}]
    programme = _create(world, tiers=TIERS, guards=guards)
    world.rule(programme)
    published = programmes.publish(world.db, world.scope, programme.id)
    assert published.version.number == 1 and published.version.model_dump(mode="json")["tiers"] == TIERS
