"""The benchmark scripts keep working: a tiny run of the batch posting benchmark, and its machine readings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine import CpuShare, speed_probe  # noqa: E402


def test_ledger_batch_benchmark_runs_both_halves_and_verifies_the_ledger() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "ledger_batch.py")]
    command += ["--batches", "3", "--sizes", "10", "--wallets", "20", "--floor"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr  # the script asserts verify_ledger() and the row counts itself
    line = re.compile(r"^(\w[\w ()]*?) batch=\s*10 x\s+3:\s+([\d,]+) transactions/s", re.M)
    rates = {label.strip(): int(rate.replace(",", "")) for label, rate in line.findall(result.stdout)}
    expected = {"issue", "issue (database half alone)", "transfer", "transfer (database half alone)"}
    assert set(rates) == expected, result.stdout
    assert all(rate > 0 for rate in rates.values())
    assert re.search(r"^speed probe: \d+(\.\d)? ms", result.stdout, re.M), result.stdout


def test_cpu_share_reads_an_idle_machine_as_mostly_idle_and_a_busy_one_as_busy() -> None:
    idle = CpuShare().start()
    time.sleep(0.3)
    resting = idle.stop()
    busy = CpuShare().start()
    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:  # one core busy: at least a fifth of two cores' time (others may add)
        pass
    working = busy.stop()
    assert abs(sum(resting.values()) - 100) < 1 and abs(sum(working.values()) - 100) < 1
    assert working["user"] + working["system"] >= 20
    assert speed_probe() > 0


def test_events_benchmark_checks_the_service_and_the_intake_alone_on_a_small_load() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "events_http.py"), "--skip-baseline", "--intake-only"]
    command += ["--generator", "python", "--requests", "120", "--connections", "8", "--customers", "5"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    # The script asserts: every accepted event stored; with workers, each processed once and the ledger verified;
    # without them, none processed.
    assert result.returncode == 0, result.stderr[-3000:]
    figures = [json.loads(line) for line in result.stdout.splitlines() if line.strip().startswith("{")]
    service, intake = figures
    assert service["accepted"] == service["events_stored"] == service["processed"] == 120
    assert service["ledger_ok"] is True
    assert intake["accepted"] == intake["events_stored"] == 120 and "processed" not in intake
    assert set(intake["thread_cpu_ms_per_event"]).isdisjoint({"event-worker", "delivery-worker"})


def test_event_worker_benchmark_processes_every_event_and_verifies_the_ledger() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "event_worker.py"), "--events", "60", "--customers", "4"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]  # the script asserts every event processed, ledger ok
    found = re.search(
        r"^event worker: 60 events in [\d.]+ s \(([\d,]+) events/s\), CPU [\d.]+ s, ([\d,]+)", result.stdout, re.M
    )
    assert found is not None, result.stdout
    # amounts 5 + 37i mod 200 for i < 60 against thresholds 10, 50, 100: the rewards issued are fixed
    amounts = [5 + 37 * i % 200 for i in range(60)]
    expected = sum((a >= 10) + (a >= 50) + (a >= 100) for a in amounts)
    assert int(found.group(2).replace(",", "")) == expected


def test_replay_benchmark_checks_the_cli_and_the_hand_written_query_write_the_same_rows(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from rewards_lab.lab.synthetic import generate_events

    events = tmp_path / "events.parquet"
    pq.write_table(generate_events(20_000, 2_000, seed=2026), events)
    command = [sys.executable, str(ROOT / "benchmarks" / "replay.py"), "--file", str(events)]
    command += ["--headline-only", "--repeat", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    # The script asserts: both files hold the same rows (count, amount_minor total, digest of every column), in seq
    # order, with equal first and last rows; the CLI's files hold the issuances and totals it printed.
    assert result.returncode == 0, result.stderr[-3000:]
    printed = re.search(r"^  CLI, no ceiling .* MiB  ([\d,]+) issued", result.stdout, re.M)
    checked = re.search(r"^  checked: same ([\d,]+) rows in CLI and hand-written files", result.stdout, re.M)
    assert printed is not None and checked is not None, result.stdout
    assert printed.group(1) == checked.group(1) and int(checked.group(1).replace(",", "")) > 20_000
    assert re.search(r"^ratio CLI / hand-written \(no ceiling\): \d+\.\d\d$", result.stdout, re.M), result.stdout
