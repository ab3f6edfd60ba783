"""Replay benchmark of issue 19: the benchmark programme with expiry, against the same programme without it.

The history is benchmarks/replay.py's (cached under data/bench/). Three replays of the same history, alternately
(so that the machine's load hits them alike), each computing its totals(), daily() and per_customer():
- `plain`: the benchmark's twenty rules (benchmarks/replay_programme.json);
- `expiry`: the same with `programme.expiry` = at the end of the month after the reward's (closed form: no lot is
  consumed, every reward expires whole, in SQL);
- `expiry+redemptions`: the same with redemptions by a tenth of the customers at random times (their lots go
  through the sequential pass, FIFO, the worker before each of their operations).
Printed: seconds per replay (median of the rounds) and the ratio to `plain`.

    python benchmarks/replay_expiry.py [--events 200000] [--customers 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from machine import speed_probe  # benchmarks/machine.py, beside this script
from replay import PROGRAMME, events_file  # benchmarks/replay.py

EXPIRY = {"at_end_of": "month", "after": 1}


def _redemptions(path: Path, share: float = 0.1) -> Any:
    """A tenth of the history's customers each redeem 1 to 50 STAR once, at a random time of the history."""
    import numpy as np
    import pandas as pd
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["customer_id", "occurred_at"])
    customers = np.asarray(pc.unique(table.column("customer_id")).to_pylist(), dtype=object)
    rng = np.random.default_rng(19)
    chosen = rng.choice(customers, size=max(1, int(len(customers) * share)), replace=False)
    times = pc.min_max(table.column("occurred_at"))
    low, high = (pd.Timestamp(times[k].as_py()) for k in ("min", "max"))
    spread = rng.random(len(chosen)) * (high - low).total_seconds()
    return pd.DataFrame(
        {
            "customer_id": chosen,
            "amount": [str(v) for v in rng.integers(1, 51, len(chosen))],
            "occurred_at": [low + pd.Timedelta(seconds=float(s)) for s in spread],
        }
    )


def _once(path: Path, payload: dict[str, Any], redemptions: Any) -> tuple[float, dict[str, Any]]:
    from rewards_lab.contract.programme_file import parse_programme
    from rewards_lab.replay.engine import replay

    started = time.perf_counter()
    result = replay(path, parse_programme(payload), redemptions=redemptions, progress=False)
    totals = result.totals()
    result.daily()
    result.per_customer()
    return time.perf_counter() - started, totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = events_file(args.events, args.customers)
    print(f"speed probe: {speed_probe()} ms (fixed pure-Python work; lower is quicker)")
    plain: dict[str, Any] = json.loads(PROGRAMME.read_text())
    expiring = json.loads(json.dumps(plain))
    expiring["programme"]["expiry"] = EXPIRY
    spent = _redemptions(path)
    runs: dict[str, list[float]] = {"plain": [], "expiry": [], "expiry+redemptions": []}
    totals: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):
        for label, payload, redemptions in (
            ("plain", plain, None),
            ("expiry", expiring, None),
            ("expiry+redemptions", expiring, spent),
        ):
            seconds, totals[label] = _once(path, payload, redemptions)
            runs[label].append(seconds)
    base = statistics.median(runs["plain"])
    print(f"{args.events:,} events, {args.customers:,} customers, {args.repeat} round(s), {len(spent):,} redemptions")
    for label, seconds in runs.items():
        median = statistics.median(seconds)
        found = totals[label]
        extra = f", expired {found['expired']} in {found['expired_lots']:,} lots" if "expired" in found else ""
        print(f"{label:>20}: {median:6.2f} s ({median / base:4.2f}x plain); issued {found['issued']}{extra}")


if __name__ == "__main__":
    main()
