"""A pandas DataFrame whose `data` column holds JSON text (a pulled history read with pandas, as notebook 02 does)
replays as the same events with their data as columns."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rewards_lab.replay.engine import replay

SPRING = Path(__file__).resolve().parents[2] / "data" / "programmes" / "spring_launch.json"


def _issued(events: object) -> list[tuple[str, str]]:
    rows = replay(events, SPRING).issuances.filter("status = 'issued'").order("seq")
    return [(event, str(amount)) for event, amount in rows.project("external_event_id, amount").fetchall()]


def test_a_data_column_of_json_text_is_read_as_json() -> None:
    data = [{"amount": 42.5}, {"amount": 19.99}, {"photos": 2}, {}, {"amount": 100.37}]
    kinds = ["order.completed", "order.completed", "review.posted", "customer.signed_up", "order.completed"]
    core = pd.DataFrame(
        {
            "external_event_id": [f"e{i}" for i in range(5)],
            "type": kinds,
            "customer_id": ["c1", "c2", "c1", "c3", "c2"],
            "occurred_at": pd.date_range("2026-03-01", periods=5, freq="h", tz="UTC"),
        }
    )
    as_text = core.assign(data=[json.dumps(d) for d in data])
    as_columns = pd.concat([core, pd.DataFrame(data)], axis=1)
    issued = _issued(as_text)
    assert [event for event, _ in issued] == ["e0", "e2", "e3", "e4"]  # 19.99 is under the threshold
    assert issued == _issued(as_columns)
