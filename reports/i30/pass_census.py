"""Issue 30 design census: what today's sequential pass holds on the caps + daily budget + refunds benchmark
history, and how much of it the plan's closed forms would take out (docs: reports/i30-replay-plan.md, section 5).

    PYTHONPATH=.:benchmarks /work/main/.venv/bin/python reports/i30/pass_census.py [events_file]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from replay_caps_reversals import featured  # type: ignore[import-not-found]  # noqa: E402

from rewards_lab.contract.programme_file import load_programme, parse_programme  # noqa: E402
from rewards_lab.replay.engine import STEPS, replay  # noqa: E402

PLAIN = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_programme.json"


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--budget-factor=")]
    factor = next((float(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--budget-factor=")), 1.4)
    path = args[0] if args else "/work/main/data/bench/events_1000000_100000_refunds.parquet"
    started = time.perf_counter()
    plain = replay(path, load_programme(PLAIN))
    totals, days = plain.totals(), plain.daily()["day"].nunique()
    plain_s = time.perf_counter() - started
    budget = str(int(float(totals["issued"]) / int(days) * factor))  # the benchmark's: 1.4 times the average day
    marks: list[tuple[str, float]] = []
    started = time.perf_counter()
    result = replay(path, parse_programme(featured(budget)), progress=lambda d, _t: marks.append((STEPS[d - 1], time.perf_counter() - started)))
    featured_s = time.perf_counter() - started
    con, n = result.con, result._name  # noqa: SLF001
    print(f"plain {plain_s:.2f} s; featured {featured_s:.2f} s; steps {[(s, round(t, 2)) for s, t in marks]}")
    print(f"budget {budget} per day over {days} days; events {result.events_processed:,}")
    q = lambda sql: con.sql(sql.replace("{n}", n)).fetchall()  # noqa: E731
    print("ops by op:", q("SELECT op, count(*) FROM {n}_ops GROUP BY op ORDER BY op"))
    print("rewards (positive candidates):", q("SELECT sum(n) FROM {n}_cand"))
    print("binding counters by family:", q("SELECT g, count(*) FROM {n}_bind GROUP BY g ORDER BY g"))
    print("tail (decided set-based today):", q("SELECT count(*) FROM {n}_tail"))
    # grants by how many families can bind for them (bits of one family share a counter)
    print("grant masks:", q("SELECT mask, count(*) FROM {n}_ops WHERE op = 0 GROUP BY mask ORDER BY 2 DESC LIMIT 12"))
    # items whose reward no binding counter counts: closed form in the plan
    print("items by their reward's mask (0: closed form):", q(
        "SELECT o.sequential, count(*) FROM {n}_ops o WHERE op = 1 GROUP BY ALL"))
    # budget: days whose budget can bind, the rewards on them, and how many come before the day's running
    # *requested* total passes the budget (no budget check needed before that point)
    print("budget days binding:", q("SELECT count(*) FROM {n}_bind WHERE g = (SELECT max(g) FROM {n}_bind)"))
    bits_budget = 1 << 10
    print("grants with the budget bit:", q(f"SELECT count(*) FROM {{n}}_ops WHERE op = 0 AND (mask & {bits_budget}) <> 0"))
    print("... of which before the day's running requested total exceeds the budget:", q(f"""
        SELECT count_if(s <= {int(budget) * 100}) , count(*) FROM (
          SELECT sum(m) OVER (PARTITION BY d_day ORDER BY k1, k2, k3) AS s FROM (
            SELECT r.d_day, coalesce(mv.ppos, r.pos) AS k1, coalesce(mv.psub, 0) AS k2, r.slot AS k3, r.m
            FROM {{n}}_mrows r LEFT JOIN {{n}}_moved mv ON mv.pos = r.pos WHERE (r.mask & {bits_budget}) <> 0))"""))
    print("grants with only per-customer families (customer components):", q(
        f"SELECT count(*) FROM {{n}}_ops WHERE op = 0 AND mask > 0 AND (mask & {bits_budget}) = 0"))
    print("holders in the pass:", q("SELECT count(DISTINCT holder) FROM {n}_ops WHERE op = 0"))
    components(con, n)
    prefix_pruning(result)
    per_reward(result)



def components(con, n: str) -> None:  # type: ignore[no-untyped-def]
    """Grants in counter keys that hold one family only and no reversal of their rewards (closed form), and the
    rest (the ordered pass, per customer)."""
    q = lambda sql: con.sql(sql.replace("{n}", n)).fetchall()  # noqa: E731
    print("grants per (holder, month) by coupling:", q("""
        WITH g AS (SELECT o.seq, o.holder, o.mask, o.d_month AS mon,
                          EXISTS (SELECT 1 FROM {n}_ops i WHERE i.op = 1 AND i.ref = o.seq) AS reversed
                   FROM {n}_ops o WHERE o.op = 0),
             k AS (SELECT holder, mon, bool_or(mask NOT IN (1, 32)) AS multi, bool_or(reversed) AS rev,
                          count(DISTINCT mask) AS masks, count(*) AS n FROM g GROUP BY ALL)
        SELECT multi OR masks > 1 AS coupled, rev, sum(n), count(*) FROM k GROUP BY ALL ORDER BY ALL"""))



def prefix_pruning(result) -> None:  # type: ignore[no-untyped-def]
    """Grants of today's pass that a per-reward "can this counter bind yet" test keeps: a counter cannot cut a
    reward while the running *requested* total of its rewards, this one included, is within its max_amount (and
    their number within its max_count). Event-level rows for the programme's and the budget's families (each
    event's total: conservative)."""
    from rewards_lab.replay.feature_store import grouping_rows_sql

    con, n = result.con, result._name  # noqa: SLF001
    limits, lay, lookup = result._features.limits, result._layout, result._features.lookup  # noqa: SLF001
    parts = []
    for g, grouping in enumerate(limits.groupings()):
        rows = grouping_rows_sql(lay, n, limits, lookup, grouping)
        start = "0" if grouping.period == "lifetime" else f"d_{grouping.period}"
        holder = "holder" if grouping.per_customer else "''"
        over = []
        for cap in grouping.caps:
            if cap.max_amount_minor is not None:
                over.append(f"s > {cap.max_amount_minor}")
            if cap.max_count is not None:
                over.append(f"c > {cap.max_count}")
        window = f"PARTITION BY {holder}, {start} ORDER BY pos ROWS UNBOUNDED PRECEDING"
        parts.append(
            f"SELECT DISTINCT {g} AS g, pos FROM (SELECT pos, sum(m) OVER ({window}) AS s, sum(n) OVER ({window}) AS c "
            f"FROM ({rows})) WHERE {' OR '.join(over)}"
        )
    con.execute(f"CREATE TEMP TABLE {n}_active AS {' UNION ALL '.join(parts)}")
    print("active (counter can bind by its requested prefix) events per family:",
          con.sql(f"SELECT g, count(*) FROM {n}_active GROUP BY g ORDER BY g").fetchall())
    print("pass grants whose event has an active family (the rest: granted whole, set-based):", con.sql(
        f"SELECT count_if(seq // {lay.slots} IN (SELECT pos FROM {n}_active)), count(*) FROM {n}_ops WHERE op = 0"
    ).fetchall())
    print("... and not in today's tail:", con.sql(
        f"SELECT count(*) FROM {n}_ops WHERE op = 0 AND seq // {lay.slots} IN (SELECT pos FROM {n}_active)"
    ).fetchall())



def per_reward(result) -> None:  # type: ignore[no-untyped-def]
    """The prefix rule per reward (not per event), and what the single-family closed form then takes out: a reward
    is `active` in a family when its counter key's requested running total (in processing order, this reward
    included) passes a max_amount, or its count a max_count."""
    from rewards_lab.replay.feature_store import rows_sql

    con, n = result.con, result._name  # noqa: SLF001
    limits, lay, lookup = result._features.limits, result._layout, result._features.lookup  # noqa: SLF001
    con.execute(f"CREATE TEMP TABLE {n}_rw AS {rows_sql(lay, n, limits, lookup, True)}")
    parts = []
    for g, grouping in enumerate(limits.groupings()):
        start = "0" if grouping.period == "lifetime" else f"d_{grouping.period}"
        holder = "holder" if grouping.per_customer else "''"
        rule = "" if grouping.rule_index is None else f"WHERE rule_index = {grouping.rule_index}"
        over = []
        for cap in grouping.caps:
            if cap.max_amount_minor is not None:
                over.append(f"s > {cap.max_amount_minor}")
            if cap.max_count is not None:
                over.append(f"c > {cap.max_count}")
        window = f"PARTITION BY {holder}, {start} ORDER BY pos, slot ROWS UNBOUNDED PRECEDING"
        parts.append(
            f"SELECT seq, {g} AS g, {holder} AS h, {start} AS st FROM (SELECT seq, holder, {start}, "
            f"sum(m) OVER ({window}) AS s, count(*) OVER ({window}) AS c FROM {n}_rw {rule}) WHERE {' OR '.join(over)}"
        )
    con.execute(f"CREATE TEMP TABLE {n}_act AS {' UNION ALL '.join(parts)}")
    reversed_ = f"SELECT ref FROM {n}_ops WHERE op = 1 AND sequential"
    print("per reward: active rewards, and (reward, family) pairs:", con.sql(
        f"SELECT count(DISTINCT seq), count(*) FROM {n}_act").fetchall())
    print("active (reward, family) pairs per family:", con.sql(
        f"SELECT g, count(*) FROM {n}_act GROUP BY g ORDER BY g").fetchall())
    print("active rewards by number of active families:", con.sql(
        f"SELECT f, count(*) FROM (SELECT seq, count(*) AS f FROM {n}_act GROUP BY seq) GROUP BY f ORDER BY f"
    ).fetchall())
    print("active rewards in a counter key whose active rewards have one family and are never reversed "
          "(single-family closed form) vs the rest (pass):", con.sql(f"""
        WITH per AS (SELECT seq, count(*) AS f FROM {n}_act GROUP BY seq),
             keyed AS (SELECT a.g, a.h, a.st, bool_and(p.f = 1) AND NOT bool_or(a.seq IN ({reversed_})) AS simple,
                              count(*) AS k FROM {n}_act a JOIN per p USING (seq) GROUP BY ALL),
             rewarded AS (SELECT a.seq, bool_and(k.simple) AS simple FROM {n}_act a
                          JOIN keyed k USING (g, h, st) GROUP BY a.seq)
        SELECT simple, count(*) FROM rewarded GROUP BY ALL ORDER BY ALL""").fetchall())
    print("... of the pass rewards, decided by today's tails:", con.sql(f"""
        SELECT count(*) FROM (SELECT DISTINCT seq FROM {n}_act) WHERE seq IN (SELECT seq FROM {n}_tail)""").fetchall())


if __name__ == "__main__":
    main()
