"""The Python client and the server's forecast gate (issue 31): `forecast_programme` answers a typed
`ForecastResult`; a refused publish raises `ForecastGuardFailed` (a `ConflictError`) carrying the same table,
parsed; an override publishes only with rewards.guards.override. Over a real server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewards_lab.client import (
    ApiError,
    AuthorizationError,
    ConflictError,
    ForecastGuardFailed,
    RewardsClient,
    ValidationError,
)
from rewards_lab.client._errors import error_from_envelope
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ErrorType
from tests.live_server import LiveServer, start_server, stop_and_verify

PUBLISHER = ["rewards.view", "rewards.edit", "rewards.activate"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("client-gate") / "gate.duckdb", "ClientGate")
    yield live
    stop_and_verify(live)


def _client(server: LiveServer, key: str | None = None) -> RewardsClient:
    return RewardsClient(server.base_url, key or server.keys["sandbox"], server.organization_id, "sandbox")


def test_a_refused_publish_raises_the_typed_refusal_with_the_servers_table(server: LiveServer) -> None:
    with _client(server) as client:
        asset = client.create_asset(name="Gate", symbol="CGATE", type="points", decimals=2)
        client.activate_asset(asset.id)
        guards = [{"metric": "issued", "period": "day", "max": "1"}]
        programme = client.create_programme(name="Client gated", asset_id=asset.id, guards=guards)
        actions = [{"type": "issue", "amount": {"fixed": "250"}}]
        client.create_rule(program_id=programme.id, event_type="visit.done", actions=actions)
        for n in range(3):
            client.submit_event(type="visit.done", external_event_id=f"c{n}", customer_id="x")
        forecast = client.forecast_programme(programme.id)
        assert isinstance(forecast, r.ForecastResult) and forecast.passed is False and forecast.events == 3
        (row,) = forecast.checks
        assert (row.metric, row.limit, row.draft, row.published, row.passed) == (
            "issued per day",
            "<= 1",
            "750.00",
            None,
            False,
        )
        with pytest.raises(ForecastGuardFailed) as refused:
            client.publish(programme.id)
        error = refused.value
        assert isinstance(error, ConflictError) and isinstance(error, ApiError) and error.http_status == 409
        assert error.forecast is not None and error.forecast.checks == forecast.checks
        assert error.failed == error.checks == forecast.checks
        assert error.forecast.window_days == 90 and error.forecast.program_id == programme.id

        key = client.create_api_key(name="publisher only", permissions=PUBLISHER)
        with _client(server, key.secret) as publisher:
            with pytest.raises(AuthorizationError) as denied:
                publisher.publish(programme.id, guard_override="approved")
            assert denied.value.code == "permission_denied"
        published = client.publish(programme.id, guard_override="approved, ticket 12")
        assert published.version.number == 1 and published.version.guard_override is not None


def test_only_the_code_of_its_own_type_gets_the_refusals_class() -> None:
    conflict, validation = ErrorType.CONFLICT.value, ErrorType.VALIDATION.value
    envelope = {"error": {"type": conflict, "code": "forecast_guard_failed", "message": "m", "details": {}}}
    plain = error_from_envelope(envelope, 409, None)
    assert isinstance(plain, ForecastGuardFailed) and plain.forecast is None and plain.checks == []
    other = {"error": {"type": validation, "code": "forecast_guard_failed", "message": "m"}}
    assert type(error_from_envelope(other, 422, None)) is ValidationError
