"""Run the lab's notebooks headless: papermill executes each into `reports/`, nbconvert writes its HTML.

`python -m rewards_lab.lab.report` is `make report`; `--refresh` re-executes the committed notebooks in place
(their stored outputs are what nbval checks, so refresh them when the package's output changes on purpose).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REPORTS = ROOT / "reports"
KERNEL = "python3"  # jupyter_client runs a "python" kernelspec with the current interpreter (the venv's)


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_MODEL_REFERENCE = re.compile(r"IPY_MODEL_([0-9a-f]+)")


def notebooks(directory: Path = NOTEBOOKS) -> list[Path]:
    """The numbered notebooks in reading order: by their number (numerically, so 10 follows 9), then by name."""
    return sorted(directory.glob("[0-9]*.ipynb"), key=lambda path: (_number(path.name), path.name))


def _number(name: str) -> int:
    digits = re.match(r"\d+", name)
    return int(digits.group()) if digits else -1


def execute(notebook: Path, output: Path, parameters: Mapping[str, Any] | None = None, *, timeout: int = 600) -> Path:
    """Execute one notebook with papermill (parameters injected after its `parameters` cell), in its folder."""
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        str(notebook),
        str(output),
        parameters=dict(parameters or {}),
        kernel_name=KERNEL,
        cwd=str(notebook.parent),
        progress_bar=False,
        execution_timeout=timeout,
    )
    return output


def to_html(notebook: Path) -> Path:
    """The executed notebook as a standalone HTML page (figures embedded), beside it."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    target.write_text(body, encoding="utf-8")
    return target


def report(
    directory: Path = NOTEBOOKS, reports: Path = REPORTS, parameters: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Path]:
    """Every numbered notebook into `reports/` (.ipynb and .html); `parameters` by notebook file name."""
    written = []
    for notebook in notebooks(directory):
        executed = execute(notebook, reports / notebook.name, (parameters or {}).get(notebook.name))
        written += [executed, to_html(executed)]
    return written


def refresh(directory: Path = NOTEBOOKS) -> list[Path]:
    """Re-execute the committed notebooks in place with their own parameters, without papermill's metadata.

    The widgets' state is kept (nbclient records it), trimmed to the models the displayed widgets use: JupyterLab
    draws the widgets from it when a notebook is opened before it runs, instead of their text repr."""
    import nbformat
    from nbclient import NotebookClient

    done = []
    for notebook in notebooks(directory):
        node = nbformat.read(notebook, as_version=4)
        NotebookClient(
            node,
            timeout=600,
            kernel_name=KERNEL,
            resources={"metadata": {"path": str(directory)}},
            store_widget_state=True,
        ).execute()
        for cell in node.cells:
            cell.get("metadata", {}).pop("execution", None)
        keep_displayed_widgets(node)
        nbformat.write(node, notebook)
        done.append(notebook)
    return done


def displayed_widgets(node: Any) -> list[str]:
    """The model ids of the widgets the notebook's outputs display, in order."""
    return [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in node.cells
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def keep_displayed_widgets(node: Any) -> None:
    """Trim the stored widget state to the models the displayed widgets reach (their children, layouts, styles,
    outputs; models created and dropped on the way, a re-drawn plot's, are not needed to draw them), and number
    them in the order they are reached: the kernel's ids are random, so every refresh would rewrite them all."""
    state = node.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    order: list[str] = []
    waiting = deque(displayed_widgets(node))
    while waiting:
        model = waiting.popleft()
        if model in order or model not in state:
            continue
        order.append(model)
        waiting.extend(_MODEL_REFERENCE.findall(json.dumps(state[model])))
    if not order:
        node.metadata.pop("widgets", None)
        return
    ids = {model: f"{number:032x}" for number, model in enumerate(order, start=1)}

    def renumber(text: str) -> str:
        return _MODEL_REFERENCE.sub(lambda match: f"IPY_MODEL_{ids.get(match[1], match[1])}", text)

    kept = {ids[model]: json.loads(renumber(json.dumps(state[model]))) for model in order}
    node.metadata["widgets"][WIDGET_STATE]["state"] = kept
    for cell in node.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is not None and view.get("model_id") in ids:
                view["model_id"] = ids[view["model_id"]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--refresh", action="store_true", help="re-execute the committed notebooks in place")
    args = parser.parse_args(argv)
    paths = refresh() if args.refresh else report()
    for path in paths:
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
