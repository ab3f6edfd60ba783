"""Expiry instants (rewards_lab.domain.expiry): `month_end` of a month index is `expires_at` of every instant in
that local month (what the replay relies on to ask once per month), and `after_us` is `after_days`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.expiry import LAST_INSTANT, ExpiryPolicy, expires_at, month_end, month_index, reward_expiry

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Pacific/Chatham", "Australia/Lord_Howe"]
policies = st.builds(ExpiryPolicy, at_end_of=st.sampled_from(["month", "quarter", "year"]), after=st.integers(0, 100))


@settings(max_examples=300, deadline=None)
@given(policies, st.integers(-(2 * 10**15), 9 * 10**15), st.sampled_from(ZONES))
def test_the_end_depends_only_on_the_local_month(policy: ExpiryPolicy, at_us: int, zone: str) -> None:
    issued = datetime(1970, 1, 1) + timedelta(microseconds=at_us)
    local = issued.replace(tzinfo=UTC).astimezone(ZoneInfo(zone))
    end = expires_at(policy, issued, zone)
    assert end == month_end(policy, month_index(local.year, local.month), zone)
    assert end > issued
    if end != LAST_INSTANT:  # local midnight opening a month after the issuance's period
        opening = end.replace(tzinfo=UTC).astimezone(ZoneInfo(zone))
        assert (opening.day, opening.hour, opening.minute) == (1, 0, 0)


def test_month_index_and_period_ends() -> None:
    assert month_index(2026, 1) == 2026 * 12 and month_index(2026, 12) == 2026 * 12 + 11
    quarter = ExpiryPolicy(at_end_of="quarter")
    assert month_end(quarter, month_index(2026, 2), "UTC") == datetime(2026, 4, 1)
    assert month_end(ExpiryPolicy(at_end_of="year", after=1), month_index(2026, 2), "UTC") == datetime(2028, 1, 1)
    assert month_end(ExpiryPolicy(at_end_of="year", after=100), month_index(9990, 2), "UTC") == LAST_INSTANT
    assert month_end(ExpiryPolicy(at_end_of="month"), month_index(2026, 3), "Europe/Paris") == datetime(2026, 3, 31, 22)


def test_after_days() -> None:
    policy = ExpiryPolicy(after_days=30)
    assert policy.after_us == 30 * 86_400_000_000
    assert ExpiryPolicy(at_end_of="month").after_us is None
    issued = datetime(2026, 3, 2, 9, 30)
    assert expires_at(policy, issued) == issued + timedelta(days=30)


def test_a_rewards_expiry_is_its_programmes_in_its_zone_else_its_assets_in_utc() -> None:
    programme, asset = ExpiryPolicy(after_days=30), ExpiryPolicy(at_end_of="year")
    assert reward_expiry(programme, "Europe/Paris", asset) == (programme, "Europe/Paris")
    assert reward_expiry(None, "Europe/Paris", asset) == (asset, "UTC")
    assert reward_expiry(programme, "Asia/Kolkata", None) == (programme, "Asia/Kolkata")
    assert reward_expiry(None, "Europe/Paris", None) is None
