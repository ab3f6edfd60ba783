"""Forecast math on hand-built issuance frames; every expected figure is computed here, independently."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from rewards_lab.forecasting import forecast

START = date(2026, 1, 1)


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Issuance rows in REPLAY_API.md's columns; each row gives day (offset), customer, rule, minor, and status."""
    records = []
    for seq, row in enumerate(rows):
        day = START + timedelta(days=row.get("day", 0))
        minor = row.get("minor", 100)
        records.append(
            {
                "seq": seq,
                "external_event_id": f"e-{seq}",
                "customer_id": row.get("customer", "c1"),
                "event_type": row.get("type", "order.completed"),
                "occurred_at": datetime(day.year, day.month, day.day, 12, tzinfo=UTC),
                "rule_index": row.get("rule", 0),
                "action_index": 0,
                "asset": "STAR",
                "amount": Decimal(minor).scaleb(-2),
                "amount_minor": minor,
                "status": row.get("status", "issued"),
                "error_code": row.get("error"),
            }
        )
    return pd.DataFrame(records)


def history_of(rows: list[dict[str, Any]], **kw: Any) -> forecast.History:
    return forecast.history(frame(rows), decimals=2, **kw)


def test_daily_fills_missing_days_and_sums_only_issued_rows() -> None:
    rows = [
        {"day": 0, "minor": 150},
        {"day": 0, "minor": 250, "rule": 1},
        {"day": 2, "minor": 1000},
        {"day": 2, "minor": 999, "status": "failed", "error": "asset_supply_exhausted"},
        {"day": 3, "minor": 5, "rule": 1},
    ]
    table = forecast.daily(history_of(rows))
    assert list(table["day"]) == [START + timedelta(days=i) for i in range(4)]
    assert list(table["issued"]) == [Decimal("4.00"), Decimal("0.00"), Decimal("10.00"), Decimal("0.05")]
    assert list(table["cumulative"]) == [Decimal("4.00"), Decimal("4.00"), Decimal("14.00"), Decimal("14.05")]
    assert list(table["issuances"]) == [2, 0, 1, 1]
    by_rule = forecast.daily(history_of(rows), by="rule")
    rule1 = by_rule[by_rule["rule_index"] == 1]
    assert list(rule1["cumulative"]) == [Decimal("2.50"), Decimal("2.50"), Decimal("2.50"), Decimal("2.55")]


def test_the_decimals_are_inferred_from_amount_and_amount_minor() -> None:
    assert forecast.history(frame([{"minor": 0}, {"minor": 1234}])).decimals == 2


def test_per_rule_and_per_customer() -> None:
    rows = [
        {"customer": "a", "minor": 100},
        {"customer": "b", "minor": 300},
        {"customer": "b", "minor": 50, "rule": 1},
        {"customer": "c", "minor": 70, "rule": 1, "status": "failed", "error": "asset_supply_exhausted"},
    ]
    rules = forecast.per_rule(history_of(rows)).set_index("rule_index")
    assert rules.loc[0, "issued"] == Decimal("4.00") and rules.loc[0, "customers"] == 2
    assert rules.loc[1, "issued"] == Decimal("0.50") and rules.loc[1, "failed"] == 1
    assert rules.loc[1, "issuances"] == 1 and rules.loc[1, "customers"] == 1
    customers = forecast.per_customer(history_of(rows))
    assert list(customers["customer_id"]) == ["b", "a"]  # c earned nothing
    assert list(customers["issued"]) == [Decimal("3.50"), Decimal("1.00")]
    assert list(customers["issuances"]) == [2, 1]


def test_liability_starts_from_the_opening_supply_and_headroom_from_the_ceiling() -> None:
    rows = [{"day": 0, "minor": 100}, {"day": 1, "minor": 200}]
    table = forecast.liability(history_of(rows, opening_supply="50", ceiling="60"))
    assert list(table["liability"]) == [Decimal("51.00"), Decimal("53.00")]
    assert list(table["headroom"]) == [Decimal("9.00"), Decimal("7.00")]
    assert list(forecast.liability(history_of(rows))["headroom"]) == [None, None]


def test_a_constant_history_projects_exactly_with_no_range() -> None:
    rows = [{"day": d, "minor": 250} for d in range(10)]
    projection = forecast.project(history_of(rows, opening_supply=10), days=5, window=7)
    issued_so_far = 10 + 10 * 2.5
    expected = [issued_so_far + 2.5 * k for k in range(1, 6)]
    assert projection.frame["expected"].tolist() == pytest.approx(expected)
    assert projection.frame["low"].tolist() == pytest.approx(expected)
    assert projection.frame["high"].tolist() == pytest.approx(expected)
    assert list(projection.frame["day"]) == [START + timedelta(days=9 + k) for k in range(1, 6)]
    assert projection.mean_daily == pytest.approx(2.5) and projection.sd_daily == pytest.approx(0)
    capped = forecast.project(history_of(rows, opening_supply=10, ceiling=40), days=5, window=7)
    assert capped.frame["expected"].tolist() == pytest.approx([37.5, 40, 40, 40, 40])
    assert capped.frame["high"].max() == 40


def binomial_quantile(n: int, q: float) -> int:
    """Smallest k with P(Binomial(n, 1/2) <= k) >= q."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) / 2**n
        if total >= q - 1e-12:
            return k
    return n


def test_the_range_matches_the_bootstrap_distribution() -> None:
    # Days alternate 0 and 10.00: a day drawn from the window is 0 or 10.00 with probability 1/2, so the
    # issuance of the next k days is 10.00 x Binomial(k, 1/2).
    rows = [{"day": d, "minor": 1000 if d % 2 else 0} for d in range(20) if d % 2]
    rows.append({"day": 0, "minor": 0, "status": "failed", "error": "wallet_frozen"})  # day 0 exists, issues 0
    projection = forecast.project(history_of(rows), days=20, window=20, draws=20_000, level=0.9)
    start = 10 * 10.0
    for k in (5, 20):
        row = projection.frame.iloc[k - 1]
        assert row["expected"] == pytest.approx(start + 5.0 * k)
        assert row["low"] == pytest.approx(start + 10 * binomial_quantile(k, 0.05), abs=10)
        assert row["high"] == pytest.approx(start + 10 * binomial_quantile(k, 0.95), abs=10)
    widths = (projection.frame["high"] - projection.frame["low"]).tolist()
    assert widths[-1] > widths[4] > 0


def test_exhaustion_historic_projected_and_none() -> None:
    refused = [{"day": 0}, {"day": 3, "status": "failed", "error": "asset_supply_exhausted"}, {"day": 5}]
    assert forecast.exhaustion(history_of(refused, ceiling=100)).on == START + timedelta(days=3)
    assert forecast.exhaustion(history_of(refused)).kind == "no_ceiling"
    # 5 days of 20.00 from an opening of 100 with a ceiling of 400: 200 left at 20.00 a day = 10 more days.
    steady = [{"day": d, "minor": 2000} for d in range(5)]
    result = forecast.exhaustion(history_of(steady, ceiling=400, opening_supply=100))
    assert result.kind == "projected"
    assert result.on == result.earliest == result.latest == START + timedelta(days=4 + 10)
    assert result.describe() == "the ceiling would be reached on 2026-01-15 (range 2026-01-15 to 2026-01-15)"
    far = forecast.exhaustion(history_of(steady, ceiling=10**9), horizon_days=365)
    assert far.kind == "not_within" and far.on is None
    assert far.describe() == "the ceiling is not reached within 365 days"


def test_segments_follow_the_domain_definitions() -> None:
    # as of day 120 (the last event): "new" first seen < 30 days ago, "active" last event < 30 days ago,
    # "lapsing" 30-89 days, "dormant" 90+ days; high value = top decile of issuance in the last 90 days
    # among at least 10 customers.
    rows = [{"customer": "old-active", "day": 0, "minor": 1}, {"customer": "old-active", "day": 110, "minor": 1}]
    rows += [{"customer": "newcomer", "day": 100, "minor": 1}]
    rows += [{"customer": "lapsing", "day": 10, "minor": 1}, {"customer": "lapsing", "day": 60, "minor": 1}]
    rows += [{"customer": "dormant", "day": 5, "minor": 1}]
    rows += [{"customer": f"peer-{i}", "day": 120, "minor": 10 + i} for i in range(9)]
    rows += [{"customer": "whale", "day": 119, "minor": 100_000}]
    # issuance in the window, sorted: 1, 1, 1, 10..18, 100000 (13 customers); the linear 0.9 quantile sits at
    # position 10.8: 17 + 0.8 x (18 - 17) = 17.8, so peer-8 (18) and the whale are high value.
    members = forecast.segment_of_customers(history_of(rows))
    segments = members.groupby("customer_id")["segment"].apply(list).to_dict()
    assert segments["old-active"] == ["active"]
    assert segments["newcomer"] == ["new", "active"]
    assert segments["lapsing"] == ["lapsing"]
    assert segments["dormant"] == ["dormant"]
    assert segments["whale"] == ["new", "active", "high_value"]
    assert segments["peer-8"] == ["new", "active", "high_value"] and segments["peer-7"] == ["new", "active"]
    table = forecast.per_segment(history_of(rows)).set_index("segment")
    assert table.loc["high_value", "issued"] == Decimal("1000.18")
    assert table.loc["dormant", "customers"] == 1
    total = sum(r.get("minor", 100) for r in rows)
    assert table.loc["high_value", "share"] == pytest.approx(100_018 / total)


def test_compare_says_how_much_more_the_second_issues() -> None:
    published = history_of([{"day": 0, "minor": 100}, {"day": 1, "minor": 100, "type": "review.posted"}])
    draft = history_of([{"day": 0, "minor": 150}, {"day": 2, "minor": 100, "type": "customer.signed_up"}])
    result = forecast.compare(published, draft, labels=("published", "draft"))
    totals = result.totals.set_index("metric")
    assert totals.loc["issued", "difference"] == Decimal("0.50")
    assert totals.loc["issued", "draft"] == Decimal("2.50")
    assert list(result.daily["difference"]) == [Decimal("0.50"), Decimal("-0.50"), Decimal("0.50")]
    by_type = result.by_event_type.set_index("event_type")
    assert by_type.loc["review.posted", "difference"] == Decimal("-1.00")
    assert by_type.loc["customer.signed_up", "difference"] == Decimal("1.00")
