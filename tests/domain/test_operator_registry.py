"""The operator registry (contract/operators.py): one entry per operator, and its pieces agree with each other.

For every entry and values drawn from its shape and kinds: the value validates (through the request model) to what
the engines use, its passing value passes its evaluation, its reasons and description name the field, the rule
builder and the sweep labels take its hint and words, docs/rules.md documents it; and its SQL form on DuckDB (the
replay, over the event data as JSON and as a typed column) issues exactly where the Python evaluation holds."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.contract import jsonutil
from rewards_lab.contract.condition_values import normalise
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.operators import OPERATORS, OperatorEntry
from rewards_lab.contract.programme_file import parse_programme
from rewards_lab.contract.rule_requests import Condition, Operator
from rewards_lab.domain.conditions import ConditionSpec, leaf_reason
from rewards_lab.lab.sweep_labels import OPERATOR_WORDS
from rewards_lab.lab.widgets import OPERATORS as BUILDER_OPERATORS
from rewards_lab.lab.widgets import VALUE_HINTS
from rewards_lab.replay.engine import replay
from tests.operator_values import wire_value

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 3, 1, tzinfo=UTC)
ONE = {"type": "issue", "amount": {"fixed": "1"}}
NUMBERS = st.one_of(
    st.sampled_from(["0", "1", "20", "19.99", "-3.25", "0.0000000001", "123456789012345", "100"]).map(Decimal),
    st.integers(-50, 200).map(Decimal),
)
STRINGS = ("web", "webshop", "shop", "Web", "", "20", "é", "gold", "golden", "old", "\U0001f600", "2026-03-29")
FIELD_VALUES = st.one_of(
    NUMBERS,
    st.sampled_from(STRINGS),
    st.sampled_from([True, False, None, {"a": 1}, 2.5, 20]),
    st.lists(st.one_of(st.sampled_from(STRINGS), NUMBERS, st.booleans()), max_size=3),
)
ENTRIES = st.sampled_from(list(OPERATORS.values()))


@st.composite
def conditions_st(draw: st.DrawFn) -> tuple[OperatorEntry, Any]:
    """An operator's entry and a value for it, as a client sends it."""
    entry = draw(ENTRIES)
    kind = draw(st.sampled_from(entry.kinds)) if entry.kinds else "number"
    return entry, wire_value(draw, entry, kind, NUMBERS, STRINGS)


def _spec(entry: OperatorEntry, wire: Any) -> ConditionSpec:
    body = {"field": "f", "operator": entry.name} | ({} if wire is None else {"value": wire})
    return ConditionSpec("f", entry.name, Condition.model_validate(body).value)


def test_every_operator_is_one_entry_with_each_of_its_pieces() -> None:
    assert [op.value for op in Operator] == list(OPERATORS)  # the wire's enum is the registry, in its order
    rules_doc = (ROOT / "docs" / "rules.md").read_text()
    for name, entry in OPERATORS.items():
        assert entry.name == name and entry.symbol and entry.words and entry.hint
        assert entry.kinds or not entry.takes_value
        assert f"`{name}`" in rules_doc, f"docs/rules.md does not document {name}"
    assert BUILDER_OPERATORS == list(OPERATORS)
    assert VALUE_HINTS == {name: entry.hint for name, entry in OPERATORS.items()}
    assert OPERATOR_WORDS == {name: entry.words for name, entry in OPERATORS.items()}


@settings(max_examples=300, deadline=None)
@given(condition=conditions_st(), read=FIELD_VALUES)
def test_each_entry_agrees_with_itself(condition: tuple[OperatorEntry, Any], read: Any) -> None:
    entry, wire = condition
    spec = _spec(entry, wire)
    assert spec.value == entry.value_of(wire)  # the request model validates with the entry
    passing = entry.passing(spec.value)
    assert spec.holds(normalise(passing)), f"{entry.name} {wire}: {passing!r} does not pass"
    assert entry.probes(spec.value)  # push verification tries values around its edges
    value = normalise(read)
    verdict = spec.holds(value)
    reason = leaf_reason(spec, value, verdict)
    assert reason == entry.reason("f", value, spec.value, verdict) and "f" in reason
    assert spec.describe().startswith("f ")


@pytest.mark.parametrize("name", list(OPERATORS))
def test_a_value_of_the_wrong_shape_is_refused_naming_the_value(name: str) -> None:
    entry = OPERATORS[name]
    wrong: Any = {"x": 1} if entry.takes_value else 1
    with pytest.raises(ServiceError) as refused:
        entry.value_of(wrong, "conditions[0].value")
    assert refused.value.code == "field_invalid"
    assert str(refused.value.details["field"]).startswith("conditions[0].value")
    if entry.takes_value:
        with pytest.raises(ServiceError) as missing:
            entry.value_of(None, "conditions[0].value")
        assert (missing.value.code, missing.value.details["field"]) == ("field_required", "conditions[0].value")


def _typed_column(values: list[Any]) -> pa.Array | None:
    """The values as one typed Arrow column when they allow it (None: JSON text)."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    types = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}
    if kind is Decimal:
        return pa.array(values, pa.decimal128(38, 10))
    if kind is list and all(type(item) is str for v in present for item in v):
        return pa.array(values, pa.list_(pa.string()))
    return pa.array(values, types[kind]) if kind in types else None


@st.composite
def tables_st(draw: st.DrawFn, entry: OperatorEntry) -> tuple[Any, list[Any]]:
    """A value for the operator and a table of field values: any values, and values at its edges."""
    kind = draw(st.sampled_from(entry.kinds)) if entry.kinds else "number"
    wire = wire_value(draw, entry, kind, NUMBERS, STRINGS)
    value = _spec(entry, wire).value
    edges = [entry.passing(value), *entry.probes(value)]
    values = draw(st.lists(st.one_of(FIELD_VALUES, st.sampled_from(edges)), min_size=1, max_size=8))
    return wire, [float(v) if isinstance(v, Decimal) and draw(st.integers(0, 5)) == 0 else v for v in values]


@pytest.mark.parametrize("name", list(OPERATORS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_sql_form_on_duckdb_issues_where_the_python_evaluation_holds(name: str, data: st.DataObject) -> None:
    entry = OPERATORS[name]
    wire, values = data.draw(tables_st(entry), label="value and table")
    spec = _spec(entry, wire)
    leaf: dict[str, Any] = {"field": "f", "operator": entry.name} | ({} if wire is None else {"value": wire})
    definition = parse_programme(
        {
            "programme": {"name": "Registry"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0},
            "rules": [{"event_type": "e", "conditions": [leaf], "actions": [ONE]}],
        }
    )
    events = [
        {
            "external_event_id": f"e{i}",
            "type": "e",
            "customer_id": "c",
            "occurred_at": AT,
            "data": {} if value is None and i % 2 else {"f": value},
        }
        for i, value in enumerate(values)
    ]
    expected = {f"e{i}" for i, value in enumerate(values) if spec.holds(normalise(value))}
    issued = replay(pd.DataFrame(events), definition).issuances.to_arrow_table().column("external_event_id")
    assert set(issued.to_pylist()) == expected, f"{entry.name} {jsonutil.dumps(wire)} on {values}"
    column = _typed_column(values)
    if column is not None:
        table = pa.table(
            {
                "external_event_id": [e["external_event_id"] for e in events],
                "type": ["e"] * len(events),
                "customer_id": ["c"] * len(events),
                "occurred_at": pa.array([AT] * len(events), pa.timestamp("us", "UTC")),
                "f": column,
            }
        )
        issued = replay(table, definition).issuances.to_arrow_table().column("external_event_id")
        assert set(issued.to_pylist()) == expected, f"{entry.name} {jsonutil.dumps(wire)} on a column {values}"
