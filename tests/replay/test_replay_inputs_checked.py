"""Replay inputs that would make a forecast silently wrong are refused or warned about (issue 27, item 8), on the
CLI (the error envelope; a warning in the summary and on stderr), the Lab's replay (a ReplayInputWarning, and
`warnings` on the result) and the Spark engine: a customers table without `id` (or rows without one), with a
column of a type no rule reads, or whose ids name none of the history's customers; a history with no event of
the rules' types, rules reading fields no event has, no events at all; redemptions empty or none redeemed; refunds
none of whose originals is in the history."""

from __future__ import annotations

import datetime
import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import parse_programme
from rewards_lab.lab.synthetic import generate_customers, generate_events
from rewards_lab.replay.engine import replay
from rewards_lab.replay.input_checks import ReplayInputWarning

ASSET = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}
BY_COUNTRY: dict[str, Any] = {
    "programme": {"name": "By country"},
    "asset": ASSET,
    "rules": [
        {
            "event_type": "order.completed",
            "conditions": [{"field": "customer.country", "operator": "in", "value": ["DE", "FR", "GB", "US"]}],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        }
    ],
}
ON_AMOUNT: dict[str, Any] = {
    "programme": {"name": "On amount", "clawback": "available"},
    "asset": ASSET,
    "rules": [
        {
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": 1}],
            "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
        },
        {"event_type": "order.refunded", "actions": [{"type": "reverse", "original": {"field": "order_id"}}]},
    ],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    pq.write_table(generate_events(2000, 200, seed=1), folder / "events.parquet")
    customers = generate_customers(200, seed=1)
    assert set(customers.column("country").to_pylist()) & {"DE", "FR", "GB", "US"}
    with (folder / "no_id.jsonl").open("w") as lines:
        for row in customers.drop(["id"]).to_pylist():
            lines.write(json.dumps(row) + "\n")
    with (folder / "other_ids.jsonl").open("w") as lines:
        for row in customers.to_pylist():
            lines.write(json.dumps({**row, "id": f"x-{row['id']}"}) + "\n")
    dated = customers.append_column("joined", pa.array([datetime.date(2024, 1, 1)] * customers.num_rows))
    pq.write_table(dated, folder / "dated.parquet")
    ids = customers.column("id").to_pylist()
    pq.write_table(customers.set_column(0, "id", pa.array([None, *ids[1:]], pa.string())), folder / "one_null.parquet")
    (folder / "by_country.json").write_text(json.dumps(BY_COUNTRY))
    return {path.stem: path for path in folder.iterdir()}


def _cli(files: dict[str, Path], tmp_path: Path) -> list[str]:
    return ["replay", str(files["events"]), "--programme", str(files["by_country"]), "--out", str(tmp_path / "o.csv")]


def test_the_cli_refuses_a_customers_table_without_ids(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for table, code in (("no_id", "field_required"), ("one_null", "field_required"), ("dated", "field_invalid")):
        status = main([*_cli(files, tmp_path), "--customers", str(files[table])])
        error = json.loads(capsys.readouterr().out)["error"]
        assert status == 2 and error["code"] == code, (table, error)
        assert error["details"]["field"] == ("customers.joined" if table == "dated" else "customers.id")


def test_the_cli_warns_when_no_customer_of_the_table_is_in_the_history(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_cli(files, tmp_path), "--customers", str(files["other_ids"])]) == 0
    printed = capsys.readouterr()
    summary = json.loads(printed.out)
    assert summary["issuances"] == 0
    assert len(summary["warnings"]) == 1 and "none of the 200 customers" in summary["warnings"][0]
    assert "warning: customers: none of the 200 customers" in printed.err
    assert main([*_cli(files, tmp_path), "--customers", str(files["customers_ok"])]) == 0  # the right table
    summary = json.loads(capsys.readouterr().out)
    assert summary["issuances"] > 0 and "warnings" not in summary


@pytest.fixture(scope="module", autouse=True)
def _right_table(files: dict[str, Path]) -> None:
    path = files["events"].parent / "customers_ok.parquet"
    pq.write_table(generate_customers(200, seed=1), path)
    files["customers_ok"] = path


def test_the_lab_replay_warns_each_time_and_keeps_the_warning_on_the_result(files: dict[str, Path]) -> None:
    definition = parse_programme(BY_COUNTRY)
    for _ in range(2):  # shown every time, not once per line
        with pytest.warns(ReplayInputWarning, match="none of the 200 customers"):
            result = replay(files["events"], definition, customers=files["other_ids"])
        assert len(result.warnings) == 1 and result.totals()["issuances"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayInputWarning)
        assert replay(files["events"], definition, customers=files["customers_ok"]).warnings == ()
    with pytest.raises(ServiceError) as refused:
        replay(files["events"], definition, customers=files["no_id"])
    assert refused.value.code == "field_required" and refused.value.details["field"] == "customers.id"


def test_a_history_the_rules_cannot_read_is_warned_about(files: dict[str, Path]) -> None:
    frame = pq.read_table(files["events"]).to_pandas()
    definition = parse_programme(ON_AMOUNT)
    renamed = frame.assign(type=frame["type"].str.replace(".", "_"))  # order_completed: no rule's type
    with pytest.warns(ReplayInputWarning) as caught:
        result = replay(pa.Table.from_pandas(renamed.drop(columns=["amount"]), preserve_index=False), definition)
    messages = [str(w.message) for w in caught]
    assert messages == list(result.warnings)
    assert any("none of the 2,000 events is of a type the rules are for" in m for m in messages)
    assert any("the rules read 'amount', 'order_id', which no event has" in m for m in messages)
    with pytest.warns(ReplayInputWarning) as caught:
        result = replay(pa.Table.from_pandas(frame.head(0), preserve_index=False), definition)
    assert result.warnings == ("events: the history has no events: the forecast issues nothing",)


def test_refunds_of_unknown_originals_and_redemptions_none_redeemed_are_warned_about(
    files: dict[str, Path], tmp_path: Path
) -> None:
    frame = pq.read_table(files["events"]).to_pandas()
    refunds = frame[frame["type"] == "order.completed"].head(5).copy()
    refunds["external_event_id"] = [f"rf-{i}" for i in range(len(refunds))]
    refunds["type"] = "order.refunded"
    refunds["order_id"] = "ord-not-in-the-history"
    history = pd.concat([frame.assign(order_id=None), refunds], ignore_index=True).sort_values("occurred_at")
    spent = pd.DataFrame(
        {"customer_id": ["nobody"], "amount": ["1"], "occurred_at": [pd.Timestamp("2026-02-01", tz="UTC")]}
    )
    events = pa.Table.from_pandas(history, preserve_index=False)
    with pytest.warns(ReplayInputWarning) as caught:
        result = replay(events, parse_programme(ON_AMOUNT), redemptions=spent)
    messages = [str(w.message) for w in caught]
    assert any("no refund took anything back, and 5 name no event of the history" in m for m in messages)
    assert any("none of the 1 redemptions was redeemed" in m for m in messages)
    assert result.totals()["failed_by_code"]["original_not_found"] == 5
    empty = tmp_path / "spent.csv"
    empty.write_text("")
    with pytest.raises(ServiceError) as refused:  # an empty file has no columns either
        replay(events, parse_programme(ON_AMOUNT), redemptions=empty)
    assert refused.value.code == "field_required"
    empty.write_text("customer_id,amount,occurred_at\n")
    with pytest.warns(ReplayInputWarning) as caught:
        result = replay(events, parse_programme(ON_AMOUNT), redemptions=empty)
    assert "redemptions: the table has no rows: nothing was spent" in result.warnings


def test_spark_refuses_and_warns_as_duckdb_does(files: dict[str, Path], spark: Any) -> None:
    from rewards_lab.replay.spark_engine import replay_spark

    definition = parse_programme(BY_COUNTRY)
    with pytest.raises(ServiceError) as refused:
        replay_spark(files["events"], definition, spark=spark, customers=files["no_id"])
    assert refused.value.details["field"] == "customers.id"
    with pytest.warns(ReplayInputWarning, match="none of the 200 customers"):
        result = replay_spark(files["events"], definition, spark=spark, customers=files["other_ids"])
    assert len(result.warnings) == 1
    with pytest.raises(ServiceError) as dated:
        replay_spark(files["events"], definition, spark=spark, customers=spark.read.parquet(str(files["dated"])))
    assert dated.value.details["field"] == "customers.joined"
