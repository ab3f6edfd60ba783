"""Liability (issue 19): issued - redeemed - expired - reversed per day from real DuckDB replays, the redemption
and expiry rates fitted on hand-computable histories, the projection's middle path worked out by hand, the
ceiling stopping projected issuance, and the money value."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.liability import forecast_liability, liability_history
from rewards_lab.replay.engine import ReplayResult, replay

BASE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def shop(ceiling: str | None = None, value: str | None = None) -> ProgrammeDefinition:
    """Orders earn their amount in points (0 decimals); a refund takes back a fifth of its order's reward."""
    asset: dict[str, Any] = {"name": "Points", "symbol": "PTS", "type": "points", "decimals": 0}
    asset |= {"supply_ceiling": ceiling} if ceiling else {}
    asset |= {"value_per_unit": value} if value else {}
    rules = [
        {"event_type": "order.completed", "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}]},
        {
            "event_type": "order.refunded",
            "actions": [{"type": "reverse", "original": {"field": "order_id"}, "fraction": "0.2"}],
        },
    ]
    return parse_programme({"programme": {"name": "Shop"}, "asset": asset, "rules": rules})


def event(name: str, kind: str, customer: str, day: int, **data: Any) -> dict[str, Any]:
    at = BASE + timedelta(days=day, hours=len(name))
    return {"external_event_id": name, "type": kind, "customer_id": customer, "occurred_at": at, "data": data}


# day 0: alice earns 100; day 1: alice spends 30; day 2: bob earns 50, a refund takes back 10, alice spends 12
EVENTS = [
    event("o1", "order.completed", "alice", 0, amount=100),
    event("o2", "order.completed", "bob", 2, amount=50),
    event("r2", "order.refunded", "bob", 2, order_id="o2"),
]
SPENDS = [
    {"customer_id": "alice", "amount": 30, "occurred_at": BASE + timedelta(days=1)},
    {"customer_id": "alice", "amount": 12, "occurred_at": BASE + timedelta(days=2, hours=5)},
]


def replayed(definition: ProgrammeDefinition | None = None, spends: list[dict[str, Any]] | None = SPENDS) -> Any:
    redemptions = pd.DataFrame(spends) if spends else None
    return replay(pd.DataFrame(EVENTS), definition or shop(), redemptions=redemptions)


class WithExpiry:
    """A replay result with an `expired` table, as the replay will have once it computes FIFO expiry."""

    def __init__(self, result: ReplayResult, expired: pd.DataFrame) -> None:
        self._result, self.expired = result, expired

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


def test_liability_is_issued_less_redeemed_expired_and_reversed_per_day() -> None:
    past = liability_history(replayed(shop(value="0.01")))
    frame = past.frame
    assert list(frame["day"]) == [date(2026, 3, 2), date(2026, 3, 3), date(2026, 3, 4)]
    assert [int(v) for v in frame["issued"]] == [100, 0, 50]
    assert [int(v) for v in frame["redeemed"]] == [0, 30, 12]
    assert [int(v) for v in frame["reversed"]] == [0, 0, 10]
    assert [int(v) for v in frame["expired"]] == [0, 0, 0]
    assert [int(v) for v in frame["liability"]] == [100, 70, 98]
    assert list(frame["value"]) == [Decimal("1.00"), Decimal("0.70"), Decimal("0.98")]  # the file's value_per_unit
    assert past.closing == Decimal(98) and past.supply_minor == 98
    # the same history without redemptions: the forecast module's liability (issued net of reversals)
    plain = liability_history(replayed(spends=None))
    assert [int(v) for v in plain.frame["liability"]] == [100, 100, 140]
    assert [int(v) for v in forecast.liability(replayed(spends=None))["liability"]] == [100, 100, 140]
    expired = pd.DataFrame({"expired_at": [BASE + timedelta(days=2, hours=10)], "amount_minor": [20]})
    with_expiry = liability_history(WithExpiry(replayed(), expired))
    assert [int(v) for v in with_expiry.frame["expired"]] == [0, 0, 20]
    assert [int(v) for v in with_expiry.frame["liability"]] == [100, 70, 78]


def test_the_rates_are_what_left_over_the_exposure_and_the_middle_path_follows_them() -> None:
    """Exposure per day: liability at its start + net issuance: 0 + 100, 100 + 0, 70 + 40 = 310 point-days.
    Redeemed 42 of them, expired 20: rates 42/310 and 20/310, breakage 20/62. Mean net issuance (100+0+40)/3."""
    expired = pd.DataFrame({"expired_at": [BASE + timedelta(days=2, hours=10)], "amount_minor": [20]})
    result = forecast_liability(WithExpiry(replayed(shop(value="0.5")), expired), days=2, draws=400)
    model = result.model
    assert model.redemption_rate == pytest.approx(42 / 310)
    assert model.expiry_rate == pytest.approx(20 / 310)
    assert model.breakage == pytest.approx(20 / 62)
    assert model.mean_daily_issuance == pytest.approx(140 / 3)
    assert model.window == 3 and "point-day" in model.method
    keep = 1 - 62 / 310
    first = (78 + 140 / 3) * keep
    assert list(result.projection["mid"]) == pytest.approx([first, (first + 140 / 3) * keep])
    assert list(result.projection["day"]) == [date(2026, 3, 5), date(2026, 3, 6)]
    assert result.projection["value_mid"].iloc[0] == pytest.approx(first * 0.5)
    low, high = model.redemption_range
    assert 0 <= low <= model.redemption_rate <= high <= 1
    assert (result.projection["low"] <= result.projection["high"]).all()


def test_projected_issuance_stops_at_the_ceiling_and_without_outflows_nothing_leaves() -> None:
    """Supply at the end is 150 - 10 - 42 = 98 under a ceiling of 150: the projection can never hold more than
    the ceiling (nothing expires here, so liability is the supply); without one it grows past it."""
    capped = forecast_liability(replayed(shop(ceiling="150")), days=60, draws=200)
    free = forecast_liability(replayed(), days=60, draws=200)
    assert capped.projection[["low", "mid", "high"]].to_numpy().max() <= 150 + 1e-9
    assert free.projection["mid"].iloc[-1] > 150
    assert capped.end["low"] <= capped.end["mid"] <= capped.end["high"]
    still = forecast_liability(replayed(spends=None), days=3, draws=50)
    assert (still.model.redemption_rate, still.model.expiry_rate, still.model.breakage) == (0.0, 0.0, None)
    assert list(still.projection["mid"]) == pytest.approx([140 + 140 / 3 * i for i in (1, 2, 3)])
    with pytest.raises(ValueError, match="level"):
        forecast_liability(replayed(), level=1.5)


def test_expired_points_give_room_back_under_the_ceiling_as_in_the_ledger() -> None:
    """Supply at the end: 150 issued - 10 reversed - 42 redeemed - 20 expired = 78 (the ledger's outstanding
    supply); under a ceiling of 140 the first projected day has 62 of room and issues its whole 140/3, where
    counting expired points (98) would have cut it to 42."""
    expired = pd.DataFrame({"expired_at": [BASE + timedelta(days=2, hours=10)], "amount_minor": [20]})
    past = liability_history(WithExpiry(replayed(shop(ceiling="140")), expired))
    assert past.supply_minor == 78
    result = forecast_liability(WithExpiry(replayed(shop(ceiling="140")), expired), days=1, draws=50)
    keep = 1 - 62 / 310
    assert result.projection["mid"].iloc[0] == pytest.approx((78 + 140 / 3) * keep)
