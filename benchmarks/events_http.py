"""Benchmark: POST /v1/events on one `rewards-lab serve` process, 64 connections, beside the plain baseline.

Steps: (1) the baseline (FastAPI + one DuckDB INSERT per request) under the same load; (2) our service with
authentication, tenancy, deduplication and the envelope (rate limit set high), a published rule so that every
event issues a reward; the load generator runs in its own process. While the load runs, a probe posts an event
for a customer of its own and polls GET /wallets/{id}/balances until the reward shows (event -> visible balance).
Afterwards the queue is drained, the server stopped, and the file checked: accepted events = processed events,
one execution per event, the ledger verified. Prints figures; asserts only correctness. Beside them: the share of
both cores that was busy during the load (`machine_cpu_percent`; idle cores under saturation mean the server is
bound by its GIL, not by the CPU) and a speed probe of the machine before and after (benchmarks/machine.py).
`--intake-only` (3) runs the same server and load without the event and delivery workers: the intake alone, a
bound on what the whole service can reach while it also processes every event (`make bench-http` runs it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import CpuShare, speed_probe  # noqa: E402  (benchmarks/machine.py, beside this script)

from rewards_lab.contract import requests as rq  # noqa: E402
from rewards_lab.contract.scope import Scope  # noqa: E402
from rewards_lab.contract.validation import validate  # noqa: E402
from rewards_lab.service import assets, customers, programmes  # noqa: E402
from rewards_lab.store.database import Database  # noqa: E402
from rewards_lab.store.verification import verify_ledger  # noqa: E402
from tests.live_server import free_port  # noqa: E402

TEMPLATE = (
    'ev-|{"type": "order.completed", "external_event_id": "{id}", "customer_id": "c{c}",'
    ' "occurred_at": "2026-11-20T10:00:00Z", "data": {"amount": 42.50, "channel": "web"}}'
)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux): a figure that other load on the machine barely moves."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of a process, by OS thread name (`serve` names its threads; the main thread runs
    the event loop); unnamed threads (DuckDB's, the thread pool's) are summed as `other`."""
    totals: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        label = "event-loop" if int(task.name) == pid else name if "-" in name else "other"
        totals[label] = totals.get(label, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return totals


def _wait_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


@dataclasses.dataclass(frozen=True)
class Load:
    """How to load the server: wrk (C, little CPU) for `seconds`, or the Python generator for `requests`."""

    generator: str
    requests: int
    seconds: float
    connections: int


def pick_generator(wanted: str) -> str:
    if wanted == "python" or (wanted == "auto" and shutil.which("wrk") is None):
        if wanted == "auto":
            print("note: wrk not found (apt-get install wrk); using the Python load generator, which shares the CPU")
        return "python"
    return "wrk"


def _load(url: str, headers: dict[str, str], load: Load, customers_n: int) -> dict[str, object]:
    if load.generator == "wrk":
        return _load_wrk(url, headers, load, customers_n)
    command = [sys.executable, str(ROOT / "benchmarks" / "http_load.py"), url, "--requests", str(load.requests)]
    connections = load.connections
    command += ["--connections", str(connections), "--customers", str(customers_n), "--template", TEMPLATE]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    figures: dict[str, object] = json.loads(result.stdout)
    return figures


def _load_wrk(url: str, headers: dict[str, str], load: Load, customers_n: int) -> dict[str, object]:
    """wrk with benchmarks/events_wrk.lua: a fresh external_event_id per request, statuses counted. wrk stops
    by time, so up to `connections` requests may be in flight (stored, but not counted as accepted) at the end."""
    prefix, body = TEMPLATE.split("|", 1)
    command = ["wrk", "-t2", f"-c{load.connections}", f"-d{load.seconds:g}s", "--timeout", "10s"]
    command += ["-s", str(ROOT / "benchmarks" / "events_wrk.lua")]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    command += [url, "--", prefix, str(customers_n), body]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    line = next(x for x in result.stdout.splitlines() if x.startswith("WRK_JSON "))
    figures: dict[str, object] = json.loads(line.removeprefix("WRK_JSON "))
    figures["generator"] = "wrk"
    return figures


def baseline(folder: Path, load: Load) -> dict[str, object]:
    port = free_port()
    env = {**os.environ, "BASELINE_DB": str(folder / "baseline.duckdb"), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "benchmarks.baseline_app:app", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        _wait_up(f"http://127.0.0.1:{port}/docs", server)
        return _load(f"http://127.0.0.1:{port}/v1/events", {}, load, 1000)
    finally:
        server.terminate()
        server.wait(30)


def _prepare(db: Path, customers_n: int) -> tuple[dict[str, object], str]:
    """Bootstrap (enterprise plan, limit set high), then customers, wallets, an asset and a published rule."""
    boot = json.loads(
        subprocess.run(
            [sys.executable, "-m", "rewards_lab.cli.main", "bootstrap", "--db", str(db), "--org", "bench"]
            + ["--plan", "enterprise", "--rate-limit", "100000000"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    scope = Scope(str(boot["organization_id"]), "sandbox")
    with Database(db) as database:
        body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}
        star = assets.activate_asset(
            database, scope, assets.create_asset(database, scope, validate(rq.AssetCreate, body)).id
        )
        for index in [*range(customers_n), "probe"]:
            customer = customers.create_customer(database, scope, rq.CustomerCreate(external_id=f"c{index}"))
            wallet = customers.create_wallet(database, scope, rq.WalletCreate(customer_id=customer.id))
        programme = programmes.create_programme(database, scope, rq.ProgrammeCreate(name="Bench", asset_id=star.id))
        rule = {
            "program_id": programme.id,
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": Decimal("0.05")}}],
        }
        programmes.create_rule(database, scope, validate(rq.RuleCreate, rule))
        programmes.publish(database, scope, programme.id)
    return boot, wallet.id  # the last wallet is the probe's


def _probe(base: str, headers: dict[str, str], wallet_id: str, stop: threading.Event, out: list[float]) -> None:
    """Post one event for the probe customer, poll its balance until the reward shows; repeat."""
    with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
        number = 0
        while not stop.is_set():
            before = client.get(f"/wallets/{wallet_id}/balances").json()["data"]["balances"]
            seen = before[0]["balance"] if before else "0"
            started = time.perf_counter()
            body = {
                "type": "order.completed",
                "external_event_id": f"probe-{number}",
                "customer_id": "cprobe",
                "data": {"amount": 100},
            }
            assert client.post("/events", json=body).status_code == 202
            number += 1
            while not stop.is_set():
                balances = client.get(f"/wallets/{wallet_id}/balances").json()["data"]["balances"]
                if balances and balances[0]["balance"] != seen:
                    out.append((time.perf_counter() - started) * 1000)
                    break
                time.sleep(0.005)
            time.sleep(0.1)


def _headers(boot: dict[str, object]) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {boot['api_keys']['sandbox']}",  # type: ignore[index]
        "X-Organization-ID": str(boot["organization_id"]),
        "X-Environment": "sandbox",
    }


def _serve_under_load(
    command: list[str], port: int, headers: dict[str, str], load: Load, customers_n: int, probe_wallet: str | None
) -> tuple[dict[str, object], list[float]]:
    """Start the server, run the load (and the probe, given its wallet), wait for the queue to drain when a
    worker runs, and measure the server's CPU; the server is stopped before this returns."""
    base = f"http://127.0.0.1:{port}/v1"
    gc_out = Path(tempfile.mkdtemp()) / "gc.json"
    server = subprocess.Popen(
        command + ["--port", str(port), "--log-level", "warning"], stderr=subprocess.DEVNULL, env=_gc_probe_env(gc_out)
    )
    probe_ms: list[float] = []
    try:
        _wait_up(f"{base}/openapi.json", server)
        stop = threading.Event()
        probe = threading.Thread(target=_probe, args=(base, headers, probe_wallet, stop, probe_ms))
        if probe_wallet is not None:
            probe.start()
        cpu_before = _cpu_seconds(server.pid)
        threads_before = _thread_cpu(server.pid)
        machine_cpu = CpuShare().start()
        load_started = time.time()
        figures = _load(f"{base}/events", headers, load, customers_n)
        load_ended = time.time()
        figures["machine_cpu_percent"] = machine_cpu.stop()  # both cores: server, load generator and the rest
        if probe_wallet is not None:
            stop.set()
            probe.join()
            drain_started = time.perf_counter()
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                while client.get("/events", params={"status": "received", "limit": 1}).json()["data"]:
                    time.sleep(0.1)
            figures["drain_after_load_s"] = round(time.perf_counter() - drain_started, 2)
        cpu = _cpu_seconds(server.pid) - cpu_before
        requests_n = max(1, int(figures["requests"]))  # type: ignore[call-overload]
        figures["server_cpu_ms_per_event"] = round(cpu * 1000 / requests_n, 3)
        threads_after = _thread_cpu(server.pid)
        figures["thread_cpu_ms_per_event"] = {
            name: round((seconds - threads_before.get(name, 0.0)) * 1000 / requests_n, 3)
            for name, seconds in sorted(threads_after.items(), key=lambda item: -item[1])
        }
    finally:
        server.terminate()
        server.wait(60)
    figures["gc_pauses_during_load"] = _gc_pauses(gc_out, load_started, load_ended)
    shutil.rmtree(gc_out.parent, ignore_errors=True)
    return figures, probe_ms


def _gc_probe_env(out: Path) -> dict[str, str]:
    """The server's environment with benchmarks/gc_probe first on its path: it records the collector's pauses."""
    path = os.pathsep.join(p for p in (str(ROOT / "benchmarks" / "gc_probe"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "REWARDS_LAB_BENCH_GC_OUT": str(out)}


def _gc_pauses(out: Path, started: float, ended: float) -> dict[str, object]:
    """Per generation, the collector's pauses while the load ran: how many, their total and the longest (ms).
    A full collection (generation 2) stops every thread of the server: its longest pause bounds what it adds to
    the p99 of every request in flight."""
    if not out.exists():
        return {}
    pauses = [(gen, ms) for at, gen, ms in json.loads(out.read_text()) if started <= at <= ended]
    summary: dict[str, object] = {}
    for gen in sorted({gen for gen, _ in pauses}):
        times = [ms for g, ms in pauses if g == gen]
        summary[f"gen{gen}"] = {"n": len(times), "total_ms": round(sum(times), 1), "max_ms": round(max(times), 1)}
    return summary


def _stored_within_bounds(figures: dict[str, object], load: Load, received: int) -> None:
    """Every accepted event is stored. wrk stops on time: requests still in flight then (at most one per
    connection) may be stored without their answer being counted; the Python generator waits for all."""
    accepted = int(figures["accepted"])  # type: ignore[call-overload]
    in_flight = load.connections if load.generator == "wrk" else 0
    assert accepted <= received <= accepted + in_flight, (received, accepted)


def ours(folder: Path, load: Load, customers_n: int) -> dict[str, object]:
    db = folder / "service.duckdb"
    boot, probe_wallet = _prepare(db, customers_n)
    command = [sys.executable, "-m", "rewards_lab.cli.main", "serve", "--db", str(db)]
    figures, probe_ms = _serve_under_load(command, free_port(), _headers(boot), load, customers_n, probe_wallet)
    with Database(db) as database:
        (received, processed, executions, distinct_events, lag_p50, lag_p99) = (
            database.reader()
            .execute(
                """SELECT count(*), count(*) FILTER (status = 'processed'),
                      (SELECT count(*) FROM reward_executions),
                      (SELECT count(DISTINCT event_id) FROM reward_executions),
                      quantile_cont(epoch_ms(processed_at) - epoch_ms(received_at), 0.5),
                      quantile_cont(epoch_ms(processed_at) - epoch_ms(received_at), 0.99)
               FROM events WHERE external_event_id LIKE 'ev-%'"""
            )
            .fetchone()
        )
        report = verify_ledger(database.reader())
    _stored_within_bounds(figures, load, received)
    assert received == processed, (received, processed)  # and every stored event is processed
    assert executions == distinct_events, (executions, distinct_events)  # one execution per processed event
    figures.update(
        events_stored=received,
        processed=processed,
        executions=executions,
        ledger_ok=report.ok,
        event_to_processed_p50_ms=lag_p50,
        event_to_processed_p99_ms=lag_p99,
        probe_event_to_balance_ms={
            "samples": len(probe_ms),
            "p50": round(statistics.median(probe_ms), 1) if probe_ms else None,
            "max": round(max(probe_ms), 1) if probe_ms else None,
        },
    )
    return figures


def intake_only(folder: Path, load: Load, customers_n: int) -> dict[str, object]:
    """The same server and load without the event and delivery workers (benchmarks/intake_only_server.py):
    authentication, tenancy, deduplication, durable group commit and the envelope, and no processing. What this
    reaches bounds what the whole service can reach while it also processes every event."""
    db = folder / "intake.duckdb"
    boot, _ = _prepare(db, customers_n)
    command = [sys.executable, str(ROOT / "benchmarks" / "intake_only_server.py"), "--db", str(db)]
    figures, _ = _serve_under_load(command, free_port(), _headers(boot), load, customers_n, None)
    with Database(db) as database:
        row = (
            database.reader()
            .execute(
                "SELECT count(*), count(*) FILTER (status = 'received') FROM events WHERE external_event_id LIKE 'ev-%'"
            )
            .fetchone()
        )
    assert row is not None
    received, unprocessed = int(row[0]), int(row[1])
    _stored_within_bounds(figures, load, received)
    assert unprocessed == received, (unprocessed, received)  # nothing processed them
    figures.update(events_stored=received)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--generator", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a wrk run")
    parser.add_argument("--requests", type=int, default=20_000, help="requests of a Python generator run")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--customers", type=int, default=1000)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument(
        "--intake-only", action="store_true", help="also run the server without its workers (intake alone)"
    )
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}")
    generator = pick_generator(args.generator)
    load = Load(generator, args.requests, args.seconds, args.connections)
    print(f"load: {generator}, {args.connections} connections, load average {os.getloadavg()[0]:.2f}")
    print(f"speed probe: {speed_probe()} ms (fixed pure-Python work; lower is quicker)")
    print("(thread_cpu_ms_per_event includes the drain after the load and the probe's requests)")
    with tempfile.TemporaryDirectory() as folder:
        if not args.skip_baseline:
            print("baseline (plain FastAPI, one DuckDB INSERT per request):")
            print("  ", json.dumps(baseline(Path(folder), load)))
        print("rewards-lab serve, POST /v1/events:")
        print("  ", json.dumps(ours(Path(folder), load, args.customers)))
        if args.intake_only:
            print("the same server without its workers (intake alone, no event processed):")
            print("  ", json.dumps(intake_only(Path(folder), load, args.customers)))
    print(f"speed probe: {speed_probe()} ms")


if __name__ == "__main__":
    main()
