"""schemathesis against the live document of a real server, every check it has (`--checks all`), stateful links
included: no server error, every response (status, headers, body) in the document, every request the document
forbids refused, every request it allows accepted, 405 with `Allow` for a method a path lacks.

Bounded: a few examples per operation and one time budget for the whole run (fuzzing and stateful testing repeat
until it is spent), with a fixed seed so that a failure can be replayed (`st run ... --seed 2026`).

`positive_data_acceptance` is told to let a 422 through, and `schemathesis_hooks.refusal_of_valid_data_is_declared`
checks each such 422 strictly instead: a schema-valid request may be refused only with a code and field the
operation declares in `x-refused-beyond-schema` (a cursor the service never issued, an amount finer than the
stored asset's decimals...). Any other refusal of valid data fails the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import LiveServer, start_server

ROOT = Path(__file__).resolve().parents[2]
TIME_BUDGET_S = 60  # per run: one run of examples, coverage and fuzzing, then one of stateful sequences
MAX_EXAMPLES = 5
CONFIG = """
[checks.positive_data_acceptance]
# 422 is judged by tests/schemathesis_hooks.py (declared refusals only), every other status as schemathesis does.
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]

[checks.use_after_free]
# Every DELETE of /v1 keeps its resource readable, by decision (docs/decisions.md): DELETE /webhooks/{id} disables
# the endpoint and keeps its delivery history, DELETE /developer/api-keys/{id} revokes the key and keeps it listed,
# DELETE /reward-rules/{id} removes the rule from the draft while published versions still hold it.
enabled = false
"""


def schemathesis_run(
    live: LiveServer, workdir: Path, phases: str, *, budget_s: int = TIME_BUDGET_S
) -> subprocess.CompletedProcess[str]:
    """`st run --checks all` against `live` with our hooks, over `phases`; returns the finished process."""
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    headers = [f"{name}: {value}" for name, value in live.headers().items()]
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(config),
        "run",
        f"{live.base_url}/openapi.json",
        *(argument for header in headers for argument in ("-H", header)),
        "--checks",
        "all",
        "--phases",
        phases,
        "--max-examples",
        str(MAX_EXAMPLES),
        "--max-time",
        str(budget_s),
        "--workers",
        "1",  # CPython 3.11's ast is not thread-safe, and hypothesis parses lambdas with it (SystemError)
        "--seed",
        "2026",
        "--generation-database",
        "none",
        "--no-color",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, timeout=budget_s + 120, cwd=workdir, env=env)


def test_schemathesis_all_checks_and_stateful_links_find_nothing(tmp_path: Path) -> None:
    live = start_server(
        tmp_path / "fuzz.duckdb",
        "Fuzz",
        "--plan",
        "enterprise",
        "--rate-limit",
        "1000000",
        # the fuzzer sends thousands of requests without credentials from one address: the per-address budget
        # before authentication (tests/api/test_hardening_abuse_limits.py) would answer 429 instead of 401
        serve_args=("--unauthenticated-limit-per-minute", "1000000"),
    )
    try:
        document = httpx.get(f"{live.base_url}/openapi.json", timeout=10).json()
        operations = sum(len(item) for item in document["paths"].values())
        links = sum(
            len(response.get("links", {}))
            for item in document["paths"].values()
            for spec in item.values()
            for response in spec["responses"].values()
        )
        single = schemathesis_run(live, tmp_path, "examples,coverage,fuzzing")
        sequences = schemathesis_run(live, tmp_path, "stateful")
    finally:
        live.stop()
    output = single.stdout + single.stderr
    assert single.returncode == 0, output[-8000:]
    tested = re.search(r"Tested:\s+(\d+)", output)
    assert tested is not None and int(tested.group(1)) == operations, output[-3000:]
    output = sequences.stdout + sequences.stderr
    assert sequences.returncode == 0, output[-8000:]
    stateful = re.search(r"API Links:\s+(\d+) covered / (\d+) selected", output)
    assert stateful is not None and int(stateful.group(2)) >= links >= 30, output[-3000:]
    assert int(stateful.group(1)) >= 5, output[-3000:]  # the links were followed, not only listed (19 here)
    assert "Traceback" not in (tmp_path / "fuzz.server.log").read_text()
