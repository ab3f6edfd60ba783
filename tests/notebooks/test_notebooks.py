"""The notebooks in CI: each runs with papermill on small parameters, and nbval checks the committed outputs.

nbval runs in a child pytest (`--nbval --nbval-current-env`, so the kernel is this interpreter) with the
sanitising patterns of notebooks/nbval_sanitize.cfg; images and widget models are not compared (nbval's default),
text and HTML outputs are. Refresh the committed outputs with `make notebooks` after an intended change.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from rewards_lab.lab import report

NOTEBOOKS = report.notebooks()
SMALL: dict[str, dict[str, Any]] = {
    "01_design_and_simulate.ipynb": {"new_rate": "0.1"},
    "02_replay_and_forecast.ipynb": {
        "max_events": 3000,
        "projection_days": 14,
        "sweep_rates": [0.05, 0.1],
        "sweep_thresholds": [0, 20, 50],
    },
    "03_compare_versions.ipynb": {"max_events": 3000, "draft_rate": "0.06"},
    # No base_url: the notebook starts a throwaway local service (test_push_notebook.py runs it against `serve`).
    "04_push.ipynb": {},
    "05_publish_gate.ipynb": {"days": 30},
    "06_caps_budgets_refunds.ipynb": {"max_events": 4000, "sweep_caps": ["300", "800"], "projection_days": 14},
    "07_rule_language.ipynb": {"n_events": 3000, "n_customers": 300},
}


def test_there_are_notebooks_and_each_has_a_parameters_cell() -> None:
    assert [path.name for path in NOTEBOOKS] == list(SMALL)
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, path.name
        assert set(SMALL.get(path.name, {})) <= set(_names(tagged[0].source)), path.name


def test_notebooks_come_in_numeric_order_with_unique_numbers(tmp_path: Path) -> None:
    """`make report` runs them in reading order: by number, numerically (10 after 9), whatever the name says."""
    for name in ["10_last.ipynb", "2_b.ipynb", "01_a.ipynb", "09_z.ipynb", "README.md", "notes.ipynb"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in report.notebooks(tmp_path)] == ["01_a.ipynb", "2_b.ipynb", "09_z.ipynb", "10_last.ipynb"]
    numbers = [int(path.name[:2]) for path in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1))  # unique, no gap: one reading order


def test_every_title_is_numbered_like_its_file_and_both_readmes_list_every_notebook() -> None:
    for path in NOTEBOOKS:
        first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        assert first.source.startswith(f"# {path.name[:2]} · "), (path.name, first.source[:60])
        if _displayed_widgets(path):
            assert "Run the notebook (Run ▸ Run All Cells) to use the widgets" in first.source, path.name
    assert "**Start here**" in nbformat.read(NOTEBOOKS[0], as_version=4).cells[0].source
    for readme in [report.ROOT / "README.md", report.NOTEBOOKS / "README.md"]:
        text = readme.read_text()
        assert "Start here: `01_design_and_simulate.ipynb`" in text.replace("**", ""), readme
        listed = re.findall(r"^\| `(\d\d_\w+\.ipynb)` \|", text, flags=re.M)
        assert listed == [path.name for path in NOTEBOOKS], readme


def test_the_committed_notebooks_store_the_state_of_the_widgets_they_display() -> None:
    """Opened before running, JupyterLab draws a widget from the state saved in the notebook's metadata (else it
    shows the widget's text repr, `VBox(children=...`): every displayed widget and every model it reaches."""
    with_widgets = [path.name for path in NOTEBOOKS if _displayed_widgets(path)]
    assert with_widgets[:2] == ["01_design_and_simulate.ipynb", "02_replay_and_forecast.ipynb"]
    for path in NOTEBOOKS:
        node = nbformat.read(path, as_version=4)
        state = node.metadata.get("widgets", {}).get(report.WIDGET_STATE, {}).get("state", {})
        displayed = _displayed_widgets(path)
        assert set(displayed) <= set(state), path.name
        referenced = set(re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state)))
        assert referenced <= set(state), (path.name, referenced - set(state))
        for model in displayed:
            assert state[model]["model_name"] == "VBoxModel" and state[model]["state"]["children"], path.name
        # Where the widget cannot be drawn (an untrusted notebook, a plain viewer): a sentence, not `VBox(...`.
        for output in _outputs(path):
            if report.WIDGET_VIEW in output.get("data", {}):
                text = output["data"]["text/plain"]
                assert text.endswith("widget: run the notebook (Run ▸ Run All Cells) to use it]"), text[:80]


def test_a_refresh_keeps_only_the_widget_models_the_outputs_reach() -> None:
    def model(name: str, **state: Any) -> dict[str, Any]:
        return {"model_name": name, "state": {"_model_name": name, **state}}

    node = nbformat.v4.new_notebook()
    view = {report.WIDGET_VIEW: {"model_id": "a1", "version_major": 2, "version_minor": 0}, "text/plain": "VBox()"}
    node.cells = [nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("display_data", data=view)])]
    state = {
        "a1": model("VBoxModel", children=["IPY_MODEL_b2"], layout="IPY_MODEL_c3"),
        "b2": model("ButtonModel", layout="IPY_MODEL_c3"),
        "c3": model("LayoutModel"),
        "d4": model("OutputModel"),  # a closed plot's output: nothing displayed reaches it
    }
    node.metadata["widgets"] = {report.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    report.keep_displayed_widgets(node)
    kept = node.metadata["widgets"][report.WIDGET_STATE]["state"]
    one, two, three = (f"{n:032x}" for n in (1, 2, 3))  # renumbered in the order reached: a refresh changes no id
    assert list(kept) == [one, two, three]
    assert kept[one]["state"] == {
        "_model_name": "VBoxModel",
        "children": [f"IPY_MODEL_{two}"],
        "layout": f"IPY_MODEL_{three}",
    }
    assert kept[two]["state"]["layout"] == f"IPY_MODEL_{three}" and kept[three]["model_name"] == "LayoutModel"
    assert report.displayed_widgets(node) == [one]
    node.cells = []
    report.keep_displayed_widgets(node)
    assert "widgets" not in node.metadata


def _displayed_widgets(path: Path) -> list[str]:
    return report.displayed_widgets(nbformat.read(path, as_version=4))


def _names(source: str) -> list[str]:
    return [line.split("=")[0].strip() for line in source.splitlines() if "=" in line and not line.startswith("#")]


def _outputs(path: Path) -> list[dict[str, Any]]:
    return [output for cell in nbformat.read(path, as_version=4).cells for output in cell.get("outputs", [])]


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_runs_with_papermill_on_small_parameters(notebook: Path, tmp_path: Path) -> None:
    executed = report.execute(notebook, tmp_path / notebook.name, SMALL.get(notebook.name))
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = report.to_html(executed).read_text()
    assert "<html" in html
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    if notebook.name.startswith("01"):
        assert "issue amount x 0.1" in text  # the injected parameter reached the draft (the diff, in words)
    if notebook.name.startswith("02"):
        assert "3000 events replayed" in text and len(images) == 4  # supply, per rule, liability, heat map
        assert html.count("data:image/png;base64") >= 4  # the figures are embedded in the HTML
        assert "redeemed" in text and "breakage" in text  # liability net of (synthetic) redemptions
    if notebook.name.startswith("05_publish"):
        assert "all guards pass" in text and "liability 30 days ahead" in text and len(images) == 1
        # a draft within its guards runs through (tests/notebooks/test_gate_notebook.py: one that breaks them)
        assert "The forecast gate passes" in text
    if notebook.name.startswith("04"):  # no base_url: pushed to a throwaway local service (the committed parameters)
        assert "Push 'Spring launch' to http://127.0.0.1:" in text
        assert "no difference between the lab and the live side" in text
    if notebook.name.startswith("03"):
        assert "issue amount x 0.06" in text and len(images) == 2  # the injected rate, in the diff's words


@pytest.mark.slow
def test_the_committed_outputs_match_nbval() -> None:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        str(report.NOTEBOOKS / "nbval_sanitize.cfg"),
        "--nbval-kernel-startup-timeout",
        "120",
        "--nbval-cell-timeout",
        "300",
        "-W",
        "ignore::DeprecationWarning",  # the kernel client's deprecations are not the notebooks' failures
        "-p",
        "no:cacheprovider",
        "-q",
        *[str(path) for path in NOTEBOOKS],
    ]
    done = subprocess.run(command, cwd=report.ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
