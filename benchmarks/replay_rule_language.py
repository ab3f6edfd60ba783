"""Replay benchmark of the rule language (issue 17): a programme of groups, strings, lists, presence, time fields in
a timezone, a window, priorities with stop_processing and customer facts, against the benchmark's numeric
programme, over the same history (data/bench/events_<n>_<customers>.parquet, made by benchmarks/replay.py).

The history's data are numbers only, so the strings come from a customers table generated for its customers
(tier, country, segments) and from `occurred_at.date`. Both programmes are replayed in this process (DuckDB),
`--repeat` times each, alternately; the script prints the medians, their ratio and the rows the Python fallback
evaluated (`python_rows`: 0 means every event ran in SQL).

    python benchmarks/replay_rule_language.py [--events 200000] [--customers 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pyarrow as pa
from replay import PROGRAMME, events_file  # benchmarks/replay.py, beside this script

from rewards_lab.contract.programme_file import ProgrammeDefinition, load_programme, parse_programme
from rewards_lab.replay.engine import replay

TIERS = ("gold", "silver", "bronze", "")
COUNTRIES = ("FR", "DE", "ES", "IT", "GB")
RULES = [
    {  # priority first: VIP orders on a weekend in Paris, and nothing else for that order
        "event_type": "order.completed",
        "priority": -1,
        "stop_processing": True,
        "conditions": [
            {"field": "customer.segments", "operator": "contains", "value": "vip"},
            {"field": "occurred_at.weekday", "operator": "in", "value": [6, 7]},
        ],
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.1}}],
    },
    {
        "event_type": "order.completed",
        "conditions": [
            {
                "any": [
                    {"field": "customer.attributes.tier", "operator": "eq", "value": "gold"},
                    {
                        "all": [
                            {"field": "amount", "operator": "between", "value": [50, 500]},
                            {"not": {"field": "channel_code", "operator": "in", "value": [2, 3]}},
                        ]
                    },
                ]
            },
            {"field": "customer.country", "operator": "in", "value": ["FR", "DE", "ES"]},
        ],
        "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.05}}],
    },
    {
        "event_type": "order.completed",
        "conditions": [
            {"field": "occurred_at.date", "operator": "between", "value": ["2026-01-10", "2026-01-20"]},
            {"field": "occurred_at.hour", "operator": "lt", "value": 12},
            {"field": "drinks", "operator": "exists"},
        ],
        "actions": [{"type": "issue", "amount": {"fixed": "1.00"}}],
    },
    {
        "event_type": "review.posted",
        "conditions": [
            {
                "any": [
                    {"field": "photos", "operator": "gte", "value": 3},
                    {"field": "customer.attributes.tier", "operator": "neq", "value": "bronze"},
                ]
            },
            {"not": {"field": "cabin_class", "operator": "exists"}},
        ],
        "actions": [{"type": "issue", "amount": {"fixed": "2.50"}}],
    },
    {
        "event_type": "customer.signed_up",
        "conditions": [{"field": "customer.attributes.age", "operator": "between", "value": [18, 25]}],
        "actions": [{"type": "issue", "amount": {"fixed": "10.00"}}],
    },
    {"event_type": "referral.converted", "actions": [{"type": "issue", "amount": {"fixed": "25.00"}}]},
]


def rule_language_programme() -> ProgrammeDefinition:
    return parse_programme(
        {
            "programme": {
                "name": "Benchmark: the rule language",
                "timezone": "Europe/Paris",
                "starts_at": "2026-01-03T00:00:00+01:00",
            },
            "asset": {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2},
            "rules": RULES,
        }
    )


def customers_table(path: Path) -> pa.Table:
    """One row per customer of the history: a tier and an age (attribute columns), a country, segments."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ids = pc.unique(pq.read_table(path, columns=["customer_id"]).column(0)).to_pylist()
    ids.sort()
    return pa.table(
        {
            "id": ids,
            "country": [COUNTRIES[i % len(COUNTRIES)] for i in range(len(ids))],
            "segments": pa.array(
                [["vip"] if i % 7 == 0 else ["active"] for i in range(len(ids))], pa.list_(pa.string())
            ),
            "tier": [TIERS[i % len(TIERS)] for i in range(len(ids))],
            "age": pa.array([18 + i % 50 for i in range(len(ids))], pa.int32()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = events_file(args.events, args.customers)
    customers = customers_table(path)
    programmes = {"numeric (benchmarks/replay_programme.json)": (load_programme(PROGRAMME), None)}
    programmes["rule language (customers table)"] = (rule_language_programme(), customers)
    seconds: dict[str, list[float]] = {label: [] for label in programmes}
    fallback: dict[str, int] = {}
    issued: dict[str, object] = {}
    for _ in range(args.repeat):
        for label, (definition, table) in programmes.items():
            started = time.perf_counter()
            result = replay(path, definition, customers=table, progress=False)
            totals = result.totals()
            seconds[label].append(time.perf_counter() - started)
            fallback[label], issued[label] = result.python_rows, totals["issued"]
    print(f"events: {args.events:,} from {path.name}; customers: {customers.num_rows:,}; median of {args.repeat}")
    for label in programmes:
        median = statistics.median(seconds[label])
        rate = f"{args.events / median:10,.0f} events/s"
        print(f"{label:<42} {median:6.2f} s {rate}  python_rows {fallback[label]}  issued {issued[label]}")
    labels = list(programmes)
    ratio = statistics.median(seconds[labels[1]]) / statistics.median(seconds[labels[0]])
    print(f"ratio rule language / numeric: {ratio:.2f}")


if __name__ == "__main__":
    main()
