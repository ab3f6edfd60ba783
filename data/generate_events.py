"""Write a synthetic event history (seeded, sized) as Parquet, CSV or JSON lines.

python data/generate_events.py --events 20000 --customers 2000 --seed 1 --out data/sample_events.parquet
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from rewards_lab.lab.synthetic import ALL_TYPES, DEFAULT_TYPES, generate_events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--customers", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", default="2026-01-01")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--types", nargs="+", choices=ALL_TYPES, default=list(DEFAULT_TYPES))
    parser.add_argument("--out", type=Path, required=True, help=".parquet, .csv or .jsonl")
    args = parser.parse_args()
    started = time.perf_counter()
    table = generate_events(
        args.events, args.customers, seed=args.seed, start=args.start, days=args.days, types=args.types
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    suffix = args.out.suffix.lower()
    if suffix == ".parquet":
        pq.write_table(table, args.out, compression="zstd")
    else:
        options = "FORMAT CSV, HEADER true" if suffix == ".csv" else "FORMAT JSON"
        duckdb.sql(f"COPY (SELECT * FROM table) TO '{args.out}' ({options})")
    print(f"{table.num_rows:,} events -> {args.out} in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
