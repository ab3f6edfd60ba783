"""Differential test: the vectorised replay and the live engine give the same issuances, row by row.

Hypothesis draws programmes (conditions with every operator on numbers, strings, booleans, lists and presence,
nested any / all / not groups, nested data paths, time fields in a few timezones, customer attributes and country,
thresholds at and around boundaries, priorities with stop_processing, fixed and per-rate amounts, beneficiaries,
a window, decimals 0..8, ceilings small enough to bind, an opening supply) and event streams (values at, just above
and below thresholds, strings around string bounds, missing fields, nulls, booleans, lists, nested objects, huge and
tiny numbers, floats, numbers with more places than SQL reads, ties in occurred_at or times over weeks across DST
changes, events out of order, beneficiaries naming customers by id or external id, unknown ones, non-strings).
The live engine runs the real service functions over a DuckDB file (customers created with attributes and
country through the service layer, the programme with its timezone and window, events submitted in occurred_at
order, ties by input order, each received when it occurred, then processed); the replay runs on the same events
in input order, with the customers exported from the live service, with the data as one `data` column and as
typed columns, on DuckDB and on Spark (the third party), and every engine must give the live engine's rows, the
rewarded customer included.

Segments cannot be set in the live service (they derive from activity), so `customer.segments`, with the
customers table in its other shapes, is held to the live rule evaluation itself (`rule_evaluation.evaluate` with
each event's facts, under the ledger's ceiling):
`test_replay_agrees_with_the_rule_evaluation_on_segments_and_customer_tables`.
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.contract import jsonutil
from rewards_lab.contract import requests as rq
from rewards_lab.contract.amounts import MAX_RATE
from rewards_lab.contract.operators import OPERATORS as OPERATOR_ENTRIES
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.conditions import CustomerFacts, EventFacts
from rewards_lab.domain.money import MAX_AMOUNT_MINOR, format_amount, parse_ceiling
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.engine import event_processing
from rewards_lab.replay.compiler import rule_specs
from rewards_lab.replay.engine import replay
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.service import assets, customers, event_intake, ledger, organizations, programmes
from rewards_lab.store.database import Database
from tests.operator_values import wire_value
from tests.replay_live import redemptions_frame, replayed_outcome, run_live

NUMBER_FIELDS = ("amount", "qty", "x.y")
FIELDS = (*NUMBER_FIELDS, "channel", "order.channel", "tags", "vip")
TYPES = ("order.completed", "review.posted")
CUSTOMERS = ("alice", "bob", "carol")
BASE = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
STRINGS = (
    "web",
    "app",
    "Web",
    "",
    "20",
    "é",
    "z",
    "\uffff",
    "\U0001f600",
    "gold",
    "FR",
    "active",
    "2026-03-29",
    "2026-03-08",
    "webshop",  # starts with "web"; "old" ends "gold", "2026-03" starts the dates
    "old",
    "2026-03",
)
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata")
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


OPERATORS = tuple(OPERATOR_ENTRIES)  # every operator of the registry, a new one too
NUMERIC_FIELDS = (*NUMBER_FIELDS, "occurred_at.weekday", "occurred_at.hour", "customer.attributes.age")
LIVE_FIELDS = (  # what the live worker reads too (segments derive from activity: the live service sets none)
    *FIELDS,
    "occurred_at.weekday",
    "occurred_at.hour",
    "occurred_at.date",
    "customer.attributes.tier",
    "customer.attributes.age",
    "customer.attributes.vip",
    "customer.country",
)


@st.composite
def leaves_st(draw: st.DrawFn, fields: tuple[str, ...]) -> dict[str, Any]:
    """A condition: number fields are mostly compared with numbers, the others mostly with strings."""
    field = draw(st.sampled_from(fields))
    operator = draw(st.sampled_from(OPERATORS))
    entry = OPERATOR_ENTRIES[operator]
    if not entry.takes_value:
        return {"field": field, "operator": operator}
    numeric = field in NUMERIC_FIELDS
    kind = "number" if entry.kinds == ("number",) or numeric == (draw(st.integers(0, 4)) > 0) else "string"
    return {"field": field, "operator": operator, "value": wire_value(draw, entry, kind, thresholds, STRINGS)}


def conditions_st(fields: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Conditions nested in any / all / not groups, at most three levels."""
    return st.recursive(
        leaves_st(fields),
        lambda parts: st.one_of(
            st.builds(lambda items: {"any": items}, st.lists(parts, min_size=1, max_size=3)),
            st.builds(lambda items: {"all": items}, st.lists(parts, min_size=1, max_size=3)),
            st.builds(lambda item: {"not": item}, parts),
        ),
        max_leaves=5,
    )


@st.composite
def programmes_st(draw: st.DrawFn, fields: tuple[str, ...] = FIELDS, facts: bool = False) -> ProgrammeDefinition:
    """A programme file. With `facts`, rules also read time and customer fields, and the programme has a
    timezone and maybe a window."""
    decimals = draw(st.integers(0, 8))
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        conditions = [draw(conditions_st(fields)) for _ in range(draw(st.integers(0, 2)))]
        actions = []
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                action: dict[str, Any] = {
                    "type": "issue",
                    "amount": {"per": draw(st.sampled_from(NUMBER_FIELDS)), "rate": draw(rates)},
                }
            else:
                action = {"type": "issue", "amount": {"fixed": format_amount(draw(st.integers(1, 3000)), decimals)}}
            if draw(st.integers(0, 4)) == 0:
                action["beneficiary"] = {"field": "ref"}
            actions.append(action)
        rule: dict[str, Any] = {
            "event_type": draw(st.sampled_from(TYPES)),
            "conditions": conditions,
            "actions": actions,
        }
        if draw(st.integers(0, 3)) == 0:
            rule["priority"] = draw(st.integers(-2, 2))
        if draw(st.integers(0, 3)) == 0:
            rule["stop_processing"] = True
        rules.append(rule)
    ceiling = draw(st.one_of(st.none(), st.integers(1, 20_000)))
    asset = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": decimals}
    if ceiling is not None:
        asset["supply_ceiling"] = format_amount(ceiling, decimals)
    info: dict[str, Any] = {"name": "Differential"}
    if facts:
        info["timezone"] = draw(st.sampled_from(ZONES))
        if draw(st.booleans()):
            start = BASE + timedelta(hours=draw(st.integers(-30, 60)))
            info["starts_at"] = start.isoformat()
            if draw(st.booleans()):
                info["ends_at"] = (start + timedelta(hours=draw(st.integers(1, 80)))).isoformat()
    return parse_programme({"programme": info, "asset": asset, "rules": rules})


def _thresholds_of(programme: ProgrammeDefinition) -> list[Decimal]:
    """Every number the programme's conditions compare with."""
    found: list[Decimal] = []

    def walk(node: Any) -> None:
        payload = node if isinstance(node, dict) else node.model_dump(mode="python", by_alias=True)
        for key in ("any", "all"):
            if key in payload and "field" not in payload:
                for part in payload[key]:
                    walk(part)
                return
        if "not" in payload and "field" not in payload:
            walk(payload["not"])
            return
        value = payload.get("value")
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, Decimal):
                found.append(item)

    for rule in programme.rules:
        for condition in rule.conditions:
            walk(condition)
    return found


def _near(draw: st.DrawFn, programme: ProgrammeDefinition) -> Any:
    """A number at, just above or just below one of the programme's thresholds, in one of several forms."""
    values = _thresholds_of(programme) or [Decimal(20)]
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
        return draw(st.sampled_from(["12", "abc", "", "1e5", *STRINGS]))
    return draw(st.sampled_from([True, False, None, [1], {"a": 1}, ["web", 20], []]))


@st.composite
def strings_st(draw: st.DrawFn, programme: ProgrammeDefinition) -> Any:
    """A value of a string field: mostly strings (around the programme's string bounds), sometimes another kind."""
    kind = draw(st.integers(0, 9))
    if kind <= 6:
        return draw(st.sampled_from(STRINGS))
    if kind == 7:
        return draw(st.sampled_from([True, False, None]))
    return draw(values_st(programme))


@st.composite
def streams_st(draw: st.DrawFn, programme: ProgrammeDefinition, spread: int = 5) -> list[dict[str, Any]]:
    """Events; occurred_at within `spread` minutes of BASE (ties on purpose), or hours for time fields."""
    stream = []
    unit = timedelta(minutes=1) if spread <= 5 else timedelta(hours=1)
    for index in range(draw(st.integers(1, 20))):
        data: dict[str, Any] = {}
        for name in NUMBER_FIELDS:
            if draw(st.integers(0, 4)) > 0:  # sometimes missing
                data[name] = draw(values_st(programme))
        if draw(st.integers(0, 3)) > 0:
            data["channel"] = draw(strings_st(programme))
        nested = draw(st.integers(0, 4))  # order.channel: nested, spelled with the dot, both or neither
        if nested in (1, 3):
            data["order"] = draw(
                st.one_of(st.builds(lambda v: {"channel": v}, strings_st(programme)), strings_st(programme))
            )
        if nested in (2, 3):
            data["order.channel"] = draw(strings_st(programme))
        if draw(st.booleans()):
            items = st.one_of(st.sampled_from(STRINGS), st.sampled_from([20, Decimal("19.99"), 1.5, 0, True]))
            data["tags"] = draw(st.one_of(st.lists(items, max_size=3), strings_st(programme)))
        if draw(st.booleans()):
            data["vip"] = draw(st.sampled_from([True, False, "true", 1, None]))
        if draw(st.integers(0, 2)) == 0:
            data["ref"] = draw(st.sampled_from(["bob", "@id:carol", "@id:alice", "dave", "", 7, None]))
        stream.append(
            {
                "external_event_id": f"e{index}",
                "type": draw(st.sampled_from([*TYPES, "other.type"])),
                "customer_id": draw(st.sampled_from(CUSTOMERS)),
                "occurred_at": BASE + unit * draw(st.integers(0, spread)),  # ties on purpose
                "data": data,
            }
        )
    return stream


# the live engine ------------------------------------------------------------------------------------------------
LIVE_CUSTOMERS = {  # the fixed tests' customers: created through the service layer, with attributes and a country
    "alice": {"country": "FR", "attributes": {"tier": "gold", "age": 31, "vip": True}},
    "bob": {"country": "DE", "attributes": {"tier": "silver", "age": Decimal("19.5")}},
    "carol": {"attributes": {}},
}


@st.composite
def live_customers_st(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """alice, bob and carol with random attributes (tier, age, vip) and countries, as the service takes them."""
    drawn = {}
    for name in CUSTOMERS:
        attributes: dict[str, Any] = {}
        if draw(st.booleans()):
            attributes["tier"] = draw(st.sampled_from(["gold", "silver", "Gold", ""]))
        if draw(st.booleans()):
            attributes["age"] = draw(st.sampled_from([18, 31, Decimal("19.5"), 65]))
        if draw(st.booleans()):
            attributes["vip"] = draw(st.booleans())
        country = draw(st.sampled_from(["FR", "DE", "US", None]))
        drawn[name] = {"attributes": attributes, **({"country": country} if country else {})}
    return drawn


def _live_rows(
    path: Path,
    definition: ProgrammeDefinition,
    stream: list[dict[str, Any]],
    opening: int,
    people: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[tuple], pd.DataFrame, list[dict[str, Any]]]:
    """The live engine's executions (external_event_id, rule index, action index, amount_minor, status,
    error_code, customer_id), the customers table exported from it, and the stream as submitted (a beneficiary
    written `@id:name` names that customer by its id)."""
    database = Database(path)
    try:
        org = organizations.create_organization(database, "Differential")
        scope = Scope(org.id, "sandbox")
        asset_body = validate(rq.AssetCreate, definition.asset.model_dump(mode="python", exclude_none=True))
        asset = assets.activate_asset(database, scope, assets.create_asset(database, scope, asset_body).id)
        include = {"timezone", "starts_at", "ends_at", "max_event_age_days"}
        schedule = definition.programme.model_dump(mode="json", include=include)
        body = {"name": "Differential", "asset_id": asset.id, **schedule}
        programme = programmes.create_programme(database, scope, validate(rq.ProgrammeCreate, body))
        rule_index = {}
        for index, rule in enumerate(definition.rules):
            body = {"program_id": programme.id, **rule.model_dump(mode="python")}
            created = programmes.create_rule(database, scope, validate(rq.RuleCreate, body))
            rule_index[created.id] = index
        programmes.publish(database, scope, programme.id)
        wallets, exported = {}, []
        for name in CUSTOMERS:
            fields = {"external_id": name, **(people or LIVE_CUSTOMERS)[name]}
            customer = customers.create_customer(database, scope, validate(rq.CustomerCreate, fields))
            body = {"customer_id": customer.id}
            wallets[name] = customers.create_wallet(database, scope, validate(rq.WalletCreate, body))
            exported.append(customer.model_dump(mode="python", include={"id", "external_id", "country", "attributes"}))
        ids = {row["external_id"]: row["id"] for row in exported}
        submitted = [_with_ids(event, ids) for event in stream]
        if opening:
            body = {"wallet_id": wallets["alice"].id, "amount": format_amount(opening, asset.decimals), "reason": "o"}
            ledger.issue(database, scope, asset.id, validate(rq.IssueRequest, body))
        ordered = sorted(submitted, key=lambda e: e["occurred_at"])  # stable: ties keep input order
        for at, group in itertools.groupby(ordered, key=lambda e: e["occurred_at"]):  # each received when it occurred
            bodies = [validate(rq.EventCreate, event) for event in group]
            results = event_intake.submit_events(database, scope, bodies, received_at=_naive_utc(at))
            assert all(not isinstance(result, Exception) for result in results)
        event_processing.process_all(database)
        rows = (
            database.reader()
            .execute(
                "SELECT external_event_id, rule_id, action_index, amount_minor, status, error_code, customer_id "
                "FROM reward_executions ORDER BY id"
            )
            .fetchall()
        )
    finally:
        database.close()
    table = pd.DataFrame(exported)
    return [(e, rule_index[r], a, m, s, c, who) for e, r, a, m, s, c, who in rows], table, submitted


def _naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def _with_ids(event: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    reference = event["data"].get("ref")
    if isinstance(reference, str) and reference.startswith("@id:"):
        return {**event, "data": {**event["data"], "ref": ids[reference.removeprefix("@id:")]}}
    return event


def _live(path: Path, definition: ProgrammeDefinition, stream: list[dict[str, Any]], opening: int) -> list[tuple]:
    rows, _, _ = _live_rows(path, definition, stream, opening)
    return [row[:6] for row in rows]


# the replay -----------------------------------------------------------------------------------------------------
def _arrow_type(values: list[Any]) -> pa.DataType | None:
    """The Arrow type every present value has (None: they differ, or a value has no such type: JSON text)."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if not present or len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is float:
        return pa.float64()
    if kind is int:
        return pa.int64() if all(abs(v) < 2**63 for v in present) else None
    if kind is str:
        return pa.string()
    if kind is bool:
        return pa.bool_()
    if kind is list and all(type(item) is str for v in present for item in v):
        return pa.list_(pa.string())
    if kind is dict and all(set(v) == {"channel"} and type(v["channel"]) in (str, type(None)) for v in present):
        return pa.struct([("channel", pa.string())])
    return None


def _as_columns(stream: list[dict[str, Any]]) -> pa.Table:
    """The data as separate columns: typed (double, bigint, string, boolean, a list of strings, a STRUCT) where
    every value allows, else JSON text (a pandas frame's object columns)."""
    table = pa.table({name: [e[name] for e in stream] for name in ("external_event_id", "type", "customer_id")})
    table = table.append_column("occurred_at", pa.array([e["occurred_at"] for e in stream], pa.timestamp("us", "UTC")))
    names = list(dict.fromkeys(name for e in stream for name in e["data"]))
    json_columns = []
    for name in names:
        values = [e["data"].get(name) for e in stream]
        arrow_type = _arrow_type(values)
        # a dotted key present with null stops the walk to the nested field (live); a typed column's NULL cannot
        # say "present", JSON text can ('null' present, NULL absent)
        null_key = "." in name and any(name in e["data"] and e["data"][name] is None for e in stream)
        if arrow_type is None or null_key:
            json_columns.append(name)
            cells = [None if name not in e["data"] else jsonutil.dumps(e["data"][name]) for e in stream]
            table = table.append_column(name, pa.array(cells, pa.string()))
        else:
            table = table.append_column(name, pa.array(values, arrow_type))
    return table.replace_schema_metadata({b"replay_json_columns": jsonutil.dumps(json_columns).encode()})


PICKED = ("external_event_id", "rule_index", "action_index", "amount_minor", "status", "error_code")
WITH_CUSTOMER = (*PICKED, "customer_id")


def _replayed(
    events_input: Any, definition: ProgrammeDefinition, opening: int, customers_table: Any = None
) -> list[tuple]:
    opening_supply = format_amount(opening, definition.asset.decimals)
    result = replay(events_input, definition, opening_supply=opening_supply, customers=customers_table)
    picked = PICKED if customers_table is None else WITH_CUSTOMER
    table = result.issuances.to_arrow_table().select(list(picked)).to_pylist()
    return [tuple(row[name] for name in picked) for row in table]


def _spark_replayed(
    events_input: Any, definition: ProgrammeDefinition, opening: int, spark: Any, customers_table: Any = None
) -> list[tuple]:
    """The Spark engine's rows (the third party). A pandas frame reaches Spark as the DuckDB engine reads it:
    JSON values in `data` or in object columns (evaluated in Python on the executors), typed values in SQL."""
    opening_supply = format_amount(opening, definition.asset.decimals)
    result = replay_spark(
        events_input, definition, opening_supply=opening_supply, spark=spark, customers=customers_table
    )
    picked = PICKED if customers_table is None else WITH_CUSTOMER
    table = result.to_arrow().select(list(picked)).to_pylist()
    return [tuple(row[name] for name in picked) for row in table]


def _as_ids(rows: list[tuple], table: pd.DataFrame) -> list[tuple]:
    """The replay's rows with the rewarded customer as the live engine records it: its id (the replay keeps an
    event's own customer as the event names it, by external id here)."""
    ids = dict(zip(table["external_id"], table["id"], strict=True))
    return [(*row[:6], ids.get(row[6], row[6])) for row in rows]


@settings(
    max_examples=int(os.environ.get("REPLAY_DIFFERENTIAL_EXAMPLES", "25")),  # more when run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_replay_agrees_with_the_live_engine_row_by_row(tmp_path: Path, data: st.DataObject, spark: Any) -> None:
    facts = data.draw(st.booleans(), label="time, customer facts and a window")
    definition = data.draw(programmes_st(LIVE_FIELDS if facts else FIELDS, facts=facts), label="programme")
    stream = data.draw(streams_st(definition, spread=24 * 40 if facts else 5), label="events")
    people = data.draw(live_customers_st(), label="customers")
    ceiling = definition.asset.supply_ceiling
    top = int(Decimal(ceiling).scaleb(definition.asset.decimals)) if ceiling else 5000
    opening = data.draw(st.sampled_from([0, 0, 1, top // 2, top]), label="opening")
    path = tmp_path / f"live-{next(_counter)}.duckdb"
    live, table, submitted = _live_rows(path, definition, stream, opening, people)
    as_object = pd.DataFrame(submitted)
    assert _as_ids(_replayed(as_object, definition, opening, table), table) == live
    columns = _as_columns(submitted)
    assert _as_ids(_replayed(columns, definition, opening, table), table) == live
    # Spark, the third party, on one of the two inputs per example (its share of the suite's time stays small)
    spark_input = as_object if data.draw(st.booleans(), label="spark reads the data column") else columns
    assert _as_ids(_spark_replayed(spark_input, definition, opening, spark, table), table) == live


# segments and the customers table's shapes: the live rule evaluation with the event's facts ---------------------
FACT_FIELDS = (*LIVE_FIELDS, "customer.segments")
REPLAY_CUSTOMERS = ("c1", "c2", "c3", "c4")


@st.composite
def customer_tables_st(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Customers c1..c4 (external ids alice, bob, carol, none) with random attributes, countries and segments."""
    rows = []
    for index, external in enumerate(["alice", "bob", "carol", None]):
        attributes: dict[str, Any] = {}
        if draw(st.booleans()):
            attributes["tier"] = draw(st.sampled_from(["gold", "silver", "Gold", ""]))
        if draw(st.booleans()):
            attributes["age"] = draw(st.sampled_from([18, 31, Decimal("19.5"), 65]))
        if draw(st.booleans()):
            attributes["vip"] = draw(st.booleans())
        segments = draw(st.lists(st.sampled_from(["active", "dormant", "vip"]), unique=True, max_size=2))
        country = draw(st.sampled_from(["FR", "DE", "US", "é", None]))
        rows.append(
            {
                "id": REPLAY_CUSTOMERS[index],
                "external_id": external,
                "country": country,
                "attributes": attributes,
                "segments": segments,
            }
        )
    return rows


def _customers_input(rows: list[dict[str, Any]], shape: str) -> Any:
    """The customers table: attributes as a JSON object (pandas), as columns of their own, or as a STRUCT."""
    if shape == "json":
        return pd.DataFrame(rows)
    base = {
        "id": [r["id"] for r in rows],
        "external_id": [r["external_id"] for r in rows],
        "country": [r["country"] for r in rows],
        "segments": pa.array([r["segments"] for r in rows], pa.list_(pa.string())),
    }
    tier = pa.array([r["attributes"].get("tier") for r in rows], pa.string())
    age = pa.array([r["attributes"].get("age") for r in rows], pa.decimal128(4, 1))
    vip = pa.array([r["attributes"].get("vip") for r in rows], pa.bool_())
    if shape == "columns":
        return pa.table({**base, "tier": tier, "age": age, "vip": vip})
    attributes = pa.StructArray.from_arrays([tier, age, vip], names=["tier", "age", "vip"])
    return pa.table({**base, "attributes": attributes})


def _expected(
    definition: ProgrammeDefinition, stream: list[dict[str, Any]], table: list[dict[str, Any]], opening: int
) -> list[tuple]:
    """The rows the live engine's rule evaluation gives with each event's facts (its time; its customer, found
    by id, else by external id), in the programme's window, beneficiaries found the same way, under the ceiling
    as the ledger enforces it (in processing order; a refused issuance changes nothing)."""
    specs = rule_specs(definition)
    info, decimals = definition.programme, definition.asset.decimals
    ceiling = parse_ceiling(definition.asset.supply_ceiling, decimals, "asset.supply_ceiling")
    by_reference = {row["external_id"]: row for row in table if row["external_id"] is not None}
    by_reference.update({row["id"]: row for row in table})
    outstanding, rows = opening, []
    for event in sorted(stream, key=lambda e: e["occurred_at"]):  # stable: ties keep input order
        moment = event["occurred_at"]
        if (info.starts_at and moment < info.starts_at) or (info.ends_at and moment >= info.ends_at):
            continue
        found = by_reference.get(event["customer_id"])
        customer = (
            None if found is None else CustomerFacts(found["attributes"], found["country"], tuple(found["segments"]))
        )
        (matches,) = evaluate(specs, [(event["type"], event["data"])], facts=[EventFacts(moment, customer)])
        for match in matches:
            for action in match.actions:
                if not action.issues and action.error_code is None:
                    continue
                who, code, amount = event["customer_id"], action.error_code, action.amount_minor
                if action.beneficiary is not None:
                    named = by_reference.get(action.beneficiary)
                    who = action.beneficiary if named is None else named["id"]
                    code = "beneficiary_not_found" if named is None else None
                status = "failed"
                if code is None and (ceiling is None or outstanding + amount <= ceiling):
                    outstanding, status = outstanding + amount, "issued"
                elif code is None:
                    code = "asset_supply_exhausted"
                rows.append(
                    (event["external_event_id"], int(match.rule_id), action.action_index, amount, status, code, who)
                )
    return rows


@settings(
    max_examples=int(os.environ.get("REPLAY_FACTS_EXAMPLES", "10")),  # more when run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_replay_agrees_with_the_rule_evaluation_on_segments_and_customer_tables(
    data: st.DataObject, spark: Any
) -> None:
    """Segments, attributes and countries from a customers table in three shapes (attributes as JSON, as columns,
    as a STRUCT; customers found by id or external id, or not at all), with time fields, windows and
    beneficiaries: DuckDB (both inputs) and Spark (one) give the rows of the live rule evaluation with each
    event's facts."""
    definition = data.draw(programmes_st(FACT_FIELDS, facts=True), label="programme")
    stream = data.draw(streams_st(definition, spread=24 * 40), label="events")
    rows = data.draw(customer_tables_st(), label="customers")
    for event in stream:
        event["customer_id"] = data.draw(st.sampled_from(["alice", "bob", "carol", "c2", "c4", "nobody"]))
        if isinstance(event["data"].get("ref"), str) and event["data"]["ref"].startswith("@id:"):
            event["data"]["ref"] = "c3"
    opening = data.draw(st.sampled_from([0, 1]), label="opening")
    expected = _expected(definition, stream, rows, opening)
    shape = data.draw(st.sampled_from(["json", "columns", "struct"]), label="customers' shape")
    table = _customers_input(rows, shape)
    as_object = pd.DataFrame(stream)
    assert _replayed(as_object, definition, opening, table) == expected
    columns = _as_columns(stream)
    assert _replayed(columns, definition, opening, table) == expected
    if data.draw(st.booleans(), label="on Spark too"):
        spark_input = as_object if data.draw(st.booleans(), label="spark reads the data column") else columns
        assert _spark_replayed(spark_input, definition, opening, spark, table) == expected


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


# caps, budgets, reversals and redemptions (issue 18) -----------------------------------------------------------
ORDER, REFUND = "order.completed", "order.refunded"
PERIOD_NAMES = ("day", "week", "month", "year", "lifetime")


@st.composite
def caps_st(draw: st.DrawFn, unit: int, most: int = 2) -> list[dict[str, Any]]:
    """Caps small enough to bind partially: amounts of a few rewards, counts of one to three."""
    caps = []
    for _ in range(draw(st.integers(1, most))):
        period = draw(st.sampled_from(PERIOD_NAMES))
        if draw(st.booleans()):
            caps.append({"period": period, "max_amount": str(Decimal(draw(st.integers(1, 120 * unit))) / unit)})
        else:
            caps.append({"period": period, "max_count": draw(st.integers(1, 3))})
    return caps


@st.composite
def featured_programmes_st(draw: st.DrawFn) -> ProgrammeDefinition:
    """Issue rules on orders and reviews (per-rate and fixed amounts, beneficiaries, caps), reverse rules on
    refunds (the whole, a constant fraction, or refund_amount over amount), programme caps, a budget, a clawback
    policy, a timezone and sometimes a binding ceiling."""
    decimals = draw(st.integers(0, 2))
    unit = 10**decimals
    rules: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        actions = []
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                rate = draw(st.sampled_from(["1", "0.5", "0.333", "2", "0.05"]))
                action: dict[str, Any] = {"type": "issue", "amount": {"per": "amount", "rate": rate}}
            else:
                action = {
                    "type": "issue",
                    "amount": {"fixed": format_amount(draw(st.integers(1, 40 * unit)), decimals)},
                }
            if draw(st.integers(0, 5)) == 0:
                action["beneficiary"] = {"field": "ref"}
            actions.append(action)
        rule: dict[str, Any] = {
            "event_type": draw(st.sampled_from([ORDER, ORDER, "review.posted"])),
            "actions": actions,
        }
        if draw(st.integers(0, 3)) == 0:
            rule["conditions"] = [{"field": "amount", "operator": "gte", "value": draw(st.integers(0, 60))}]
        if draw(st.integers(0, 2)) > 0:
            rule["limits"] = draw(caps_st(unit))
        if draw(st.integers(0, 5)) == 0:
            rule["priority"] = draw(st.integers(-1, 1))
        rules.append(rule)
    for _ in range(draw(st.integers(1, 2))):
        reverse: dict[str, Any] = {"type": "reverse", "original": {"field": "order_id"}}
        shape = draw(st.integers(0, 2))
        if shape == 1:
            reverse["fraction"] = draw(st.sampled_from(["0.5", "0.333333", "1", "0.25"]))
        elif shape == 2:
            reverse["fraction"] = {"field": "refund_amount", "of": "amount"}
        if draw(st.integers(0, 3)) == 0:  # a marketplace's rule: a refund by any customer takes back (issue 27)
            reverse["any_customer"] = True
        refund: dict[str, Any] = {"event_type": REFUND, "actions": [reverse]}
        if draw(st.integers(0, 4)) == 0:
            refund["conditions"] = [{"field": "reason", "operator": "neq", "value": "fraud"}]
        rules.insert(draw(st.integers(0, len(rules))), refund)
    info: dict[str, Any] = {
        "name": "Featured",
        "timezone": draw(st.sampled_from(ZONES)),
        "clawback": draw(st.sampled_from(["available", "negative", "none"])),
    }
    if draw(st.booleans()):
        info["limits"] = draw(caps_st(unit, 1))
    if draw(st.booleans()):
        budget = draw(st.integers(1, 400 * unit))
        info["budget"] = {"period": draw(st.sampled_from(PERIOD_NAMES)), "max_amount": str(Decimal(budget) / unit)}
    asset: dict[str, Any] = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": decimals}
    if draw(st.integers(0, 3)) == 0:
        asset["supply_ceiling"] = format_amount(draw(st.integers(1, 600 * unit)), decimals)
    return parse_programme({"programme": info, "asset": asset, "rules": rules})


@st.composite
def featured_streams_st(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Orders, reviews and refunds over a few weeks (ties on purpose): refunds of earlier and later orders, of
    unknown ones, repeated, partial (refund_amount missing, negative, above the order), without an order_id, by
    the order's customer (by id or external id) or by another one (issue 27)."""
    count = draw(st.integers(1, 22))
    dense = draw(st.integers(0, 2)) == 0  # one customer's busy day: caps reached early, then mostly skipped
    hours = [0, 1, 2, 3, 5] if dense else [0, 1, 20, 30, 50, 170, 200, 700, 900]
    who = ["alice", "alice", "alice", "bob"] if dense else list(CUSTOMERS)
    kinds = [draw(st.sampled_from([ORDER, ORDER, ORDER, REFUND, REFUND, "review.posted"])) for _ in range(count)]
    customers = [draw(st.sampled_from(who)) for _ in kinds]
    orders = [f"e{i}" for i, kind in enumerate(kinds) if kind == ORDER] or ["e0"]
    stream = []
    for index, kind in enumerate(kinds):
        data: dict[str, Any] = {}
        if kind == REFUND:
            pick = draw(st.integers(0, 9))
            if pick <= 6:
                data["order_id"] = draw(st.sampled_from(orders))
                whose = draw(st.integers(0, 3))  # mostly the order's own customer, sometimes by id, or anyone
                named = customers[int(data["order_id"][1:])]
                if whose <= 1:
                    customers[index] = named
                elif whose == 2:
                    customers[index] = f"@id:{named}"
            elif pick == 7:
                data["order_id"] = draw(st.sampled_from(["nothing", f"e{draw(st.integers(0, count - 1))}"]))
            elif pick == 8:
                data["order_id"] = draw(st.sampled_from([7, None, ""]))
            if draw(st.integers(0, 4)) > 0:
                data["refund_amount"] = draw(st.sampled_from([10, 25, Decimal("12.5"), 0, -5, 1000, 33]))
            if draw(st.integers(0, 5)) == 0:
                data["reason"] = "fraud"
        elif draw(st.integers(0, 6)) > 0:
            data["amount"] = draw(st.sampled_from([0, 5, 20, 33, 60, 100, Decimal("12.75"), Decimal("99.99")]))
        if kind != REFUND and draw(st.integers(0, 4)) == 0:
            data["ref"] = draw(st.sampled_from(["bob", "@id:carol", "dave", "", 7]))
        stream.append(
            {
                "external_event_id": f"e{index}",
                "type": kind,
                "customer_id": customers[index],
                "occurred_at": BASE + timedelta(hours=draw(st.sampled_from(hours))),
                "data": data,
            }
        )
    return stream


@st.composite
def redemptions_st(draw: st.DrawFn, decimals: int) -> list[dict[str, Any]]:
    """What customers spent, at times among the events' (some more than they hold)."""
    return [
        {
            "customer_id": draw(st.sampled_from(CUSTOMERS)),
            "amount": draw(st.integers(1, 80 * 10**decimals)),
            "occurred_at": BASE + timedelta(hours=draw(st.sampled_from([0, 1, 25, 40, 180, 800, 1000]))),
        }
        for _ in range(draw(st.integers(0, 4)))
    ]


@settings(
    max_examples=int(os.environ.get("REPLAY_FEATURED_EXAMPLES", "12")),  # more when run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_caps_budgets_reversals_and_redemptions_agree_with_the_live_engine(
    tmp_path: Path, data: st.DataObject, spark: Any
) -> None:
    """Binding caps (amount and count, every period, in the programme's timezone), budgets exhausted mid-period,
    partial, repeated and early refunds, refunds of unknown orders, spent points under every clawback policy,
    and sometimes a binding ceiling: DuckDB (both inputs) and Spark (the third party, on one example in eight: its
    share of the suite's time stays small) give the live engine's executions (amount, status, code, customer, the
    cap that cut), the rewards each reversal took back (target and what the wallet gave), every customer's
    balance and every redemption's outcome."""
    definition = data.draw(featured_programmes_st(), label="programme")
    stream = data.draw(featured_streams_st(), label="events")
    spends = data.draw(redemptions_st(definition.asset.decimals), label="redemptions")
    ceiling = definition.asset.supply_ceiling
    opening = data.draw(st.sampled_from([0, 0, 1 if ceiling else 0]), label="opening")
    live = run_live(tmp_path / f"featured-{next(_counter)}.duckdb", definition, stream, spends, opening)
    submitted = live.submitted
    expected = live.outcome.sorted()
    frame = redemptions_frame(spends, definition.asset.decimals)
    supply = format_amount(opening, definition.asset.decimals)
    inputs = (pd.DataFrame(submitted), _as_columns(submitted))
    for events_input in inputs:
        result = replay(events_input, definition, opening_supply=supply, customers=live.customers, redemptions=frame)
        assert replayed_outcome(result).sorted() == expected
    if data.draw(st.integers(0, 7), label="on Spark too") == 0:
        spark_input = inputs[data.draw(st.integers(0, 1), label="spark reads the data column")]
        on_spark = replay_spark(
            spark_input, definition, opening_supply=supply, spark=spark, customers=live.customers, redemptions=frame
        )
        assert replayed_outcome(on_spark, spark=True).sorted() == expected
