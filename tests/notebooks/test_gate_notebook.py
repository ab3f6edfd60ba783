"""Notebook 05 as a CI gate (issue 19): under papermill, a draft that breaks its guard fails the run (the papermill
command exits non-zero, `execute_notebook` raises) and an override lets a failing draft through with its reason. One
within its guards runs through: tests/notebooks/test_notebooks.py runs notebook 05 on its committed (passing) draft."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rewards_lab.lab import report

NOTEBOOK = report.NOTEBOOKS / "05_publish_gate.ipynb"
GATED = report.ROOT / "data" / "programmes" / "spring_gated.json"


def _draft(tmp_path: Path, rate: float) -> Path:
    """The gated spring programme with another rate on orders (0.06 issues 17,296 in its busiest month, 0.1
    about 28,800: over the guard's 20,000)."""
    data = json.loads(GATED.read_text())
    data["rules"][0]["actions"][0]["amount"]["rate"] = rate
    path = tmp_path / f"draft_{rate}.json"
    path.write_text(json.dumps(data))
    return path


def _text(path: Path) -> str:
    cells = nbformat.read(path, as_version=4).cells
    outputs = [o for cell in cells for o in cell.get("outputs", [])]
    return "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)


@pytest.mark.slow
def test_papermill_fails_on_a_draft_that_breaks_its_guard_unless_overridden(tmp_path: Path) -> None:
    papermill = Path(sys.executable).parent / "papermill"
    out = tmp_path / "refused.ipynb"
    command = [str(papermill), str(NOTEBOOK), str(out), "-p", "programme", str(_draft(tmp_path, 0.1))]
    done = subprocess.run(
        [*command, "-p", "days", "30", "--cwd", str(NOTEBOOK.parent)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode != 0, done.stdout[-2000:] + done.stderr[-2000:]
    # the CLI exits non-zero because execute_notebook (what `make report` calls) raises PapermillExecutionError
    assert "PapermillExecutionError" in done.stderr
    assert "GateRefused" in done.stderr and "issued per month" in done.stderr
    assert "FAIL" in _text(out)
    # A draft within its guards runs through: the committed draft (rate 0.06) in test_notebooks.py's run of
    # notebook 05 ("The forecast gate passes"), and with the default 90 days in nbval's run of the committed outputs.
    overridden = report.execute(
        NOTEBOOK,
        tmp_path / "overridden.ipynb",
        {"programme": str(_draft(tmp_path, 0.1)), "override": "Easter campaign, approved", "days": 30},
    )
    assert "overridden: Easter campaign, approved" in _text(overridden)


def test_the_replays_own_connections_show_no_progress_bar_in_a_notebook() -> None:
    """DuckDB's progress bar is a widget output in a kernel for any statement over 2 s: on a busy machine a replay
    or a sweep would then add an output that nbval compares with the committed one."""
    from rewards_lab.replay.engine import quiet_connection

    setting = quiet_connection().execute("SELECT current_setting('enable_progress_bar')").fetchall()
    assert setting == [(False,)]
