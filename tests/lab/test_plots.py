"""Figures draw what the forecast computes: lines, band, ceiling, bars and heat-map cells."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import numpy as np
import pandas as pd

from rewards_lab.forecasting import forecast
from rewards_lab.lab import plots
from tests.lab.test_forecast import history_of


def test_cumulative_draws_liability_projection_band_and_ceiling() -> None:
    h = history_of([{"day": d, "minor": 1000 * (d % 3)} for d in range(12)], ceiling=200)
    projection = forecast.project(h, days=10, window=7)
    figure = plots.cumulative(h, projection)
    axes = figure.axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert list(lines["replay: liability"].get_ydata()) == [float(v) for v in forecast.liability(h)["liability"]]
    assert list(lines["projected"].get_ydata()) == list(projection.frame["expected"])
    assert list(lines["ceiling 200 points"].get_ydata()) == [200.0, 200.0]
    assert len(axes.collections) == 1  # the band
    assert plots.png(figure).startswith(b"\x89PNG")
    assert figure._repr_png_().startswith(b"\x89PNG")  # Jupyter shows it without pyplot


def test_per_rule_bars_and_compare() -> None:
    a = history_of([{"rule": 0, "minor": 500}, {"rule": 1, "minor": 100}])
    b = history_of([{"rule": 0, "minor": 700, "type": "review.posted"}])
    bars = plots.per_rule(a).axes[0].patches
    assert [p.get_width() for p in bars] == [5.0, 1.0]
    figure = plots.compare(forecast.compare(a, b, ("published", "draft")))
    differences = sorted(p.get_width() for p in figure.axes[1].patches)
    assert differences == [-6.0, 7.0]


def test_sweep_heatmap_puts_each_grid_point_in_its_cell() -> None:
    rows = []
    for rate in (0.01, 0.02, 0.05):
        for threshold in (10, 20):
            rows.append(
                {
                    "rate": rate,
                    "threshold": threshold,
                    "issued": Decimal(str(rate * 1000 / threshold)),
                    "exhausted_on": date(2026, 2, 1) if rate == 0.05 else None,
                }
            )
    figure = plots.sweep_heatmap(pd.DataFrame(rows), x="rate", y="threshold")
    data = figure.axes[0].images[0].get_array()
    assert np.allclose(np.asarray(data), [[1.0, 2.0, 5.0], [0.5, 1.0, 2.5]])
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert sum("out 2026-02-01" in t for t in texts) == 2
