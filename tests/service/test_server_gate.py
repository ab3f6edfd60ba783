"""The forecast gate enforced by the service (issue 31): publish replays the tenant's stored events of the guard
window through the draft and the live version, and refuses a failing draft unless an allowed caller overrides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import GuardOverride, PublishRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import event_intake, organizations, programme_forecast, programme_lifecycle, programmes
from rewards_lab.service.programme_forecast import ForecastLimits, evaluate_draft
from tests.conftest import World

AT_MOST_ONE_A_DAY = [{"metric": "issued", "period": "day", "max": "1"}]


def _guarded(world: World, amount: str, guards: list[dict[str, Any]] | None = None, **fields: Any) -> str:
    asset = world.asset()
    body = {"name": "Guarded", "asset_id": asset.id, "guards": AT_MOST_ONE_A_DAY if guards is None else guards}
    created = programmes.create_programme(world.db, world.scope, validate(rq.ProgrammeCreate, {**body, **fields}))
    world.rule(created, amount={"fixed": amount})
    return created.id


def _events(world: World, count: int, *, scope: Scope | None = None, ago: timedelta = timedelta(hours=1)) -> None:
    when = (datetime.now(UTC) - ago).isoformat()
    for n in range(count):
        body = {
            "type": "order.completed",
            "external_event_id": f"e-{ago}-{n}",
            "customer_id": "c1",
            "occurred_at": when,
        }
        event_intake.submit_event(world.db, scope or world.scope, validate(rq.EventCreate, body))


def _refusal(action: Any) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()
    return caught.value


def test_a_draft_issuing_a_thousand_times_its_guard_is_refused_with_the_table(world: World) -> None:
    program_id = _guarded(world, "1000")
    _events(world, 2)
    refused = _refusal(lambda: programmes.publish(world.db, world.scope, program_id))
    assert (refused.code, refused.http_status) == ("forecast_guard_failed", 409)
    (check,) = refused.details["checks"]
    assert (check["metric"], check["limit"], check["draft"], check["published"]) == (
        "issued per day",
        "<= 1",
        "2000.00",
        None,
    )
    assert check["checked"] == "2000.00" and check["passed"] is False
    assert refused.details["passed"] is False and refused.details["events"] == 2
    assert programmes.get_programme(world.db, world.scope, program_id).current_version is None  # nothing published
    # the forecast shows the same table without publishing
    table = programme_forecast.forecast_programme(world.db, world.scope, program_id)
    assert [c.model_dump(mode="json") for c in table.checks] == refused.details["checks"]
    # an override needs the permission; with it the draft publishes and the override is recorded
    override = PublishRequest(guard_override=GuardOverride(reason="approved, ticket 9"))
    denied = _refusal(lambda: programmes.publish(world.db, world.scope, program_id, override, may_override=False))
    assert (denied.code, denied.details["permission"]) == ("permission_denied", "rewards.guards.override")
    published = programmes.publish(world.db, world.scope, program_id, override, actor="key_x", may_override=True)
    assert published.version.number == 1 and published.version.guard_override is not None
    assert published.version.guard_override.given_by == "key_x"


def test_a_passing_draft_publishes_and_is_compared_with_the_live_version(world: World) -> None:
    program_id = _guarded(world, "0.50")
    _events(world, 2)  # 1.00 in a day: within the guard
    first = programmes.publish(world.db, world.scope, program_id, may_override=False)
    assert first.version.number == 1
    table = programme_forecast.forecast_programme(world.db, world.scope, program_id)
    assert table.passed and table.published_version == 1
    assert (table.checks[0].draft, table.checks[0].published) == ("1.00", "1.00")


def test_a_programme_without_guards_publishes_without_a_forecast(world: World) -> None:
    program_id = _guarded(world, "1000", guards=[])
    _events(world, 2)
    with mock.patch.object(programme_forecast, "evaluate_draft", side_effect=AssertionError("no forecast")):
        published = programmes.publish(world.db, world.scope, program_id, may_override=False)
    assert published.version.number == 1 and published.version.guard_window_days == 90


def test_the_window_bounds_the_events_and_other_tenants_never_enter(world: World) -> None:
    program_id = _guarded(world, "1000", guard_window_days=2)
    _events(world, 3, ago=timedelta(days=5))  # before the window
    other = Scope(organizations.create_organization(world.db, "Other").id, "sandbox")
    _events(world, 4, scope=other)  # another tenant's, inside the window
    _events(world, 1, scope=Scope(world.scope.organization_id, "production"))  # another environment's
    table = programme_forecast.forecast_programme(world.db, world.scope, program_id)
    assert (table.window_days, table.events, table.passed) == (2, 0, True)
    assert programmes.publish(world.db, world.scope, program_id).version.guard_window_days == 2
    _events(world, 1)
    assert programme_forecast.forecast_programme(world.db, world.scope, program_id).events == 1


def test_a_window_too_large_or_too_slow_is_refused_with_its_code(world: World) -> None:
    program_id = _guarded(world, "1")
    _events(world, 3)
    large = _refusal(lambda: evaluate_draft(world.db, world.scope, program_id, limits=ForecastLimits(max_events=2)))
    assert (large.code, large.http_status, large.details["limit"], large.details["events"]) == (
        "forecast_too_large",
        422,
        2,
        3,
    )
    slow = _refusal(lambda: evaluate_draft(world.db, world.scope, program_id, limits=ForecastLimits(timeout_s=1e-9)))
    assert (slow.code, slow.http_status) == ("forecast_timeout", 422)
    assert evaluate_draft(world.db, world.scope, program_id).result.events == 3  # the defaults: it runs
    with pytest.raises(ValueError):
        ForecastLimits.from_env({"REWARDS_LAB_FORECAST_TIMEOUT_S": "0"})
    assert ForecastLimits.from_env({"REWARDS_LAB_FORECAST_MAX_EVENTS": "5"}).max_events == 5


def test_a_draft_changed_while_its_forecast_ran_is_not_published(world: World) -> None:
    program_id = _guarded(world, "0.10")
    stale = evaluate_draft(world.db, world.scope, program_id)
    world.rule(programmes.get_programme(world.db, world.scope, program_id), amount={"fixed": "1000"})
    with mock.patch.object(programmes, "guarded_forecast", return_value=stale):
        changed = _refusal(lambda: programmes.publish(world.db, world.scope, program_id))
    assert (changed.code, changed.http_status) == ("programme_draft_changed", 409)
    assert programmes.publish(world.db, world.scope, program_id).version.number == 1  # evaluated again: no events


@pytest.mark.parametrize(
    ("edit", "loosens"),
    [
        ({"guards": None}, True),
        ({"guards": []}, True),
        ({"guards": [{"metric": "issued", "period": "day", "max": "2"}]}, True),  # a max raised
        ({"guards": [{"metric": "issued", "period": "week", "max": "1"}]}, True),  # another guard
        ({"guard_window_days": 30}, True),  # the window shortened
        ({"guards": [{"metric": "issued", "period": "day", "max": "0.5"}]}, False),  # stricter
        ({"guard_window_days": 120}, False),
        ({"guards": [*AT_MOST_ONE_A_DAY, {"metric": "ceiling_exhausted_within_days", "min": 30}]}, False),
        ({"name": "renamed"}, False),
    ],
)
def test_removing_or_loosening_guards_needs_the_override_permission(
    world: World, edit: dict[str, Any], loosens: bool
) -> None:
    program_id = _guarded(world, "1")  # at most 1 a day, over the default 90 days
    body = validate(rq.ProgrammeUpdate, edit)

    def update() -> r.Programme:
        return programme_lifecycle.update_programme(world.db, world.scope, program_id, body, may_override=False)

    if loosens:
        assert _refusal(update).details["permission"] == "rewards.guards.override"
        unchanged = programmes.get_programme(world.db, world.scope, program_id)
        assert [g.model_dump(mode="json") for g in unchanged.guards] == AT_MOST_ONE_A_DAY
        allowed = programme_lifecycle.update_programme(world.db, world.scope, program_id, body, may_override=True)
        assert allowed.guard_window_days == edit.get("guard_window_days", 90)
    else:
        assert update().guard_window_days == edit.get("guard_window_days", 90)


def test_restoring_a_version_with_looser_guards_needs_the_permission(world: World) -> None:
    program_id = _guarded(world, "0.01", guards=[])
    programmes.publish(world.db, world.scope, program_id)
    tighter = validate(rq.ProgrammeUpdate, {"guards": AT_MOST_ONE_A_DAY})
    programme_lifecycle.update_programme(world.db, world.scope, program_id, tighter, may_override=False)
    restore = programme_lifecycle.restore_version
    denied = _refusal(lambda: restore(world.db, world.scope, program_id, "1", may_override=False))
    assert denied.code == "permission_denied"
    assert restore(world.db, world.scope, program_id, "1", may_override=True).guards == []
