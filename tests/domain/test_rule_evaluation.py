"""`evaluate` without reasons (the worker's column-wise form) equals `evaluate(..., explain=True)` event by event:
the same matched rules in the same order, the same values read, amounts, rounding and refusals."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.domain.rules import ActionSpec, ConditionSpec, RuleSpec

_TYPES = ("order.completed", "review.posted")
_FIELDS = ("amount", "count", "score")
_BOUNDARIES = [
    Decimal(x) for x in ("20", "20.00", "19.99", "20.01", "0", "-5", "0.005", "1E+3", "19.999999999999999999")
]
_NUMBERS = (
    st.sampled_from(_BOUNDARIES)
    | st.decimals(min_value=-(10**6), max_value=10**6, places=3, allow_nan=False, allow_infinity=False)
    | st.sampled_from([Decimal("1E+999999999"), Decimal("-1E+30"), Decimal("123456789012345678901234567890.5")])
)
_VALUES = (
    _NUMBERS
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["20", "", "x", True, False, None, [Decimal(20)], {"n": 1}, Decimal("NaN"), Decimal("-Infinity")])
)
_CONDITIONS = st.builds(
    ConditionSpec, st.sampled_from(_FIELDS), st.sampled_from(["gte", "gt", "lte", "lt", "eq", "neq"]), _NUMBERS
)
_ACTIONS = st.one_of(
    st.builds(
        ActionSpec,
        st.sampled_from(["ast_a", "ast_b"]),
        st.integers(0, 4),
        fixed_minor=st.integers(1, MAX_AMOUNT_MINOR),
    ),
    st.builds(
        ActionSpec,
        st.sampled_from(["ast_a", "ast_b"]),
        st.integers(0, 4),
        per=st.sampled_from(_FIELDS),
        rate=st.sampled_from([Decimal("0.05"), Decimal("1"), Decimal("0.0001"), Decimal("3.333"), Decimal("1E+6")]),
    ),
)
_RULES = st.lists(
    st.builds(
        RuleSpec,
        st.sampled_from(["rule_1", "rule_2", "rule_3"]),
        st.sampled_from(_TYPES),
        st.lists(_CONDITIONS, max_size=3).map(tuple),
        st.lists(_ACTIONS, min_size=1, max_size=3).map(tuple),
    ),
    max_size=4,
)
_EVENTS = st.lists(
    st.tuples(st.sampled_from(_TYPES), st.dictionaries(st.sampled_from([*_FIELDS, "other"]), _VALUES, max_size=4)),
    max_size=12,
)


def _expected(rules: list[RuleSpec], event_type: str, data: dict[str, Any]) -> list[Any]:
    return [
        (
            verdict.rule_id,
            verdict.inputs(),
            [
                (a.action_index, a.asset_id, a.decimals, a.amount_minor, a.error_code, a.reason if a.error_code else "")
                for a in verdict.actions
            ],
        )
        for verdict in evaluate(rules, [(event_type, data)], explain=True)[0]
        if verdict.matched
    ]


def _batch(matches: list[Any]) -> list[Any]:
    return [
        (
            match.rule_id,
            match.inputs,
            [(a.action_index, a.asset_id, a.decimals, a.amount_minor, a.error_code, a.reason) for a in match.actions],
        )
        for match in matches
    ]


_BOUNDARY_RULE = RuleSpec(
    "rule_1",
    "order.completed",
    (ConditionSpec("amount", "gte", Decimal("20")),),
    (ActionSpec("ast_a", 2, per="amount", rate=Decimal("0.05")), ActionSpec("ast_b", 0, fixed_minor=5)),
)


@settings(max_examples=500, deadline=None)
@given(rules=_RULES, events=_EVENTS)
@example(
    rules=[_BOUNDARY_RULE],
    events=[
        ("order.completed", {"amount": Decimal("20")}),
        ("order.completed", {"amount": Decimal("19.999999999999999999")}),
        ("order.completed", {"amount": Decimal("20.00"), "other": 1}),
        ("order.completed", {"amount": "25"}),
        ("order.completed", {}),
        ("order.completed", {"amount": Decimal("1E+999999999")}),
        ("order.completed", {"amount": Decimal("42.5")}),
        ("order.completed", {"amount": Decimal("42.50")}),
        ("order.completed", {"amount": 42.5}),
        ("review.posted", {"amount": Decimal("100")}),
    ],
)
def test_evaluation_without_reasons_equals_the_explained_one_event_by_event(
    rules: list[RuleSpec], events: list[Any]
) -> None:
    batch = evaluate(rules, events)
    assert len(batch) == len(events)
    for (event_type, data), matches in zip(events, batch, strict=True):
        # repr: NaN read from the data is not equal to itself, but must be the same value recorded
        assert repr(_batch(matches)) == repr(_expected(rules, event_type, data))


def test_amounts_round_toward_zero_and_refusals_keep_their_reason() -> None:
    events = [
        ("order.completed", {"amount": Decimal("20.19")}),  # 1.0095 -> 1.00
        ("order.completed", {"amount": Decimal("1E+999999999")}),
        ("order.completed", {"amount": Decimal("19.99")}),
    ]
    first, refused, unmatched = evaluate([_BOUNDARY_RULE], events)
    assert [a.amount_minor for a in first[0].actions] == [100, 5]
    assert first[0].inputs == {"amount": "20.19"}
    assert refused[0].actions[0].error_code == "amount_too_large"
    assert "1E+999999999" in refused[0].actions[0].reason and refused[0].actions[0].amount_minor == 0
    assert unmatched == []


def test_equal_values_of_other_kinds_never_share_a_test() -> None:
    """`eq false` and `eq 0` are equal (and hash alike) in Python: the cache of built tests keeps them apart (it once
    gave a condition the test of another one, in any rule or programme, that the process had built first)."""
    for first, second, read in [
        (Decimal(0), False, False),
        (Decimal(1), True, True),
        ((Decimal(1), Decimal(0)), (True, False), True),
    ]:
        operator = "in" if isinstance(first, tuple) else "eq"
        assert ConditionSpec("f", operator, first).holds(read) is False
        assert ConditionSpec("f", operator, second).holds(read) is True
