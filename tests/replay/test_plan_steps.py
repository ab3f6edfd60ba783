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
from rewards_lab.domain.money import MAX_AMOUNT_MINOR
from rewards_lab.replay import store
from rewards_lab.replay.compiler import SPARK, compile_programme
from rewards_lab.replay.engine import prepared, quiet_connection
from rewards_lab.replay.engines.duckdb import DuckDBExecutor
from rewards_lab.replay.engines.spark import SparkExecutor
from rewards_lab.replay.inputs import open_events
from rewards_lab.replay.lot_pass import LOTS
from rewards_lab.replay.order import order_events
from rewards_lab.replay.plan import ceiling, rules, schema
from rewards_lab.replay.plan import expiry as plan_expiry
from rewards_lab.replay.plan.layout import layout
from rewards_lab.replay.plan.rules import Context
from rewards_lab.replay.plan.sql import lint, parse, render
from rewards_lab.replay.plan.steps import STEPS
from rewards_lab.replay.spark_engine import with_facts, with_positions
from rewards_lab.replay.spark_inputs import open_spark_events

PREFIX = "__steps"
BOUNDARY = 0  # the ceiling's boundary day in the issuances fixture: 1970-01-01 (where the 1969 evening lands)

# The tables each step reads that no earlier step makes: given by the test (driver tables) or made by the entry
# point (`ordered`). A new step must be listed here, so that it runs below on both executors.
FIXTURES: dict[str, tuple[str, ...]] = {
    "amounts": ("ordered",),
    "fallback": ("fallback_rows", "slots", "ordered"),
    "with_fallback": (),
    "candidates": (),
    "cells": ("slots",),
    "issuances": ("ordered", "slots", "ceiling_kept"),
    # expiry (plan.expiry)
    "months": ("ordered",),
    "expiry_times": ("ordered", "month_ends"),
    "lots": ("issued", "lotted", "pass_lots"),
}


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
            ],
        }
    )


def _at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


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
        ("e10", "order.completed", "c3", _at(2026, 10, 31, 23, 0), 100, None),  # Paris: 1 November, 00:00
        ("e11", "signup", "c7", _at(2026, 12, 31, 23, 30), None, None),  # Paris: 2027
    ]
    columns = list(zip(*rows, strict=True))
    return pa.table(
        {
            "external_event_id": pa.array(columns[0], pa.string()),
            "type": pa.array(columns[1], pa.string()),
            "customer_id": pa.array(columns[2], pa.string()),
            "occurred_at": pa.array(columns[3], pa.timestamp("us", tz="UTC")),
            "amount": pa.array(columns[4], pa.int64()),
            "referrer_id": pa.array(columns[5], pa.string()),
        }
    )


FALLBACK_ROWS = pa.table(  # outcomes of e3 (pos 2, a signup: slot 3) and e8 (pos 7), one a beneficiary's
    {
        "pos": pa.array([2, 7], pa.int64()),
        "slot": pa.array([3, 3], pa.int32()),
        "m": pa.array([2**63 - 1, 7], pa.int64()),
        "b": pa.array([None, "r3"], pa.string()),
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
# is the end of November 2026 in Paris, exactly when e9's lot (October) expires: it has expired, e10's (November
# in Paris, October in UTC) has not; the lots of 1969 expired long ago.
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


def _months() -> list[int]:
    """The events' local months in Paris, computed here."""
    local = [t.astimezone(ZoneInfo("Europe/Paris")) for t in _events().column("occurred_at").to_pylist()]
    return sorted({month_index(t.year, t.month) for t in local})


def _issued(slots: int) -> pa.Table:
    """Issued rewards of events 1969-06 (pos 0), 1969-12-31 (1), the DST change (5), e9 (8: expires at `as_of`),
    e10 (9) and e11 (10); c2's are the pass's (`lotted`)."""
    rows = [(0, 0, "c1", 150), (1, 1, "c2", 40), (5, 0, "c1", 2**63 - 1), (8, 2, "c6", 999_999), (9, 0, "c3", 100)]
    rows.append((10, 3, "c7", MAX_AMOUNT_MINOR))
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


def _context(plan: Any, engine: Any) -> Context:
    return Context(PREFIX, plan, layout(plan), engine, "PTS", 2, boundary=BOUNDARY, expiry=EXPIRY)


def _run(executor: Any, ctx: Context) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Every step in order (fixtures registered first): per step, its query's lint and its output's rows."""
    executor.register(schema.SLOTS.on(PREFIX), rules.slots_table(ctx.layout))
    executor.register(schema.FALLBACK_ROWS.on(PREFIX), FALLBACK_ROWS)
    executor.register(schema.CEILING_KEPT.on(PREFIX), KEPT)
    executor.register(schema.MONTH_ENDS.on(PREFIX), plan_expiry.month_ends_table(EXPIRY, _months()))
    executor.register(schema.ISSUED.on(PREFIX), _issued(ctx.layout.slots))
    executor.register(schema.LOTTED.on(PREFIX), pa.table({"holder": pa.array(["c2", "nobody"], pa.string())}))
    executor.register(schema.PASS_LOTS.on(PREFIX), PASS_LOTS)
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
    from_sql, plan = prepared(con, _programme(), source, None)
    order_events(con, source, from_sql, PREFIX)
    executor = DuckDBExecutor(con)
    yield executor, plan, _run(executor, _context(plan, "duckdb"))
    executor.close()
    con.close()


@pytest.fixture(scope="module")
def on_spark(spark: Any) -> Any:
    source = open_spark_events(spark, _events())
    ordered, _ = with_positions(source.frame)
    plan = compile_programme(_programme(), source, SPARK)
    with_facts(ordered, plan, source).createOrReplaceTempView(schema.ORDERED.on(PREFIX))
    executor = SparkExecutor(spark)
    yield executor, plan, _run(executor, _context(plan, "spark"))
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
    sql = STEPS[0].build(_context(plan, "duckdb")).on("duckdb")
    assert sql.startswith("SELECT __pos AS pos, customer_id, CAST(epoch_us(occurred_at) // 86400000000 AS INTEGER)")
    for group in plan.by_type:
        for amount in group.amounts:
            assert plan.render(amount) in sql
    assert sql.count(" WHEN ") >= len(plan.by_type) and sql.endswith(f"END AS a FROM {PREFIX}_ordered")


@pytest.mark.parametrize("step", [step.name for step in STEPS])
def test_duckdb_runs_a_steps_text_as_its_tree_renders(step: str, on_duckdb: Any) -> None:
    """DuckDB runs a step's text with the trees rendered in, without SQLGlot's parser: the same statement."""
    (found,) = [s for s in STEPS if s.name == step]
    text = found.build(_context(on_duckdb[1], "duckdb"))
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


@pytest.mark.parametrize("room", [0, 150_00, 10**18 + 5, 2 * 10**18])
def test_the_ceiling_decides_the_same_on_both_engines(room: int, on_duckdb: Any, on_spark: Any) -> None:
    decided = []
    for executor, plan, _ in (on_duckdb, on_spark):
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
    step = STEPS[0].build(_context(plan, "duckdb"))
    assert step.on("duckdb") == before
    assert render(step.tree(), "duckdb") == render(parse(before), "duckdb")


# expiry ---------------------------------------------------------------------------------------------------------
def test_the_months_step_finds_the_local_months(on_duckdb: Any) -> None:
    """Months in Paris, not UTC: e10 (31 October 23:00 UTC) is November's, e11 (31 December) 2027's."""
    assert sorted(row[0] for row in on_duckdb[2]["months"][1]) == _months()
    assert month_index(2026, 11) in _months() and month_index(2027, 1) in _months()


def test_the_lots_reach_the_edges(on_duckdb: Any) -> None:
    """A lot expiring exactly at `as_of` has expired, the next has not; the 1969 lots expired; the pass's lots
    (c2's, one never expiring) replace the closed form's for their customer."""
    lots = {row[0]: row for row in on_duckdb[2]["lots"][1]}  # seq, holder, issued, expires, amount, remaining, x
    slots = layout(on_duckdb[1]).slots
    e9, e10, e1 = lots[8 * slots + 2], lots[9 * slots], lots[0]
    assert e9[3] == AS_OF and (e9[5], e9[6]) == (0, 999_999)
    assert e10[3] > AS_OF and (e10[5], e10[6]) == (100, 0)
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
        "per_rule": plan_expiry.expired_per_rule(name, slots),
        "per_holder": plan_expiry.expired_per_holder(name),
    }


def test_the_expiry_outputs_give_the_same_rows_on_both_engines(on_duckdb: Any, on_spark: Any) -> None:
    """The result's lots, expired lots and expiry summaries (DuckDB text, rendered for Spark) over the `lots`
    step's table, in their order."""
    slots = layout(on_duckdb[1]).slots
    for output, sql in _expiry_outputs(PREFIX, slots).items():
        found = [executor.fetch(sql if executor.engine == "duckdb" else render(parse(sql), "spark"))
                 for executor, _, _ in (on_duckdb, on_spark)]  # fmt: skip
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
    for executor, plan, _ in (on_duckdb, on_spark):
        ctx = dataclasses.replace(_context(plan, executor.engine), expiry=after)
        executor.create(f"{PREFIX}_days", plan_expiry.times(ctx), stored=False)
        found.append(_rows(executor.fetch(f"SELECT * FROM {PREFIX}_days")))
    assert found[0] == found[1] and len(found[0]) == _events().num_rows
    assert all(exp == t + days * 86_400_000_000 for _, t, exp in found[0])
