"""The forecast with caps, budgets and refunds (issue 18): the refund stream generator, issuance net of reversals,
what caps and budgets cut, liability net of reversals, and the figure, all held to the replay's own totals."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

from rewards_lab.forecasting import forecast
from rewards_lab.lab import plots, synthetic
from rewards_lab.lab.workbench import Lab

FAIR_SHOP = Path(__file__).resolve().parents[2] / "data" / "programmes" / "fair_shop.json"


@pytest.fixture(scope="module")
def replayed() -> tuple[object, dict[str, object]]:
    events = synthetic.with_refunds(synthetic.generate_events(6000, 300, seed=3, days=60), seed=3, share=0.2)
    shop = Lab().load(FAIR_SHOP)
    shop.publish()
    result = shop.replay(events.to_pandas(), opening_supply="1000")
    return result, result.totals()


def test_the_refund_stream_names_earlier_orders_of_the_same_customer_for_at_most_their_amount() -> None:
    events = synthetic.generate_events(3000, 200, seed=5)
    first, again = synthetic.with_refunds(events, seed=5), synthetic.with_refunds(events, seed=5)
    assert first.equals(again)
    refunds = first.filter(pc.equal(first.column("type"), "order.refunded")).to_pylist()
    orders = {row["external_event_id"]: row for row in events.to_pylist() if row["type"] == "order.completed"}
    assert 0.04 * len(orders) < len({r["order_id"] for r in refunds}) < 0.07 * len(orders)
    assert any(r["refund_amount"] < orders[r["order_id"]]["amount"] for r in refunds)  # some partial
    for refund in refunds:
        order = orders[refund["order_id"]]
        assert refund["customer_id"] == order["customer_id"] and refund["occurred_at"] > order["occurred_at"]
        assert Decimal(0) <= refund["refund_amount"] <= order["amount"]
    times = first.column("occurred_at").to_pylist()
    assert times == sorted(times) and first.num_rows == events.num_rows + len(refunds)


def test_per_day_figures_add_up_to_the_replays_totals(replayed: tuple[object, dict[str, object]]) -> None:
    result, totals = replayed
    history = forecast.history(result)
    per_day = forecast.limits_and_reversals(history)
    for column in ("requested", "cut", "issued", "reversed", "net"):
        assert sum(per_day[column], Decimal(0)) == totals[column], column
    assert int(per_day["limited"].sum()) == totals["limited"]
    by_scope = sum(per_day["cut_by_rule_caps"]) + sum(per_day["cut_by_programme_caps"]) + sum(per_day["cut_by_budget"])
    assert by_scope == totals["cut"] and Decimal(totals["reversed"]) > 0 and Decimal(totals["cut"]) > 0
    daily = forecast.daily(history)
    assert daily["net_cumulative"].iloc[-1] == totals["net"]
    assert forecast.liability(history)["liability"].iloc[-1] == Decimal(1000) + Decimal(str(totals["net"]))
    projection = forecast.project(history, days=7)
    assert projection.frame["expected"].iloc[0] > float(Decimal(1000) + Decimal(str(totals["net"])))


def test_a_replay_without_caps_or_refunds_keeps_its_tables() -> None:
    spring = Lab().load(FAIR_SHOP.parent / "spring_launch.json")
    spring.publish()
    history = forecast.history(spring.replay(synthetic.generate_events(500, 50, seed=1).to_pandas()))
    assert forecast.limits_and_reversals(history).empty
    assert list(forecast.daily(history).columns) == ["day", "asset", "issued", "issuances", "cumulative"]


def test_the_figure_stacks_what_was_kept_taken_back_and_cut(replayed: tuple[object, dict[str, object]]) -> None:
    result, _ = replayed
    figure = plots.limits_and_reversals(result)
    (axes,) = figure.axes
    assert [c.get_label() for c in axes.containers] == [
        "kept",
        "taken back by refunds",
        "cut by rule caps",
        "cut by programme caps",
        "cut by the budget",
    ]
    assert plots.png(figure).startswith(b"\x89PNG")
