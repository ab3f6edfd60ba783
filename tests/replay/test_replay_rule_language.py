"""The rule language of issue 17 in the replay (DuckDB and Spark), held to the live rule evaluation: groups under
SQL's three-valued logic, strings and booleans of every input shape, time fields across a DST change, the
programme's window and timezone, priority with stop_processing, the customers table in every shape, and
beneficiaries; and that ordinary rows never need the Python fallback."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import (
    ProgrammeDefinition,
    dumps_programme,
    load_programme,
    parse_programme,
    save_programme,
)
from rewards_lab.domain.conditions import CustomerFacts, EventFacts
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.replay.compiler import rule_specs
from rewards_lab.replay.engine import ReplayResult, replay
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.replay.sweep import sweep
from rewards_lab.replay.to_file import replay_to_file

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)
PICKED = ("external_event_id", "rule_index", "action_index", "amount_minor", "status", "error_code", "customer_id")


def _programme(rules: list[dict[str, Any]], **programme: Any) -> ProgrammeDefinition:
    return parse_programme(
        {
            "programme": {"name": "Rule language", **programme},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0},
            "rules": rules,
        }
    )


def _rule(conditions: list[Any], fixed: str = "1", event_type: str = "order", **extra: Any) -> dict[str, Any]:
    return {
        "event_type": event_type,
        "conditions": conditions,
        "actions": [{"type": "issue", "amount": {"fixed": fixed}}],
        **extra,
    }


def _events(datas: list[dict[str, Any]], customer: str = "alice", step: timedelta = timedelta(0)) -> list[dict]:
    return [
        {
            "external_event_id": f"e{index}",
            "type": "order",
            "customer_id": customer,
            "occurred_at": T0 + step * index,
            "data": data,
        }
        for index, data in enumerate(datas)
    ]


def _rows(result: ReplayResult) -> list[tuple[Any, ...]]:
    return [tuple(row[k] for k in PICKED) for row in result.issuances.to_arrow_table().to_pylist()]


def _spark_rows(result: Any) -> list[tuple[Any, ...]]:
    return [tuple(row[k] for k in PICKED) for row in result.to_arrow().to_pylist()]


def _evaluated(definition: ProgrammeDefinition, stream: list[dict], customers: dict[str, CustomerFacts]) -> list:
    """(event, rule index) of every rule the live evaluation matches, with each event's facts."""
    specs = rule_specs(definition)
    facts = [EventFacts(e["occurred_at"], customers.get(e["customer_id"])) for e in stream]
    matched = evaluate(specs, [(e["type"], e["data"]) for e in stream], facts=facts)
    return [(e["external_event_id"], int(m.rule_id)) for e, ms in zip(stream, matched, strict=True) for m in ms]


def _matched(result: ReplayResult) -> list[tuple[str, int]]:
    return [(row[0], row[1]) for row in _rows(result)]


# conditions ---------------------------------------------------------------------------------------------------
def test_not_of_a_missing_or_other_kind_field_holds_and_groups_follow_the_live_evaluation() -> None:
    """SQL's NULL would make `not(x eq 1)` unknown for a missing x: the compiled NOT is strict, like the live
    engine (a missing field or one of another kind makes a leaf false, so its negation true)."""
    rules = [
        _rule([{"not": {"field": "x", "operator": "eq", "value": 1}}]),
        _rule(
            [
                {
                    "not": {
                        "any": [
                            {"field": "x", "operator": "gt", "value": 5},
                            {"field": "c", "operator": "eq", "value": "web"},
                        ]
                    }
                }
            ]
        ),
        _rule(
            [
                {
                    "all": [
                        {"not": {"field": "x", "operator": "exists"}},
                        {"field": "c", "operator": "neq", "value": "web"},
                    ]
                }
            ]
        ),
        _rule(
            [
                {
                    "any": [
                        {"field": "tags", "operator": "contains", "value": "promo"},
                        {"field": "x", "operator": "in", "value": [2, 3.5]},
                    ]
                }
            ]
        ),
        _rule([{"not": {"field": "c", "operator": "not_in", "value": ["web", "app"]}}]),
    ]
    definition = _programme(rules)
    datas = [
        {},
        {"x": 1},
        {"x": "1"},
        {"x": 6, "c": "app"},
        {"c": "web"},
        {"c": 5},
        {"x": None, "c": "Web"},
        {"tags": ["a", "promo"]},
        {"tags": "promo"},
        {"x": Decimal("3.50")},
        {"x": True},
        {"c": "app", "x": 2},
    ]
    stream = _events(datas)
    expected = _evaluated(definition, stream, {})
    for shape in (pd.DataFrame(stream), _flat(stream)):
        result = replay(shape, definition)
        assert _matched(result) == expected
        assert result.python_rows == 0  # read in SQL, the JSON included


def _flat(stream: list[dict[str, Any]]) -> pd.DataFrame:
    """The data as columns of a pandas frame (object columns: JSON values)."""
    return pd.DataFrame([{**{k: v for k, v in e.items() if k != "data"}, **e["data"]} for e in stream])


def test_strings_compare_by_code_point_in_every_shape_and_on_spark(spark: Any, tmp_path: Path) -> None:
    """Exact, case-sensitive equality and code point order (UTF-8 bytes in both engines: U+FFFF sorts before
    an emoji, although Java's UTF-16 would order them the other way)."""
    rules = [
        _rule([{"field": "c", "operator": "between", "value": ["b", "\uffff"]}]),
        _rule([{"field": "c", "operator": "gt", "value": 0}]),  # a string is never a number
        _rule([{"field": "c", "operator": "eq", "value": "é"}]),
        _rule([{"field": "flag", "operator": "eq", "value": True}]),
        _rule([{"field": "order.channel", "operator": "in", "value": ["web", "app"]}]),
    ]
    definition = _programme(rules)
    values = ["a", "b", "B", "é", "e\u0301", "\uffff", "\U0001f600", "z", "", "20"]
    datas = [
        {"c": c, "flag": i % 2 == 0, "order": {"channel": "web" if i % 3 else "store"}} for i, c in enumerate(values)
    ]
    stream = _events(datas)
    expected = _evaluated(definition, stream, {})
    typed = pa.table(
        {
            "external_event_id": [e["external_event_id"] for e in stream],
            "type": ["order"] * len(stream),
            "customer_id": ["alice"] * len(stream),
            "occurred_at": [e["occurred_at"] for e in stream],
            "c": values,
            "flag": [d["flag"] for d in datas],
            "order": pa.array([d["order"] for d in datas], pa.struct([("channel", pa.string())])),
        }
    )
    csv = tmp_path / "events.csv"
    _flat(stream).drop(columns=["order"]).assign(**{"order.channel": [d["order"]["channel"] for d in datas]}).assign(
        flag=["true" if d["flag"] else "false" for d in datas]
    ).to_csv(csv, index=False)
    # a CSV cell is read as the JSON scalar it spells: "20" is the number 20, an empty cell is missing
    as_cells = [
        {**e, "data": {**e["data"], "c": {"20": Decimal(20), "": None}.get(e["data"]["c"], e["data"]["c"])}}
        for e in stream
    ]
    for shape, wanted in (
        (pd.DataFrame(stream), expected),
        (_flat(stream), expected),
        (typed, expected),
        (str(csv), _evaluated(definition, as_cells, {})),
    ):
        result = replay(shape, definition)
        assert _matched(result) == wanted, shape
        assert result.python_rows == 0, shape
    assert ("e9", 1) in _evaluated(definition, as_cells, {}) and ("e9", 1) not in expected
    on_spark = replay_spark(typed, definition, spark=spark)
    assert [(r[0], r[1]) for r in _spark_rows(on_spark)] == expected
    assert on_spark.python_rows == 0


def test_nested_paths_prefer_the_dotted_key_then_walk() -> None:
    definition = _programme([_rule([{"field": "order.channel", "operator": "eq", "value": "web"}])])
    datas = [
        {"order": {"channel": "web"}},
        {"order.channel": "web"},
        {"order.channel": None, "order": {"channel": "web"}},  # the dotted key is there (null): no walk
        {"order.channel": "app", "order": {"channel": "web"}},
        {"order": "web"},
        {"order": [{"channel": "web"}]},
    ]
    stream = _events(datas)
    expected = _evaluated(definition, stream, {})
    assert expected == [("e0", 0), ("e1", 0)]
    assert _matched(replay(pd.DataFrame(stream), definition)) == expected


def test_a_beneficiary_in_a_json_column_a_null_dotted_key_keeps_off_the_walk(spark: Any) -> None:
    """Columns of JSON text say what typed columns cannot: 'null' is a key present with null (no walk to the
    nested field, as live: beneficiary_missing), NULL an absent key (the walk). A reference SQL leaves to the
    fallback is a NULL literal in the stored form; the fallback's references fit it (this crashed with a
    ConversionException before)."""
    definition = _programme(
        [
            {
                "event_type": "order",
                "actions": [{"type": "issue", "amount": {"fixed": "1"}, "beneficiary": {"field": "order.channel"}}],
            }
        ]
    )
    stream = _events([{"order.channel": None, "order": {"channel": "c1"}}, {"order": {"channel": "c2"}}])
    live = [(r[0], r[5], r[6]) for r in _rows(replay(pd.DataFrame(stream), definition))]
    assert live == [("e0", "beneficiary_missing", "alice"), ("e1", None, "c2")]
    base = pd.DataFrame(stream).drop(columns="data")
    table = pa.Table.from_pandas(base, preserve_index=False).append_column(
        "order.channel", pa.array(["null", None], pa.string())
    )
    table = table.append_column("order", pa.array([{"channel": "c1"}, {"channel": "c2"}]))
    table = table.replace_schema_metadata({b"replay_json_columns": json.dumps(["order.channel"]).encode()})
    assert [(r[0], r[5], r[6]) for r in _rows(replay(table, definition))] == live
    assert [(r[0], r[5], r[6]) for r in _spark_rows(replay_spark(table, definition, spark=spark))] == live


# time, timezone and window --------------------------------------------------------------------------------------
def test_time_fields_in_paris_across_the_dst_change(spark: Any) -> None:
    """Paris moves from UTC+1 to UTC+2 at 2026-03-29 01:00 UTC: hours, dates and weekdays follow, in SQL on both
    engines, as the live evaluation reads them."""
    rules = [
        _rule([{"field": "occurred_at.hour", "operator": "eq", "value": 3}]),
        _rule([{"field": "occurred_at.hour", "operator": "eq", "value": 2}]),
        _rule([{"field": "occurred_at.date", "operator": "eq", "value": "2026-03-29"}]),
        _rule([{"field": "occurred_at.weekday", "operator": "eq", "value": 7}]),
    ]
    definition = _programme(rules, timezone="Europe/Paris")
    stream = _events([{}] * 12, step=timedelta(minutes=30))  # 22:00 UTC Saturday to 03:30 UTC Sunday
    expected = _evaluated(definition, stream, {})
    hours = {e: [r for ev, r in expected if ev == e] for e in ("e5", "e6")}
    assert hours == {"e5": [2, 3], "e6": [0, 2, 3]}  # 00:30 UTC is 01:30 in Paris; 01:00 UTC is 03:00
    result = replay(pd.DataFrame(stream), definition)
    assert _matched(result) == expected and result.python_rows == 0
    assert [(r[0], r[1]) for r in _spark_rows(replay_spark(pd.DataFrame(stream), definition, spark=spark))] == expected
    utc = _programme(rules)
    assert _matched(replay(pd.DataFrame(stream), utc)) == _evaluated(utc, stream, {})


def test_the_window_rewards_events_from_starts_at_until_before_ends_at(spark: Any) -> None:
    definition = _programme([_rule([])], starts_at="2026-03-28T23:30:00+01:00", ends_at="2026-03-29T00:00:00Z")
    stream = _events([{}] * 6, step=timedelta(minutes=30))
    result = replay(pd.DataFrame(stream), definition)
    assert [row[0] for row in _rows(result)] == ["e1", "e2", "e3"]  # 22:30, 23:00, 23:30 UTC
    assert [row[0] for row in _spark_rows(replay_spark(pd.DataFrame(stream), definition, spark=spark))] == [
        "e1",
        "e2",
        "e3",
    ]


def test_programme_timezone_and_window_are_validated_and_optional(tmp_path: Path) -> None:
    plain = load_programme(ROOT / "data" / "programmes" / "spring_launch.json")
    assert "timezone" not in plain.payload()["programme"]  # absent: not written, files read as before
    assert dumps_programme(plain) == dumps_programme(parse_programme(json.loads(dumps_programme(plain))))
    window = {"timezone": "America/New_York", "starts_at": "2026-03-01T00:00:00-05:00"}
    with_zone = parse_programme({**plain.payload(), "programme": {**plain.payload()["programme"], **window}})
    saved = load_programme(save_programme(with_zone, tmp_path / "zoned.json"))
    assert (
        saved.programme.zone == "America/New_York" and saved.payload()["programme"]["starts_at"] == window["starts_at"]
    )
    assert [r.fingerprint() for r in saved.rules] == [r.fingerprint() for r in plain.rules]
    for programme, field in (
        ({"timezone": "Mars/Olympus"}, "programme.timezone"),
        ({"timezone": "localtime"}, "programme.timezone"),
        ({"starts_at": "2026-03-01T00:00:00"}, "programme.starts_at"),  # no offset: no instant
        ({"starts_at": "2026-03-02T00:00:00Z", "ends_at": "2026-03-01T00:00:00Z"}, "programme.ends_at"),
    ):
        with pytest.raises(ServiceError) as refused:
            parse_programme({**plain.payload(), "programme": {"name": "x", **programme}})
        assert refused.value.code == "field_invalid" and refused.value.details["field"] == field


# priority and stop_processing ------------------------------------------------------------------------------------
def test_priority_and_stop_processing_in_sql(spark: Any) -> None:
    """Rules apply by (priority, file order); a matching stop rule keeps the later rules of its event type off,
    and the issuance rows name each rule by its index in the file (not its place in the order)."""
    rules = [
        _rule([], fixed="1"),
        _rule([{"field": "vip", "operator": "eq", "value": True}], fixed="2", priority=-1, stop_processing=True),
        _rule([], fixed="3", priority=-5),
        _rule([{"field": "x", "operator": "gte", "value": 1}], fixed="4", priority=-1, stop_processing=True),
        _rule([], fixed="5", event_type="other"),
    ]
    definition = _programme(rules)
    stream = _events([{"vip": True}, {"x": 2}, {"vip": False, "x": 0}, {"vip": True, "x": 3}, {"vip": "true"}])
    stream.append({**stream[0], "external_event_id": "e5", "type": "other"})
    expected = _evaluated(definition, stream, {})
    assert [r for e, r in expected if e == "e0"] == [2, 1]
    assert [r for e, r in expected if e == "e2"] == [2, 0]
    result = replay(pd.DataFrame(stream), definition)
    assert _matched(result) == expected and result.python_rows == 0
    assert [row[3] for row in _rows(result) if row[0] == "e0"] == [3, 2]
    assert [(r[0], r[1]) for r in _spark_rows(replay_spark(pd.DataFrame(stream), definition, spark=spark))] == expected


# customers and beneficiaries --------------------------------------------------------------------------------------
CUSTOMERS = [
    {
        "id": "c1",
        "external_id": "alice",
        "country": "FR",
        "segments": ["active"],
        "attributes": {"tier": "gold", "age": 31},
    },
    {"id": "c2", "external_id": "bob", "country": "DE", "segments": [], "attributes": {"tier": "silver", "age": 19.5}},
    {"id": "c3", "external_id": None, "country": None, "segments": ["vip", "active"], "attributes": {}},
]
FACTS = {
    reference: CustomerFacts(c["attributes"], c["country"], tuple(c["segments"]))
    for c in CUSTOMERS
    for reference in (c["id"], c["external_id"])
    if reference is not None
}
CUSTOMER_RULES = [
    _rule([{"field": "customer.attributes.tier", "operator": "eq", "value": "gold"}]),
    _rule([{"field": "customer.attributes.age", "operator": "between", "value": [19, 30]}]),
    _rule([{"field": "customer.country", "operator": "in", "value": ["FR", "DE"]}]),
    _rule([{"field": "customer.segments", "operator": "contains", "value": "active"}]),
    _rule([{"not": {"field": "customer.attributes.tier", "operator": "exists"}}]),
    _rule([{"field": "customer.segments", "operator": "exists"}]),  # every known customer has segments, maybe []
]


def _customer_shapes(tmp_path: Path) -> dict[str, Any]:
    frame = pd.DataFrame(CUSTOMERS)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CUSTOMERS))
    frame.assign(
        attributes=[json.dumps(c["attributes"]) for c in CUSTOMERS],
        segments=[json.dumps(c["segments"]) for c in CUSTOMERS],
    ).to_csv(tmp_path / "c.csv", index=False)
    columns = pa.table(
        {
            "id": [c["id"] for c in CUSTOMERS],
            "external_id": [c["external_id"] for c in CUSTOMERS],
            "country": [c["country"] for c in CUSTOMERS],
            "segments": pa.array([c["segments"] for c in CUSTOMERS], pa.list_(pa.string())),
            "tier": [c["attributes"].get("tier") for c in CUSTOMERS],
            "age": pa.array([c["attributes"].get("age") for c in CUSTOMERS], pa.float64()),
        }
    )
    pq.write_table(columns, tmp_path / "c.parquet")
    mapped = columns.drop_columns(["tier", "age"]).append_column(
        "attributes",
        pa.array(
            [[(k, str(v)) for k, v in c["attributes"].items() if k == "tier"] for c in CUSTOMERS],
            pa.map_(pa.string(), pa.string()),
        ),
    )
    return {
        "pandas (JSON attributes)": frame,
        "jsonl": str(tmp_path / "c.jsonl"),
        "csv": str(tmp_path / "c.csv"),
        "parquet (attribute columns)": str(tmp_path / "c.parquet"),
        "duckdb relation": duckdb.connect().from_arrow(columns),
        "map attributes": mapped,
    }


def _tier_only(facts: dict[str, CustomerFacts]) -> dict[str, CustomerFacts]:
    """The facts a table whose attributes MAP holds only the tier gives."""
    kept = {reference: {k: v for k, v in f.attributes.items() if k == "tier"} for reference, f in facts.items()}
    return {reference: CustomerFacts(kept[reference], f.country, f.segments) for reference, f in facts.items()}


def test_customer_fields_read_the_customers_table_in_every_shape(tmp_path: Path, spark: Any) -> None:
    """The customer is found by id, else by external id; one not in the table (or no table) reads no customer
    field. Attributes as JSON, as columns of their own or a MAP; segments as a list or JSON text."""
    definition = _programme(CUSTOMER_RULES)
    stream = [
        e | {"customer_id": who} for e, who in zip(_events([{}] * 4), ["alice", "c2", "c3", "nobody"], strict=True)
    ]
    expected = _evaluated(definition, stream, FACTS)
    # nobody: no facts at all (no tier, so not(tier exists) holds; no segments, not even an empty list)
    assert ("e3", 4) in expected and ("e3", 5) not in expected and ("e2", 5) in expected
    shapes = _customer_shapes(tmp_path)
    for name, customers in shapes.items():
        wanted = _evaluated(definition, stream, FACTS if name != "map attributes" else _tier_only(FACTS))
        result = replay(pd.DataFrame(stream), definition, customers=customers)
        assert _matched(result) == wanted, name
        assert result.python_rows == 0, name
    assert _matched(replay(pd.DataFrame(stream), definition)) == _evaluated(definition, stream, {})
    typed = pa.table({k: [e[k] for e in stream] for k in ("external_event_id", "type", "customer_id", "occurred_at")})
    for customers, facts in (
        (spark.createDataFrame(shapes["map attributes"]), _tier_only(FACTS)),
        (shapes["parquet (attribute columns)"], FACTS),
    ):
        on_spark = replay_spark(typed, definition, customers=customers, spark=spark)
        assert [(r[0], r[1]) for r in _spark_rows(on_spark)] == _evaluated(definition, stream, facts)
        assert on_spark.python_rows == 0


def test_beneficiaries_are_resolved_in_the_customers_table(tmp_path: Path, spark: Any) -> None:
    """The reward goes to the customer the field names (by id, else external id); an unknown one fails that action
    alone with beneficiary_not_found (its amount kept, as the live engine records it), a missing or non-string
    reference with beneficiary_missing; without a table the reference itself is the customer."""
    definition = _programme(
        [
            {
                "event_type": "order",
                "actions": [
                    {"type": "issue", "amount": {"fixed": "10"}, "beneficiary": {"field": "referrer"}},
                    {"type": "issue", "amount": {"fixed": "5"}},
                ],
            }
        ]
    )
    stream = _events(
        [{"referrer": "bob"}, {"referrer": "c3"}, {"referrer": "zed"}, {"referrer": ""}, {}, {"referrer": 7}]
    )
    customers = pd.DataFrame(CUSTOMERS)
    rows = _rows(replay(pd.DataFrame(stream), definition, customers=customers))
    assert [r[2:] for r in rows if r[2] == 0] == [
        (0, 10, "issued", None, "c2"),
        (0, 10, "issued", None, "c3"),
        (0, 10, "failed", "beneficiary_not_found", "zed"),
        (0, 0, "failed", "beneficiary_missing", "alice"),
        (0, 0, "failed", "beneficiary_missing", "alice"),
        (0, 0, "failed", "beneficiary_missing", "alice"),
    ]
    assert all(r[2:] == (1, 5, "issued", None, "alice") for r in rows if r[2] == 1)
    result = replay(pd.DataFrame(stream), definition, customers=customers)
    assert result.totals()["failed_by_code"] == {"beneficiary_missing": 3, "beneficiary_not_found": 1}
    per_customer = {
        c: int(v) for c, v in zip(result.per_customer()["customer_id"], result.per_customer()["issued"], strict=True)
    }
    assert per_customer == {"alice": 30, "c2": 10, "c3": 10}
    assert _spark_rows(replay_spark(pd.DataFrame(stream), definition, customers=customers, spark=spark)) == rows
    without = _rows(replay(pd.DataFrame(stream), definition))
    assert [r[6] for r in without if r[2] == 0] == ["bob", "c3", "zed", "alice", "alice", "alice"]
    assert [r[4] for r in without if r[2] == 0][:3] == ["issued"] * 3
    # the CLI, and a programme with beneficiaries writes through the stored path (the same rows)
    events = tmp_path / "events.parquet"
    referrers = [e["data"].get("referrer") if isinstance(e["data"].get("referrer"), str) else None for e in stream]
    table = pa.table({k: [e[k] for e in stream] for k in ("external_event_id", "type", "customer_id", "occurred_at")})
    pq.write_table(table.append_column("referrer", pa.array(referrers, pa.string())), events)
    programme = save_programme(definition, tmp_path / "referrals.json")
    customers.to_json(tmp_path / "customers.jsonl", orient="records", lines=True)
    out = tmp_path / "out.parquet"
    assert (
        main(
            [
                "replay",
                str(events),
                "--programme",
                str(programme),
                "--out",
                str(out),
                "--customers",
                str(tmp_path / "customers.jsonl"),
            ]
        )
        == 0
    )
    written = pq.read_table(out).to_pylist()
    assert [(r["customer_id"], r["error_code"]) for r in written if r["action_index"] == 0] == [
        ("c2", None),
        ("c3", None),
        ("zed", "beneficiary_not_found"),
        ("alice", "beneficiary_missing"),
        ("alice", "beneficiary_missing"),
        ("alice", "beneficiary_missing"),
    ]
    assert not replay_to_file(events, programme, tmp_path / "again.parquet", customers=customers).streamed


def test_a_beneficiary_action_refused_as_too_large_records_the_events_customer(spark: Any) -> None:
    """The live engine refuses an amount no ledger can hold before it looks at the beneficiary, so the failed
    execution is the event's customer's, not the referrer's (found by a Hypothesis draw of the differential
    test, seed 137137226156176277949637495915417965664); an amount it can hold goes to the referrer."""
    definition = _programme(
        [
            {
                "event_type": "order",
                "actions": [
                    {
                        "type": "issue",
                        "amount": {"per": "amount", "rate": 10000000},
                        "beneficiary": {"field": "referrer"},
                    }
                ],
            }
        ]
    )
    stream = _events([{"amount": 10**13, "referrer": "c3"}, {"amount": 4, "referrer": "c3"}])  # x 10^7: too large
    expected = [("e0", 0, "failed", "amount_too_large", "alice"), ("e1", 40000000, "issued", None, "c3")]
    for customers in (None, pd.DataFrame(CUSTOMERS)):
        rows = _rows(replay(pd.DataFrame(stream), definition, customers=customers))
        assert [(r[0], r[3], r[4], r[5], r[6]) for r in rows] == expected
        assert replay(pd.DataFrame(stream), definition, customers=customers).python_rows == 0  # SQL decided it
        on_spark = _spark_rows(replay_spark(pd.DataFrame(stream), definition, customers=customers, spark=spark))
        assert on_spark == rows


def test_the_fallback_reads_time_and_customer_facts(tmp_path: Path) -> None:
    """Rows SQL cannot read exactly (a number with more places than DECIMAL(28, 10)) are evaluated in Python with
    the same facts: time in the programme's timezone, the customer's attributes, a beneficiary resolved."""
    rules = [
        {
            "event_type": "order",
            "conditions": [
                {"field": "amount", "operator": "gt", "value": 1},
                {"field": "customer.attributes.tier", "operator": "eq", "value": "gold"},
                {"field": "occurred_at.hour", "operator": "lte", "value": 23},
            ],
            "actions": [
                {"type": "issue", "amount": {"per": "amount", "rate": 1}, "beneficiary": {"field": "referrer"}}
            ],
        }
    ]
    definition = _programme(rules, timezone="Asia/Kolkata")
    exotic = Decimal("1.00000000000000000001")
    stream = _events([{"amount": exotic, "referrer": "bob"}, {"amount": exotic, "referrer": "zed"}, {"amount": 2}])
    result = replay(pd.DataFrame(stream), definition, customers=pd.DataFrame(CUSTOMERS))
    assert result.python_rows == 2
    assert [(r[0], r[3], r[5], r[6]) for r in _rows(result)] == [
        ("e0", 1, None, "c2"),
        ("e1", 1, "beneficiary_not_found", "zed"),
        ("e2", 0, "beneficiary_missing", "alice"),
    ]


def test_a_bad_customers_table_is_refused(tmp_path: Path) -> None:
    definition = _programme(CUSTOMER_RULES)
    stream = pd.DataFrame(_events([{}]))
    with pytest.raises(ServiceError) as missing:
        replay(stream, definition, customers=pd.DataFrame([{"external_id": "alice"}]))
    assert missing.value.code == "field_required" and missing.value.details["field"] == "customers.id"
    with pytest.raises(ServiceError) as twice:
        replay(stream, definition, customers=pd.DataFrame([{"id": "c1"}, {"id": "c1"}]))
    assert twice.value.code == "field_invalid" and twice.value.details["field"] == "customers"
    with pytest.raises(ServiceError) as nothing:
        replay(stream, definition, customers=tmp_path / "nothing.parquet")
    assert nothing.value.code == "field_invalid"


def test_sweeps_read_the_customers_table() -> None:
    definition = _programme(
        [
            {
                "event_type": "order",
                "conditions": [{"field": "customer.country", "operator": "eq", "value": "FR"}],
                "actions": [{"type": "issue", "amount": {"fixed": "3"}, "beneficiary": {"field": "referrer"}}],
            }
        ]
    )
    stream = pd.DataFrame(_events([{"referrer": "bob"}, {"referrer": "zed"}, {}]))
    customers = pd.DataFrame(CUSTOMERS)
    frame = sweep(stream, definition, {"rules[0].actions[0].amount.fixed": ["3", "4"]}, customers=customers)
    assert frame["issued"].tolist() == [Decimal(3), Decimal(4)] and frame["failed"].tolist() == [2, 2]
    totals = replay(stream, definition, customers=customers).totals()
    assert totals["issued"] == Decimal(3) and totals["failed"] == 2
