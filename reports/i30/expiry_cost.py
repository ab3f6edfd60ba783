"""Issue 30 design measurement (section 5.10): what the expiry closed form costs today (one stored lot per reward)
against the aggregates it feeds computed straight from the per-event table.

    PYTHONPATH=.:benchmarks /work/main/.venv/bin/python reports/i30/expiry_cost.py [events.parquet]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from replay_expiry import EXPIRY  # type: ignore[import-not-found]  # noqa: E402

from rewards_lab.contract.programme_file import parse_programme  # noqa: E402
from rewards_lab.replay import expiry_store  # noqa: E402
from rewards_lab.replay.engine import replay  # noqa: E402

PROGRAMME = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_programme.json"
DAY_US = 86_400_000_000


def timed(payload: dict, path: Path) -> tuple[float, object]:  # type: ignore[type-arg]
    started = time.perf_counter()
    result = replay(path, parse_programme(payload), progress=False)
    result.totals()
    result.daily()
    result.per_customer()
    return time.perf_counter() - started, result


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/main/data/bench/events_1000000_100000.parquet")
    plain = json.loads(PROGRAMME.read_text())
    expiring = json.loads(json.dumps(plain))
    expiring["programme"]["expiry"] = EXPIRY
    runs: dict[str, list[float]] = {"plain": [], "expiry": []}
    result = None
    for _ in range(3):
        runs["plain"].append(timed(plain, path)[0])
        seconds, result = timed(expiring, path)
        runs["expiry"].append(seconds)
    plain_s, expiry_s = statistics.median(runs["plain"]), statistics.median(runs["expiry"])
    con, n, lay = result.con, result._name, result._layout  # noqa: SLF001
    as_of = result._expiry.as_of  # noqa: SLF001
    started = time.perf_counter()
    issued = expiry_store.issued_sql(lay, n, False)
    con.execute(  # the lots of every issued reward, as expiry_store.lots_table stores them
        f"CREATE TEMP TABLE again AS SELECT i.seq, i.customer_id, x.t, x.exp, i.amount_minor FROM ({issued}) i "
        f"JOIN {n}_xt x ON x.pos = i.seq // {lay.slots}")
    lots_s = time.perf_counter() - started
    fields = ", ".join(f"sum(greatest(p.a.c{i}, 0)) AS x{i}" for i in range(1, lay.width + 1))
    started = time.perf_counter()
    by_day = con.sql(
        f"SELECT CAST(x.exp // {DAY_US} AS INTEGER) AS day, p.a.k AS k, {fields} FROM {n}_pe p "
        f"JOIN {n}_xt x ON x.pos = p.pos WHERE x.exp <= {as_of} AND p.a.k IS NOT NULL GROUP BY ALL").fetchall()
    per_holder = con.sql(
        f"SELECT p.customer_id, sum({lay.event_total()}) FROM {n}_pe p JOIN {n}_xt x ON x.pos = p.pos "
        f"WHERE x.exp <= {as_of} AND p.a.k IS NOT NULL GROUP BY ALL").fetchall()
    aggregate_s = time.perf_counter() - started
    (lots,) = con.sql("SELECT count(*) FROM again").fetchall()[0]
    # `exp` stored in the per-event table (the plan computes it in the same projection): expired per customer is
    # one more column of per_customer's GROUP BY, expired per day one GROUP BY over events
    con.execute(f"CREATE TEMP TABLE pe_exp AS SELECT p.*, x.exp FROM {n}_pe p JOIN {n}_xt x ON x.pos = p.pos")
    total = lay.event_total()
    timings = {}
    for label, query in (
        ("per_customer as today", f"SELECT customer_id, sum({total}) FROM pe_exp GROUP BY ALL"),
        ("per_customer + expired", f"SELECT customer_id, sum({total}), sum(CASE WHEN exp <= {as_of} THEN {total} END) "
                                   "FROM pe_exp GROUP BY ALL"),
        ("expired per day and type", f"SELECT CAST(exp // {DAY_US} AS INTEGER), a.k, {fields.replace('p.a.', 'a.')} "
                                     f"FROM pe_exp WHERE exp <= {as_of} AND a.k IS NOT NULL GROUP BY ALL"),
    ):
        found = []
        for _ in range(3):
            started = time.perf_counter()
            con.sql(query).fetchall()
            found.append(time.perf_counter() - started)
        timings[label] = statistics.median(found)
    print(f"plain {plain_s:.2f} s, expiry {expiry_s:.2f} s ({expiry_s / plain_s:.2f}x), medians of 3, each with "
          f"totals(), daily(), per_customer()")
    print(f"one lot per issued reward, stored again: {lots:,} rows in {lots_s:.2f} s; the expiry aggregates straight "
          f"from the per-event table ({len(by_day):,} day x type cells, {len(per_holder):,} customers): "
          f"{aggregate_s:.2f} s")
    print("with exp in the per-event table: " + ", ".join(f"{k} {v:.3f} s" for k, v in timings.items()))


if __name__ == "__main__":
    main()
