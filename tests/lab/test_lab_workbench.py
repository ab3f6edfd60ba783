"""The Lab: programme files into the engine's draft, edits, simulation tables, publish, versions, export, diff."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import load_programme
from rewards_lab.lab.workbench import Lab
from rewards_lab.store.verification import verify_ledger

PROGRAMMES = Path(__file__).resolve().parents[2] / "data" / "programmes"
SPRING = PROGRAMMES / "spring_launch.json"


def test_a_file_loads_into_the_draft_and_exports_back_unchanged(tmp_path: Path) -> None:
    with Lab(tmp_path / "lab.duckdb") as lab:
        spring = lab.load(SPRING)
        assert [rule.event_type for rule in spring.rules()] == [
            "order.completed",
            "customer.signed_up",
            "review.posted",
        ]
        assert spring.asset().status == "active" and spring.info().current_version is None
        exported = spring.export(tmp_path / "out.json")
        original = load_programme(SPRING)
        back = load_programme(exported)
        assert back.rules == original.rules and back.programme == original.programme
        assert Decimal(back.asset.supply_ceiling or "0") == Decimal("1000000")
        organization = lab.organization_id
        program_id = spring.id
        assert verify_ledger(lab.database.reader()).ok
    with Lab(tmp_path / "lab.duckdb", organization_id=organization) as reopened:
        assert [p.id for p in reopened.programmes()] == [program_id]
        assert len(reopened.open(program_id).rules()) == 3


def test_edits_go_to_the_draft_and_publish_freezes_them() -> None:
    lab = Lab()
    spring = lab.load(SPRING)
    spring.publish()
    spring.update_rule(0, amount={"per": "amount", "rate": Decimal("0.07")})
    spring.remove_rule(1)
    added = spring.add_rule("referral.converted", conditions=[("tier", "gte", 2)], amount={"fixed": "5.00"})
    assert added.version is None
    assert [r.event_type for r in spring.rules("live")] == ["order.completed", "customer.signed_up", "review.posted"]
    assert [r.event_type for r in spring.rules()] == ["order.completed", "review.posted", "referral.converted"]
    summary = spring.diff().summary()
    assert sum(line.startswith("-") for line in summary) == 2  # old rate, the sign-up bonus
    assert sum(line.startswith("+") for line in summary) == 2  # new rate, the referral rule
    spring.publish()
    table = spring.versions_table()
    assert list(table["version"]) == [1, 2, "draft"] and list(table["rules"]) == [3, 3, 3]
    assert spring.diff().is_empty


def test_contract_errors_name_the_field() -> None:
    spring = Lab().load(SPRING)
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", conditions=[("amount", "like", 3)], amount={"fixed": "1"})
    assert caught.value.details["field"] == "conditions[0].operator"
    with pytest.raises(ServiceError) as caught:
        spring.add_rule("order.completed", amount={"fixed": "1.005"})
    assert caught.value.code == "amount_too_many_decimals"
    with pytest.raises(ServiceError) as caught:
        spring.update_rule(7, amount={"fixed": "1"})
    assert caught.value.code == "rule_not_found"


def test_loading_a_different_asset_with_a_taken_symbol_is_refused() -> None:
    lab = Lab()
    first = lab.load(SPRING)
    again = lab.load(SPRING)  # same asset: reused
    assert again.info().asset_id == first.info().asset_id
    changed = load_programme(SPRING).model_copy(deep=True)
    changed.asset.decimals = 3
    with pytest.raises(ServiceError) as caught:
        lab.load(changed)
    assert caught.value.code == "asset_symbol_taken" and caught.value.details["field"] == "asset.symbol"


def test_simulating_a_table_gives_one_row_per_event_and_rule_with_reasons() -> None:
    spring = Lab().load(SPRING)
    events = pd.DataFrame(
        {
            "external_event_id": ["o-1", "r-1", "o-2", "o-3"],
            "type": ["order.completed", "review.posted", "order.completed", "order.completed"],
            "amount": [42.5, None, 19.99, None],
            "photos": [None, 2, None, None],
        }
    )
    table = spring.simulate_table(events)
    assert len(table) == 4 * 3
    matched = table[table["matched"]]
    assert list(zip(matched["external_event_id"], matched["rule_index"], matched["amount"], strict=True)) == [
        ("o-1", 0, Decimal("2.12")),
        ("r-1", 2, Decimal("2.50")),
    ]
    o2 = table[(table["external_event_id"] == "o-2") & (table["rule_index"] == 0)].iloc[0]
    assert "19.99 >= 20 does not hold" in o2["reasons"]
    o3 = table[(table["external_event_id"] == "o-3") & (table["rule_index"] == 0)].iloc[0]
    assert "'amount' is missing" in o3["reasons"]
    # the same through the service's single-event simulation
    single = spring.simulate({"type": "order.completed", "amount": Decimal("42.5")})
    assert single.totals[0].amount == "2.12"
    one_rule = spring.simulate_table(events, rule=2)
    assert list(one_rule["rule_index"]) == [2, 2, 2, 2] and list(one_rule["matched"]) == [False, True, False, False]


def test_a_data_column_holds_the_event_data() -> None:
    spring = Lab().load(SPRING)
    events = [
        {"type": "order.completed", "data": '{"amount": 100}'},
        {"type": "order.completed", "data": {"amount": "100"}},  # a string is not a number
    ]
    table = spring.simulate_table(events, rule=0)
    assert list(table["amount"]) == [Decimal("5.00"), Decimal("0")]
    assert "not a number" in table["reasons"].iloc[1]


def test_priority_stop_processing_and_beneficiaries_survive_load_and_export(tmp_path: Path) -> None:
    path = PROGRAMMES / "refer_a_friend.json"
    referral = Lab().load(path)
    assert referral.definition() == load_programme(path)
    assert load_programme(referral.export(tmp_path / "out.json")) == load_programme(path)
    table = referral.simulate_table([{"type": "customer.signed_up", "referrer_id": "cust_1"}])
    assert list(table["matched"]) == [True, False]  # the referral rule stops the welcome rule
    assert "rule" in table["reasons"].iloc[1] and "stops processing" in table["reasons"].iloc[1]


def test_a_programme_schedule_survives_load_and_export_and_applies_to_its_simulation() -> None:
    path = PROGRAMMES / "december_campaign.json"
    december = Lab().load(path)
    assert december.definition() == load_programme(path)  # the same instants, written in UTC
    schedule = december.schedule()
    assert schedule.timezone == "Europe/Paris" and schedule.starts_at is not None
    before = december.simulate({"type": "order.completed", "amount": 45}, occurred_at="2026-11-30T23:30:00+01:00")
    assert not before.in_window and "outside the window" in before.window_reason
    inside = december.simulate({"type": "order.completed", "amount": 45}, occurred_at="2026-12-24T10:00:00+01:00")
    assert inside.in_window and not inside.matched  # no customer named: customer.country is absent
