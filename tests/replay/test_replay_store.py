"""The replay's stored form (one row per event, rewards_lab.replay.store) against an independent computation:
the issuance rows its view unnests equal the per-rule-action SELECTs (one row per candidate issuance, the form the
replay used before and the sweep still uses), and the statuses equal the ceiling resolved over every amount in
`seq` order; plus the processing order read from Parquet and Arrow timestamps."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme
from rewards_lab.domain.ceiling import resolve
from rewards_lab.lab.synthetic import ALL_TYPES, generate_events
from rewards_lab.replay.compiler import DUCKDB, TOO_LARGE, compile_programme, referenced_fields, rule_specs
from rewards_lab.replay.engine import ReplayResult, candidate_selects, python_outcomes, replay
from rewards_lab.replay.input_checks import ReplayInputWarning
from rewards_lab.replay.inputs import open_events
from rewards_lab.replay.order import input_in_order, order_events
from rewards_lab.replay.plan import ceiling as plan_ceiling
from tests.replay.test_replay import _check_summaries

ROOT = Path(__file__).resolve().parents[2]
PROGRAMMES = [
    ROOT / "benchmarks" / "replay_programme.json",
    *(ROOT / "data" / "programmes" / f"{name}.json" for name in ("spring_launch", "coffee_stamps", "travel_credits")),
]


def _candidates(events: Any, definition: ProgrammeDefinition) -> list[tuple[int, int]]:
    """(seq, m) of every candidate issuance, from one SELECT per rule action (not the stored form)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    source = open_events(con, events, "ref_events")
    from_sql = source.prepare(referenced_fields(rule_specs(definition)))
    order_events(con, source, from_sql, "ref")
    plan = compile_programme(definition, source, DUCKDB)
    selects = [select for _, select in candidate_selects(plan, "ref_ordered")]
    rows = con.sql(" UNION ALL ".join(f"SELECT seq, m FROM ({s})" for s in selects)).fetchall() if selects else []
    fallback, _, _, _ = python_outcomes(con, source, plan, "ref_ordered")
    return sorted([(int(seq), int(m)) for seq, m in rows] + [(seq, m) for seq, _, m in fallback])


def _expected(candidates: list[tuple[int, int]], room: int | None) -> list[tuple[int, int, str, str | None]]:
    """(seq, amount_minor, status, error_code) with the ceiling applied one amount at a time, in seq order."""
    positive = np.array([m for _, m in candidates if m > 0], dtype=np.int64)
    issued = set(range(len(positive)))
    if room is not None:
        first, after = resolve(positive, room)
        issued = set(range(min(first, len(positive)))) | {int(i) for i in after}
    rows, index = [], 0
    for seq, m in candidates:
        if m == TOO_LARGE:
            rows.append((seq, 0, "failed", "amount_too_large"))
            continue
        rows.append((seq, m, "issued", None) if index in issued else (seq, m, "failed", "asset_supply_exhausted"))
        index += 1
    return rows


def _rows(result: ReplayResult) -> list[tuple[int, int, str, str | None]]:
    table = result.issuances.select("seq, amount_minor, status, error_code").fetchall()
    return [(int(s), int(m), str(status), code) for s, m, status, code in table]


def _with_ceiling(definition: ProgrammeDefinition, ceiling: int) -> ProgrammeDefinition:
    decimals = definition.asset.decimals
    text = format(Decimal(ceiling).scaleb(-decimals), "f")
    return definition.model_copy(update={"asset": definition.asset.model_copy(update={"supply_ceiling": text})})


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "events.parquet"
    # every event type: booking.completed has no rule in the benchmark programme (stored with NULL amounts)
    pq.write_table(generate_events(40_000, 3_000, seed=3, types=ALL_TYPES), path, row_group_size=5_000)
    return path


@pytest.mark.parametrize("programme", PROGRAMMES, ids=lambda p: p.stem)
def test_the_unnested_rows_equal_one_select_per_rule_action(history: Path, programme: Path) -> None:
    definition = load_programme(programme)
    definition = definition.model_copy(update={"asset": definition.asset.model_copy(update={"supply_ceiling": None})})
    candidates = _candidates(history, definition)
    result = replay(history, definition, progress=False)
    assert len(candidates) > 1000 and _rows(result) == _expected(candidates, None)
    _check_summaries(result)
    issued = sum(m for _, m in candidates if m > 0)
    assert result.totals()["issued"] == Decimal(issued).scaleb(-definition.asset.decimals)


def test_ceilings_at_every_edge_agree_with_a_plain_resolution(history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """First issuance refused, mid-history, the very last one, an exact fit, an opening supply above the ceiling,
    and the events after the boundary day fetched in many small chunks."""
    definition = load_programme(PROGRAMMES[0])
    candidates = _candidates(history, definition)
    amounts = [m for _, m in candidates if m > 0]
    total = sum(amounts)
    cases = [(amounts[0] - 1, 0), (total // 3, 0), (total - 1, 0), (total, 0), (total // 2, total // 4), (100, 500)]
    for chunks in ((50_000, 3_200_000), (3, 10)):
        monkeypatch.setattr(plan_ceiling, "FIRST_CHUNK", chunks[0])
        monkeypatch.setattr(plan_ceiling, "LAST_CHUNK", chunks[1])
        for ceiling, opening in cases:
            minor_opening = format(Decimal(opening).scaleb(-2), "f")
            result = replay(history, _with_ceiling(definition, ceiling), opening_supply=minor_opening, progress=False)
            expected = _expected(candidates, ceiling - opening)
            assert _rows(result) == expected, (ceiling, opening, chunks)
            _check_summaries(result)
            totals = result.totals()
            assert totals["issuances"] == sum(1 for row in expected if row[2] == "issued")
            assert totals["failed"] == len(expected) - totals["issuances"]
    statuses = [row[2] for row in _expected(candidates, total // 3)]
    refused = statuses.index("failed")
    assert "issued" in statuses[refused:]  # a later, smaller amount still fits after the first refusal


def test_too_large_amounts_are_refused_and_never_count_against_the_ceiling(tmp_path: Path) -> None:
    """A BIGINT column makes the amount possibly too large: such rows are failed, and a later amount still fits."""
    n = 3_000
    rng = np.random.default_rng(9)
    points = rng.integers(1, 500, n)
    points[::7] = 10**17  # x 100 x 100 minor units: above the largest amount
    events = pa.table(
        {
            "external_event_id": [f"e{i:05d}" for i in range(n)],
            "type": ["order.completed"] * n,
            "customer_id": [f"c{i % 40}" for i in range(n)],
            "occurred_at": pa.array(np.sort(rng.integers(0, 10 * 86_400, n)) * 1_000_000, pa.timestamp("us", "UTC")),
            "points": pa.array(points, pa.int64()),
        }
    )
    programme = parse_programme(
        {
            "programme": {"name": "Big"},
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, "supply_ceiling": "5000"},
            "rules": [
                {
                    "event_type": "order.completed",
                    "actions": [
                        {"type": "issue", "amount": {"per": "points", "rate": 100}},
                        {"type": "issue", "amount": {"fixed": "0.05"}},
                    ],
                }
            ],
        }
    )
    candidates = _candidates(events, programme)
    assert sum(1 for _, m in candidates if m == TOO_LARGE) > 100
    result = replay(events, programme, progress=False)
    expected = _expected(candidates, 500_000)
    assert _rows(result) == expected
    _check_summaries(result)
    assert result.totals()["failed_by_code"]["amount_too_large"] == sum(1 for _, m in candidates if m == TOO_LARGE)


def test_processing_order_from_timestamps_strings_and_out_of_order_input(tmp_path: Path) -> None:
    events = generate_events(5_000, 300, seed=4)
    shuffled = events.take(list(range(1, 5_000, 2)) + list(range(0, 5_000, 2)))
    as_text = events.set_column(3, "occurred_at", events["occurred_at"].cast(pa.string()))
    paths = {}
    for label, table in (("ordered", events), ("shuffled", shuffled), ("text", as_text)):
        paths[label] = tmp_path / f"{label}.parquet"
        pq.write_table(table, paths[label], row_group_size=700)
    con = duckdb.connect()
    assert input_in_order(open_events(con, paths["ordered"], "a")) == (5_000, True)
    assert input_in_order(open_events(con, paths["shuffled"], "b")) == (5_000, False)
    assert input_in_order(open_events(con, shuffled, "c")) == (5_000, False)
    assert input_in_order(open_events(con, paths["text"], "d")) is None  # not a timestamp column: DuckDB decides
    programme = load_programme(PROGRAMMES[0])
    for source, table in (
        (paths["shuffled"], shuffled),
        (shuffled, shuffled),
        (paths["ordered"], events),
        (paths["text"], events),
    ):
        frame = table.to_pandas()
        frame["input"] = range(len(frame))
        order = frame.sort_values(["occurred_at", "input"], kind="stable")["external_event_id"].tolist()
        rows = replay(source, programme, progress=False).to_pandas()
        seen = rows.drop_duplicates("external_event_id")["external_event_id"].tolist()
        assert len(seen) > 3_000 and seen == [e for e in order if e in set(seen)]
    missing = events.set_column(3, "occurred_at", pa.array([None] * 5_000, pa.timestamp("us", "UTC")))
    pq.write_table(missing, tmp_path / "missing.parquet")
    with pytest.raises(ServiceError) as caught:
        replay(tmp_path / "missing.parquet", programme)
    assert caught.value.code == "field_required" and caught.value.details["field"] == "occurred_at"


def test_summaries_when_no_event_has_a_rule() -> None:
    events = pd.DataFrame(
        [{"external_event_id": "e", "type": "t", "customer_id": "c", "occurred_at": "2026-01-01T00:00:00Z"}]
    )
    asset = {"name": "S", "symbol": "S", "type": "points", "decimals": 0, "supply_ceiling": "5"}
    other = [{"event_type": "other", "actions": [{"type": "issue", "amount": {"fixed": "1"}}]}]
    for rules in (other, [*other, {**other[0], "event_type": "another"}]):
        programme = parse_programme({"programme": {"name": "Empty"}, "asset": asset, "rules": rules})
        with pytest.warns(ReplayInputWarning, match="none of the 1 events is of a type the rules are for"):
            result = replay(events, programme)  # said, not silent (issue 27)
        assert result.events_processed == 1
        assert result.to_pandas().empty and result.daily().empty and result.per_customer().empty
        assert result.totals() == {"issued": Decimal(0), "issuances": 0, "failed": 0, "failed_by_code": {}}
