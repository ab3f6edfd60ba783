"""A notebook runs with papermill from the repository root, from notebooks/, and with papermill's --cwd.

The notebooks name their files relative to the repository and resolve them with `rewards_lab.lab.paths.locate`,
so neither the directory papermill is started from nor the kernel's working directory matters. Notebook 01 is
the cheapest (one programme file, no history), so it stands for all of them. From notebooks/ (the kernel's working
directory there) is tests/notebooks/test_notebooks.py's run of every notebook (`report.execute`, cwd notebooks/).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rewards_lab.lab.paths import ROOT_VARIABLE, locate, repository_root

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "01_design_and_simulate.ipynb"


def _papermill(cwd: Path, notebook: Path, output: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != ROOT_VARIABLE}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "papermill", str(notebook), str(output), "-k", "python3", "--no-progress-bar"]
    return subprocess.run(
        [*command, "-p", "new_rate", "0.1", *arguments],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "arguments"),
    [
        ("root", ()),  # papermill notebooks/01_... out.ipynb, the notebook's own parameters
        ("elsewhere", ("--cwd", "{tmp}")),  # the kernel in a directory outside the repository
    ],
)
def test_the_notebook_runs_wherever_papermill_starts_it(where: str, arguments: tuple[str, ...], tmp_path: Path) -> None:
    output = tmp_path / "out.ipynb"
    done = _papermill(ROOT, Path("notebooks") / NOTEBOOK, output, *(a.format(tmp=tmp_path) for a in arguments))
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = [o for cell in nbformat.read(output, as_version=4).cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "issue amount x 0.1" in text  # the whole notebook ran, the injected parameter included


def test_locate_prefers_the_working_directory_then_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ROOT_VARIABLE, raising=False)
    sample = "data/programmes/spring_launch.json"
    assert locate(sample, start=ROOT / "notebooks") == ROOT / sample  # walked up from notebooks/
    assert locate(sample, start=tmp_path) == ROOT / sample  # outside: the checkout the package runs from
    (tmp_path / "mine.json").write_text("{}")
    assert locate("mine.json", start=tmp_path) == tmp_path / "mine.json"  # the user's own file, where they are
    assert locate(tmp_path / "mine.json") == tmp_path / "mine.json"


def test_the_root_variable_wins_and_must_name_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path))
    assert repository_root(start=ROOT) == tmp_path.resolve()
    assert locate("data/events.parquet", start=ROOT) == tmp_path.resolve() / "data" / "events.parquet"
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError, match=ROOT_VARIABLE):
        repository_root()
