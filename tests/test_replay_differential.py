"""Differential test: the vectorised replay and the live engine give the same issuances, row by row.

Hypothesis draws programmes (conditions with every operator, thresholds at and around boundaries, fixed and
per-rate amounts, decimals 0..8, ceilings small enough to bind, an opening supply) and event streams (values at,
just above and below thresholds, missing fields, nulls, strings, booleans, huge and tiny numbers, floats, numbers
with more places than SQL reads, ties in occurred_at, events out of order). The live engine runs the real service
functions over a DuckDB file (events submitted in occurred_at order, ties by input order, then processed); the
replay runs on the same events in input order, with the data as one `data` column and as separate columns, on
DuckDB and on Spark (the third party), and every engine must give the live engine's rows.
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.contract import requests as rq
from rewards_lab.contract.amounts import MAX_RATE
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, format_amount
from rewards_lab.replay.engine import replay
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.service import assets, customers, event_intake, event_processing, ledger, organizations, programmes
from rewards_lab.store.database import Database

FIELDS = ("amount", "qty", "x.y")
TYPES = ("order.completed", "review.posted")
CUSTOMERS = ("alice", "bob", "carol")
BASE = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
_counter = itertools.count()

thresholds = st.one_of(
    st.sampled_from(["0", "1", "20", "19.99", "-3.25", "0.0000000001", "123456789012345", "0.5", "100"]),
    st.integers(-50, 200).map(str),
    st.builds(lambda c, p: str(Decimal(c).scaleb(-p)), st.integers(-(10**9), 10**9), st.integers(0, 6)),
).map(Decimal)
rates = (
    st.one_of(
        st.sampled_from(["0.05", "1", "0.0000000001", "99999999.9999999", "0.333", "2.5", "0.015", "3"]),
        st.builds(lambda c, p: str(Decimal(c).scaleb(-p)), st.integers(1, 10**9), st.integers(0, 10)),
    )
    .map(Decimal)
    .filter(lambda rate: rate < MAX_RATE)
)  # a programme file refuses rates from MAX_RATE up


@st.composite
def programmes_st(draw: st.DrawFn) -> ProgrammeDefinition:
    decimals = draw(st.integers(0, 8))
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        conditions = [
            {
                "field": draw(st.sampled_from(FIELDS)),
                "operator": draw(st.sampled_from(["gte", "gt", "lte", "lt", "eq", "neq"])),
                "value": draw(thresholds),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        actions = []
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                actions.append({"type": "issue", "amount": {"per": draw(st.sampled_from(FIELDS)), "rate": draw(rates)}})
            else:
                fixed = format_amount(draw(st.integers(1, 3000)), decimals)
                actions.append({"type": "issue", "amount": {"fixed": fixed}})
        rules.append({"event_type": draw(st.sampled_from(TYPES)), "conditions": conditions, "actions": actions})
    ceiling = draw(st.one_of(st.none(), st.integers(1, 20_000)))
    asset = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": decimals}
    if ceiling is not None:
        asset["supply_ceiling"] = format_amount(ceiling, decimals)
    return parse_programme({"programme": {"name": "Differential"}, "asset": asset, "rules": rules})


def _near(draw: st.DrawFn, programme: ProgrammeDefinition) -> Any:
    """A number at, just above or just below one of the programme's thresholds, in one of several forms."""
    values = [c.value for rule in programme.rules for c in rule.conditions] or [Decimal(20)]
    base = draw(st.sampled_from(values))
    delta = draw(st.sampled_from(["0", "0.0000000001", "-0.0000000001", "1", "-1", "0.01", "1E-20", "-1E-20"]))
    value = base + Decimal(delta)
    form = draw(st.sampled_from(["decimal", "float", "int"]))
    if form == "float":
        return float(value)
    if form == "int" and value == value.to_integral_value():
        return int(value)
    return value


@st.composite
def values_st(draw: st.DrawFn, programme: ProgrammeDefinition) -> Any:
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return _near(draw, programme)
    if kind == 4:
        return draw(st.integers(-(10**6), 10**6))
    if kind == 5:
        return draw(
            st.sampled_from(
                [
                    10**20,
                    -(10**20),
                    Decimal("1E+30"),
                    Decimal("1E-30"),
                    Decimal("0.29"),
                    Decimal("12345678901234567890.123456789"),
                    Decimal("0.1234567890123456789"),
                    2**63 - 1,
                    Decimal("99999999999999999.99"),
                    Decimal("-0"),
                ]
            )
        )
    if kind == 6:
        return draw(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
    if kind == 7:
        return draw(st.sampled_from([0.1, 2.675, 1e-7, 1e300, 19.99, 0.3333333333333333, 1e16, -0.0]))
    if kind == 8:
        return draw(st.sampled_from(["12", "abc", "", "1e5"]))
    return draw(st.sampled_from([True, False, None, [1], {"a": 1}]))


@st.composite
def streams_st(draw: st.DrawFn, programme: ProgrammeDefinition) -> list[dict[str, Any]]:
    stream = []
    for index in range(draw(st.integers(1, 20))):
        data = {}
        for name in FIELDS:
            if draw(st.integers(0, 4)) > 0:  # sometimes missing
                data[name] = draw(values_st(programme))
        stream.append(
            {
                "external_event_id": f"e{index}",
                "type": draw(st.sampled_from([*TYPES, "other.type"])),
                "customer_id": draw(st.sampled_from(CUSTOMERS)),
                "occurred_at": BASE + timedelta(minutes=draw(st.integers(0, 5))),  # ties on purpose
                "data": data,
            }
        )
    return stream


# the live engine ------------------------------------------------------------------------------------------------
def _live(path: Path, definition: ProgrammeDefinition, stream: list[dict[str, Any]], opening: int) -> list[tuple]:
    database = Database(path)
    try:
        org = organizations.create_organization(database, "Differential")
        scope = Scope(org.id, "sandbox")
        asset_body = validate(rq.AssetCreate, definition.asset.model_dump(mode="python", exclude_none=True))
        asset = assets.activate_asset(database, scope, assets.create_asset(database, scope, asset_body).id)
        programme = programmes.create_programme(
            database, scope, validate(rq.ProgrammeCreate, {"name": "Differential", "asset_id": asset.id})
        )
        rule_index = {}
        for index, rule in enumerate(definition.rules):
            body = {"program_id": programme.id, **rule.model_dump(mode="python")}
            created = programmes.create_rule(database, scope, validate(rq.RuleCreate, body))
            rule_index[created.id] = index
        programmes.publish(database, scope, programme.id)
        wallets = {}
        for name in CUSTOMERS:
            customer = customers.create_customer(database, scope, validate(rq.CustomerCreate, {"external_id": name}))
            body = {"customer_id": customer.id}
            wallets[name] = customers.create_wallet(database, scope, validate(rq.WalletCreate, body))
        if opening:
            body = {"wallet_id": wallets["alice"].id, "amount": format_amount(opening, asset.decimals), "reason": "o"}
            ledger.issue(database, scope, asset.id, validate(rq.IssueRequest, body))
        ordered = sorted(stream, key=lambda e: e["occurred_at"])  # stable: ties keep input order
        bodies = [validate(rq.EventCreate, event) for event in ordered]
        results = event_intake.submit_events(database, scope, bodies)
        assert all(not isinstance(result, Exception) for result in results)
        event_processing.process_all(database)
        rows = (
            database.reader()
            .execute(
                "SELECT external_event_id, rule_id, action_index, amount_minor, status, error_code "
                "FROM reward_executions ORDER BY id"
            )
            .fetchall()
        )
    finally:
        database.close()
    return [(e, rule_index[r], a, m, s, c) for e, r, a, m, s, c in rows]


# the replay -----------------------------------------------------------------------------------------------------
def _as_columns(stream: list[dict[str, Any]]) -> pd.DataFrame:
    """The data as separate columns: float64 or int64 where every value allows, else objects (JSON values)."""
    frame = pd.DataFrame([{k: v for k, v in e.items() if k != "data"} for e in stream])
    for name in FIELDS:
        values = [e["data"].get(name) for e in stream]
        present = [v for v in values if v is not None]
        if present and all(type(v) is float for v in present) and len(present) == len(values):
            frame[name] = pd.Series(values, dtype="float64")
        elif present and all(type(v) is int and abs(v) < 2**63 for v in present) and len(present) == len(values):
            frame[name] = pd.Series(values, dtype="int64")
        else:
            frame[name] = pd.Series(values, dtype="object")
    return frame


PICKED = ("external_event_id", "rule_index", "action_index", "amount_minor", "status", "error_code")


def _replayed(events_input: Any, definition: ProgrammeDefinition, opening: int) -> list[tuple]:
    result = replay(events_input, definition, opening_supply=format_amount(opening, definition.asset.decimals))
    table = result.issuances.to_arrow_table().select(list(PICKED)).to_pylist()
    return [tuple(row[name] for name in PICKED) for row in table]


def _spark_replayed(events_input: Any, definition: ProgrammeDefinition, opening: int, spark: Any) -> list[tuple]:
    """The Spark engine's rows (the third party). A pandas frame reaches Spark as the DuckDB engine reads it:
    JSON values in `data` or in object columns (evaluated in Python on the executors), numbers in typed ones."""
    opening_supply = format_amount(opening, definition.asset.decimals)
    result = replay_spark(events_input, definition, opening_supply=opening_supply, spark=spark)
    table = result.to_arrow().select(list(PICKED)).to_pylist()
    return [tuple(row[name] for name in PICKED) for row in table]


@settings(
    max_examples=int(os.environ.get("REPLAY_DIFFERENTIAL_EXAMPLES", "25")),  # more when run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_replay_agrees_with_the_live_engine_row_by_row(tmp_path: Path, data: st.DataObject, spark: Any) -> None:
    definition = data.draw(programmes_st(), label="programme")
    stream = data.draw(streams_st(definition), label="events")
    ceiling = definition.asset.supply_ceiling
    top = int(Decimal(ceiling).scaleb(definition.asset.decimals)) if ceiling else 5000
    opening = data.draw(st.sampled_from([0, 0, 1, top // 2, top]), label="opening")
    live = _live(tmp_path / f"live-{next(_counter)}.duckdb", definition, stream, opening)
    as_object = pd.DataFrame(stream)
    assert _replayed(as_object, definition, opening) == live
    assert _replayed(_as_columns(stream), definition, opening) == live
    # Spark, the third party, on one of the two inputs per example (its share of the suite's time stays small)
    spark_input = as_object if data.draw(st.booleans(), label="spark reads the data column") else _as_columns(stream)
    assert _spark_replayed(spark_input, definition, opening, spark) == live


def test_the_strategies_reach_the_interesting_cases(tmp_path: Path, spark: Any) -> None:
    """A fixed example with each edge at once: a binding ceiling with a later smaller issuance, a too large
    amount, a value with more places than SQL reads, a missing field and a string."""
    definition = parse_programme(
        {
            "programme": {"name": "Edges"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "supply_ceiling": "30"},
            "rules": [
                {
                    "event_type": "order.completed",
                    "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
                    "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 1}}],
                }
            ],
        }
    )
    amounts = [Decimal("25"), Decimal("10"), Decimal("4.999"), Decimal("20.0000000000001"), "30", None, 10**40]
    stream = [
        {
            "external_event_id": f"e{i}",
            "type": "order.completed",
            "customer_id": "alice",
            "occurred_at": BASE,
            "data": {} if value is None else {"amount": value},
        }
        for i, value in enumerate(amounts)
    ]
    live = _live(tmp_path / "edges.duckdb", definition, stream, 0)
    assert [row[3:] for row in live] == [
        (2500, "issued", None),
        (2000, "failed", "asset_supply_exhausted"),
        (0, "failed", "amount_too_large"),
    ]
    assert MAX_AMOUNT_MINOR < 10**42
    assert _replayed(pd.DataFrame(stream), definition, 0) == live
    assert _replayed(_as_columns(stream), definition, 0) == live
    assert _spark_replayed(pd.DataFrame(stream), definition, 0, spark) == live
    assert _spark_replayed(_as_columns(stream), definition, 0, spark) == live


@pytest.mark.parametrize("decimals", [0, 8])
def test_rounding_toward_zero_at_every_scale(tmp_path: Path, decimals: int, spark: Any) -> None:
    definition = parse_programme(
        {
            "programme": {"name": "Rounding"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": decimals},
            "rules": [
                {
                    "event_type": "order.completed",
                    "actions": [{"type": "issue", "amount": {"per": "qty", "rate": 0.333}}],
                }
            ],
        }
    )
    values = [Decimal("0.29"), 3, 2.675, Decimal("0.0000000003"), Decimal("1.00000000000000000003"), 1e-7]
    stream = [
        {
            "external_event_id": f"r{i}",
            "type": "order.completed",
            "customer_id": "bob",
            "occurred_at": BASE,
            "data": {"qty": v},
        }
        for i, v in enumerate(values)
    ]
    live = _live(tmp_path / f"rounding-{decimals}.duckdb", definition, stream, 0)
    assert _replayed(pd.DataFrame(stream), definition, 0) == live
    assert _replayed(_as_columns(stream), definition, 0) == live
    assert _spark_replayed(_as_columns(stream), definition, 0, spark) == live
