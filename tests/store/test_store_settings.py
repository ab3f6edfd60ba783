"""Typed settings and records in the store (issue 29): each JSON column reads back into the domain's types and is
written as the exact text the service wrote before those types existed, and no layer above the store decodes a
stored column."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from rewards_lab.contract import jsonutil
from rewards_lab.contract.expiry_requests import Expiry, ExpiryAfterDays, ExpiryAtEndOf
from rewards_lab.contract.guard_requests import GuardOverride, Guards
from rewards_lab.contract.limit_requests import AmountLimit, Budget, CountLimit, Limit
from rewards_lab.contract.validation import validate
from rewards_lab.domain.limits import CapCut
from rewards_lab.domain.records import ReversalRecord, RewardTaken
from rewards_lab.domain.settings import NO_SPENDING, Spending
from rewards_lab.domain.settings import GuardOverride as Given
from rewards_lab.service.settings_requests import expiry_of, guards_of, limits_of, spending_of
from rewards_lab.store import settings_json as sj

ROOT = Path(__file__).resolve().parents[2]
LIMITS: TypeAdapter[list[AmountLimit | CountLimit]] = TypeAdapter(list[Limit])
EXPIRY: TypeAdapter[ExpiryAfterDays | ExpiryAtEndOf] = TypeAdapter(Expiry)
LIMIT_BODIES = [
    [],
    [{"period": "month", "max_amount": "500"}],
    [{"per": "customer", "period": "day", "max_count": 3}, {"period": "lifetime", "max_amount": "12.50"}],
]
EXPIRY_BODIES = [None, {"after_days": 365}, {"at_end_of": "quarter"}, {"at_end_of": "year", "after": 2}]


def _old_spending_text(
    limits: list[AmountLimit | CountLimit],
    budget: Budget | None,
    clawback: str | None,
    expiry: ExpiryAfterDays | ExpiryAtEndOf | None,
    age: int | None,
) -> str | None:
    """What `service.programme_spending.checked_spending` stored before the settings were typed."""
    stored_caps = [limit.model_dump(mode="json") for limit in limits]
    stored_budget = None if budget is None else budget.model_dump(mode="json")
    policy = clawback or "available"
    stored_expiry = None if expiry is None else expiry.model_dump(mode="json")
    if not stored_caps and stored_budget is None and policy == "available" and stored_expiry is None and age is None:
        return None
    settings: dict[str, Any] = {"limits": stored_caps, "budget": stored_budget, "clawback": policy}
    if stored_expiry is not None:
        settings["expiry"] = stored_expiry
    if age is not None:
        settings["max_event_age_days"] = age
    return jsonutil.dumps(settings)


@pytest.mark.parametrize("limits", LIMIT_BODIES)
@pytest.mark.parametrize("budget", [None, {"period": "month", "max_amount": "1000"}])
@pytest.mark.parametrize("clawback", [None, "available", "negative"])
@pytest.mark.parametrize("expiry", EXPIRY_BODIES)
@pytest.mark.parametrize("age", [None, 7])
def test_spending_is_stored_as_it_always_was_and_reads_back(
    limits: list[dict[str, Any]],
    budget: dict[str, Any] | None,
    clawback: str | None,
    expiry: dict[str, Any] | None,
    age: int | None,
) -> None:
    models = LIMITS.validate_python(limits)
    budget_model = None if budget is None else Budget.model_validate(budget)
    expiry_model = None if expiry is None else EXPIRY.validate_python(expiry)
    spending = spending_of(models, budget_model, clawback, expiry_model, age)
    text = sj.spending_text(spending)
    assert text == _old_spending_text(models, budget_model, clawback, expiry_model, age)
    assert sj.spending_from(text) == spending
    assert (sj.spending_from(None) if text is None else spending) == spending


def test_a_version_without_settings_reads_as_the_defaults() -> None:
    assert sj.spending_from(None) == NO_SPENDING == Spending()
    assert NO_SPENDING.clawback == "available" and not NO_SPENDING.capped
    assert sj.spending_text(NO_SPENDING) is None


@pytest.mark.parametrize("limits", LIMIT_BODIES)
def test_a_rules_caps_are_stored_as_json_dumps_wrote_them(limits: list[dict[str, Any]]) -> None:
    models = LIMITS.validate_python(limits)
    text = sj.limits_text(limits_of(models))
    assert text == json.dumps([limit.model_dump(mode="json") for limit in models])
    assert sj.limits_from(text) == limits_of(models)
    assert sj.limits_from("[]") == sj.limits_from(None) == ()


@pytest.mark.parametrize("expiry", EXPIRY_BODIES)
def test_an_assets_expiry_is_stored_as_it_always_was(expiry: dict[str, Any] | None) -> None:
    model = None if expiry is None else EXPIRY.validate_python(expiry)
    text = sj.expiry_text(expiry_of(model))
    assert text == (None if model is None else jsonutil.dumps(model.model_dump(mode="json")))
    assert sj.expiry_from(text) == expiry_of(model)


def test_guards_and_the_override_are_stored_as_they_always_were() -> None:

    body = [
        {"metric": "issued", "period": "week", "max": "120000"},
        {"metric": "liability_delta", "max": "-50"},
        {"metric": "ceiling_exhausted_within_days", "min": 90},
    ]
    models = TypeAdapter(Guards).validate_python(body)
    text = sj.guards_text(guards_of(models))
    assert text == jsonutil.dumps([guard.model_dump(mode="json") for guard in models])
    assert sj.guards_from(text) == guards_of(models)
    assert sj.guards_text(guards_of(None)) is None and sj.guards_from(None) == ()

    given_at = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    override = validate(GuardOverride, {"reason": "approved by finance"})
    stored = sj.override_text(Given(override.reason, "key_1", given_at))
    assert stored == jsonutil.dumps(
        {"reason": "approved by finance", "given_by": "key_1", "given_at": given_at.isoformat()}
    )
    assert sj.override_from(stored) == Given("approved by finance", "key_1", given_at)


def test_an_executions_records_round_trip() -> None:
    cut = CapCut("programme", "month", date(2026, 3, 1), 50_000, None, 1_250)
    assert sj.cut_text(cut) == (
        '{"scope":"programme","period":"month","period_start":"2026-03-01","max_amount_minor":50000,'
        '"max_count":null,"cut_minor":1250}'
    )
    assert sj.cut_from(sj.cut_text(cut)) == cut and sj.cut_text(None) is None
    keys = (("prg_1", "budget:month", "", "2026-03-01"), ("prg_1", "rule:r:day", "cus_1", "2026-03-02"))
    assert sj.keys_text(keys) == jsonutil.dumps([list(key) for key in keys])
    assert sj.keys_from(sj.keys_text(keys)) == keys and sj.keys_text(()) is None and sj.keys_from(None) == ()
    record = ReversalRecord(
        "evt_1",
        "o-1",
        Decimal("0.5"),
        "available",
        (RewardTaken("exe_1", "txn_1", "cus_1", "wal_1", 500, 200, "txn_2"),),
    )
    text = sj.reversal_text(record)
    assert text is not None and '"fraction":"0.5"' in text and '"taken_minor":200' in text
    assert sj.reversal_from(text) == record and sj.reversal_text(None) is None


def test_no_layer_above_the_store_decodes_a_stored_column() -> None:
    """The engine and the services read typed rows: JSON is decoded in the store (and the rows it returns)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("service", "engine")
        for path in sorted((ROOT / "rewards_lab" / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b(jsonutil|json|simplejson)\.loads\(", line)
    ]
    assert found == []
