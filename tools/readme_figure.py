"""The README's picture: the sample history replayed through the spring programme, its liability with a
60-day projection and the supply ceiling, drawn by the lab's own plots (what notebook 02 shows).

    PYTHONPATH=. .venv/bin/python tools/readme_figure.py   # writes docs/img/liability_forecast.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from rewards_lab.forecasting import forecast
from rewards_lab.lab import plots
from rewards_lab.lab.workbench import Lab

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "img" / "liability_forecast.png"


def main() -> int:
    events = pd.read_parquet(ROOT / "data" / "sample_events.parquet")
    spring = Lab().load(ROOT / "data" / "programmes" / "spring_launch.json")
    spring.publish()
    history = forecast.history(spring.replay(events, opening_supply="940000"))
    figure = plots.cumulative(history, forecast.project(history, days=60))
    TARGET.write_bytes(plots.png(figure, dpi=100))
    print(TARGET.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
