"""Every step of the replay plan (rewards_lab.replay.plan.steps.STEPS) renders and runs on both executors: built
for one fixed programme, linted (plan.sql.lint), run on a DuckDBExecutor and a SparkExecutor over the same small
fixtures (amounts near the largest amount, 2^63 and beyond; events before 1970 and across a DST change; a
beneficiary field, empty or missing), and the outputs compared row for row. A step without a fixture fails here.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from sqlglot import exp

from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme
from rewards_lab.domain.expiry import ExpiryPolicy, month_index
from rewards_lab.domain.limits import Cap
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.replay import store
from rewards_lab.replay.compiler import SPARK, compile_programme
from rewards_lab.replay.engine import evaluation, prepared, quiet_connection
from rewards_lab.replay.engines.duckdb import DuckDBExecutor
from rewards_lab.replay.engines.spark import SparkExecutor
from rewards_lab.replay.fallback import OUTCOMES
from rewards_lab.replay.inputs import open_events
from rewards_lab.replay.limits_plan import LimitsPlan
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.order import order_events
from rewards_lab.replay.plan import ceiling, outputs, rules, schema
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.limits import Pass, PassShape, lotted, masked, run_pass
from rewards_lab.replay.plan.redemptions import place_redemptions
from rewards_lab.replay.plan.reversals import decide_reversals
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import Text, lint, parse, render
from rewards_lab.replay.plan.steps import AMOUNTS, STEPS
from rewards_lab.replay.redemptions import redemptions_table
from rewards_lab.replay.sequential import DECISIONS as DECISIONS_OUT
from rewards_lab.replay.sequential import ITEMS as ITEMS_OUT
from rewards_lab.replay.sequential import REDEMPTIONS as REDEEMED_OUT
from rewards_lab.replay.spark_customers import open_spark_customers
from rewards_lab.replay.spark_engine import with_facts, with_positions
from rewards_lab.replay.spark_inputs import open_spark_events

PREFIX = "__steps"
BOUNDARY = 0  # the ceiling's boundary day in the issuances fixture: 1970-01-01 (where the 1969 evening lands)

# The tables each step reads that no earlier step makes: given by the test (driver tables) or made by the entry
# point (`ordered`). A new step must be listed here, so that it runs below on both executors.
FIXTURES: dict[str, tuple[str, ...]] = {
    # customers and the fallback (increment 4)
    "customers": ("customers",),
    "facts": ("events",),
    "exotic": ("ordered",),
    "fallback_rows": ("fallback_outcomes",),
    # end of increment 4's fixtures
    "amounts": ("ordered",),
    "fallback": ("slots", "ordered"),
    "with_fallback": (),
    "candidates": (),
    "cells": ("slots",),
    "issuances": ("ordered", "slots", "ceiling_kept"),
    # expiry (plan.expiry)
    "months": ("ordered",),
    "expiry_times": ("ordered", "month_ends"),
    "lots": ("issued", "lotted", "pass_lots"),
}
FIXTURES |= {  # reverse actions and redemptions
    "reverse_actions": ("ordered", "reverse_fallback"),
    "originals": ("ordered",),
    "actions": ("ordered", "holders", "divisors"),
    "decisions": ("decided", "moved"),
    "redemptions": ("redemption_input", "holders"),
}
FIXTURES |= {
    "lotted": ("rewards",),
    "masked_rows": ("needed", "bound"),
    "tail": ("moved",),
    "ops": ("rewards", "moved"),
}  # the ordered pass (plan.limits)


def _programme() -> ProgrammeDefinition:
    return parse_programme(
        {
            "programme": {
                "name": "Steps",
                "timezone": "Europe/Paris",
                "expiry": {"at_end_of": "month", "after": 1},
            },
            "asset": {"name": "Points", "symbol": "PTS", "type": "points", "decimals": 2},
            "rules": [
                {
                    "event_type": "order.completed",
                    "actions": [
                        {"type": "issue", "amount": {"per": "amount", "rate": "1"}},
                        {"type": "issue", "amount": {"fixed": "2.50"}, "beneficiary": {"field": "referrer_id"}},
                    ],
                },
                {
                    "event_type": "order.completed",
                    "conditions": [{"field": "amount", "operator": "gte", "value": 100}],
                    "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "0.5"}}],
                },
                {"event_type": "signup", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]},
                *REVERSE_RULES,
                {
                    "event_type": "signup",
                    "conditions": [
                        {"field": "customer.country", "operator": "eq", "value": "FR"}
                    ],  # slot 6: after the reverse rules
                    "actions": [{"type": "issue", "amount": {"fixed": "3"}, "beneficiary": {"field": "referrer_id"}}],
                },
            ],
        }
    )


def _at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# reverse actions and redemptions (plan.reversals, plan.redemptions) -------------------------------------------
REVERSE_RULES = (  # last, so that the issuing rules keep their slots (4: a fraction of `amount`, 5: the whole)
    {
        "event_type": "refund",
        "actions": [
            {"type": "reverse", "original": {"field": "original_id"}, "fraction": {"field": "back", "of": "amount"}}
        ],
    },
    {"event_type": "refund", "actions": [{"type": "reverse", "original": {"field": "original_id"}}]},
)
REFUNDS = [  # (id, customer, occurred_at, original, back): after every other event, so their positions stay
    ("e10", "c1", _at(2026, 11, 1), "e4", 3),  # a fraction of a huge original: a quotient of 28 digits
    ("e11", "c5", _at(2026, 11, 2), "e1", 75),  # c5 is c1 (holders): the same customer
    ("e12", "c2", _at(2026, 11, 3), "e14", 1),  # its original comes later: moved after it
    ("e13", "c2", _at(2026, 11, 3, 12), "", -1),  # no original named; a negative fraction
    ("e14", "c2", _at(2026, 11, 4), None, None),  # an original (a refund naming none)
    ("e15", "c3", _at(2026, 11, 5), "zz", 1),  # an original not in the history
    ("e16", "c4", _at(2026, 11, 6), "e2", 1),  # another customer's original
]
HOLDERS = pa.table({"__ref": pa.array(["c5", "r3"], pa.string()), "__cid": pa.array(["c1", "c9"], pa.string())})
REVERSE_FALLBACK = pa.table(  # an exotic refund's failure from the live evaluation (e8's position: a fixture)
    {
        "pos": pa.array([7], pa.int64()),
        "slot": pa.array([5], pa.int32()),
        "t": pa.array([-1], pa.int64()),
        "code": pa.array(["fraction_invalid"], pa.string()),
        "ref": pa.array([None], pa.string()),
        "num": pa.array([None], pa.string()),
    }
)
DIVISORS = pa.table(  # a divisor Python read (the SQL reads every `amount` here: joined, never chosen)
    {"opos": pa.array([0], pa.int64()), "of": pa.array(["amount"], pa.string()), "dv": pa.array(["7"], pa.string())}
)
DECIDED = pa.table(  # decisions: one moved after a later original, one before 1970 (its day floors to -1)
    {
        "seq": pa.array([9 * 6 + 4, 11 * 6 + 5, 1 * 6 + 5], pa.int64()),
        "pos": pa.array([9, 11, 1], pa.int64()),
        "slot": pa.array([4, 5, 5], pa.int32()),
        "code": pa.array([None, None, "original_not_found"], pa.string()),
        "opos": pa.array([3, 13, None], pa.int64()),
        "fraction": pa.array(["0.5", None, None], pa.string()),
        "refers": pa.array([True, True, True], pa.bool_()),
        "t": pa.array([1_793_491_200_000_000, 1_793_664_000_000_000, -43_200_000_000], pa.int64()),
        "ot": pa.array([1_774_745_999_000_000, 1_793_750_400_000_000, None], pa.int64()),
        "oholder": pa.array(["c1", "c2", None], pa.string()),
    }
)
MOVED = pa.table(
    {
        "pos": pa.array([11], pa.int64()),
        "ppos": pa.array([13], pa.int64()),
        "psub": pa.array([1], pa.int32()),
        "pt": pa.array([1_793_750_400_000_000], pa.int64()),
    }
)
REDEMPTION_INPUT = pa.table(
    {
        "idx": pa.array([0, 1], pa.int64()),
        "customer_id": pa.array(["c5", "c2"], pa.string()),
        "amount_minor": pa.array([100, 2**62], pa.int64()),
        "t": pa.array([-1, 1_774_746_000_000_000], pa.int64()),
        "rank": pa.array([0, 1], pa.int64()),
        "anchor": pa.array([-1, 5], pa.int64()),
    }
)


def _register_reversal_fixtures(executor: Any) -> None:
    for table, data in (
        (schema.HOLDERS, HOLDERS),
        (schema.REVERSE_FALLBACK, REVERSE_FALLBACK),
        (schema.DIVISORS, DIVISORS),
        (schema.DECIDED, DECIDED),
        (schema.MOVED, MOVED),
        (schema.REDEMPTION_INPUT, REDEMPTION_INPUT),
    ):
        executor.register(table.on(PREFIX), data)


def _events() -> pa.Table:
    rows = [  # (id, type, customer, occurred_at, amount, referrer)
        ("e1", "order.completed", "c1", _at(1969, 6, 1, 8), 150, "r1"),
        ("e2", "order.completed", "c2", _at(1969, 12, 31, 12), 40, ""),
        ("e3", "signup", "c3", _at(1970, 1, 1, 0), None, None),
        ("e4", "order.completed", "c1", _at(2026, 3, 29, 0, 59, 59), MAX_AMOUNT_MINOR, "r2"),
        ("e5", "order.completed", "c4", _at(2026, 3, 29, 1, 0, 0), 2**62, None),
        ("e6", "order.completed", "c2", _at(2026, 3, 29, 1, 0, 0), 2**63 - 1, "c1"),
        ("e7", "refund", "c5", _at(2026, 10, 25, 0, 30), 10, None),
        ("e8", "signup", "c6", _at(2026, 10, 25, 1, 30), None, "r3"),
        ("e9", "order.completed", "c6", _at(2026, 10, 25, 2, 0), 999_999, "c6"),
    ]
    rows += [(i, "refund", c, t, None, None) for i, c, t, _, _ in REFUNDS]
    rows += [  # expiry's edges, after the refunds (positions 16 and 17)
        ("e17", "order.completed", "c3", _at(2027, 1, 31, 23, 0), 100, None),  # Paris: 1 February 2027, 00:00
        ("e18", "signup", "c7", _at(2027, 12, 31, 23, 30), None, None),  # Paris: 2028
    ]
    columns = list(zip(*rows, strict=True))
    named = {i: (o, b) for i, *_, o, b in REFUNDS}
    refunds = [named.get(row[0], (None, None)) for row in rows]
    return pa.table(
        {
            "external_event_id": pa.array(columns[0], pa.string()),
            "type": pa.array(columns[1], pa.string()),
            "customer_id": pa.array(columns[2], pa.string()),
            "occurred_at": pa.array(columns[3], pa.timestamp("us", tz="UTC")),
            "amount": pa.array(columns[4], pa.int64()),
            "referrer_id": pa.array(columns[5], pa.string()),
            "original_id": pa.array([o for o, _ in refunds], pa.string()),
            "back": pa.array([b for _, b in refunds], pa.int64()),
        }
    )


CUSTOMERS = pa.table(  # x1 names c1 and c3 (the smallest id wins); r3 has no segments
    {
        "id": pa.array(["c1", "c2", "c3", "r3"], pa.string()),
        "external_id": pa.array(["x1", None, "x1", "x3"], pa.string()),
        "country": pa.array(["FR", "DE", None, "FR"], pa.string()),
        "segments": pa.array([["gold", "new"], [], None, ["staff"]], pa.list_(pa.string())),
    }
)
FALLBACK_OUTCOMES = pa.table(  # e3 (pos 2) and e8 (pos 7), signups (slots 3, 6): marker rows (slot NULL) and outcomes
    {
        "pos": pa.array([2, 2, 2, 7, 7, 7], pa.int64()),
        "slot": pa.array([None, 3, 6, None, 3, 6], pa.int32()),
        "m": pa.array([None, 2**63 - 1, 5, None, 7, 300], pa.int64()),
        "r": pa.array([None, None, "nobody", None, None, "x3"], pa.string()),
    }
)
KEPT = pa.table(  # issued on or after the boundary day: e3's signup only
    {
        "pos": pa.array([2], pa.int64()),
        "day": pa.array([0], pa.int32()),
        "k": pa.array([1], pa.int32()),
        "i": pa.array([1], pa.int32()),
        "m": pa.array([100], pa.int64()),
    }
)


# expiry: the lots' fixtures. Rewards expire at the end of the month after their local month (Paris); `as_of`
# is the end of November 2026 in Paris, exactly when e9's lot (October) expires: it has expired, e17's (February
# in Paris, January in UTC) has not; the lots of 1969 expired long ago.
AS_OF = int(datetime(2026, 11, 30, 23, 0, tzinfo=UTC).timestamp() * 1_000_000)
_GOVERNING = plan_expiry.expiry_plan(_programme())
assert _GOVERNING is not None
EXPIRY = dataclasses.replace(_GOVERNING, as_of=AS_OF)
PASS_LOTS = pa.Table.from_pylist(  # the pass kept c2's lots: one spent, one that never expires
    [
        {"seq": 4, "holder": "c2", "lot_issued": -100, "lot_expires": 5, "lot_amount": 40, "lot_remaining": 0,
         "lot_expired": 0},
        {"seq": 21, "holder": "c2", "lot_issued": 7, "lot_expires": None, "lot_amount": 2**63 - 1,
         "lot_remaining": 2**63 - 1, "lot_expired": 0},
    ],
    schema=LOTS,
)  # fmt: skip


# the ordered pass's operations (plan.limits): one shape covering every part of the statement (in a replay, lots
# expiring give every tracked reward to the pass and no set-based credit; here both, so that both render)
# c2's monthly cap of 1.00 (bit 1), used up by e6: e14's reward is in the tail (e12's reversal of it comes after)
LIMITS = LimitsPlan({0: (Cap("rule", "month", max_amount_minor=100),)}, (), (), "available")
(MONTHLY,) = LIMITS.groupings()
SHAPE = PassShape(
    ("lifetime", "month"), full=False, expiring=True, credit="set_based", tails=(MONTHLY,), bound=((0, MONTHLY),)
)
BOUND = pa.table(  # c2's month of e6 and c6's of e9: their counters can bind
    {
        "g": pa.array([0, 0], pa.int32()),
        "holder": pa.array(["c2", "c6"]),
        "start": pa.array([20_513, 20_727], pa.int32()),
    }
)
_REWARDED = [  # (pos, slot, rule, holder, m, d_month): the rewards (also those the pass may need, `needed`)
    (4, 0, 0, "c1", 150, 20_513),  # c1 redeems: tracked, with its set-based credit (not before 1970: see below)
    (3, 0, 0, "c1", MAX_AMOUNT_MINOR, 20_513),  # e4: the original of a reversal (kept)
    (5, 0, 0, "c2", 2**63 - 1, 20_513),  # c2's counter can bind: it does
    (8, 0, 0, "c6", 999_999, 20_727),  # c6's counter can bind, not reached: c6 is not tracked
    (13, 5, 0, "c2", 7, 20_513),  # e14: an original processed before the refund naming it, in the tail
    (16, 0, 0, "c3", 100, 20_850),  # e17: nothing binds, nothing names it, c3 is not tracked: not needed
]


def _rewards(slots: int) -> pa.Table:
    return pa.table(
        {
            "seq": pa.array([pos * slots + slot for pos, slot, *_ in _REWARDED], pa.int64()),
            "pos": pa.array([r[0] for r in _REWARDED], pa.int64()),
            "slot": pa.array([r[1] for r in _REWARDED], pa.int32()),
            "rule_index": pa.array([r[2] for r in _REWARDED], pa.int32()),
            "holder": pa.array([r[3] for r in _REWARDED], pa.string()),
            "m": pa.array([r[4] for r in _REWARDED], pa.int64()),
            "d_month": pa.array([r[5] for r in _REWARDED], pa.int32()),
        }
    )


def _months() -> list[int]:
    """The events' local months in Paris, computed here."""
    local = [t.astimezone(ZoneInfo("Europe/Paris")) for t in _events().column("occurred_at").to_pylist()]
    return sorted({month_index(t.year, t.month) for t in local})


def _issued(slots: int) -> pa.Table:
    """Issued rewards of events 1969-06 (pos 0), 1969-12-31 (1), the DST change (5), e9 (8: expires at `as_of`),
    e17 (16) and e18 (17); c2's are the pass's (`lotted`)."""
    rows = [(0, 0, "c1", 150), (1, 1, "c2", 40), (5, 0, "c1", 2**63 - 1), (8, 2, "c6", 999_999), (16, 0, "c3", 100)]
    rows.append((17, 3, "c7", MAX_AMOUNT_MINOR))
    return pa.table(
        {
            "seq": pa.array([pos * slots + slot for pos, slot, _, _ in rows], pa.int64()),
            "customer_id": pa.array([c for _, _, c, _ in rows], pa.string()),
            "amount_minor": pa.array([m for _, _, _, m in rows], pa.int64()),
        }
    )


def _value(value: Any) -> Any:
    """A fetched value in one form for both engines: instants as UTC microseconds, structs as sorted items."""
    if isinstance(value, datetime):
        return int(value.astimezone(UTC).timestamp() * 1_000_000) if value.tzinfo else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return tuple(sorted((k, _value(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_value(v) for v in value)
    return value


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(_value(v) for v in row.values()) for row in table.to_pylist()), key=repr)


def _context(plan: Any, engine: Any, source: Any = None) -> Context:
    if source is None:
        return Context(PREFIX, plan, layout(plan), engine, "PTS", 2, boundary=BOUNDARY, expiry=EXPIRY, shape=SHAPE)
    reading, _ = evaluation(source, plan)
    lookup = source.customers.lookup_spec(plan.reads_customers)
    return Context(PREFIX, plan, layout(plan), engine, "PTS", 2, BOUNDARY, lookup, reading, expiry=EXPIRY, shape=SHAPE)


def _with_exotic(plan: Any) -> Any:
    """The programme with its signups marked exotic (as rows SQL cannot read exactly): the fallback's steps run."""
    return dataclasses.replace(plan, exotic=exp.paren(exp.column("type").eq(exp.Literal.string("signup"))))


def _run(executor: Any, ctx: Context) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Every step in order (fixtures registered first): per step, its query's lint and its output's rows."""
    executor.register(schema.SLOTS.on(PREFIX), rules.slots_table(ctx.layout))
    executor.register(schema.FALLBACK_OUTCOMES.on(PREFIX), FALLBACK_OUTCOMES)
    executor.register(schema.CEILING_KEPT.on(PREFIX), KEPT)
    _register_reversal_fixtures(executor)
    executor.register(schema.MONTH_ENDS.on(PREFIX), plan_expiry.month_ends_table(EXPIRY, _months()))
    executor.register(schema.ISSUED.on(PREFIX), _issued(ctx.layout.slots))
    # a stored table, as the `lotted` step's (which replaces it after the `lots` step has read it)
    executor.create(schema.LOTTED.on(PREFIX), Text("SELECT 'c2' AS holder UNION ALL SELECT 'nobody'"), stored=True)
    executor.register(schema.PASS_LOTS.on(PREFIX), PASS_LOTS)
    executor.register(schema.REWARDS.on(PREFIX), _rewards(ctx.layout.slots))
    executor.register(schema.NEEDED.on(PREFIX), _rewards(ctx.layout.slots))
    executor.register(schema.BOUND.on(PREFIX), BOUND)
    found = {}
    for step in STEPS:
        query = step.build(ctx)
        name = step.output.on(PREFIX)
        executor.create(name, query, stored=step.stored)
        found[step.name] = (
            lint(step.build(_stubbed(ctx)).tree()),
            _rows(executor.fetch(_everything(name, step.output, ctx))),
        )
    return found


def _stubbed(ctx: Context) -> Context:
    """`ctx` with the compiled rules' trees replaced by columns: the lint reads the step's own SQL. The rules are
    the compiler's, per engine (its amounts divide a HUGEINT product by `//` on DuckDB, bounded below 1.5e18 by
    a guard before it, which the lint cannot see; tested on both engines by tests/differential)."""
    by_type = tuple(
        dataclasses.replace(
            group,
            amounts=tuple(exp.column("amount") for _ in group.amounts),
            recipients=tuple(None if r is None else exp.column("referrer_id") for r in group.recipients),
        )
        for group in ctx.plan.by_type
    )
    return dataclasses.replace(ctx, plan=dataclasses.replace(ctx.plan, by_type=by_type))


def _everything(name: str, table: schema.Table, ctx: Context) -> str:
    """Every column of a step's output; `a`'s fields one by one (PySpark's toArrow refuses a NULL struct whose
    fields Spark knows are never NULL, as a constant's)."""
    if table == schema.FACTS:  # the events' own columns differ (DuckDB's input row, Spark's file and order)
        columns = ["external_event_id", "customer_id", *ctx.lookup.names] if ctx.lookup else []
        columns += [f"{c}, {c}_id" for c, _ in ctx.plan.beneficiaries]
        return f"SELECT {', '.join(columns)} FROM {name}"
    if "a" not in dict(table.columns):
        return f"SELECT * FROM {name}"
    lay = ctx.layout
    fields = ["k", *(f"c{i}" for i in range(1, lay.width + 1)), *(f"b{i}" for i in lay.beneficiary_fields)]
    return f"SELECT pos, customer_id, day, {', '.join(f'a.{f} AS {f}' for f in fields)} FROM {name}"


@pytest.fixture(scope="module")
def on_duckdb() -> Any:
    con = quiet_connection()
    con.execute("SET TimeZone = 'UTC'")
    source = open_events(con, _events(), f"{PREFIX}_events")
    from_sql, plan = prepared(con, _programme(), source, CUSTOMERS, PREFIX)
    order_events(con, source, from_sql, PREFIX)
    plan = _with_exotic(plan)
    executor = DuckDBExecutor(con)
    yield executor, plan, _run(executor, _context(plan, "duckdb", source)), source
    executor.close()
    con.close()


@pytest.fixture(scope="module")
def on_spark(spark: Any) -> Any:
    source = open_spark_events(spark, _events())
    source.customers = open_spark_customers(spark, CUSTOMERS)
    ordered, _ = with_positions(source.frame)
    plan = compile_programme(_programme(), source, SPARK)
    ordered.createOrReplaceTempView(schema.EVENTS.on(PREFIX))
    source.customers.frame.createOrReplaceTempView(schema.CUSTOMERS.on(PREFIX))
    with_facts(ordered, plan, source).createOrReplaceTempView(schema.ORDERED.on(PREFIX))
    plan = _with_exotic(plan)
    executor = SparkExecutor(spark)
    yield executor, plan, _run(executor, _context(plan, "spark", source)), source
    executor.close()


def test_every_step_has_a_fixture() -> None:
    """Each step's inputs are fixtures or earlier steps' outputs; no step is left out of the run below."""
    assert set(FIXTURES) == {step.name for step in STEPS}
    made: set[str] = set()
    for step in STEPS:
        assert {t.name for t in step.inputs} <= made | set(FIXTURES[step.name]), step.name
        made.add(step.output.name)


def test_the_rules_step_on_duckdb_is_one_projection_with_the_compiled_rules(on_duckdb: Any) -> None:
    """The `amounts` statement as DuckDB runs it: one projection, one CASE branch per type, the rules' SQL."""
    plan = on_duckdb[1]
    sql = AMOUNTS.build(_context(plan, "duckdb")).on("duckdb")
    assert sql.startswith("SELECT __pos AS pos, customer_id, CAST(epoch_us(occurred_at) // 86400000000 AS INTEGER)")
    for group in plan.by_type:
        for amount in group.amounts:
            assert plan.render(amount) in sql
    assert sql.count(" WHEN ") >= len(plan.by_type) and sql.endswith(
        f"END AS a FROM {PREFIX}_ordered WHERE NOT {plan.exotic_sql}"
    )


@pytest.mark.parametrize("step", [step.name for step in STEPS])
def test_duckdb_runs_a_steps_text_as_its_tree_renders(step: str, on_duckdb: Any) -> None:
    """DuckDB runs a step's text with the trees rendered in, without SQLGlot's parser: the same statement."""
    (found,) = [s for s in STEPS if s.name == step]
    text = found.build(_context(on_duckdb[1], "duckdb", on_duckdb[3]))
    assert render(parse(text.on("duckdb")), "duckdb") == render(text.tree(), "duckdb")


@pytest.mark.parametrize("step", [step.name for step in STEPS])
def test_a_step_gives_the_same_rows_on_both_engines(step: str, on_duckdb: Any, on_spark: Any) -> None:
    (problems, rows), (spark_problems, spark_rows) = on_duckdb[2][step], on_spark[2][step]
    assert problems == [] and spark_problems == []
    assert rows, f"{step}: the fixtures give no rows"
    assert spark_rows == rows


def test_the_fixtures_reach_the_edges(on_duckdb: Any) -> None:
    """Refusals as too large, a missing beneficiary, events before 1970, and rows from the fallback."""
    issuances = on_duckdb[2]["issuances"][1]
    codes = {row[-1] for row in issuances}
    assert {"amount_too_large", "beneficiary_missing", "asset_supply_exhausted", None} <= codes
    assert any(row[4] < 0 for row in issuances)
    assert len(on_duckdb[2]["with_fallback"][1]) > len(on_duckdb[2]["amounts"][1])


def test_the_fallback_evaluates_the_same_on_both_engines(on_duckdb: Any, on_spark: Any) -> None:
    """The `exotic` rows through `map_partitions` (no key), the live evaluation reading the same columns on both
    executors (the event's data and time, its customer's facts): one marker row per event, then its outcomes."""
    found = []
    for executor, plan, _, source in (on_duckdb, on_spark):
        _, evaluate = evaluation(source, plan)
        name = f"{PREFIX}_mapped"
        executor.map_partitions(name, f"SELECT * FROM {schema.EXOTIC.on(PREFIX)}", evaluate, OUTCOMES)
        found.append(_rows(executor.fetch(f"SELECT * FROM {name}")))
    assert found[0] == found[1]
    assert sorted(row[0] for row in found[0] if row[1] is None) == [2, 7, 17]  # e3, e8 and e18, the signups
    assert (2, 3, 100, None) in found[0]  # e3's fixed 1.00


def test_the_customers_steps_resolve_references(on_duckdb: Any) -> None:
    """The lookup names each customer under its id and external_id (x1: the smallest id, c1); the facts join
    finds an event's customer and its beneficiary's; the fallback's references resolve or are refused."""
    lookup = on_duckdb[2]["customers"][1]
    assert ("x1", "c1", "FR", ("gold", "new")) in lookup and ("c3", "c3", None, ()) in lookup
    facts = on_duckdb[2]["facts"][1]
    assert ("e8", "c6", None, None, None, "r3", "r3") in facts  # c6 is no customer; r3 names a customer
    rows = on_duckdb[2]["fallback_rows"][1]
    assert (7, 6, 300, "r3") in rows and (2, 6, -2 - 5, "nobody") in rows  # slot 6: the customers rule


@pytest.mark.parametrize("room", [0, 150_00, 10**18 + 5, 2 * 10**18])
def test_the_ceiling_decides_the_same_on_both_engines(room: int, on_duckdb: Any, on_spark: Any) -> None:
    decided = []
    for executor, plan, *_ in (on_duckdb, on_spark):
        boundary = ceiling.decide(executor, "__steps", layout(plan), room)
        decided.append((boundary, _rows(executor.fetch("SELECT * FROM __steps_kept"))))
    assert decided[0] == decided[1]


class _Statements:
    """A stand-in connection that records the statements `store.create` runs (the featured path's rules step)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, sql: str) -> None:
        self.statements.append(sql)

    def register(self, name: str, data: Any) -> None:
        pass

    def unregister(self, name: str) -> None:
        pass


def test_the_rules_step_renders_the_featured_paths_statement(on_duckdb: Any) -> None:
    """The plan's `amounts` on DuckDB is the statement the engine ran before the plan (and still runs for
    featured programmes, `store.create`), byte for byte; its tree (Spark's form) renders the same statement."""
    plan = on_duckdb[1]
    recorded = _Statements()
    store.create(recorded, layout(plan), f"{PREFIX}_ordered", plan.exotic_sql, PREFIX)  # type: ignore[arg-type]
    (created,) = [sql for sql in recorded.statements if sql.startswith(f"CREATE TEMP TABLE {PREFIX}_pe AS ")]
    before = created.removeprefix(f"CREATE TEMP TABLE {PREFIX}_pe AS ")
    step = AMOUNTS.build(_context(plan, "duckdb"))
    assert step.on("duckdb") == before
    assert render(step.tree(), "duckdb") == render(parse(before), "duckdb")


# reverse actions and redemptions: the whole of each, with its map and its driver part, on both executors -------
def _reversals_and_redemptions(executor: Any, plan: Any, engine: Any) -> dict[str, list[tuple[Any, ...]]]:
    ctx = _context(plan, engine)
    spent = redemptions_table(
        pa.table(
            {
                "customer_id": ["c5", "c2", "r3", "c4"],
                "amount": ["1.00", "0.50", "2", "3"],
                "occurred_at": [_at(1960, 1, 1), _at(2026, 3, 29, 1), _at(2030, 1, 1), _at(2026, 3, 29, 1)],
            }
        ),
        2,
    )

    def registered(table: pa.Table) -> Any:
        return lambda target, *_: executor.register(target, table)

    decide_reversals(executor, ctx, registered(REVERSE_FALLBACK), registered(DIVISORS))
    place_redemptions(executor, ctx, spent)
    tables = (schema.DECISIONS, schema.MOVED, schema.REDEMPTIONS)
    return {t.name: _rows(executor.fetch(f"SELECT * FROM {t.on(PREFIX)}")) for t in tables}


@pytest.fixture(scope="module")
def decided(on_duckdb: Any, on_spark: Any) -> Any:
    return [_reversals_and_redemptions(executor, plan, engine) for (executor, plan, _, _), engine in
            ((on_duckdb, "duckdb"), (on_spark, "spark"))]  # fmt: skip


def test_reversals_and_redemptions_decide_the_same_on_both_engines(decided: Any) -> None:
    assert decided[0] == decided[1]


def test_the_reverse_actions_reach_every_decision(decided: Any) -> None:
    """Each failure, a fraction, a whole reversal, a refund moved after its later original, redemptions anchored
    before the first event, among events at their time, and after the last."""
    decisions = decided[0]["decisions"]
    codes = {row[3] for row in decisions}
    assert {None, "original_missing", "original_not_found", "original_customer_mismatch", "fraction_invalid"} <= codes
    by_pos = {row[1]: row for row in decisions if row[2] == 4}
    assert by_pos[9][3] is None and by_pos[9][5] is not None  # e10: 3 of a huge amount, a quotient
    assert by_pos[10][3] is None  # e11: c5 is c1 through the holders
    (moved,) = decided[0]["moved"]
    assert moved[:3] == (11, 13, 1)  # e12 after e14
    anchors = {row[0]: (row[1], row[5]) for row in decided[0]["redemptions"]}
    assert anchors == {0: ("c1", -1), 1: ("c2", 5), 2: ("c9", 17), 3: ("c4", 5)}


# expiry ---------------------------------------------------------------------------------------------------------
def test_the_months_step_finds_the_local_months(on_duckdb: Any) -> None:
    """Months in Paris, not UTC: e17 (31 January 23:00 UTC) is February's, e18 (31 December 2027) 2028's."""
    assert sorted(row[0] for row in on_duckdb[2]["months"][1]) == _months()
    assert month_index(2027, 2) in _months() and month_index(2028, 1) in _months()


def test_the_lots_reach_the_edges(on_duckdb: Any) -> None:
    """A lot expiring exactly at `as_of` has expired, the next has not; the 1969 lots expired; the pass's lots
    (c2's, one never expiring) replace the closed form's for their customer."""
    lots = {row[0]: row for row in on_duckdb[2]["lots"][1]}  # seq, holder, issued, expires, amount, remaining, x
    slots = layout(on_duckdb[1]).slots
    e9, e17, e1 = lots[8 * slots + 2], lots[16 * slots], lots[0]
    assert e9[3] == AS_OF and (e9[5], e9[6]) == (0, 999_999)
    assert e17[3] > AS_OF and (e17[5], e17[6]) == (100, 0)
    assert e1[3] < 0 and e1[6] == 150
    assert sorted(row[0] for row in lots.values() if row[1] == "c2") == [4, 21] and 1 * slots + 1 not in lots
    assert any(row[3] is None for row in lots.values())


def _expiry_outputs(name: str, slots: int) -> dict[str, str]:
    def amount(minor: str) -> str:
        return f"CAST({minor} AS DECIMAL(38, 0))"

    return {
        "lots": plan_expiry.lots_sql(name, "PTS", amount),
        "expired": plan_expiry.expired_sql(name, "PTS", amount),
        "total": plan_expiry.expired_total_sql(name),
        "per_rule": plan_expiry.expired_cells(name, slots),
        "per_holder": plan_expiry.expired_per_holder(name),
    }


def test_the_expiry_outputs_give_the_same_rows_on_both_engines(on_duckdb: Any, on_spark: Any) -> None:
    """The result's lots, expired lots and expiry summaries (DuckDB text, rendered for Spark) over the `lots`
    step's table, in their order."""
    slots = layout(on_duckdb[1]).slots
    for output, sql in _expiry_outputs(PREFIX, slots).items():
        found = [executor.fetch(sql if executor.engine == "duckdb" else render(parse(sql), "spark"))
                 for executor, _, _, _ in (on_duckdb, on_spark)]  # fmt: skip
        ordered = output in ("lots", "expired")
        rows = [[tuple(_value(v) for v in row.values()) for row in table.to_pylist()] for table in found]
        if output == "total":  # (amount, count): integers, whatever their SQL types (the result reads int())
            rows = [[tuple(int(v) for v in row) for row in table] for table in rows]
        assert rows[0], output
        assert (rows[0] if ordered else sorted(rows[0], key=repr)) == (
            rows[1] if ordered else sorted(rows[1], key=repr)
        ), output


@pytest.mark.parametrize("days", [1, 30])
def test_expiry_after_days_gives_the_same_times_on_both_engines(days: int, on_duckdb: Any, on_spark: Any) -> None:
    """`after_days`: the event's time plus the days, to the microsecond (no month ends needed)."""
    policy = ExpiryPolicy.of({"after_days": days})
    assert policy is not None and policy.after_us == days * 86_400_000_000
    after = plan_expiry.ExpiryPlan(policy, "Europe/Paris", AS_OF)
    found = []
    for executor, plan, _, _ in (on_duckdb, on_spark):
        ctx = dataclasses.replace(_context(plan, executor.engine), expiry=after)
        executor.create(f"{PREFIX}_days", plan_expiry.times(ctx), stored=False)
        found.append(_rows(executor.fetch(f"SELECT * FROM {PREFIX}_days")))
    assert found[0] == found[1] and len(found[0]) == _events().num_rows
    assert all(exp == t + days * 86_400_000_000 for _, t, exp in found[0])


def _passed(executor: Any, plan: Any, one_task: bool) -> list[tuple[Any, ...]]:
    """The ordered pass over the fixtures (`lotted`, `masked_rows`, then map_partitions over `ops`), the tail's
    decisions added: under a prefix of its own, so that what other tests decide leaves it alone."""
    ctx = dataclasses.replace(_context(plan, executor.engine), prefix="__pass", shape=SHAPE)
    slots = ctx.layout.slots
    decisions = DECIDED.append_column("pday", pa.array([20_758, 20_760, -1], pa.int32()))
    redemptions = pa.table(
        {"idx": pa.array([0, 1], pa.int64()), "holder": pa.array(["c1", "c2"]), "amount": pa.array([100, 2**62]),
         "t": pa.array([-1, 1_774_746_000_000_000]), "rank": pa.array([0, 1]), "anchor": pa.array([-1, 5])}
    )  # fmt: skip
    given = {schema.REWARDS: _rewards(slots), schema.NEEDED: _rewards(slots), schema.BOUND: BOUND,
             schema.MOVED: MOVED, schema.DECISIONS: decisions, schema.REDEMPTIONS: redemptions}  # fmt: skip
    for table, data in given.items():
        executor.register(ctx.table(table), data)
    times = Text(f"SELECT * FROM {schema.EXPIRY_TIMES.on(PREFIX)}")
    executor.create(ctx.table(schema.EXPIRY_TIMES), times, stored=True)
    executor.create(ctx.table(schema.LOTTED), lotted(ctx), stored=True)
    executor.create(ctx.table(schema.MASKED_ROWS), masked(ctx), stored=True)
    out = run_pass(executor, ctx, SHAPE, Pass(LIMITS, None, AS_OF), one_task=one_task)
    return _rows(executor.fetch(f"SELECT * FROM {out}"))


def test_the_pass_decides_the_same_on_both_engines_by_holder_or_as_one_task(on_duckdb: Any, on_spark: Any) -> None:
    """The pass through each executor's map_partitions: by holder (customers share nothing here) or as one task,
    the same outcome; the tail's reward decided before it, the capped reward cut, the reversal's items taken."""
    found = _passed(on_duckdb[0], on_duckdb[1], True)
    assert _passed(on_duckdb[0], on_duckdb[1], False) == found
    assert _passed(on_spark[0], on_spark[1], True) == found
    assert _passed(on_spark[0], on_spark[1], False) == found
    slots = layout(on_duckdb[1]).slots
    by_seq = {(row[0], row[1]): row for row in found}
    assert by_seq["d", 13 * slots + 5][5] == "limited"  # e14's reward: the tail's
    assert by_seq["d", 5 * slots][4:6] == (100, "issued")  # e6's: cut to the cap
    assert by_seq["i", DECIDED.column("seq")[0].as_py()][13] == 499_999_999_999_999_999  # half of e4's taken
    assert [row[14] for row in found if row[0] == "r"] == [0, 1]


def _featured_outputs(executor: Any, plan: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The featured issuances, reversals and redemptions (plan.outputs) over the pass's outcome under `__pass`
    (its kinds d, i, r as `decided_rewards`, `taken`, `redeemed`) and the step fixtures' events and slots."""
    _passed(executor, plan, True)
    out, sequential = schema.PASS_OUT.on("__pass"), {"d": DECISIONS_OUT, "i": ITEMS_OUT, "r": REDEEMED_OUT}
    for table, kind in ((schema.DECIDED_REWARDS, "d"), (schema.TAKEN, "i"), (schema.REDEEMED, "r")):
        columns = ", ".join(sequential[kind].names)
        executor.create(table.on("__pass"), Text(f"SELECT {columns} FROM {out} WHERE kind = '{kind}'"), stored=True)
    for table in (schema.ORDERED, schema.SLOTS):
        executor.create(table.on("__pass"), Text(f"SELECT * FROM {table.on(PREFIX)}"), stored=False)
    lay = layout(plan)

    def amount(minor: str) -> str:
        return f"CAST({minor} AS DECIMAL(38, 0))"

    base = outputs.issuances_sql(lay, PREFIX, BOUNDARY, "PTS", amount)
    texts = {
        "issuances": outputs.featured_issuances_sql(base, "__pass", "PTS", amount, schema.HOLDERS.on(PREFIX))
        + " ORDER BY seq, kind",
        "reversals": outputs.reversals_sql(lay.slots, "__pass", "PTS", amount, "allow_negative"),
        "redemptions": outputs.redemptions_sql("__pass", "PTS", amount),
    }
    return {
        name: _rows(executor.fetch(sql if executor.engine == "duckdb" else render(parse(sql), "spark")))
        for name, sql in texts.items()
    }


def test_the_featured_outputs_give_the_same_rows_on_both_engines(on_duckdb: Any, on_spark: Any) -> None:
    """The issuance rows with the pass's decisions and one row per reverse action, the reversals and the
    redemptions: one text per output (DuckDB's, rendered for Spark), the same rows in the same order."""
    found = _featured_outputs(on_duckdb[0], on_duckdb[1])
    assert _featured_outputs(on_spark[0], on_spark[1]) == found
    slots = layout(on_duckdb[1]).slots
    issued = {(row[0], row[12]): row for row in found["issuances"]}
    assert issued[5 * slots, "issue"][9:11] == (100, "issued")  # e6's reward cut to the cap, its cut shown
    assert issued[5 * slots, "issue"][19] > 0
    assert any(row[12] == "reversal" and row[10] == "reversed" for row in found["issuances"])
    assert found["reversals"][0][14] == 499_999_999_999_999_999  # half of e4's taken
    assert [row[0] for row in found["redemptions"]] == [0, 1]
