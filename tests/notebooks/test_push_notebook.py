"""notebooks/04_push.ipynb executed with papermill against a real `rewards-lab serve` on 127.0.0.1.

With its default parameters (a throwaway local service) it runs in tests/notebooks/test_notebooks.py, which asserts
the push to 127.0.0.1 and that nothing differs afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.live_server import start_server

ROOT = Path(__file__).resolve().parents[2]


def printed(notebook: dict[str, Any]) -> str:
    return "".join(
        output.get("text", "")
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
    )


def test_push_notebook_plans_applies_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    papermill = pytest.importorskip("papermill")
    live = start_server(tmp_path / "notebook.duckdb", "Acme")
    try:
        monkeypatch.setenv("REWARDS_API_KEY", live.keys["sandbox"])
        output = tmp_path / "04_push.out.ipynb"
        parameters = {
            "base_url": live.base_url,
            "organization": live.organization_id,
            "environment": "sandbox",
            "programme_file": str(ROOT / "data" / "programmes" / "coffee_stamps.json"),
        }
        notebook = papermill.execute_notebook(
            str(ROOT / "notebooks" / "04_push.ipynb"),
            str(output),
            parameters=parameters,
            cwd=str(ROOT / "notebooks"),
            kernel_name="python3",
            progress_bar=False,
        )
    finally:
        live.stop()
    text = printed(notebook)
    assert "+ create programme" in text and "publish the draft as version 1" in text
    assert "No changes: the live side matches the file." in text
    assert "no difference between the lab and the live side" in text
