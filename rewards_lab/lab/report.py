"""Run the lab's notebooks headless: papermill executes each into `reports/`, nbconvert writes its HTML.

`python -m rewards_lab.lab.report` is `make report`; `--refresh` re-executes the committed notebooks in place
(their stored outputs are what nbval checks, so refresh them when the package's output changes on purpose).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REPORTS = ROOT / "reports"
KERNEL = "python3"  # jupyter_client runs a "python" kernelspec with the current interpreter (the venv's)


def notebooks(directory: Path = NOTEBOOKS) -> list[Path]:
    return sorted(directory.glob("[0-9]*.ipynb"))


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
    """Re-execute the committed notebooks in place with their own parameters, without papermill's metadata."""
    import nbformat
    from nbclient import NotebookClient

    done = []
    for notebook in notebooks(directory):
        node = nbformat.read(notebook, as_version=4)
        NotebookClient(
            node, timeout=600, kernel_name=KERNEL, resources={"metadata": {"path": str(directory)}}
        ).execute()
        for cell in node.cells:
            cell.get("metadata", {}).pop("execution", None)
        node.metadata.pop("widgets", None)  # live widget state: new model ids on every run, nothing to check
        nbformat.write(node, notebook)
        done.append(notebook)
    return done


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
