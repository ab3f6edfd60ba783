"""The CLI's file writer (replay/to_file.py) writes exactly what `replay(...).write(out)` writes, whichever path it
takes: streamed (events in order, no Python fallback; with or without a binding ceiling, with issuances after the
first refusal looked up in a list) or stored (events out of order, exotic rows, a long list after the refusal)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme
from rewards_lab.lab.synthetic import generate_events
from rewards_lab.replay import to_file
from rewards_lab.replay.engine import replay
from rewards_lab.replay.to_file import replay_to_file

ROOT = Path(__file__).resolve().parents[2]
PROGRAMME = ROOT / "benchmarks" / "replay_programme.json"


def _with_ceiling(definition: ProgrammeDefinition, ceiling: str | None) -> ProgrammeDefinition:
    return definition.model_copy(update={"asset": definition.asset.model_copy(update={"supply_ceiling": ceiling})})


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("to_file") / "events.parquet"
    pq.write_table(generate_events(30_000, 500, seed=11), path, row_group_size=7_000)
    return path


def _same_as_stored(events: Any, definition: ProgrammeDefinition, tmp_path: Path, opening: str = "0") -> bool:
    """Write both ways and compare every value; returns whether the writer streamed."""
    written = replay_to_file(events, definition, tmp_path / "streamed.parquet", opening_supply=opening)
    stored = replay(events, definition, opening_supply=opening)
    stored.write(tmp_path / "stored.parquet")
    expected = pq.read_table(tmp_path / "stored.parquet")
    actual = pq.read_table(tmp_path / "streamed.parquet")
    assert actual.cast(expected.schema).equals(expected)
    assert written.totals == stored.totals()
    assert written.events_processed == stored.events_processed
    return written.streamed


@pytest.mark.parametrize(
    ("ceiling", "opening"),
    [(None, "0"), ("900", "0"), ("900", "899.99"), ("5", "6"), ("40000", "0")],
    ids=["no ceiling", "binding", "a cent left", "opening above it", "never binds"],
)
def test_streamed_rows_equal_the_stored_ones(history: Path, tmp_path: Path, ceiling: str | None, opening: str) -> None:
    assert _same_as_stored(history, _with_ceiling(load_programme(PROGRAMME), ceiling), tmp_path, opening)


def test_issuances_after_the_first_refusal_are_looked_up(history: Path, tmp_path: Path) -> None:
    """A ceiling that leaves room for the small fixed amounts after a large one is refused: the list path."""
    definition = _with_ceiling(load_programme(PROGRAMME), "1234.56")
    issued = replay(history, definition).to_pandas()
    first_refused = issued.index[issued["error_code"] == "asset_supply_exhausted"][0]
    assert (issued.loc[first_refused:, "status"] == "issued").any(), "nothing issued after the first refusal"
    assert _same_as_stored(history, definition, tmp_path)


def test_a_long_list_after_the_refusal_takes_the_stored_path(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(to_file, "KEPT_LIMIT", 0)
    assert not _same_as_stored(history, _with_ceiling(load_programme(PROGRAMME), "1234.56"), tmp_path)


def test_events_out_of_order_take_the_stored_path(history: Path, tmp_path: Path) -> None:
    table = pq.read_table(history)
    shuffled = table.take(pa.array(list(range(15_000, 30_000)) + list(range(15_000))))
    assert not _same_as_stored(shuffled, _with_ceiling(load_programme(PROGRAMME), "900"), tmp_path)


def test_exotic_rows_take_the_stored_path_and_a_frame_streams(tmp_path: Path) -> None:
    definition = parse_programme(
        {
            "programme": {"name": "Exotic"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2},
            "rules": [
                {
                    "event_type": "order.completed",
                    "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 1}}],
                }
            ],
        }
    )
    base = {"type": "order.completed", "customer_id": "c", "occurred_at": pd.Timestamp("2026-01-01", tz="UTC")}
    exotic = pd.DataFrame(
        [
            {**base, "external_event_id": f"e{i}", "data": {"amount": v}}
            for i, v in enumerate(["x", Decimal("1.00000000000000000001"), 3])
        ]
    )
    assert not _same_as_stored(exotic, definition, tmp_path)
    plain = pd.DataFrame([{**base, "external_event_id": f"p{i}", "amount": float(i)} for i in range(5)])
    assert _same_as_stored(plain, definition, tmp_path)


def test_csv_output_and_bad_suffix(history: Path, tmp_path: Path) -> None:
    definition = load_programme(PROGRAMME)
    written = replay_to_file(history, definition, tmp_path / "issued.csv")
    assert written.streamed
    rows = pd.read_csv(tmp_path / "issued.csv")
    assert len(rows) == written.totals["issuances"] and list(rows["seq"]) == sorted(rows["seq"])
    with pytest.raises(ServiceError) as error:
        replay_to_file(history, definition, tmp_path / "issued.json")
    assert error.value.code == "field_invalid" and error.value.details["field"] == "out"


def test_the_cli_prints_what_it_wrote(history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "issued.parquet"
    assert main(["replay", str(history), "--programme", str(PROGRAMME), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    expected = replay(history, PROGRAMME).totals()
    assert summary["issuances"] == expected["issuances"] == pq.read_metadata(out).num_rows
    assert Decimal(summary["issued"]) == expected["issued"] and summary["engine"] == "duckdb"
