"""Benchmark: how much slower a DuckDB query runs on one thread while another Python thread is busy.

Why it matters: overlapping the batch path's Python half (deciding batch N+1) with its DuckDB half (writing
batch N) only pays if DuckDB runs without the GIL. The duckdb Python package releases the GIL while a query
executes, but takes it again between any two execution tasks to check for signals (KeyboardInterrupt). Beside a
thread that keeps the GIL busy, each of those hand-offs waits up to the interpreter's switch interval, so the
query slows down many times over while the Python thread hardly notices. The figures are in
reports/perf/2026-11-23-batch-posting-session6.md ("Batch posting path (session 6)").

For each switch interval, the same aggregate runs alone and then beside a pure-Python loop; the loop's speed
beside the query is printed as a share of its speed alone (near 1: the two really ran on two cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

import duckdb

QUERY = "SELECT sum(x * x % 7) FROM numbers"


def _busy_loop(stop: threading.Event) -> int:
    """Pure Python holding the GIL until `stop` is set; returns how many turns it made."""
    turns = 0
    while not stop.is_set():
        turns += 1
    return turns


def _query_then_stop(con: duckdb.DuckDBPyConnection, stop: threading.Event) -> None:
    con.execute(QUERY).fetchall()
    stop.set()


def _loop_rate(seconds: float) -> float:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    started = time.perf_counter()
    timer.start()
    turns = _busy_loop(stop)
    return turns / (time.perf_counter() - started)


def measure(con: duckdb.DuckDBPyConnection, rounds: int) -> tuple[float, float, float]:
    """(query alone ms, query beside the loop ms, loop rate beside the query / alone), medians of `rounds`."""
    alone, beside, shares = [], [], []
    for _ in range(rounds):
        alone_rate = _loop_rate(0.2)
        started = time.perf_counter()
        con.execute(QUERY).fetchall()
        alone.append((time.perf_counter() - started) * 1000)
        stop = threading.Event()
        worker = threading.Thread(target=_query_then_stop, args=(con, stop))
        started = time.perf_counter()
        worker.start()
        turns = _busy_loop(stop)
        elapsed = time.perf_counter() - started
        worker.join()
        beside.append(elapsed * 1000)
        shares.append(turns / elapsed / alone_rate)
    return statistics.median(alone), statistics.median(beside), statistics.median(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--intervals-ms", type=float, nargs="+", default=[5.0, 1.0, 0.2])
    args = parser.parse_args()
    con = duckdb.connect(config={"threads": 1})  # as the service's connection
    con.execute("CREATE TABLE numbers AS SELECT range AS x FROM range(?)", [args.rows])
    print(f"duckdb {duckdb.__version__}, python {sys.version.split()[0]}, {args.rows:,} rows, threads=1")
    for interval_ms in args.intervals_ms:
        sys.setswitchinterval(interval_ms / 1000)
        alone, beside, share = measure(con, args.rounds)
        print(
            f"switch interval {interval_ms:4.1f} ms: query alone {alone:6.1f} ms, beside a busy Python thread "
            f"{beside:6.1f} ms ({beside / alone:4.1f}x); the Python loop kept {share:4.0%} of its speed",
            flush=True,
        )


if __name__ == "__main__":
    main()
