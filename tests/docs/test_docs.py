"""What the README shows works as shown, and the documents it names exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks, "the README has no Python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})  # noqa: S102 - the documented example, run as written
    assert "balance='2.12'" in capsys.readouterr().out
    assert (tmp_path / "rewards.duckdb").exists()


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


@pytest.mark.parametrize(
    "path", ["docs/architecture.md", "docs/decisions.md", "docs/deploy.md", "reports/benchmarks.md"]
)
def test_documents_exist(path: str) -> None:
    assert (ROOT / path).read_text().strip()


def test_every_test_the_decision_log_names_exists() -> None:
    """docs/decisions.md names the test that holds each decision: a renamed or deleted test must update it."""
    text = (ROOT / "docs" / "decisions.md").read_text()
    named = set(re.findall(r"(?<![\w/])(?:tests/(?:\w+/)?)?(test_\w+\.py)(?:::(test_\w+))?", text))
    assert len(named) > 100, "the decision log names the tests that hold its decisions"
    files = {source.name: source for source in (ROOT / "tests").rglob("test_*.py")}
    missing = []
    for path, name in sorted(named):
        source = files.get(path)
        if source is None or (name and not re.search(rf"^(async )?def {name}\(", source.read_text(), re.M)):
            missing.append(f"{path}::{name}" if name else path)
    assert not missing, missing
