"""Replay benchmark: 10,000,000 events (Parquet, 1,000,000 customers, 4 event types) through a 20-rule programme.

Headline (benchmarks/replay_cli.py): the `rewards-lab replay` CLI writing the issuances to Parquet, without a
supply ceiling and with a binding one, against a hand-written DuckDB query that writes the same rows to Parquet:
seconds, peak memory of each process, and the ratio CLI / hand-written (no ceiling). The rows of both files are
checked equal. `--spark` also runs the CLI's Spark engine on the same file (informational).

Secondary, each in a fresh subprocess (so that its peak memory, ru_maxrss, is its own):
- replay without a supply ceiling, and with a binding one, from reading the file to the issuance table and its
  daily and per-customer summaries. The issuance table is stored as one row per event with the amount of every
  rule action (reports/perf/2026-11-22-replay-session3.md); materialising it as one row per issuance
  (Arrow, in processing order) and writing it to Parquet are timed separately (first round only);
- a hand-written SQL query computing the same per-event totals, daily totals and per-customer totals (every
  customer, unsorted, as the replay's `per_customer()`) for the same rules, and the ratio general /
  hand-written. The totals and the top customers of both are checked equal (outside the timed part).
In both parts each round runs the replay without a ceiling, the hand-written query and the replay with a ceiling,
one after the other, so that the machine's load hits them alike; `--repeat N` runs N rounds and reports medians
(the ratio is the median of each round's ratio). The events are generated once and cached under data/bench/
(gitignored).

    python benchmarks/replay.py [--events 10000000] [--customers 1000000] [--repeat 3] [--spark]
    python benchmarks/replay.py --quick          # 200,000 events, 20,000 customers, 1 round
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import speed_probe  # benchmarks/machine.py, beside this script
from replay_cli import RULE_CENTS, compare, load_average, own_peak_mib, sql_string

ROOT = Path(__file__).resolve().parent.parent
PROGRAMME = ROOT / "benchmarks" / "replay_programme.json"
CACHE = ROOT / "data" / "bench"

# The benchmark programme's twenty rules, written by hand (benchmarks/replay_cli.py): per-event total in minor units.
HAND_TOTAL = (
    "CASE "
    + " ".join(f"WHEN type = {sql_string(t)} THEN {' + '.join(f'({r})' for r in rules)}" for t, rules in RULE_CENTS)
    + " ELSE 0 END"
)
TOP = 5  # top customers compared between the replay and the hand-written query


def events_file(n_events: int, n_customers: int) -> Path:
    path = CACHE / f"events_{n_events}_{n_customers}.parquet"
    if not path.exists():
        import pyarrow.parquet as pq

        from rewards_lab.lab.synthetic import generate_events

        CACHE.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        table = generate_events(n_events, n_customers, seed=2026)
        generated = time.perf_counter() - started
        temporary = path.with_suffix(".tmp")
        pq.write_table(table, temporary)
        temporary.replace(path)
        print(f"generated {n_events:,} events in {generated:.1f} s -> {path}", file=sys.stderr)
    return path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Stages:
    """Wall-clock and CPU time of consecutive stages: `mark(label)` ends the stage begun at the previous mark."""

    def __init__(self) -> None:
        self.last = (time.perf_counter(), _cpu())
        self.stages: dict[str, list[float]] = {}

    def mark(self, label: str) -> None:
        now = (time.perf_counter(), _cpu())
        self.stages[label] = [now[0] - self.last[0], now[1] - self.last[1]]
        self.last = now


def measure_replay(path: Path, ceiling: str | None, output: bool) -> dict[str, object]:
    from rewards_lab.contract.programme_file import load_programme
    from rewards_lab.replay.engine import STEPS, replay

    definition = load_programme(PROGRAMME)
    if ceiling is not None:
        definition = definition.model_copy(
            update={"asset": definition.asset.model_copy(update={"supply_ceiling": ceiling})}
        )
    started, cpu = time.perf_counter(), _cpu()
    stages = Stages()
    result = replay(path, definition, progress=lambda done, _total: stages.mark(STEPS[done - 1]))
    replayed = time.perf_counter() - started
    stages.mark("return")
    daily = result.daily()
    stages.mark("daily()")
    customers = result.per_customer()
    stages.mark("per_customer()")
    total, cpu = time.perf_counter() - started, _cpu() - cpu
    peak = _peak_mib()
    totals = result.totals()
    top = result.per_customer(top=TOP)
    measured: dict[str, object] = {
        "seconds": total,
        "cpu_seconds": cpu,
        "replay_seconds": replayed,
        "stages": stages.stages,
        "events": result.events_processed,
        "issued": str(totals["issued"]),
        "issuances": totals["issuances"],
        "failed": totals["failed"],
        "days": int(daily["day"].nunique()),
        "customers": len(customers),
        "top_customers": {str(c): str(v) for c, v in zip(top["customer_id"], top["issued"], strict=True)},
        "peak_mib": peak,
    }
    if output:
        materialised = time.perf_counter()
        measured["rows"] = sum(batch.num_rows for batch in result.batches())
        measured["materialise_seconds"] = time.perf_counter() - materialised
        with tempfile.TemporaryDirectory() as directory:
            written = time.perf_counter()
            result.write(Path(directory) / "issuances.parquet")
            measured["write_seconds"] = time.perf_counter() - written
        measured["peak_with_write_mib"] = _peak_mib()
    return measured


def measure_hand(path: Path) -> dict[str, object]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    started, cpu = time.perf_counter(), _cpu()
    stages = Stages()
    con.execute(
        f"CREATE TEMP TABLE totals AS SELECT file_row_number AS pos, customer_id, "
        f"CAST(epoch_us(occurred_at) // 86400000000 AS INTEGER) AS day, {HAND_TOTAL} AS total "
        f"FROM read_parquet('{path}', file_row_number = true)"
    )
    stages.mark("per-event totals")
    con.sql("SELECT day, sum(total) FROM totals GROUP BY day ORDER BY day").fetchall()
    stages.mark("daily")
    customers = con.sql("SELECT customer_id, sum(total) AS issued FROM totals GROUP BY customer_id").to_arrow_table()
    stages.mark("per customer")
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    ((issued, events),) = con.sql("SELECT sum(total), count(*) FROM totals").fetchall()
    top = con.sql(
        f"SELECT customer_id, sum(total) AS issued FROM totals GROUP BY customer_id "
        f"ORDER BY issued DESC, customer_id LIMIT {TOP}"
    ).fetchall()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "stages": stages.stages,
        "events": int(events),
        "customers": customers.num_rows,
        "issued_minor": int(issued),
        "top_customers": {customer: int(total) for customer, total in top},
        "peak_mib": _peak_mib(),
    }


def _generated(n_events: int, n_customers: int) -> Path:
    """The events file, generated in a process of its own: every process this one starts counts its peak memory
    in their own (benchmarks/replay_cli.py), so this one must stay small."""
    command = [sys.executable, __file__, "--measure", "generate", "--events", str(n_events)]
    command += ["--customers", str(n_customers)]
    return Path(subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout.strip())


def _run(mode: str, path: Path, ceiling: str | None = None, output: bool = False) -> dict[str, object]:
    command = [sys.executable, __file__, "--measure", mode, "--file", str(path)]
    if ceiling:
        command += ["--ceiling", ceiling]
    if output:
        command += ["--output"]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(text.strip().splitlines()[-1])
    return result


def _f(run: dict[str, object], key: str) -> float:
    return float(str(run[key]))


def _stage_line(run: dict[str, object]) -> str:
    stages = run["stages"]
    assert isinstance(stages, dict)
    return "; ".join(f"{label} {wall:.2f}/{cpu:.2f}" for label, (wall, cpu) in stages.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (replay, hand-written, replay with ceiling)")
    parser.add_argument("--quick", action="store_true", help="200,000 events, 20,000 customers, 1 round")
    parser.add_argument("--file", help="events file (Parquet, in occurred_at order) instead of the generated one")
    parser.add_argument("--spark", action="store_true", help="also time the CLI's Spark engine (informational)")
    parser.add_argument("--headline-only", action="store_true", help="only the CLI against hand-written SQL")
    parser.add_argument("--measure", choices=["replay", "hand", "generate"], help=argparse.SUPPRESS)
    parser.add_argument("--ceiling", help=argparse.SUPPRESS)
    parser.add_argument("--output", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.events, args.customers, args.repeat = 200_000, 20_000, 1
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.measure == "replay":
        print(json.dumps(measure_replay(Path(args.file), args.ceiling, args.output)))
        return
    if args.measure == "hand":
        print(json.dumps(measure_hand(Path(args.file))))
        return
    if args.measure == "generate":
        print(events_file(args.events, args.customers))
        return

    path = Path(args.file) if args.file else _generated(args.events, args.customers)
    print(f"before: {load_average()}")
    print(f"speed probe: {speed_probe()} ms (fixed pure-Python work; lower is quicker)")
    headline = compare(path, args.repeat, args.spark)
    if args.headline_only:
        print(f"after: {load_average()}; speed probe: {speed_probe()} ms")
        return
    print("secondary: in-process replay() and its summaries against hand-written SQL of per-event totals")
    runs: dict[str, list[dict[str, object]]] = {"free": [], "hand": [], "bound": []}
    ceiling = ""
    for round_ in range(args.repeat):
        first = round_ == 0
        runs["free"].append(_run("replay", path, output=first))
        if first:
            issued_minor = int(str(runs["free"][0]["issued"]).replace(".", ""))
            ceiling = f"{issued_minor // 100 // 3}"  # binds about a third of the way through the history
        runs["hand"].append(_run("hand", path))
        runs["bound"].append(_run("replay", path, ceiling, output=first))
        free, hand = runs["free"][-1], runs["hand"][-1]
        assert int(str(free["issued"]).replace(".", "")) == hand["issued_minor"], (free["issued"], hand)
        assert free["customers"] == hand["customers"], (free["customers"], hand["customers"])
        hand_top = hand["top_customers"]
        assert isinstance(hand_top, dict)
        expected_top = {c: f"{v // 100}.{v % 100:02d}" for c, v in hand_top.items()}
        assert free["top_customers"] == expected_top, (free["top_customers"], expected_top)
        print(f"round {round_ + 1}: {load_average()}")
        for label, run in (
            ("replay, no ceiling", free),
            ("hand-written SQL", hand),
            ("replay, ceiling", runs["bound"][-1]),
        ):
            seconds, cpu = _f(run, "seconds"), _f(run, "cpu_seconds")
            print(f"  {label:<20} {seconds:6.2f} s (CPU {cpu:6.2f} s); stages, wall/CPU s: {_stage_line(run)}")
    n = int(str(runs["free"][0]["events"]))
    print(f"events: {n:,} from {path.name}; 20 rules; 4 event types; median of {args.repeat} round(s)")
    labels = (("replay, no ceiling", "free"), (f"replay, ceiling {ceiling}", "bound"), ("hand-written SQL", "hand"))
    for label, mode in labels:
        seconds = statistics.median(_f(run, "seconds") for run in runs[mode])
        cpu = statistics.median(_f(run, "cpu_seconds") for run in runs[mode])
        peak = max(_f(run, "peak_mib") for run in runs[mode])
        print(f"{label:<28} {seconds:8.2f} s (CPU {cpu:6.2f} s)  {n / seconds:12,.0f} events/s  peak {peak:7.0f} MiB")
        first_run = runs[mode][0]
        if "write_seconds" in first_run:
            print(
                f"{'':<28} {first_run['rows']:,} issuance rows materialised (Arrow, in order): "
                f"{_f(first_run, 'materialise_seconds'):.2f} s; written to Parquet: "
                f"{_f(first_run, 'write_seconds'):.2f} s (peak {_f(first_run, 'peak_with_write_mib'):.0f} MiB); "
                f"{first_run['issuances']:,} issued, {first_run['failed']:,} failed"
            )
    pairs = list(zip(runs["free"], runs["hand"], strict=True))
    wall = statistics.median(_f(f, "seconds") / _f(h, "seconds") for f, h in pairs)
    cpu_ratio = statistics.median(_f(f, "cpu_seconds") / _f(h, "cpu_seconds") for f, h in pairs)
    print(
        f"ratio general / hand-written (no ceiling, median of rounds): {wall:.2f} wall-clock, {cpu_ratio:.2f} CPU time"
    )
    print(f"headline (above): ratio CLI / hand-written SQL writing the same rows {headline:.2f}")
    print(f"after: {load_average()}; speed probe: {speed_probe()} ms; this process peaked at {own_peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
