"""How the lab names rules and shows its tables (issue 28): one label per rule (position and name, else event type
and first condition), used by the rules table, simulation tables, the simulator widget and forecasts; tables
rendered whole in a notebook (no cell cut with an ellipsis), per-segment shares said to overlap."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pandas as pd

from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme
from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.labels import rule_label, rule_labels
from rewards_lab.lab.sweep_labels import parameter_label
from rewards_lab.lab.widgets import Simulator
from rewards_lab.lab.workbench import Lab

PROGRAMMES = Path(__file__).resolve().parents[2] / "data" / "programmes"
GOLD_WEEKEND = (
    'channel in ["store", "app"] and customer.attributes.tier == "gold" and occurred_at.weekday between 6 and 7'
)


def _unnamed(stem: str) -> ProgrammeDefinition:
    """A sample programme with its rules' names taken out."""
    data = load_programme(PROGRAMMES / f"{stem}.json").payload()
    for rule in data["rules"]:
        rule.pop("name", None)
    return ProgrammeDefinition.model_validate(data)


def test_a_rule_is_labelled_by_position_and_name_else_by_event_type_and_first_condition() -> None:
    named = load_programme(PROGRAMMES / "coffee_club.json").rules
    assert rule_label(1, named[1]) == "2 · Gold members' weekend points"  # position 1: numbered from 1
    unnamed = _unnamed("coffee_club").rules
    labels = rule_labels(unnamed)
    assert labels == {
        0: '1 · order.completed when channel in ["store", "app"]',
        1: '2 · order.completed when channel in ["store", "app"] and 2 more',
        2: '3 · order.completed when channel != "web" and 1 more',
    }
    assert len(set(labels.values())) == 3  # rules of one event type told apart
    signup = _unnamed("spring_launch").rules[1]
    assert rule_label(1, signup) == "2 · customer.signed_up"  # no condition: nothing to add


def test_the_rules_table_shows_names_and_whole_conditions_in_a_notebook() -> None:
    coffee = Lab().load(PROGRAMMES / "coffee_club.json")
    table = coffee.rules_table()
    assert list(table["name"]) == [rule.name for rule in load_programme(PROGRAMMES / "coffee_club.json").rules]
    assert table.loc[1, "when"] == GOLD_WEEKEND
    shown = table._repr_html_()
    assert GOLD_WEEKEND.replace('"', "&quot;") in shown  # the whole condition, escaped, not cut
    assert "…" not in shown and "..." not in shown
    assert "white-space: pre-wrap" in shown and "Gold members&#x27; weekend points" in shown
    assert shown == coffee.rules_table()._repr_html_()  # deterministic: committed outputs compare equal
    # pandas' own rendering of the same frame cuts it: what a designer saw before
    assert "..." in pd.DataFrame(table)._repr_html_()  # type: ignore[operator]  # (pandas-stubs: a column)


def test_simulation_tables_name_the_rules_and_show_every_reason_whole() -> None:
    referral = Lab().load(PROGRAMMES / "refer_a_friend.json")
    table = referral.simulate_table([{"type": "customer.signed_up", "referrer_id": "cust_1"}])
    assert list(table["rule"]) == ["1 · Referral bonus for both", "2 · Welcome bonus"]
    stopped = table["reasons"].iloc[1]
    assert stopped == 'not applied: rule "Referral bonus for both" (priority 0) matched first and stops processing'
    shown = table._repr_html_()
    assert "stops processing" in shown and "…" not in shown
    spring = Lab().load(PROGRAMMES / "spring_launch.json")
    short = spring.simulate_table([{"type": "order.completed", "amount": 19.99}], rule=0)
    reason = short["reasons"].iloc[0]
    assert len(reason) > 50 and reason.replace(">", "&gt;") in short._repr_html_()  # longer than pandas' cut


def test_the_simulator_widget_lists_rules_by_name_in_a_whole_table() -> None:
    referral = Lab().load(PROGRAMMES / "refer_a_friend.json")
    simulator = Simulator(referral, example={"type": "customer.signed_up", "referrer_id": "cust_1"})
    simulator.run.click()
    shown = simulator.result.value
    assert "1 · Referral bonus for both" in shown and "2 · Welcome bonus" in shown
    assert "rule &quot;Referral bonus for both&quot; (priority 0) matched first and stops processing" in shown
    assert "rul_" not in shown and "white-space: pre-wrap" in shown


def test_forecasts_label_rules_by_name_and_say_that_segments_overlap() -> None:
    spring = Lab().load(PROGRAMMES / "spring_launch.json")
    spring.publish()
    at = datetime(2026, 3, 2, 12, tzinfo=UTC)
    events = pd.DataFrame(
        {
            "external_event_id": ["o-1", "s-1", "o-2"],
            "customer_id": ["c1", "c2", "c2"],
            "type": ["order.completed", "customer.signed_up", "order.completed"],
            "occurred_at": [at, at, at],
            "amount": [40.0, None, 100.0],
        }
    )
    history = forecast.history(spring.replay(events))
    assert history.rule_labels[0] == "1 · Cashback on orders of 20 or more"
    by_rule = forecast.per_rule(history)
    assert list(by_rule["rule"]) == ["1 · Cashback on orders of 20 or more", "2 · Welcome bonus"]
    assert list(by_rule["issued"]) == [Decimal("7.00"), Decimal("10.00")]
    segments = forecast.per_segment(history)
    assert segments["share"].sum() > 1  # c2 is new and active: counted in both
    shown = segments._repr_html_()
    assert html.escape(forecast.SEGMENTS_OVERLAP) in shown
    assert "100.0%" in shown  # shares as percentages


def test_sweep_parameters_name_their_rule_as_every_list_of_rules_does() -> None:
    unnamed = _unnamed("coffee_club")
    threshold = "rules[1].conditions[0].value"
    label = parameter_label(threshold, unnamed.payload())  # read from the file's JSON, no labels given
    assert label.startswith(rule_labels(unnamed.rules)[1] + ": ")
    assert label.startswith('2 · order.completed when channel in ["store", "app"] and 2 more: ')
    named = load_programme(PROGRAMMES / "coffee_club.json")
    rate = parameter_label("rules[1].actions[0].amount.rate", named.payload())
    assert rate.startswith("2 · Gold members' weekend points: ")
