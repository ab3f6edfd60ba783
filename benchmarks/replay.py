"""Replay benchmark: 10,000,000 events (Parquet, 1,000,000 customers, 4 event types) through a 20-rule programme.

Times, each in a fresh subprocess (so that its peak memory, ru_maxrss, is its own):
- replay without a supply ceiling, and with a binding one, from reading the file to the issuance table and its
  daily and per-customer summaries. The issuance table is stored as one row per event with the amount of every
  rule action (docs/decisions.md, "Replay performance (session 3)"); materialising it as one row per issuance
  (Arrow, in processing order) and writing it to Parquet are timed separately;
- a hand-written SQL query computing the same per-event totals (and daily and per-customer totals) for the same
  rules, and the ratio general / hand-written. The totals of both are checked equal.
The events are generated once and cached under data/bench/ (gitignored).

    python benchmarks/replay.py [--events 10000000] [--customers 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMME = ROOT / "benchmarks" / "replay_programme.json"
CACHE = ROOT / "data" / "bench"

# The benchmark programme's twenty rules, written by hand: per-event total in minor units (2 decimals).
# `amount` is DECIMAL(12, 2): amount * 100 is its integer cents; `x * r // 100` truncates a positive product.
HAND_TOTAL = """
    CASE WHEN type = 'order.completed' THEN
        (CASE WHEN amount >= 20 THEN CAST(amount * 100 AS BIGINT) * 5 // 100 ELSE 0 END)
      + (CASE WHEN amount >= 100 THEN CAST(amount * 100 AS BIGINT) * 2 // 100 ELSE 0 END)
      + (CASE WHEN amount < 20 AND amount >= 5 THEN 50 ELSE 0 END)
      + (CASE WHEN channel_code = 3 THEN 100 ELSE 0 END)
      + (CASE WHEN channel_code = 2 AND amount >= 50 THEN CAST(amount * 100 AS BIGINT) // 100 ELSE 0 END)
      + (CASE WHEN size >= 3 AND drinks > 0 THEN drinks * 100 ELSE 0 END)
      + (CASE WHEN size < 3 AND drinks > 0 THEN drinks * 50 ELSE 0 END)
      + (CASE WHEN drinks >= 4 THEN 200 ELSE 0 END)
      + (CASE WHEN amount >= 500 THEN 2500 ELSE 0 END)
      + (CASE WHEN channel_code = 1 AND size = 4 THEN 75 ELSE 0 END)
      + (CASE WHEN amount > 35.5 AND amount <= 60 THEN CAST(amount * 100 AS BIGINT) * 15 // 1000 ELSE 0 END)
      + (CASE WHEN drinks = 1 AND channel_code <> 2 THEN 10 ELSE 0 END)
    WHEN type = 'customer.signed_up' THEN 1000 + 500
    WHEN type = 'review.posted' THEN
        (CASE WHEN photos >= 1 THEN 250 ELSE 0 END)
      + (CASE WHEN photos >= 3 THEN photos * 50 ELSE 0 END)
      + (CASE WHEN photos = 0 THEN 25 ELSE 0 END)
      + (CASE WHEN photos > 4 THEN 500 ELSE 0 END)
    WHEN type = 'referral.converted' THEN 2500 + (CASE WHEN amount >= 0 THEN 500 ELSE 0 END)
    ELSE 0 END"""


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


def measure_replay(path: Path, ceiling: str | None) -> dict[str, object]:
    from rewards_lab.lab.programme_file import load_programme
    from rewards_lab.lab.replay import replay

    definition = load_programme(PROGRAMME)
    if ceiling is not None:
        definition = definition.model_copy(
            update={"asset": definition.asset.model_copy(update={"supply_ceiling": ceiling})}
        )
    started, cpu = time.perf_counter(), _cpu()
    result = replay(path, definition, progress=False)
    replayed = time.perf_counter() - started
    daily = result.daily()
    customers = result.per_customer()
    total, cpu = time.perf_counter() - started, _cpu() - cpu
    peak = _peak_mib()
    totals = result.totals()
    materialised = time.perf_counter()
    rows = sum(batch.num_rows for batch in result.batches())
    materialise_seconds = time.perf_counter() - materialised
    with tempfile.TemporaryDirectory() as directory:
        written = time.perf_counter()
        result.write(Path(directory) / "issuances.parquet")
        write_seconds = time.perf_counter() - written
    top = customers.head(5)
    return {
        "seconds": total,
        "cpu_seconds": cpu,
        "replay_seconds": replayed,
        "write_seconds": write_seconds,
        "materialise_seconds": materialise_seconds,
        "rows": rows,
        "events": result.events_processed,
        "issued": str(totals["issued"]),
        "issuances": totals["issuances"],
        "failed": totals["failed"],
        "days": int(daily["day"].nunique()),
        "customers": len(customers),
        "top_customers": {str(c): str(v) for c, v in zip(top["customer_id"], top["issued"], strict=True)},
        "peak_mib": peak,
        "peak_with_write_mib": _peak_mib(),
    }


def measure_hand(path: Path) -> dict[str, object]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    started, cpu = time.perf_counter(), _cpu()
    con.execute(
        f"CREATE TEMP TABLE totals AS SELECT file_row_number AS pos, customer_id, "
        f"CAST(epoch_us(occurred_at) // 86400000000 AS INTEGER) AS day, {HAND_TOTAL} AS total "
        f"FROM read_parquet('{path}', file_row_number = true)"
    )
    con.sql("SELECT day, sum(total) FROM totals GROUP BY day ORDER BY day").fetchall()
    top = con.sql(
        "SELECT customer_id, sum(total) AS issued FROM totals GROUP BY customer_id ORDER BY issued DESC, customer_id"
    ).to_arrow_table()
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    ((issued, events),) = con.sql("SELECT sum(total), count(*) FROM totals").fetchall()
    head = top.slice(0, 5).to_pylist()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "events": int(events),
        "issued_minor": int(issued),
        "top_customers": {row["customer_id"]: int(row["issued"]) for row in head},
        "peak_mib": _peak_mib(),
    }


def _run(mode: str, path: Path, ceiling: str | None = None) -> dict[str, object]:
    command = [sys.executable, __file__, "--measure", mode, "--file", str(path)]
    if ceiling:
        command += ["--ceiling", ceiling]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--measure", choices=["replay", "hand"], help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--ceiling", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure == "replay":
        print(json.dumps(measure_replay(Path(args.file), args.ceiling)))
        return
    if args.measure == "hand":
        print(json.dumps(measure_hand(Path(args.file))))
        return

    path = events_file(args.events, args.customers)
    free = _run("replay", path)
    issued_minor = int(round(float(str(free["issued"])) * 100))
    ceiling = f"{issued_minor // 100 // 3}"  # binds about a third of the way through the history
    bound = _run("replay", path, ceiling)
    hand = _run("hand", path)
    exact_free = str(free["issued"]).replace(".", "")
    assert int(exact_free) == hand["issued_minor"], (free["issued"], hand["issued_minor"])
    n = int(str(free["events"]))
    print(f"events: {n:,} from {path.name}; 20 rules; 4 event types")
    for label, run in (("replay, no ceiling", free), (f"replay, ceiling {ceiling}", bound), ("hand-written SQL", hand)):
        seconds = float(str(run["seconds"]))
        cpu = float(str(run["cpu_seconds"]))
        print(
            f"{label:<28} {seconds:8.2f} s (CPU {cpu:6.2f} s)  {n / seconds:12,.0f} events/s  "
            f"peak {float(str(run['peak_mib'])):7.0f} MiB"
        )
        if "write_seconds" in run:
            print(
                f"{'':<28} {run['rows']:,} issuance rows materialised (Arrow, in order): "
                f"{float(str(run['materialise_seconds'])):.2f} s; written to Parquet: "
                f"{float(str(run['write_seconds'])):.2f} s; {run['issuances']:,} issued, {run['failed']:,} failed"
            )
    wall = float(str(free["seconds"])) / float(str(hand["seconds"]))
    cpu_ratio = float(str(free["cpu_seconds"])) / float(str(hand["cpu_seconds"]))
    print(f"ratio general / hand-written (no ceiling): {wall:.2f} wall-clock, {cpu_ratio:.2f} CPU time")


if __name__ == "__main__":
    main()
