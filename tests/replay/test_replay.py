"""The vectorised replay: every input kind, processing order and ties, the supply ceiling from an opening supply,
values that are missing or not numbers, summaries, output files and the `rewards-lab replay` command."""

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
from rewards_lab.contract.programme_file import ProgrammeDefinition, parse_programme, save_programme
from rewards_lab.lab.synthetic import generate_events
from rewards_lab.replay.engine import ISSUANCE_COLUMNS, ReplayResult, replay

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def _programme(ceiling: str | None = "35.00") -> ProgrammeDefinition:
    asset: dict[str, Any] = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}
    if ceiling:
        asset["supply_ceiling"] = ceiling
    return parse_programme(
        {
            "programme": {"name": "Test"},
            "asset": asset,
            "rules": [
                {
                    "event_type": "order.completed",
                    "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
                    "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 1}}],
                },
                {"event_type": "review.posted", "actions": [{"type": "issue", "amount": {"fixed": "5.00"}}]},
            ],
        }
    )


def _event(external_id: str, minutes: int, event_type: str = "order.completed", **data: Any) -> dict[str, Any]:
    return {
        "external_event_id": external_id,
        "type": event_type,
        "customer_id": "alice" if external_id < "e4" else "bob",
        "occurred_at": T0 + timedelta(minutes=minutes),
        "data": data,
    }


# Out of order, with a tie (e1 and e3 at minute 60: input order decides), and values that issue nothing.
STREAM = [
    _event("e1", 60, amount=Decimal("25")),
    _event("e2", 0, "review.posted"),
    _event("e3", 60, amount=21),
    _event("e4", 120, "review.posted"),
    _event("e5", 30, amount="25"),  # a string is not a number
    _event("e6", 30),  # missing
    _event("e7", 30, amount=Decimal("19.99")),  # condition does not hold
    _event("e8", 30, amount=True),  # a boolean is not a number
    _event("e9", 30, "other.type", amount=100),  # no rule for the type
]


def _rows(result: ReplayResult) -> list[tuple[Any, ...]]:
    table = result.issuances.to_arrow_table()
    assert table.column_names == list(ISSUANCE_COLUMNS)
    picked = ("external_event_id", "rule_index", "amount_minor", "status", "error_code")
    return [tuple(row[name] for name in picked) for row in table.to_pylist()]


def _check_summaries(result: ReplayResult) -> None:
    """daily() and per_customer() agree with the issuance rows themselves (they are computed another way)."""
    rows = result.to_pandas()
    issued = rows[rows["status"] == "issued"]
    by_customer = {c: (sum(g["amount"]), len(g)) for c, g in issued.groupby("customer_id")}
    customers = result.per_customer()
    assert {r["customer_id"]: (r["issued"], r["issuances"]) for r in customers.to_dict("records")} == by_customer
    by_day = {
        (day, rule): (sum(g["amount"]), len(g))
        for (day, rule), g in issued.groupby([issued["occurred_at"].dt.date, "rule_index"])
    }
    daily = result.daily()
    assert {(r["day"], r["rule_index"]): (r["issued"], r["issuances"]) for r in daily.to_dict("records")} == by_day


def test_ceiling_binds_in_processing_order_and_a_later_smaller_issuance_still_fits() -> None:
    result = replay(pd.DataFrame(STREAM), _programme())
    assert _rows(result) == [
        ("e2", 1, 500, "issued", None),
        ("e1", 0, 2500, "issued", None),
        ("e3", 0, 2100, "failed", "asset_supply_exhausted"),
        ("e4", 1, 500, "issued", None),
    ]
    totals = result.totals()
    assert totals == {
        "issued": Decimal("35.00"),
        "issuances": 3,
        "failed": 1,
        "failed_by_code": {"asset_supply_exhausted": 1},
    }
    assert result.ceiling == Decimal("35.00") and result.events_processed == len(STREAM)
    frame = result.to_pandas()
    assert frame["amount"].tolist() == [Decimal("5.00"), Decimal("25.00"), Decimal("21.00"), Decimal("5.00")]
    assert str(frame["occurred_at"].dt.tz) == "UTC"
    assert frame["seq"].is_monotonic_increasing and frame["event_type"].tolist()[0] == "review.posted"
    _check_summaries(result)


def test_opening_supply_counts_against_the_ceiling() -> None:
    result = replay(pd.DataFrame(STREAM), _programme(), opening_supply="10")
    assert [(row[0], row[3]) for row in _rows(result)] == [
        ("e2", "issued"),
        ("e1", "failed"),
        ("e3", "failed"),
        ("e4", "issued"),
    ]
    assert result.opening_supply == Decimal("10.00") and result.totals()["issued"] == Decimal("10.00")
    everything_out = replay(pd.DataFrame(STREAM), _programme(), opening_supply=Decimal("35"))
    assert {row[3] for row in _rows(everything_out)} == {"failed"}


def test_without_a_ceiling_everything_issues() -> None:
    result = replay(pd.DataFrame(STREAM), _programme(ceiling=None))
    assert [row[3] for row in _rows(result)] == ["issued"] * 4 and result.ceiling is None


def test_opening_supply_must_be_an_amount_of_the_asset() -> None:
    with pytest.raises(ServiceError) as caught:
        replay(pd.DataFrame(STREAM), _programme(), opening_supply="1.005")
    assert caught.value.code == "amount_too_many_decimals" and caught.value.details["field"] == "opening_supply"


# every input kind ----------------------------------------------------------------------------------------------
NUMERIC = [e for e in STREAM if not isinstance(e["data"].get("amount"), str | bool)]


def _flat(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**{k: v for k, v in e.items() if k != "data"}, "amount": e["data"].get("amount")} for e in stream]


def _expected() -> list[tuple[Any, ...]]:
    return _rows(replay(pd.DataFrame(NUMERIC), _programme()))


def _typed_table() -> pa.Table:
    flat = _flat(NUMERIC)
    return pa.table(
        {
            "external_event_id": [e["external_event_id"] for e in flat],
            "type": [e["type"] for e in flat],
            "customer_id": [e["customer_id"] for e in flat],
            "occurred_at": pa.array([e["occurred_at"] for e in flat], pa.timestamp("us", tz="UTC")),
            "amount": pa.array([e["amount"] for e in flat], pa.decimal128(12, 2)),
        }
    )


def test_the_expected_rows_of_the_numeric_stream() -> None:
    assert _expected() == [
        ("e2", 1, 500, "issued", None),
        ("e1", 0, 2500, "issued", None),
        ("e3", 0, 2100, "failed", "asset_supply_exhausted"),
        ("e4", 1, 500, "issued", None),
    ]


def test_parquet_with_typed_columns(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(_typed_table(), path)
    result = replay(path, _programme())
    assert _rows(result) == _expected()
    assert _rows(replay(str(path), _programme())) == _expected()
    _check_summaries(result)
    _check_summaries(replay(path, _programme(ceiling=None)))


def test_parquet_with_double_and_integer_columns(tmp_path: Path) -> None:
    table = _typed_table()
    for kind in (pa.float64(), pa.int64()):
        path = tmp_path / f"events-{kind}.parquet"
        pq.write_table(table.set_column(4, "amount", table["amount"].cast(kind, safe=False)), path)
        assert _rows(replay(path, _programme())) == _expected()


def test_csv_cells_are_json_scalars(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    frame = pd.DataFrame(_flat(NUMERIC))
    frame["occurred_at"] = frame["occurred_at"].map(lambda t: t.isoformat())
    frame["amount"] = frame["amount"].map(lambda v: "" if v is None else str(v))
    frame.to_csv(path, index=False)
    assert _rows(replay(path, _programme())) == _expected()
    frame.loc[0, "amount"] = "abc"  # e1: a string, not a number
    frame.to_csv(path, index=False)
    assert [row[0] for row in _rows(replay(path, _programme()))] == ["e2", "e3", "e4"]


def test_csv_with_a_data_column_of_json(tmp_path: Path) -> None:
    path = tmp_path / "events.csv"
    frame = pd.DataFrame(STREAM)
    frame["occurred_at"] = frame["occurred_at"].map(lambda t: t.isoformat())
    frame["data"] = frame["data"].map(
        lambda d: json.dumps({k: str(v) if isinstance(v, Decimal) else v for k, v in d.items()})
    )
    frame.to_csv(path, index=False)
    # Decimals were written as strings here: e1 ("25") issues nothing; everything else as in the DataFrame.
    assert [row[0] for row in _rows(replay(path, _programme()))] == ["e2", "e3", "e4"]


def test_json_lines_nested_and_flat(tmp_path: Path) -> None:
    nested, flat = tmp_path / "nested.jsonl", tmp_path / "flat.ndjson"
    lines = [
        {**e, "occurred_at": e["occurred_at"].isoformat(), "data": {k: float(v) for k, v in e["data"].items()}}
        for e in NUMERIC
    ]
    nested.write_text("".join(json.dumps(line) + "\n" for line in lines))
    flat.write_text(
        "".join(json.dumps({**{k: v for k, v in line.items() if k != "data"}, **line["data"]}) + "\n" for line in lines)
    )
    assert _rows(replay(nested, _programme())) == _expected()
    assert _rows(replay(flat, _programme())) == _expected()


def test_dataframe_with_data_as_columns() -> None:
    assert _rows(replay(pd.DataFrame(_flat(STREAM)), _programme())) == _rows(replay(pd.DataFrame(STREAM), _programme()))


def test_arrow_struct_and_map_data_and_a_duckdb_relation() -> None:
    typed = _typed_table()
    struct = pa.StructArray.from_arrays([typed["amount"].combine_chunks()], names=["amount"])
    with_struct = typed.drop_columns(["amount"]).append_column("data", struct)
    assert _rows(replay(with_struct, _programme())) == _expected()
    con = duckdb.connect()
    con.register("typed", typed)
    relation = con.sql("SELECT * EXCLUDE (amount), MAP {'amount': amount} AS data FROM typed")
    assert _rows(replay(relation, _programme())) == _expected()
    assert _rows(replay(con.sql("SELECT * FROM typed"), _programme())) == _expected()


def test_values_sql_cannot_read_exactly_go_through_the_live_functions() -> None:
    stream = [
        _event("e1", 0, amount=Decimal("20.000000000000000000001")),  # more places than DECIMAL(28, 10)
        _event("e2", 1, amount=Decimal("19.999999999999999999999")),
        _event("e3", 2, amount=10**30),  # refused: more than the ledger can hold in one amount
        _event("e4", 3, amount=Decimal("30.5")),
    ]
    result = replay(pd.DataFrame(stream), _programme(ceiling=None))
    assert _rows(result) == [
        ("e1", 0, 2000, "issued", None),
        ("e3", 0, 0, "failed", "amount_too_large"),
        ("e4", 0, 3050, "issued", None),
    ]
    assert result.python_rows == 3  # e4 is read in SQL
    assert result.totals()["failed_by_code"] == {"amount_too_large": 1}
    _check_summaries(result)
    # SQL and fallback rows before the ceiling's first refusal, and a fallback row that still fits after it
    mixed = [
        _event("e4", 0, amount=Decimal("30.5")),
        _event("e1", 1, amount=Decimal("20.000000000000000000001")),
        _event("e5", 2, amount=Decimal("30.5")),
        _event("e6", 3, amount=Decimal("20.000000000000000000001")),
    ]
    capped = replay(pd.DataFrame(mixed), _programme(ceiling="75.00"))
    assert [(row[0], row[3]) for row in _rows(capped)] == [
        ("e4", "issued"),
        ("e1", "issued"),
        ("e5", "failed"),
        ("e6", "issued"),
    ]
    _check_summaries(capped)


def test_missing_columns_and_bad_inputs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ServiceError) as caught:
        replay(pd.DataFrame([{"type": "x", "customer_id": "c", "occurred_at": T0}]), _programme())
    assert caught.value.code == "field_required" and caught.value.details["field"] == "external_event_id"
    frame = pd.DataFrame(_flat(NUMERIC))
    frame.loc[0, "occurred_at"] = None
    with pytest.raises(ServiceError) as caught:
        replay(frame, _programme())
    assert caught.value.details["field"] == "occurred_at"
    with pytest.raises(ServiceError) as caught:
        replay(tmp_path / "nothing.parquet", _programme())
    assert caught.value.code == "field_invalid"
    (tmp_path / "events.xlsx").write_text("x")
    with pytest.raises(ServiceError):
        replay(tmp_path / "events.xlsx", _programme())


# summaries, output, progress ----------------------------------------------------------------------------------
def test_daily_per_customer_and_write(tmp_path: Path) -> None:
    result = replay(pd.DataFrame(STREAM), _programme())
    daily = result.daily()
    assert daily.to_dict("records") == [
        {
            "day": T0.date(),
            "asset": "STAR",
            "rule_index": 0,
            "issued": Decimal("25.00"),
            "cumulative": Decimal("25.00"),
            "issuances": 1,
        },
        {
            "day": T0.date(),
            "asset": "STAR",
            "rule_index": 1,
            "issued": Decimal("10.00"),
            "cumulative": Decimal("10.00"),
            "issuances": 2,
        },
    ]
    expected = [
        {"customer_id": "alice", "issued": Decimal("30.00"), "issuances": 2},
        {"customer_id": "bob", "issued": Decimal("5.00"), "issuances": 1},
    ]
    customers = result.per_customer()
    assert sorted(customers.to_dict("records"), key=lambda r: r["customer_id"]) == expected
    assert str(customers["issued"].dtype) == "decimal128(38, 2)[pyarrow]"  # exact, no Decimal per row
    assert customers["issued"].sum() == Decimal("35.00")
    assert result.per_customer(top=2).to_dict("records") == expected  # largest first
    assert result.per_customer(top=1).to_dict("records") == expected[:1]
    parquet = result.write(tmp_path / "out" / "issuances.parquet")
    assert pq.read_table(parquet).column_names == list(ISSUANCE_COLUMNS)
    assert pq.read_table(parquet)["external_event_id"].to_pylist() == ["e2", "e1", "e3", "e4"]
    csv = result.write(tmp_path / "issuances.csv")
    assert pd.read_csv(csv)["status"].tolist() == ["issued", "issued", "failed", "issued"]
    with pytest.raises(ServiceError) as caught:
        result.write(tmp_path / "issuances.txt")
    assert caught.value.details["field"] == "out"


def test_top_customers_are_largest_first_with_ties_by_customer_id() -> None:
    events = [
        {**_event(f"e{n}", n, "review.posted"), "customer_id": customer}
        for n, customer in enumerate(["carol", "bob", "bob", "alice", "dave", "alice"])
    ]
    result = replay(pd.DataFrame(events), _programme(ceiling=None))
    top = result.per_customer(top=3)
    assert [(r["customer_id"], r["issued"]) for r in top.to_dict("records")] == [
        ("alice", Decimal("10.00")),
        ("bob", Decimal("10.00")),
        ("carol", Decimal("5.00")),
    ]
    assert len(result.per_customer()) == 4 and result.per_customer(top=10)["customer_id"].tolist()[-1] == "dave"
    for bad in (0, -1, 2.5, "3", True):
        with pytest.raises(ServiceError) as caught:
            result.per_customer(top=bad)  # type: ignore[arg-type]
        assert caught.value.code == "field_invalid" and caught.value.details["field"] == "top"


def test_progress_reports_every_step() -> None:
    calls: list[tuple[int, int]] = []
    replay(pd.DataFrame(STREAM), _programme(), progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] and [c[0] for c in calls] == list(range(1, len(calls) + 1))


def test_cli_replays_a_file_and_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events, programme, out = tmp_path / "events.parquet", tmp_path / "programme.json", tmp_path / "out.parquet"
    pq.write_table(_typed_table(), events)
    save_programme(_programme(), programme)
    assert main(["replay", str(events), "--programme", str(programme), "--out", str(out), "--opening-supply", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["events"] == len(NUMERIC) and summary["issuances"] == 2 and summary["issued"] == "30.00"
    assert summary["failed_by_code"] == {"asset_supply_exhausted": 2} and summary["seconds"] >= 0
    assert pq.read_table(out).num_rows == 4
    assert main(["replay", str(events), "--programme", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "field_invalid"


# synthetic data ------------------------------------------------------------------------------------------------
def test_generator_is_seeded_sized_and_ordered() -> None:
    first = generate_events(2000, 100, seed=7)
    assert first.equals(generate_events(2000, 100, seed=7))
    assert not first.equals(generate_events(2000, 100, seed=8))
    assert first.num_rows == 2000 and len(set(first["customer_id"].to_pylist())) <= 100
    stamps = first["occurred_at"].to_pylist()
    assert stamps == sorted(stamps)
    assert set(first["type"].to_pylist()) == {
        "order.completed",
        "customer.signed_up",
        "review.posted",
        "referral.converted",
    }
    assert first.schema.field("amount").type == pa.decimal128(12, 2)


def test_the_committed_sample_replays_through_the_example_programmes() -> None:
    sample = ROOT / "data" / "sample_events.parquet"
    assert sample.stat().st_size < 1_000_000
    for name in ("spring_launch", "coffee_stamps", "travel_credits"):
        result = replay(sample, ROOT / "data" / "programmes" / f"{name}.json")
        assert result.events_processed == pq.read_metadata(sample).num_rows
        assert result.totals()["issuances"] > 0 and result.python_rows == 0


# sweeps --------------------------------------------------------------------------------------------------------
def test_sweep_agrees_with_separate_replays_at_every_grid_point() -> None:
    from rewards_lab.replay.sweep import sweep, with_values

    events = generate_events(3000, 200, seed=11)
    programme = parse_programme(
        {
            "programme": {"name": "Sweep"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "supply_ceiling": "1500"},
            "rules": [
                {
                    "event_type": "order.completed",
                    "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
                    "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.05}}],
                },
                {"event_type": "review.posted", "actions": [{"type": "issue", "amount": {"fixed": "2.50"}}]},
            ],
        }
    )
    grid = {"rules[0].actions[0].amount.rate": [0.01, 0.05, 0.2], "rules[0].conditions[0].value": [10, 40]}
    table = sweep(events, programme, grid, opening_supply="100")
    assert list(table.columns) == [*grid, "issued", "issuances", "failed", "liability", "exhausted_on"]
    assert len(table) == 6
    for row in table.to_dict("records"):
        values = {key: row[key] for key in grid}
        result = replay(events, with_values(programme, values), opening_supply="100")
        totals = result.totals()
        assert (row["issued"], row["issuances"], row["failed"]) == (
            totals["issued"],
            totals["issuances"],
            totals["failed"],
        )
        assert row["liability"] == Decimal("100") + totals["issued"]
        failed = result.issuances.filter("error_code = 'asset_supply_exhausted'").order("seq").limit(1).to_arrow_table()
        first_day = failed["occurred_at"][0].as_py().date() if failed.num_rows else None
        assert row["exhausted_on"] == first_day
    assert table["exhausted_on"].notna().any() and table["exhausted_on"].isna().any()  # the ceiling binds sometimes


def test_sweep_keys_must_name_a_value_of_the_programme() -> None:
    from rewards_lab.replay.sweep import sweep

    with pytest.raises(ServiceError) as caught:
        sweep(pd.DataFrame(STREAM), _programme(), {"rules[5].actions[0].amount.rate": [1]})
    assert caught.value.details["field"] == "rules[5].actions[0].amount.rate"
    with pytest.raises(ServiceError) as caught:
        sweep(pd.DataFrame(STREAM), _programme(), {"rules[0].actions[0].amount.rate": [-1]})
    assert caught.value.code == "field_invalid"


def test_processing_order_holds_for_a_large_file_read_in_parallel(tmp_path: Path) -> None:
    """With a fixed reward and a ceiling of K rewards, exactly the first K events in (occurred_at, input order)
    issue. Many row groups make DuckDB read the file in parallel, out of order."""
    events = generate_events(120_000, 500, seed=5).drop_columns(["amount"])
    order = list(range(events.num_rows))
    order = order[1::2] + order[::2]  # out of occurred_at order, with many ties (timestamps to the second)
    shuffled = events.take(order)
    path = tmp_path / "events.parquet"
    pq.write_table(shuffled, path, row_group_size=4096)
    programme = parse_programme(
        {
            "programme": {"name": "One each"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 0, "supply_ceiling": "50000"},
            "rules": [
                {"event_type": t, "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}
                for t in ("order.completed", "customer.signed_up", "review.posted", "referral.converted")
            ],
        }
    )
    frame = shuffled.to_pandas()
    frame["input"] = range(len(frame))
    first = set(frame.sort_values(["occurred_at", "input"], kind="stable")["external_event_id"][:50_000])
    for source in (path, shuffled):
        issued = replay(source, programme).issuances.filter("status = 'issued'").to_arrow_table()
        assert set(issued["external_event_id"].to_pylist()) == first


@pytest.mark.parametrize("seed", range(6))
def test_ceiling_resolution_matches_a_plain_loop(seed: int) -> None:
    """The numpy rounds of domain.ceiling.resolve (what the replay calls) against the ledger's rule applied one
    issuance at a time."""
    import numpy as np

    from rewards_lab.domain.ceiling import resolve

    rng = np.random.default_rng(seed)
    amounts = np.concatenate([rng.integers(1, 50, 6000), rng.integers(1, 3, 6000), rng.integers(40, 500, 3000)])
    rng.shuffle(amounts)
    room = int(amounts[:4000].sum()) + int(rng.integers(0, 5000))
    left, expected = room, []
    for index, value in enumerate(amounts.tolist()):
        if value <= left:
            expected.append(index)
            left -= value
    first, after = resolve(amounts.astype(np.int64), room)
    assert list(range(first)) + after.tolist() == expected
    assert first < len(amounts) and first not in expected
