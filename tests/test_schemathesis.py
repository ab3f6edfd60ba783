"""schemathesis against the live document of a real server: no server error, no response that breaks the schema.

Bounded: a few examples per operation and a time budget, with a fixed seed so that a failure can be replayed
(`st run ... --seed 2026`). Besides the two the contract promises (no 5xx, every response in its schema), a
request the schema forbids must be refused (`negative_data_rejection`: it found event times given as numbers).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import start_server

TIME_BUDGET_S = 55


def test_schemathesis_finds_no_server_error_no_response_off_the_schema_no_bad_request_accepted(tmp_path: Path) -> None:
    live = start_server(tmp_path / "fuzz.duckdb", "Fuzz", "--plan", "enterprise", "--rate-limit", "1000000")
    try:
        document = httpx.get(f"{live.base_url}/openapi.json", timeout=10).json()
        operations = sum(len(item) for item in document["paths"].values())
        headers = [f"{name}: {value}" for name, value in live.headers().items()]
        command = [
            str(Path(sys.executable).with_name("st")),
            "run",
            f"{live.base_url}/openapi.json",
            *(argument for header in headers for argument in ("-H", header)),
            "--checks",
            "not_a_server_error,response_schema_conformance,negative_data_rejection",
            "--max-examples",
            "3",
            "--max-time",
            str(TIME_BUDGET_S),
            "--workers",
            "2",
            "--seed",
            "2026",
            "--generation-database",
            "none",
            "--no-color",
        ]
        run = subprocess.run(command, capture_output=True, text=True, timeout=TIME_BUDGET_S + 60, cwd=tmp_path)
    finally:
        live.stop()
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    tested = re.search(r"Tested:\s+(\d+)", output)
    assert tested is not None and int(tested.group(1)) == operations, output[-3000:]
    summary = re.search(r"(\d+) generated, (\d+) passed", output)
    assert summary is not None and summary.group(1) == summary.group(2) and int(summary.group(1)) >= operations
    assert "Traceback" not in (tmp_path / "fuzz.server.log").read_text()
