"""Replay benchmark of issue 18: caps, a budget and reversals on the 10M-event benchmark history.

The history is benchmarks/replay.py's (10,000,000 events, 1,000,000 customers, cached under data/bench/) with a
refund stream added: about 5% of the orders are refunded (`order.refunded`, `order_id` naming the order,
`refund_amount` the whole order or part of it), mostly hours to days after the order, some twice, and a few
delivered before their order (they are processed right after it). The programme is the benchmark's twenty rules
(benchmarks/replay_programme.json) with, added by this script:
- caps: rule 0 (5% of the order) at most 20 STAR per customer and day, rule 11 (0.10 per single drink) at most 3
  rewards per customer and week, and the programme at most 150 STAR per customer and month;
- a budget per day, set from the plain replay's issuance so that it runs out on the busiest days only;
- a reverse rule on refunds, `refund_amount` over the order's `amount`, clawback `available`.

Each round replays, in fresh subprocesses (so that each peak memory, ru_maxrss, is its own), the same history
through the programme without these features and with them, one after the other (so that the machine's load hits
them alike): seconds, CPU, peak memory, and the ratio with / without (median of the rounds). Each replay computes
its issuance table, totals(), daily() and per_customer(). Peak memory must stay within 2 GiB.

    python benchmarks/replay_caps_reversals.py [--events 10000000] [--customers 1000000] [--repeat 3]
    python benchmarks/replay_caps_reversals.py --quick          # 200,000 events, 20,000 customers, 1 round
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from machine import speed_probe  # benchmarks/machine.py, beside this script
from replay import CACHE, PROGRAMME, Stages, events_file  # benchmarks/replay.py
from replay_cli import load_average, own_peak_mib

REFUND_SHARE = 0.05  # of the orders
LIMIT_MIB = 2048


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def with_refunds(n_events: int, n_customers: int) -> Path:
    """The benchmark history with its refund stream (generated once, cached)."""
    path = CACHE / f"events_{n_events}_{n_customers}_refunds.parquet"
    if path.exists():
        return path
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    started = time.perf_counter()
    base = pq.read_table(events_file(n_events, n_customers))
    rng = np.random.default_rng(18)
    orders = np.flatnonzero(np.asarray(pc.equal(base.column("type"), "order.completed").to_numpy(zero_copy_only=False)))
    chosen = np.sort(rng.choice(orders, size=int(len(orders) * REFUND_SHARE), replace=False))
    again = chosen[rng.random(len(chosen)) < 0.1]  # a tenth refunded twice (two partial refunds)
    picked = np.concatenate([chosen, again])
    times = base.column("occurred_at").cast(pa.timestamp("us", tz="UTC")).to_numpy().astype("datetime64[us]")
    stamps = times.view(np.int64)[picked]
    delay = (rng.exponential(3 * 86_400, len(picked)) * 1_000_000).astype(np.int64)
    early = rng.random(len(picked)) < 0.01  # delivered before their order
    delay[early] = -(rng.integers(1, 3_600, int(early.sum())) * 1_000_000)
    cents = np.asarray(base.column("amount").cast(pa.float64()).to_numpy(zero_copy_only=False))[picked]
    cents = np.nan_to_num(cents * 100).astype(np.int64)
    partial = rng.random(len(picked)) < 0.4
    share = np.where(partial, rng.integers(10, 90, len(picked)), 100)
    refund_cents = cents * share // 100
    instant = pa.timestamp("us", tz="UTC")
    refunds = pa.table(
        {
            "external_event_id": pa.array([f"rf-{i}" for i in range(len(picked))], pa.string()),
            "type": pa.array(["order.refunded"] * len(picked), pa.string()),
            "customer_id": base.column("customer_id").take(pa.array(picked)),
            "occurred_at": pa.array(stamps + delay, instant),
            "order_id": base.column("external_event_id").take(pa.array(picked)),
            "refund_amount": pa.array([Decimal(int(c)).scaleb(-2) for c in refund_cents], pa.decimal128(12, 2)),
        }
    )
    schema = base.schema.set(base.schema.get_field_index("occurred_at"), pa.field("occurred_at", instant))
    history = base.cast(schema)
    history = history.append_column("order_id", pa.nulls(history.num_rows, pa.string()))
    history = history.append_column("refund_amount", pa.nulls(history.num_rows, pa.decimal128(12, 2)))
    for field in history.schema:
        if field.name not in refunds.column_names:
            refunds = refunds.append_column(field, pa.nulls(refunds.num_rows, field.type))
    merged = pa.concat_tables([history, refunds.select(history.column_names).cast(history.schema)])
    merged = merged.take(pc.sort_indices(merged, sort_keys=[("occurred_at", "ascending")]))  # stable
    temporary = path.with_suffix(".tmp")
    pq.write_table(merged, temporary)
    temporary.replace(path)
    print(f"added {len(picked):,} refunds in {time.perf_counter() - started:.1f} s -> {path}", file=sys.stderr)
    return path


def featured(budget: str) -> dict[str, Any]:
    """The benchmark programme with caps, a daily budget and a reverse rule on refunds."""
    payload: dict[str, Any] = json.loads(PROGRAMME.read_text())
    payload["programme"]["name"] = "Benchmark: twenty rules with caps, a budget and refunds"
    payload["programme"]["limits"] = [{"period": "month", "max_amount": "500"}]
    payload["programme"]["budget"] = {"period": "day", "max_amount": budget}
    payload["programme"]["clawback"] = "available"
    payload["rules"][0]["limits"] = [{"period": "day", "max_amount": "20"}]
    payload["rules"][11]["limits"] = [{"period": "week", "max_count": 3}]
    reverse = {
        "type": "reverse",
        "original": {"field": "order_id"},
        "fraction": {"field": "refund_amount", "of": "amount"},
    }
    payload["rules"].append({"event_type": "order.refunded", "actions": [reverse]})
    return payload


def measure(path: Path, programme: dict[str, Any] | None) -> dict[str, object]:
    from rewards_lab.contract.programme_file import load_programme, parse_programme
    from rewards_lab.replay.engine import STEPS, replay

    definition = load_programme(PROGRAMME) if programme is None else parse_programme(programme)
    started, cpu = time.perf_counter(), _cpu()
    stages = Stages()
    result = replay(path, definition, progress=lambda done, _total: stages.mark(STEPS[done - 1]))
    stages.mark("return")
    totals = result.totals()
    stages.mark("totals()")
    daily = result.daily()
    stages.mark("daily()")
    customers = result.per_customer()
    stages.mark("per_customer()")
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    measured: dict[str, object] = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "stages": stages.stages,
        "events": result.events_processed,
        "totals": {k: str(v) if not isinstance(v, dict) else v for k, v in totals.items()},
        "days": int(daily["day"].nunique()),
        "customers": len(customers),
        "peak_mib": _peak_mib(),
    }
    if programme is not None:
        name = result._name  # noqa: SLF001 - the benchmark reports how much went through the sequential pass
        counts = result.con.sql(
            f"SELECT (SELECT count(*) FROM {name}_ops), (SELECT count_if(op = 0) FROM {name}_ops), "
            f"(SELECT count_if(op = 1) FROM {name}_ops), (SELECT count(*) FROM {name}_bind)"
        ).fetchall()[0]
        measured["pass"] = dict(zip(("operations", "grants", "items", "binding_counters"), counts, strict=True))
    return measured


def _run(path: Path, budget: str | None) -> dict[str, object]:
    command = [sys.executable, __file__, "--measure", "--file", str(path)]
    if budget is not None:
        command += ["--budget", budget]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(text.strip().splitlines()[-1])
    return result


def _stage_line(run: dict[str, object]) -> str:
    stages = run["stages"]
    assert isinstance(stages, dict)
    return "; ".join(f"{label} {wall:.2f}/{cpu:.2f}" for label, (wall, cpu) in stages.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 events, 20,000 customers, 1 round")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--budget", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        programme = None if args.budget is None else featured(args.budget)
        print(json.dumps(measure(Path(args.file), programme), default=str))
        return
    if args.quick:
        args.events, args.customers, args.repeat = 200_000, 20_000, 1
    path = with_refunds(args.events, args.customers)
    print(f"before: {load_average()}")
    print(f"speed probe: {speed_probe()} ms (fixed pure-Python work; lower is quicker)")
    runs: dict[str, list[dict[str, object]]] = {"plain": [], "featured": []}
    budget = ""
    for round_ in range(args.repeat):
        runs["plain"].append(_run(path, None))
        if round_ == 0:  # a day's budget the busiest days run out of: 1.4 times the average day's issuance
            plain = runs["plain"][0]
            totals = plain["totals"]
            assert isinstance(totals, dict)
            budget = str(int(float(totals["issued"]) / int(str(plain["days"])) * 1.4))
        runs["featured"].append(_run(path, budget))
        print(f"round {round_ + 1}: {load_average()}")
        for label, run in (("without", runs["plain"][-1]), ("with caps, budget, refunds", runs["featured"][-1])):
            print(
                f"  {label:<28} {float(str(run['seconds'])):7.2f} s (CPU {float(str(run['cpu_seconds'])):7.2f} s) "
                f"peak {float(str(run['peak_mib'])):6.0f} MiB; stages wall/CPU s: {_stage_line(run)}"
            )
    n = int(str(runs["plain"][0]["events"]))
    print(f"events: {n:,} ({path.name}); budget {budget} STAR per day; median of {args.repeat} round(s)")
    for label, mode in (("without caps, budget, refunds", "plain"), ("with them", "featured")):
        seconds = statistics.median(float(str(run["seconds"])) for run in runs[mode])
        cpu = statistics.median(float(str(run["cpu_seconds"])) for run in runs[mode])
        peak = max(float(str(run["peak_mib"])) for run in runs[mode])
        print(f"{label:<30} {seconds:8.2f} s (CPU {cpu:7.2f} s) {n / seconds:12,.0f} events/s  peak {peak:6.0f} MiB")
    pairs = list(zip(runs["featured"], runs["plain"], strict=True))
    ratio = statistics.median(float(str(f["seconds"])) / float(str(p["seconds"])) for f, p in pairs)
    cpu_ratio = statistics.median(float(str(f["cpu_seconds"])) / float(str(p["cpu_seconds"])) for f, p in pairs)
    print(f"ratio with / without (median of rounds): {ratio:.2f} wall-clock, {cpu_ratio:.2f} CPU time")
    first = runs["featured"][0]
    print(f"with them: {json.dumps(first['totals'])}")
    print(f"sequential pass: {json.dumps(first.get('pass'))}")
    peak = max(float(str(run["peak_mib"])) for mode in runs.values() for run in mode)
    print(f"peak memory {peak:.0f} MiB: {'within' if peak <= LIMIT_MIB else 'ABOVE'} the {LIMIT_MIB} MiB limit")
    print(f"after: {load_average()}; speed probe: {speed_probe()} ms; this process peaked at {own_peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
