"""`rewards-lab replay` (the CLI, DuckDB) on feature programmes at benchmark size (issue 27).

The history is benchmarks/replay_caps_reversals.py's: the 10M-event benchmark history with its 5% refund stream
(cached under data/bench/). The programmes are the benchmark's twenty rules (benchmarks/replay_programme.json)
alone (the streaming path, for reference) and with, one at a time, then all together:
- caps: rule 0 at most 20 STAR per customer and day, rule 11 at most 3 rewards per week, the programme 150 a month;
- a budget: per day, 1.05 times the plain replay's average day (the busier days run out);
- a reverse rule on refunds (`refund_amount` over the order's `amount`, clawback `available`);
- expiry: points expire 30 days after they are issued.

Each is one CLI process (benchmarks/replay_cli.py's run_measured: wall-clock from start to exit, its own peak
resident set), run one after the other. Checked (in a process of its own, outside the timed part): the exit code
is 0 with the JSON summary (a failure is the CLI's error envelope: printed, and the run fails); the file is in seq
order; its issued rows of kind `issue` are the issuances and the total the CLI printed. Peak memory must stay
within LIMIT_MIB.

    python benchmarks/replay_cli_features.py [--events 10000000] [--customers 1000000]
    python benchmarks/replay_cli_features.py --quick          # 200,000 events, 20,000 customers
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

from machine import speed_probe  # benchmarks/machine.py, beside this script
from replay import PROGRAMME  # benchmarks/replay.py
from replay_caps_reversals import with_refunds
from replay_cli import Finished, cli_command, load_average, own_peak_mib, run_measured

LIMIT_MIB = 2048
ROOT = Path(__file__).resolve().parent.parent


def _base() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(PROGRAMME.read_text())
    return payload


def caps(payload: dict[str, Any]) -> None:
    payload["programme"]["limits"] = [{"period": "month", "max_amount": "150"}]
    payload["rules"][0]["limits"] = [{"period": "day", "max_amount": "20"}]
    payload["rules"][11]["limits"] = [{"period": "week", "max_count": 3}]


def budget(payload: dict[str, Any], per_day: str) -> None:
    payload["programme"]["budget"] = {"period": "day", "max_amount": per_day}


def reverse(payload: dict[str, Any]) -> None:
    payload["programme"]["clawback"] = "available"
    action = {
        "type": "reverse",
        "original": {"field": "order_id"},
        "fraction": {"field": "refund_amount", "of": "amount"},
    }
    payload["rules"].append({"event_type": "order.refunded", "actions": [action]})


def expiry(payload: dict[str, Any]) -> None:
    payload["programme"]["expiry"] = {"after_days": 30}


def programmes(per_day: str) -> dict[str, dict[str, Any]]:
    """The feature programmes by label, each the benchmark's rules with its features."""
    made: dict[str, dict[str, Any]] = {}
    for label, features in (
        ("caps", (caps,)),
        ("budget", (lambda p: budget(p, per_day),)),
        ("reverse rule", (reverse,)),
        ("expiry", (expiry,)),
        ("reverse and expiry", (reverse, expiry)),
        ("all four", (caps, lambda p: budget(p, per_day), reverse, expiry)),
    ):
        payload = _base()
        for feature in features:
            feature(payload)
        made[label] = payload
    return made


def check(path: Path, summary: dict[str, Any]) -> str:
    """The file is in seq order and its issued rows of kind `issue` are the printed issuances and total."""
    import duckdb
    from replay_cli import _in_seq_order

    con = duckdb.connect()
    columns = [row[0] for row in con.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()]
    issue = " AND kind = 'issue'" if "kind" in columns else ""
    ((rows, issued_rows, issued_minor),) = con.sql(
        f"SELECT count(*), count(*) FILTER (WHERE status = 'issued'{issue}), "
        f"coalesce(sum(amount_minor) FILTER (WHERE status = 'issued'{issue}), 0) FROM read_parquet('{path}')"
    ).fetchall()
    printed_minor = int(Decimal(summary["issued"]).scaleb(2))
    if issued_rows != summary["issuances"] or issued_minor != printed_minor:
        raise AssertionError(f"{path.name}: {issued_rows:,} issued rows ({issued_minor}), printed {summary}")
    if not _in_seq_order(path):
        raise AssertionError(f"{path.name}: not in seq order")
    return f"{rows:,} rows in seq order; {issued_rows:,} issued = printed, {summary['issued']} STAR"


def days_of(path: Path) -> int:
    """The UTC days the issuances of a file fall on."""
    import duckdb

    query = f"SELECT count(DISTINCT CAST(occurred_at AS DATE)) FROM read_parquet('{path}')"
    return int(duckdb.connect().sql(query).fetchall()[0][0])


def _child(*argv: str) -> str:
    """A check in a process of its own: reading the files here would grow this process, whose peak its
    children's ru_maxrss include (benchmarks/replay_cli.py)."""
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"{argv[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def _run(events: Path, programme: Path, out: Path) -> tuple[Finished, dict[str, Any]]:
    run = run_measured(cli_command(events, programme, out))
    if run.returncode != 0:
        raise AssertionError(run.failure(f"the CLI on {programme.name}"))
    return run, run.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="200,000 events, 20,000 customers")
    parser.add_argument("--only", nargs="*", help="labels to run (default: all)")
    parser.add_argument("--check", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--days", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check:
        print(check(Path(args.check[0]), json.loads(args.check[1])))
        return
    if args.days:
        print(days_of(Path(args.days)))
        return
    if args.quick:
        args.events, args.customers = 200_000, 20_000
    events = with_refunds(args.events, args.customers)
    print(f"before: {load_average()}; speed probe: {speed_probe()} ms")
    peaks: list[float] = []
    with tempfile.TemporaryDirectory(prefix="replay-cli-features-") as temporary:
        directory = Path(temporary)
        plain_file = directory / "plain.json"
        plain_file.write_text(json.dumps(_base()))
        plain, summary = _run(events, plain_file, directory / "plain.parquet")
        print(
            f"  {'plain (streamed)':<18} {plain.seconds:7.2f} s  peak {plain.peak_mib:6.0f} MiB  "
            f"{summary['issuances']:,} issued"
        )
        days = int(_child("--days", str(directory / "plain.parquet")))
        per_day = str(int(Decimal(summary["issued"]) / max(days, 1) * Decimal("1.05")))
        (directory / "plain.parquet").unlink()
        for label, payload in programmes(per_day).items():
            if args.only and label not in args.only:
                continue
            path = directory / f"{label.replace(' ', '_')}.json"
            path.write_text(json.dumps(payload))
            out = directory / f"{label.replace(' ', '_')}.parquet"
            run, summary = _run(events, path, out)
            peaks.append(run.peak_mib)
            checked = _child("--check", str(out), json.dumps(summary))
            print(f"  {label:<18} {run.seconds:7.2f} s  peak {run.peak_mib:6.0f} MiB  {checked}")
            out.unlink()
    n = int(summary["events"])
    print(f"events: {n:,} ({events.name}); budget {per_day} STAR per day; one run each, a fresh CLI process")
    worst = max(peaks, default=0.0)
    print(f"peak memory {worst:.0f} MiB: {'within' if worst <= LIMIT_MIB else 'ABOVE'} the {LIMIT_MIB} MiB limit")
    print(f"after: {load_average()}; this process peaked at {own_peak_mib():.0f} MiB")
    if worst > LIMIT_MIB:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
