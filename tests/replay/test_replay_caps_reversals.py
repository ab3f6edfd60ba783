"""Replay of caps, budgets, reversals and redemptions (issue 18), focused: each rule of the semantics on a small
history, held to the live engine in process (tests/replay_live.py) on real DuckDB files, the replay held to the
domain's functions (the refund order, calendar periods), the plain path unchanged, the summaries net of reversals,
the inputs and outputs, and Spark equal to DuckDB on one history with all of it."""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.cli.main import main as cli_main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme, save_programme
from rewards_lab.domain.limits import period_start
from rewards_lab.domain.processing_order import note_original, processing_keys, refunds_after_originals
from rewards_lab.replay import feature_store
from rewards_lab.replay.engine import ISSUANCE_COLUMNS, replay
from rewards_lab.replay.engines.duckdb import DuckDBExecutor
from rewards_lab.replay.feature_store import local_day, period_starts
from rewards_lab.replay.inputs import quote
from rewards_lab.replay.plan import outputs
from rewards_lab.replay.plan.outputs import ADDED_COLUMNS
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.replay.sweep import sweep, with_values
from tests.replay_live import Outcome, redemptions_frame, replayed_outcome, run_live

ORDER, REFUND = "order.completed", "order.refunded"
BASE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday


def programme(
    *,
    rule: dict[str, Any] | None = None,
    reverse: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
    asset: dict[str, Any] | None = None,
    extra_rules: list[dict[str, Any]] | None = None,
) -> ProgrammeDefinition:
    """Orders earn `amount x 1` points (0 decimals); refunds reverse (`reverse` sets the fraction)."""
    rules = [{"event_type": ORDER, "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}]}]
    rules[0].update(rule or {})
    rules += extra_rules or []
    rules.append(
        {"event_type": REFUND, "actions": [{"type": "reverse", "original": {"field": "order_id"}, **(reverse or {})}]}
    )
    return parse_programme(
        {
            "programme": {"name": "Shop", **(info or {})},
            "asset": {"name": "Points", "symbol": "PTS", "type": "points", "decimals": 0, **(asset or {})},
            "rules": rules,
        }
    )


def order(name: str, customer: str, hours: float, amount: Any) -> dict[str, Any]:
    at = BASE + timedelta(hours=hours)
    return {
        "external_event_id": name,
        "type": ORDER,
        "customer_id": customer,
        "occurred_at": at,
        "data": {"amount": amount},
    }


def refund(name: str, customer: str, hours: float, **data: Any) -> dict[str, Any]:
    at = BASE + timedelta(hours=hours)
    return {"external_event_id": name, "type": REFUND, "customer_id": customer, "occurred_at": at, "data": data}


def spend(customer: str, hours: float, amount: int) -> dict[str, Any]:
    return {"customer_id": customer, "amount": amount, "occurred_at": BASE + timedelta(hours=hours)}


def agree(
    tmp_path: Path,
    definition: ProgrammeDefinition,
    stream: list[dict[str, Any]],
    spends: list[dict[str, Any]] | None = None,
    opening: int = 0,
) -> tuple[Outcome, Any]:
    """Run the live engine and the DuckDB replay; assert they agree; return the live outcome and the result."""
    spends = spends or []
    live = run_live(tmp_path / "live.duckdb", definition, stream, spends, opening)
    result = replay(
        pd.DataFrame(live.submitted),
        definition,
        opening_supply=str(opening),
        customers=live.customers,
        redemptions=redemptions_frame(spends, definition.asset.decimals) if spends else None,
    )
    assert replayed_outcome(result).sorted() == live.outcome.sorted()
    return live.outcome, result


def by_event(outcome: Outcome) -> dict[str, tuple[Any, ...]]:
    return {row[0]: (row[3], row[4], row[5], row[7]) for row in outcome.rows}


# the pieces the replay adds, held to the live engine's own functions -------------------------------------------
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 11), max_size=3), min_size=1, max_size=12),
)
def test_the_refund_order_is_the_workers(references: list[list[int]]) -> None:
    """Each event at its place, a refund right after the last of its originals that come later, chains and
    several refunds of one original in their order: the replay's processing keys, from the pairs it finds in
    its history (`note_original`), give the worker's order (both domain.processing_order; tests/domain holds
    that order to a plain model)."""
    ids = [f"e{i}" for i in range(len(references))]
    named = [[f"e{j}" for j in refs] for refs in references]
    follows: dict[int, int] = {}
    for index, refs in enumerate(references):
        for original in refs:
            if original < len(references):
                note_original(follows, index, original)
    keys = processing_keys(follows)
    replayed = sorted(range(len(ids)), key=lambda i: keys.get(i, (i, 0)))
    assert replayed == refunds_after_originals(ids, named)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(10**15), 4 * 10**15), min_size=1, max_size=40),
    st.sampled_from(
        ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe"]
    ),
)
def test_periods_in_sql_are_the_domains_calendar_periods(instants: list[int], zone: str) -> None:
    """The first local day of each period, computed by DuckDB from the event's time in the programme's
    timezone, is domain.limits.period_start's (daylight saving time, ISO weeks, dates before 1970)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    lday = local_day(zone)
    starts = period_starts(["day", "week", "month", "year"], "lday")
    select = ", ".join(f"{sql} AS {period}" for period, sql in starts.items())
    con.register("t", pa.table({"us": pa.array(instants, pa.int64())}))
    instants_sql = "SELECT make_timestamp(us)::TIMESTAMPTZ AS occurred_at FROM t"
    query = f"SELECT {select} FROM (SELECT {lday} AS lday FROM ({instants_sql}))"
    rows = con.sql(query).fetchall()
    epoch = date(1970, 1, 1)
    for us, row in zip(instants, rows, strict=True):
        expected = [(period_start(p, us, zone) - epoch).days for p in ("day", "week", "month", "year")]
        assert list(row) == expected, (us, zone)


class Recording:
    """A DuckDB connection that remembers the statements it runs."""

    def __init__(self) -> None:
        self.con, self.statements = duckdb.connect(), []

    def execute(self, query: str, *args: Any) -> Any:
        self.statements.append(query)
        return self.con.execute(query, *args)

    def sql(self, query: str, *args: Any) -> Any:
        self.statements.append(query)
        return self.con.sql(query, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def test_a_programme_without_caps_or_reversals_runs_the_sql_it_ran_before() -> None:
    """No caps, budget, reversal or redemption: no added column, no statement of the featured path, and the
    issuance view is rewards_lab.replay.plan.outputs' SQL (the store's before the plan), byte for byte."""
    definition = parse_programme(
        {
            "programme": {"name": "Plain"},
            "asset": {"name": "Points", "symbol": "PTS", "type": "points", "decimals": 0, "supply_ceiling": "50"},
            "rules": [{"event_type": ORDER, "actions": [{"type": "issue", "amount": {"per": "amount", "rate": "1"}}]}],
        }
    )
    recording = Recording()
    events = pd.DataFrame([order("a", "alice", 0, 30), order("b", "alice", 1, 30)])
    result = replay(events, definition, connection=recording)  # type: ignore[arg-type]
    assert tuple(result.issuances.columns) == ISSUANCE_COLUMNS
    name = result._name  # noqa: SLF001 - the SQL itself is what is checked
    expected = outputs.issuances_sql(result._layout, name, result._boundary, "PTS", result._amount)  # noqa: SLF001
    assert f"CREATE OR REPLACE TEMP VIEW {quote(name + '_issuances')} AS {expected}" in recording.statements
    assert not any(marker in text for text in recording.statements for marker in ("lday", "_ops", "_rad", "_ra "))
    assert result.totals() == {
        "issued": 30,
        "issuances": 1,
        "failed": 1,
        "failed_by_code": {"asset_supply_exhausted": 1},
    }
    assert result.reversals.fetchall() == [] and result.redemptions.fetchall() == []


# caps and budgets ----------------------------------------------------------------------------------------------
def test_caps_that_cannot_bind_stay_set_based(tmp_path: Path) -> None:
    """A cap no customer reaches sends none of its rewards through the sequential pass (only the reversal's
    reward goes in), and the rows are the live engine's."""
    definition = programme(
        rule={"limits": [{"period": "month", "max_amount": "1000"}, {"period": "day", "max_count": 5}]}
    )
    stream = [order("o1", "alice", 0, 40), order("o2", "bob", 1, 50), refund("r1", "alice", 2, order_id="o1")]
    _, result = agree(tmp_path, definition, stream)
    ops = result.con.sql(f"SELECT op, count(*) FROM {result._name}_ops GROUP BY op").fetchall()  # noqa: SLF001
    assert ops == [(1, 1)]


def test_amount_caps_cut_count_caps_skip_and_a_budget_runs_out_mid_day(tmp_path: Path) -> None:
    """A rule's daily amount cap cuts to what remains, its count cap skips once reached (status limited), the
    programme's budget runs out within the day and a refund gives back what it took, so a later reward fits."""
    definition = programme(
        rule={"limits": [{"period": "day", "max_amount": "60"}, {"period": "week", "max_count": 3}]},
        info={"budget": {"period": "day", "max_amount": "100"}},
    )
    stream = [
        order("a1", "alice", 0, 40),
        order("a2", "alice", 1, 40),  # the daily cap leaves 20
        order("b1", "bob", 2, 50),  # the budget leaves 40 of 100 - 60: 40
        order("c1", "carol", 3, 30),  # nothing left of the budget: limited
        refund("r1", "bob", 4, order_id="b1"),  # gives 40 back to bob's counters and the budget
        order("c2", "carol", 5, 30),
        order("a3", "alice", 26, 10),
        order("a4", "alice", 27, 10),  # alice's fourth reward of the week: skipped
    ]
    outcome, result = agree(tmp_path, definition, stream)
    seen = by_event(outcome)
    assert seen["a2"][:2] == (20, "issued") and seen["a2"][3] == ("rule", "day", "2026-03-02", 20)
    assert seen["b1"][:2] == (40, "issued") and seen["b1"][3][0] == "budget"
    assert seen["c1"][:2] == (0, "limited")
    assert seen["c2"][:2] == (30, "issued")
    assert seen["a4"][:2] == (0, "limited") and seen["a4"][3] == ("rule", "week", "2026-03-02", 10)
    totals = result.totals()
    assert (totals["limited"], totals["cut"], totals["reversed"]) == (2, Decimal(20 + 10 + 30 + 10), Decimal(40))


def test_a_customer_past_a_cap_is_skipped_without_the_pass_until_a_refund_gives_room(tmp_path: Path) -> None:
    """Alice reaches her monthly cap at once: her next orders are surely skipped and decided set-based (the
    tail), until a refund gives some of the cap back and the pass decides again, until the cap is surely used
    up again; the live engine agrees."""
    definition = programme(info={"limits": [{"period": "month", "max_amount": "100"}]})
    stream = [order(f"o{i}", "alice", i, 60) for i in range(6)]
    stream += [refund("r1", "alice", 6.5, order_id="o0"), order("o6", "alice", 7, 60), order("o7", "alice", 8, 60)]
    outcome, result = agree(tmp_path, definition, stream)
    seen = by_event(outcome)
    assert [seen[f"o{i}"][:2] for i in range(8)] == [
        (60, "issued"),
        (40, "issued"),
        *[(0, "limited")] * 4,
        (60, "issued"),
        (0, "limited"),
    ]
    tail = result.con.sql(f"SELECT seq FROM {result._name}_tail ORDER BY seq").fetchall()  # noqa: SLF001
    # o2 to o5 come once 100 were asked for; the refund may give back up to 60, which o6 may take again: o7 too
    assert len(tail) == 5


def test_periods_follow_the_programmes_timezone(tmp_path: Path) -> None:
    """In Asia/Kolkata 2026-03-02 19:00 UTC is already 3 March: the daily cap starts afresh there (in UTC it
    would still be the 2nd, and the third order limited too)."""
    definition = programme(rule={"limits": [{"period": "day", "max_amount": "50"}]}, info={"timezone": "Asia/Kolkata"})
    stream = [order("o1", "alice", 8, 50), order("o2", "alice", 8.5, 20), order("o3", "alice", 10, 20)]
    outcome, _ = agree(tmp_path, definition, stream)
    seen = by_event(outcome)
    assert [seen[name][:2] for name in ("o1", "o2", "o3")] == [(50, "issued"), (0, "limited"), (20, "issued")]


# reversals --------------------------------------------------------------------------------------------------
def test_partial_repeated_early_and_unknown_refunds(tmp_path: Path) -> None:
    """A refund before its order is processed right after it; partial refunds read from both events never take
    back more than was issued; an unknown order fails original_not_found, a missing one original_missing, a
    missing refund_amount fraction_invalid; an order of amount 0 cannot divide (fraction_invalid)."""
    definition = programme(reverse={"fraction": {"field": "refund_amount", "of": "amount"}})
    stream = [
        refund("r0", "alice", 0, order_id="o1", refund_amount=25),  # before its order
        order("o1", "alice", 1, 100),
        refund("r1", "alice", 2, order_id="o1", refund_amount=50),
        refund("r2", "alice", 3, order_id="o1", refund_amount=80),  # only what remains: 25
        refund("r3", "alice", 4, order_id="nope", refund_amount=5),
        refund("r4", "alice", 5, refund_amount=5),
        refund("r5", "alice", 6, order_id="o1"),
        order("z", "bob", 7, 0),
        refund("r6", "bob", 8, order_id="z", refund_amount=1),
    ]
    outcome, result = agree(tmp_path, definition, stream)
    seen = by_event(outcome)
    assert [seen[name][0] for name in ("r0", "r1", "r2")] == [25, 50, 25]
    assert [seen[name][2] for name in ("r3", "r4", "r5", "r6")] == [
        "original_not_found",
        "original_missing",
        "fraction_invalid",
        "fraction_invalid",
    ]
    reversals = result.reversals.df()
    assert list(reversals["original_external_event_id"]) == ["o1", "o1", "o1"]
    assert int(reversals["target_minor"].sum()) == 100  # never more than the reward


@pytest.mark.parametrize(
    ("clawback", "taken", "balance"), [("available", 30, 0), ("negative", 100, -70), ("none", 0, 30)]
)
def test_clawback_policies_against_spent_points(tmp_path: Path, clawback: str, taken: int, balance: int) -> None:
    """Alice spent 70 of her 100 points before the refund: each policy gives back what the live engine's does;
    a later redemption she cannot cover is refused on both sides."""
    definition = programme(info={"clawback": clawback})
    stream = [order("o1", "alice", 0, 100), refund("r1", "alice", 2, order_id="o1")]
    spends = [spend("alice", 1, 70), spend("alice", 3, 40)]
    outcome, result = agree(tmp_path, definition, stream, spends)
    assert by_event(outcome)["r1"][0] == taken
    assert outcome.redeemed == [True, balance >= 40]
    (customer,) = result.per_customer().to_dict("records")
    assert (int(customer["net"]), int(customer["balance"])) == (100 - taken, balance - (40 if balance >= 40 else 0))
    assert int(result.reversals.df()["shortfall_minor"].sum()) == 100 - taken


def test_redemptions_at_one_place_go_in_time_order(tmp_path: Path) -> None:
    """Two redemptions after the last event, given latest first: the earlier one is made first, as it was."""
    definition = programme()
    stream = [order("o1", "bob", 0, 100)]
    outcome, _ = agree(tmp_path, definition, stream, [spend("bob", 50, 80), spend("bob", 10, 60)])
    assert outcome.redeemed == [False, True] and outcome.balances == {outcome.rows[0][6]: 40}


def test_a_binding_ceiling_meets_reversals_and_redemptions(tmp_path: Path) -> None:
    """A ceiling that binds, with a reversal and a redemption giving supply back: every reward goes through the
    pass, which sees the room they leave, as the live ledger does."""
    definition = programme(asset={"supply_ceiling": "100"}, extra_rules=[])
    stream = [
        order("o1", "alice", 0, 60),
        order("o2", "bob", 1, 60),  # refused: 60 + 60 > 100
        refund("r1", "alice", 2, order_id="o1"),
        order("o3", "bob", 4, 70),  # fits once the refund gave 60 back
    ]
    outcome, result = agree(tmp_path, definition, stream, [spend("bob", 3, 1)], opening=30)
    assert outcome.redeemed == [False]  # bob holds nothing
    seen = by_event(outcome)
    assert seen["o2"][1:3] == ("failed", "asset_supply_exhausted") and seen["o3"][:2] == (70, "issued")
    assert result.totals()["failed_by_code"] == {"asset_supply_exhausted": 1}


def test_beneficiaries_rewards_are_taken_back_from_them(tmp_path: Path) -> None:
    """An order rewards its customer and a referrer; its refund takes back from both wallets."""
    definition = programme(
        extra_rules=[
            {
                "event_type": ORDER,
                "actions": [{"type": "issue", "amount": {"fixed": "5"}, "beneficiary": {"field": "ref"}}],
            }
        ]
    )
    stream = [order("o1", "alice", 0, 40), refund("r1", "alice", 1, order_id="o1")]
    stream[0]["data"]["ref"] = "bob"
    outcome, _ = agree(tmp_path, definition, stream)
    assert sorted(item[-2:] for item in outcome.items) == [(5, 5), (40, 40)]
    assert outcome.balances == {}


# summaries, inputs and outputs --------------------------------------------------------------------------------
def test_the_pass_by_worker_processes_decides_as_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass keyed by holder (per-customer caps, no budget) runs in process by default; run by the DuckDB
    executor's worker processes (each a hash partition of the holders), it gives the same issuances and
    summaries."""
    definition = programme(info={"limits": [{"period": "month", "max_amount": "100"}]})
    stream = [order(f"o{i}{name[0]}", name, i, 60) for i in range(6) for name in ("alice", "bob", "carol")]
    stream += [refund("r1", "alice", 6.5, order_id="o0a"), order("o6a", "alice", 7, 60), order("o7b", "bob", 8, 60)]
    spawned: list[int] = []
    by_processes_of = DuckDBExecutor._by_processes  # noqa: SLF001 - counted, then run as it is

    def counted(self: DuckDBExecutor, *args: Any, **kwargs: Any) -> Any:
        spawned.append(self.workers)
        return by_processes_of(self, *args, **kwargs)

    monkeypatch.setattr(DuckDBExecutor, "_by_processes", counted)
    _, in_process = agree(tmp_path, definition, stream)
    assert spawned == []  # by default the pass runs in process (processes were slower on two cores)
    monkeypatch.setattr(feature_store, "PASS_WORKER_ROWS", 0)
    (tmp_path / "workers").mkdir()
    _, by_processes = agree(tmp_path / "workers", definition, stream)
    assert spawned or (os.cpu_count() or 1) == 1  # one core: no worker processes (the pass runs in process)
    columns = ["seq", "status", "amount_minor", "cut_minor"]
    rows = [r.issuances.df().sort_values("seq")[columns].values.tolist() for r in (in_process, by_processes)]
    assert rows[0] == rows[1] and len(rows[0]) == len(stream)  # 20 orders, one reversal
    assert in_process.totals() == by_processes.totals()


RICH = [
    order("o1", "alice", 0, 80),
    order("o2", "bob", 1, 30),
    refund("r0", "bob", 1.5, order_id="o3", refund_amount=10),
    order("o3", "bob", 2, 40),
    refund("r1", "alice", 26, order_id="o1", refund_amount=40),
    order("o4", "alice", 27, 90),
    refund("r2", "carol", 28, order_id="o9", refund_amount=5),
]


def rich() -> ProgrammeDefinition:
    return programme(
        rule={"limits": [{"period": "day", "max_amount": "60"}]},
        reverse={"fraction": {"field": "refund_amount", "of": "amount"}},
        info={"budget": {"period": "month", "max_amount": "200"}, "clawback": "none"},
    )


def test_summaries_are_net_of_reversals_and_show_what_caps_cut() -> None:
    """alice: o1 80 cut to 60 by the daily cap; bob: o2 30, o3 40 cut to 30; r0 (before o3, processed after it)
    takes a quarter of 30: 7; alice spends 50, so r1 (half of 60: 30) finds 10 and, under `none`, takes nothing
    (shortfall 30); o4 (the next day) 90 cut to 60; r2 names no event."""
    result = replay(pd.DataFrame(RICH), rich(), redemptions=pd.DataFrame([spend("alice", 25, 50)]))
    totals = result.totals()
    assert (totals["issued"], totals["requested"], totals["cut"]) == (Decimal(180), Decimal(240), Decimal(60))
    assert (totals["reversed"], totals["shortfall"], totals["net"]) == (Decimal(7), Decimal(30), Decimal(173))
    assert (totals["redeemed"], totals["redemptions"], totals["reversals"]) == (Decimal(50), 1, 2)
    assert totals["failed_by_code"] == {"original_not_found": 1}
    daily = result.daily()
    assert [str(day) for day in daily["day"]] == ["2026-03-02", "2026-03-03"]
    assert [int(v) for v in daily["reversed"]] == [7, 0] and [int(v) for v in daily["net_cumulative"]] == [113, 173]
    assert [int(v) for v in daily["cut"]] == [30, 30]
    customers = result.per_customer().set_index("customer_id")
    assert [int(v) for v in customers.loc["alice", ["issued", "reversed", "redeemed", "balance"]]] == [120, 0, 50, 70]
    assert [int(v) for v in customers.loc["bob", ["issued", "reversed", "net", "balance"]]] == [60, 7, 53, 53]
    shortfalls = result.reversals.df().set_index("external_event_id")["shortfall_minor"]
    assert (int(shortfalls["r0"]), int(shortfalls["r1"])) == (0, 30)


def test_spark_gives_the_duckdb_engines_rows_and_summaries(spark: Any) -> None:
    """The whole of it on one history: the issuance table, reversals, redemptions and every summary."""
    spends = pd.DataFrame([spend("alice", 25, 50), spend("carol", 3, 5)])
    duck = replay(pd.DataFrame(RICH), rich(), redemptions=spends)
    on_spark = replay_spark(pd.DataFrame(RICH), rich(), redemptions=spends, spark=spark)
    columns = list(on_spark.columns)
    assert columns == [*ISSUANCE_COLUMNS, *ADDED_COLUMNS]
    assert on_spark.to_arrow().to_pylist() == duck.issuances.to_arrow_table().select(columns).to_pylist()
    assert (
        on_spark.reversals.orderBy("seq", "original_seq").toArrow().to_pylist()
        == duck.reversals.to_arrow_table().to_pylist()
    )
    assert on_spark.redemptions.orderBy("idx").toArrow().to_pylist() == duck.redemptions.to_arrow_table().to_pylist()
    assert on_spark.totals() == duck.totals()
    assert on_spark.daily().to_dict("records") == duck.daily().to_dict("records")
    by_customer = duck.per_customer().sort_values("customer_id").to_dict("records")
    assert on_spark.per_customer().sort_values("customer_id").to_dict("records") == by_customer


def test_redemptions_from_files_and_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.parquet"
    table = pa.Table.from_pylist([{**event, "data": json.dumps(event["data"])} for event in RICH])
    pq.write_table(table, events)
    spent = tmp_path / "spent.csv"
    spent.write_text("customer_id,amount,occurred_at\nalice,50,2026-03-03T10:00:00Z\nbob,1000,2026-03-03T10:00:00Z\n")
    path = save_programme(rich(), tmp_path / "rich.json")
    out = tmp_path / "issued.parquet"
    assert (
        cli_main(["replay", str(events), "--programme", str(path), "--out", str(out), "--redemptions", str(spent)]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert (summary["net"], summary["redeemed"], summary["redemptions_refused"]) == ("173", "50", 1)
    written = pq.read_table(out)
    assert written.column_names == [*ISSUANCE_COLUMNS, *ADDED_COLUMNS]
    assert written.column("kind").to_pylist().count("reversal") == 3
    lines = tmp_path / "spent.jsonl"
    lines.write_text('{"customer_id": "alice", "amount": 50, "occurred_at": "2026-03-03T10:00:00Z"}\n')
    result = replay(pd.DataFrame(RICH), rich(), redemptions=lines)
    assert result.totals()["redeemed"] == Decimal(50)
    result.write(tmp_path / "issued.csv")
    assert (tmp_path / "issued.csv").read_text().splitlines()[0].endswith("cut_amount,cut_minor")
    with pytest.raises(ServiceError) as missing:
        replay(pd.DataFrame(RICH), rich(), redemptions=pd.DataFrame({"customer_id": ["a"], "amount": ["1"]}))
    assert missing.value.code == "field_required"
    with pytest.raises(ServiceError) as places:
        replay(pd.DataFrame(RICH), rich(), redemptions=pd.DataFrame([{**spend("a", 1, 1), "amount": "1.5"}]))
    assert places.value.code == "amount_too_many_decimals"


def test_a_sweep_varies_a_cap() -> None:
    """A sweep over a cap's amount gives each point's own replay (issued, and the liability net of reversals)."""
    frame = sweep(pd.DataFrame(RICH), rich(), {"rules[0].limits[0].max_amount": ["40", "60", "100"]})
    for row in frame.to_dict("records"):
        point = with_values(rich(), {"rules[0].limits[0].max_amount": row["rules[0].limits[0].max_amount"]})
        totals = replay(pd.DataFrame(RICH), point).totals()
        assert (row["issued"], row["liability"]) == (totals["issued"], totals["net"])
    assert list(frame["issued"]) == sorted(frame["issued"])  # a looser cap issues more
