"""Expiry in the replay (issue 19): lots, FIFO expiry and breakage, held equal to the live engine.

The live side (tests/replay_live.py) runs the expiry worker as an ideal one would: `expire_due(as_of=t)` before the
events of each time t and before each redemption at t, and at the end at `as_of`. The replay, on DuckDB and on
Spark, must give the same executions, the same lots (customer, issued_at, expires_at, amount, what remains, what
expired), balances and redemptions: hidden histories with redemptions across expiry boundaries (the differential
draw), and explicit cases (a redemption just before and just after a lot expires, `at_end_of` month in a
non-UTC timezone, a refund after its lot expired, expired points giving room back under the ceiling).
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards_lab.cli.main import main as cli_main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme, save_programme
from rewards_lab.domain.expiry import ExpiryPolicy, expires_at
from rewards_lab.forecasting.liability import liability_history
from rewards_lab.lab.workbench import Lab
from rewards_lab.replay.engine import replay
from rewards_lab.replay.lot_pass import LotBook
from rewards_lab.replay.spark_engine import replay_spark
from rewards_lab.replay.sweep import sweep
from tests.differential.test_replay_differential import (
    BASE,
    CUSTOMERS,
    ORDER,
    REFUND,
    _as_columns,
    featured_programmes_st,
    featured_streams_st,
)
from tests.replay_live import Outcome, redemptions_frame, replayed_outcome, run_live

_counter = itertools.count()
EXPIRIES = (
    {"after_days": 1},
    {"after_days": 2},
    {"after_days": 9},
    {"at_end_of": "month"},
    {"at_end_of": "month", "after": 1},
    {"at_end_of": "quarter"},
    {"at_end_of": "year"},
)


@st.composite
def expiring_programmes_st(draw: st.DrawFn) -> ProgrammeDefinition:
    """The featured programmes (caps, budgets, reversals, clawback policies, ceilings, timezones) with an expiry on
    the programme (its timezone) or on the asset (UTC); sometimes stripped of reversals, caps and budget, so that
    expiry is the closed form."""
    payload = draw(featured_programmes_st()).payload()
    expiry = draw(st.sampled_from(EXPIRIES))
    if draw(st.booleans()):
        payload["programme"]["expiry"] = expiry
    else:
        payload["asset"]["expiry"] = expiry
    if draw(st.integers(0, 2)) == 0:
        payload["rules"] = [rule for rule in payload["rules"] if rule["event_type"] != REFUND]
        payload["programme"].pop("limits", None)
        payload["programme"].pop("budget", None)
        for rule in payload["rules"]:
            rule.pop("limits", None)
    return parse_programme(payload)


@st.composite
def spends_st(draw: st.DrawFn, decimals: int) -> list[dict[str, Any]]:
    """Redemptions among the events' times and just around the expiry boundaries a day or two after them, and
    around the end of March in Paris (757 h: 22:00 UTC) and New York (763 h: 04:00 UTC on 1 April)."""
    hours = [0, 1, 23, 24, 25, 40, 47, 48, 49, 180, 700, 744, 757, 763, 800, 1000]
    return [
        {
            "customer_id": draw(st.sampled_from(CUSTOMERS)),
            "amount": draw(st.integers(1, 60 * 10**decimals)),
            "occurred_at": BASE + timedelta(hours=draw(st.sampled_from(hours)), seconds=draw(st.sampled_from([0, -1]))),
        }
        for _ in range(draw(st.integers(0, 5)))
    ]


def _agree(
    tmp_path: Path,
    definition: ProgrammeDefinition,
    stream: list[dict[str, Any]],
    spends: list[dict[str, Any]],
    *,
    opening: int = 0,
    as_of: datetime | None = None,
    spark: Any = None,
) -> Outcome:
    """Run live, replay on DuckDB (both inputs) and, given a session, on Spark; all must agree. The live outcome."""
    live = run_live(tmp_path / f"expiry-{next(_counter)}.duckdb", definition, stream, spends, opening, as_of)
    expected = live.outcome.sorted()
    frame = redemptions_frame(spends, definition.asset.decimals) if spends else None
    supply = str(Decimal(opening).scaleb(-definition.asset.decimals))
    inputs = (pd.DataFrame(live.submitted), _as_columns(live.submitted))
    options = {"opening_supply": supply, "customers": live.customers, "redemptions": frame, "as_of": as_of}
    ids = dict(zip(live.customers["external_id"], live.customers["id"], strict=True))
    for events_input in inputs:
        assert _by_id(replayed_outcome(replay(events_input, definition, **options)), ids) == expected
    if spark is not None:
        on_spark = replay_spark(inputs[0], definition, spark=spark, **options)
        assert _by_id(replayed_outcome(on_spark, spark=True), ids) == expected
    # Without a customers table too (the plan's own path), where that table changes nothing: no redemptions (they
    # name customers by id), every beneficiary an existing customer (without the table a replay cannot refuse one)
    # and every event's customer named by external id (without the table `bob` and bob's id are two customers).
    named = {event["data"].get("ref") for event in live.submitted} - {None}
    by_external_id = all(event["customer_id"] in ids for event in live.submitted)
    if not spends and named <= set(ids) and by_external_id:
        bare = {**options, "customers": None}
        assert _by_id(replayed_outcome(replay(inputs[0], definition, **bare)), ids) == expected
        if spark is not None:
            on_spark = replay_spark(inputs[0], definition, spark=spark, **bare)
            assert _by_id(replayed_outcome(on_spark, spark=True), ids) == expected
    return expected


def _by_id(outcome: Outcome, ids: dict[str, str]) -> Outcome:
    """A replay's outcome with customers as the live engine names them (a replay without caps, reversals or
    redemptions keeps an event's customer as the event names it: by external id here)."""
    rows = [(*row[:6], ids.get(row[6], row[6]), row[7]) for row in outcome.rows]
    items = [(*item[:6], ids.get(item[6], item[6]), *item[7:]) for item in outcome.items]
    lots = [(ids.get(lot[0], lot[0]), *lot[1:]) for lot in outcome.lots]
    balances = {ids.get(customer, customer): amount for customer, amount in outcome.balances.items()}
    return Outcome(rows, items, balances, outcome.redeemed, lots).sorted()


@settings(
    max_examples=int(os.environ.get("REPLAY_EXPIRY_EXAMPLES", "10")),  # more when run by hand
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_lots_expiry_and_balances_agree_with_the_live_engine(tmp_path: Path, data: st.DataObject, spark: Any) -> None:
    """Hidden histories with redemptions across expiry boundaries (a second before and at them), refunds before
    and after their rewards' lots expire under every clawback policy, caps, budgets, binding ceilings, expiry on
    the programme (in its timezone) or the asset, `as_of` at the end or weeks later: DuckDB (both inputs) and
    Spark (one example in six: its share of the suite's time stays small) give the live engine's executions,
    lots, balances and redemptions."""
    definition = data.draw(expiring_programmes_st(), label="programme")
    stream = data.draw(featured_streams_st(), label="events")
    has_refunds = any(rule.event_type == REFUND for rule in definition.rules)
    spends = (
        data.draw(spends_st(definition.asset.decimals), label="redemptions")
        if has_refunds or data.draw(st.booleans(), label="redeems")
        else []
    )
    opening = data.draw(st.sampled_from([0, 0, 1 if definition.asset.supply_ceiling else 0]), label="opening")
    later = data.draw(st.sampled_from([None, None, 24 * 40]), label="as_of")
    moments = [e["occurred_at"] for e in stream] + [s["occurred_at"] for s in spends]
    as_of = None if later is None else max(moments) + timedelta(hours=later)
    on_spark = spark if data.draw(st.integers(0, 5), label="on Spark too") == 0 else None
    _agree(tmp_path, definition, stream, spends, opening=opening, as_of=as_of, spark=on_spark)


# explicit cases ------------------------------------------------------------------------------------------------
def _programme(policy: dict[str, Any], *, zone: str | None = None, refunds: bool = False, **asset: Any) -> Any:
    info: dict[str, Any] = {"name": "Expiring", "expiry": policy}
    if zone is not None:
        info["timezone"] = zone
    rules: list[dict[str, Any]] = [{"event_type": ORDER, "actions": [{"type": "issue", "amount": {"fixed": "10"}}]}]
    if refunds:
        rules.append({"event_type": REFUND, "actions": [{"type": "reverse", "original": {"field": "order_id"}}]})
        info["clawback"] = "available"
    shape = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0, **asset}
    return parse_programme({"programme": info, "asset": shape, "rules": rules})


def _order(index: int, at: datetime, customer: str = "alice") -> dict[str, Any]:
    return {"external_event_id": f"e{index}", "type": ORDER, "customer_id": customer, "occurred_at": at, "data": {}}


def _lots(outcome: Outcome) -> list[tuple[int, int, int]]:
    return [(amount, remaining, expired) for _, _, _, amount, remaining, expired in outcome.lots]


@pytest.mark.parametrize("before", [True, False])
def test_a_redemption_just_before_or_at_an_expiry(tmp_path: Path, before: bool, spark: Any) -> None:
    """Lots of 10 issued a day apart expire after 2 days. A redemption of 15 a microsecond before the first lot
    expires takes it whole and 5 of the second (which later expires with 5 left); at the instant it expires the
    first lot is gone and the redemption takes 10 of the second and 5 of the third."""
    definition = _programme({"after_days": 2})
    stream = [_order(i, BASE + timedelta(days=i)) for i in range(3)]
    at = BASE + timedelta(days=2) - (timedelta(microseconds=1) if before else timedelta(0))
    spends = [{"customer_id": "alice", "amount": 15, "occurred_at": at}]
    on_spark = spark if before else None  # one of the two on Spark too: the suite's time
    found = _agree(tmp_path, definition, stream, spends, as_of=BASE + timedelta(days=10), spark=on_spark)
    if before:
        assert _lots(found) == [(10, 0, 0), (10, 0, 5), (10, 0, 10)]
    else:
        assert _lots(found) == [(10, 0, 10), (10, 0, 0), (10, 0, 5)]
    assert found.balances == {} and found.redeemed == [True]


def test_at_end_of_month_in_a_timezone_other_than_utc(tmp_path: Path, spark: Any) -> None:
    """An order at 22:30 UTC on 31 March is already 1 April in Paris: under `at_end_of` month in Europe/Paris its
    lot expires at the end of April (local midnight, 22:00 UTC on 30 April); the lot of an order an hour earlier
    (23:30 in Paris, still March) expires at 22:00 UTC on 31 March, half an hour after it was issued."""
    definition = _programme({"at_end_of": "month"}, zone="Europe/Paris")
    march = datetime(2026, 3, 31, 21, 30, tzinfo=UTC)  # 23:30 in Paris (CEST), still March
    april = datetime(2026, 3, 31, 22, 30, tzinfo=UTC)  # 00:30 on 1 April in Paris
    stream = [_order(0, march), _order(1, april, "bob")]
    found = _agree(tmp_path, definition, stream, [], as_of=datetime(2026, 4, 30, 22, tzinfo=UTC), spark=spark)
    policy = ExpiryPolicy(at_end_of="month")
    ends = {lot[0]: lot[2] for lot in found.lots}
    assert ends[min(ends)] == expires_at(policy, march.replace(tzinfo=None), "Europe/Paris")
    assert sorted(ends.values()) == [datetime(2026, 3, 31, 22), datetime(2026, 4, 30, 22)]
    assert _lots(found) == [(10, 0, 10), (10, 0, 10)]  # both due by as_of, the end of April in Paris


def test_a_refund_after_its_lot_expired_takes_what_the_wallet_still_holds(tmp_path: Path, spark: Any) -> None:
    """Under the `available` clawback, a refund of an order whose lot has expired takes back nothing of it when
    nothing else is held, and takes from the newer lot (FIFO after the original's own) when something is."""
    definition = _programme({"after_days": 1}, refunds=True)
    stream = [
        _order(0, BASE),
        _order(1, BASE + timedelta(days=2)),
        {
            "external_event_id": "r0",
            "type": REFUND,
            "customer_id": "alice",
            "occurred_at": BASE + timedelta(days=2, hours=1),
            "data": {"order_id": "e0"},
        },
    ]
    found = _agree(tmp_path, definition, stream, [], spark=spark)
    assert [item[-2:] for item in found.items] == [(10, 10)]  # its target, taken from e1's lot
    assert _lots(found) == [(10, 0, 10), (10, 0, 0)]
    assert found.balances == {}


def test_a_refund_processed_with_an_order_takes_from_the_lot_that_order_made(tmp_path: Path) -> None:
    """A refund at the same instant as an order is processed in the order's batch: the refund of a reward whose
    lot expired takes from the new order's lot (made in that batch), and a refund of that same order takes its
    own new lot; the live ledger keeps what the batch left of those lots (it once wrote them whole: a wallet's
    lots then held more than its balance, `lots_mismatch`), as the replay does."""
    definition = _programme({"after_days": 1}, refunds=True)

    def refund(index: int, at: datetime, order_id: str) -> dict[str, Any]:
        return {"external_event_id": f"r{index}", "type": REFUND, "customer_id": "alice", "occurred_at": at,
                "data": {"order_id": order_id}}  # fmt: skip

    stream = [
        _order(0, BASE),
        _order(1, BASE + timedelta(days=2)),
        refund(0, BASE + timedelta(days=2), "e0"),
        _order(2, BASE + timedelta(days=3)),
        refund(1, BASE + timedelta(days=3), "e2"),
    ]
    found = _agree(tmp_path, definition, stream, [])
    assert [item[-2:] for item in found.items] == [(10, 10), (10, 10)]
    assert _lots(found) == [(10, 0, 10), (10, 0, 0), (10, 0, 0)]
    assert found.balances == {}


def test_expired_points_give_room_back_under_the_ceiling(tmp_path: Path) -> None:
    """With a ceiling of 20, a third reward of 10 is refused while two lots are outstanding, and a fourth is
    issued once the first has expired."""
    definition = _programme({"after_days": 1}, supply_ceiling="20")
    stream = [_order(0, BASE), _order(1, BASE + timedelta(hours=1)), _order(2, BASE + timedelta(hours=2))]
    stream.append(_order(3, BASE + timedelta(days=1, hours=1)))
    found = _agree(tmp_path, definition, stream, [])
    assert sorted(row[4] for row in found.rows) == ["failed", "issued", "issued", "issued"]
    result = replay(pd.DataFrame(stream), definition)
    assert result.totals()["expired"] == Decimal(20)  # the first two, by the last event's time


def test_as_of_is_the_history_end_and_cannot_be_earlier() -> None:
    definition = _programme({"after_days": 1})
    stream = pd.DataFrame([_order(0, BASE), _order(1, BASE + timedelta(days=1))])
    result = replay(stream, definition)
    assert result.as_of == BASE + timedelta(days=1)
    assert result.totals()["expired"] == Decimal(10)  # the first lot expires at the second order's instant
    assert replay(stream, definition, as_of=BASE + timedelta(days=5)).totals()["expired"] == Decimal(20)
    with pytest.raises(ServiceError) as refused:
        replay(stream, definition, as_of=BASE)
    assert refused.value.code == "field_invalid" and refused.value.details["field"] == "as_of"


def test_without_expiry_nothing_changes() -> None:
    """A programme without expiry has no lots, no `expired` total and no `expired` column."""
    definition = parse_programme(
        {
            "programme": {"name": "Plain"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0},
            "rules": [{"event_type": ORDER, "actions": [{"type": "issue", "amount": {"fixed": "10"}}]}],
        }
    )
    result = replay(pd.DataFrame([_order(0, BASE)]), definition)
    assert "expired" not in result.totals() and "expired" not in result.daily().columns
    assert result.lots.fetchall() == [] and result.expired.fetchall() == [] and result.as_of is None


def test_a_programme_files_expiry_round_trips_through_the_lab_and_its_replay(tmp_path: Path) -> None:
    """`programme.expiry` and `asset.expiry` of a file reach the Lab's programme and asset, come back in its
    definition (draft and published version), and its replay expires the lots."""
    definition = _programme({"at_end_of": "quarter", "after": 1}, zone="Europe/Paris", expiry={"after_days": 30})
    shop = Lab().load(definition)
    assert shop.definition() == definition
    shop.publish()
    assert shop.definition("live") == definition
    assert load_programme(shop.export(tmp_path / "shop.json")) == definition
    events = pd.DataFrame([_order(0, BASE)])
    result = shop.replay(events, as_of=datetime(2026, 10, 1, tzinfo=UTC))
    ((ends,),) = result.expired.select("expires_at").fetchall()
    assert ends == datetime(2026, 6, 30, 22, tzinfo=UTC)  # the end of Q2 in Paris: the quarter after Q1


def test_the_cli_replays_with_expiry_until_as_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rewards-lab replay --as-of` expires what is due by then; the summary prints what expired."""
    definition = _programme({"after_days": 2})
    events = tmp_path / "events.parquet"
    rows = [{**_order(i, BASE + timedelta(days=i)), "data": json.dumps({})} for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), events)
    path = save_programme(definition, tmp_path / "expiring.json")
    out = tmp_path / "issued.parquet"
    command = ["replay", str(events), "--programme", str(path), "--out", str(out)]
    assert cli_main(command) == 0
    assert json.loads(capsys.readouterr().out)["expired"] == "10"  # the first lot, at the last order's instant
    assert cli_main([*command, "--as-of", "2026-03-04T09:00:00Z"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["expired"], summary["expired_lots"], summary["issued"]) == ("20", 2, "30")
    assert pq.read_table(out).num_rows == 3


def test_the_labs_liability_reads_what_the_replay_expired() -> None:
    """Orders of 10 on four days, a redemption of 15 on the second (FIFO: 10 of the first lot, 5 of the second),
    lots of two days: by `as_of` the second lot's 5 and the last two lots have expired (25), and the liability
    (issued - redeemed - expired - reversed, forecasting/liability.py) is the customers' balance: nothing."""
    definition = _programme({"after_days": 2})
    stream = pd.DataFrame([_order(i, BASE + timedelta(days=i)) for i in range(4)])
    spent = redemptions_frame([{"customer_id": "alice", "amount": 15, "occurred_at": BASE + timedelta(hours=25)}], 0)
    result = replay(stream, definition, redemptions=spent, as_of=BASE + timedelta(days=10))
    assert result.expired.df()["amount_minor"].tolist() == [5, 10, 10]
    found = liability_history(result)
    assert (found.minor["expired"].sum(), found.minor["redeemed"].sum(), found.closing) == (25, 15, Decimal(0))
    assert result.per_customer()["balance"].tolist() == [Decimal(0)]


def test_the_pass_keeps_lots_as_the_ledger_does() -> None:
    """The pass's lot book (replay/lot_pass.py): a reversal takes from its own reward's lot first, a redemption
    from the oldest, a credit to a wallet below zero pays the debt first, the worker runs once per anchor event
    (and before each redemption) and finally at `as_of`, on one clock: a customer who never comes back has their
    lots expired at anyone's operation, and expired or spent lots leave the book (what it holds stays bounded by
    the lots still open, issue 27)."""
    book = LotBook(as_of=1_000)
    book.credit("bob", 0, 7, 7, issued=0, expires=120)  # bob never comes back
    book.credit("alice", 1, 10, 10, issued=0, expires=100)
    book.credit("alice", 2, 10, 20, issued=5, expires=200)
    book.debit("alice", 4, first=2)  # the reversal of reward 2: its own lot
    book.debit("alice", 12)  # a redemption: the oldest first (all of lot 1, 2 of lot 2)
    assert book.due(anchor=7, clock=150, redemption=False) == [("bob", 7)]  # lot 1 is spent
    assert set(book.open) == {"alice"}
    book.credit("alice", 3, 10, 5, issued=160, expires=None)  # the wallet was at -5 (a negative clawback)
    assert book.due(anchor=8, clock=200, redemption=False) == [("alice", 4)]
    assert book.due(anchor=8, clock=500, redemption=False) == []  # the same anchor: not again
    assert book.held("alice") == [5]  # the expired lot left the book
    rows = book.batch().to_pylist()
    finished = list(book.finish(chunk=1))
    assert [expired for expired, _ in finished if expired] == []
    rows = sorted(rows + [row for _, lots in finished for row in lots.to_pylist()], key=lambda row: row["seq"])
    assert [(r["seq"], r["lot_amount"], r["lot_remaining"], r["lot_expired"]) for r in rows] == [
        (0, 7, 0, 7),
        (1, 10, 0, 0),
        (2, 10, 0, 4),
        (3, 5, 5, 0),
    ]


def test_a_lot_that_expires_before_1970_expires_and_is_finished_once() -> None:
    """Times are microseconds since 1970: a lot issued and expiring before it (negative times) is an expiring lot
    like any other, not one that never expires (the book's "never" is below every instant)."""
    book = LotBook(as_of=1_000)
    book.credit("ann", 0, 6, 6, issued=-9_000, expires=-5_000)
    book.credit("ann", 1, 4, 10, issued=-8_000, expires=None)
    book.credit("bea", 2, 3, 3, issued=-7_000, expires=-6_000)
    assert book.due(anchor=3, clock=-5_500, redemption=False) == [("bea", 3)]
    assert book.due(anchor=4, clock=-5_000, redemption=False) == [("ann", 6)]
    book.debit("ann", 4)  # the lot without expiry, spent: finished once, its slot free
    book.credit("cy", 5, 2, 2, issued=-4_000, expires=-1)  # takes a freed slot
    rows = book.batch().to_pylist()
    rows += [row for _, lots in book.finish(chunk=1) for row in lots.to_pylist()]
    found = sorted((r["seq"], r["holder"], r["lot_expires"], r["lot_remaining"], r["lot_expired"]) for r in rows)
    assert found == [
        (0, "ann", -5_000, 0, 6),
        (1, "ann", None, 0, 0),
        (2, "bea", -6_000, 0, 3),
        (5, "cy", -1, 0, 2),
    ]


def test_a_sweep_of_an_expiring_programme_is_net_of_what_expired() -> None:
    """Each grid point is its own replay: its liability is what was issued less what expired by the end."""
    definition = _programme({"after_days": 1})
    stream = pd.DataFrame([_order(i, BASE + timedelta(days=i)) for i in range(3)])
    frame = sweep(stream, definition, {"rules[0].actions[0].amount.fixed": ["10", "4"]})
    assert frame["issued"].tolist() == [Decimal(30), Decimal(12)]
    assert frame["liability"].tolist() == [Decimal(10), Decimal(4)]  # two of three lots expired by the last order
