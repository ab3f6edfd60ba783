"""Issue 30 design check (section 5.7): expiry with redemptions as FIFO interval arithmetic, against today's lot pass.

Replays benchmarks/replay_expiry.py's `expiry+redemptions` case (the benchmark programme, lots expiring at the end of
the month after, a tenth of the customers redeeming once) and recomputes, for every redeeming customer, from the
issued rewards and the redemptions alone: each redemption's acceptance and each lot's remaining and expired parts.
With C the running sum of a customer's lot amounts in FIFO order, I(t) = C of the lots issued at or before the
redemption's place, E(t) = the amounts of the lots with expires <= t; redemption k starts at max(p, E), is accepted
when I - start >= amount, and then p = start + amount. Also times the closed form's SQL against the replay.

    PYTHONPATH=.:benchmarks /work/main/.venv/bin/python reports/i30/fifo_check.py [events.parquet]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from replay_expiry import EXPIRY, _redemptions  # type: ignore[import-not-found]  # noqa: E402

from rewards_lab.contract.programme_file import parse_programme  # noqa: E402
from rewards_lab.replay.engine import replay  # noqa: E402

PROGRAMME = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_programme.json"


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/main/data/bench/events_200000_20000.parquet")
    payload = json.loads(PROGRAMME.read_text())
    payload["programme"]["expiry"] = EXPIRY
    spent = _redemptions(path)
    started = time.perf_counter()
    result = replay(path, parse_programme(payload), redemptions=spent, progress=False)
    replay_s = time.perf_counter() - started
    con, n, slots = result.con, result._name, result._layout.slots  # noqa: SLF001
    started = time.perf_counter()
    # lots of the redeeming customers, FIFO (seq order: issued_at never decreases along it), with C and expiry
    con.execute(f"""CREATE TEMP TABLE cf_lots AS
        SELECT i.customer_id AS holder, i.seq, x.pos, x.t, x.exp, i.amount_minor AS amount,
               sum(i.amount_minor) OVER (PARTITION BY i.customer_id ORDER BY i.seq ROWS UNBOUNDED PRECEDING) AS c_end
        FROM (SELECT seq, customer_id, amount_minor FROM {n}_issuances WHERE status = 'issued'
              AND customer_id IN (SELECT holder FROM {n}_red)) i
        JOIN {n}_xt x ON x.pos = i.seq // {slots}""")
    # per redemption: I (issued at or before its anchor) and E (expired by its time), by correlated aggregates
    rows = con.sql(f"""
        SELECT r.holder, r.idx, r.amount, r.t, r.anchor, r.rank,
               coalesce((SELECT max(c_end) FROM cf_lots l WHERE l.holder = r.holder AND l.pos <= r.anchor), 0) AS i,
               coalesce((SELECT sum(amount) FROM cf_lots l WHERE l.holder = r.holder AND l.exp <= r.t), 0) AS e
        FROM {n}_red r ORDER BY r.holder, r.anchor, r.rank""").fetchall()
    accepted, intervals, pointer, last = {}, [], 0, None
    for holder, idx, amount, _t, _anchor, _rank, issued, expired in rows:
        if holder != last:
            pointer, last = 0, holder
        start = max(pointer, int(expired))
        ok = int(issued) - start >= int(amount)
        accepted[int(idx)] = ok
        if ok:
            intervals.append((holder, start, start + int(amount)))
            pointer = start + int(amount)
        else:
            pointer = start
    import pyarrow as pa

    con.register("cf_intervals", pa.table({"holder": [h for h, _, _ in intervals], "lo": [lo for _, lo, _ in intervals],
                                           "hi": [hi for _, _, hi in intervals]}))
    as_of = result._expiry.as_of  # noqa: SLF001
    lots = con.sql("""
        SELECT l.seq, l.amount - coalesce(sum(CASE WHEN v.lo IS NOT NULL  -- least/greatest skip NULLs
                   THEN greatest(0, least(l.c_end, v.hi) - greatest(l.c_end - l.amount, v.lo)) END), 0) AS left_, l.exp
        FROM cf_lots l LEFT JOIN cf_intervals v ON v.holder = l.holder
        GROUP BY l.seq, l.amount, l.exp""").fetchall()
    closed_s = time.perf_counter() - started
    closed_lots = {int(seq): (0 if exp is not None and exp <= as_of else int(left), int(left) if exp is not None and exp <= as_of else 0)
                   for seq, left, exp in lots}
    pass_accept = dict(con.sql(f"SELECT idx, accepted FROM {n}_redout").fetchall())
    pass_lots = {int(seq): (int(rem), int(exp)) for seq, rem, exp in con.sql(
        f"SELECT seq, lot_remaining, lot_expired FROM {n}_plots").fetchall()}
    same_accept = sum(accepted[k] == bool(v) for k, v in pass_accept.items())
    same_lots = sum(closed_lots.get(k) == v for k, v in pass_lots.items())
    print(f"replay with the lot pass {replay_s:.2f} s; closed form (SQL + a scan over redemptions) {closed_s:.2f} s")
    print(f"redemptions: {len(pass_accept):,}, accepted {sum(map(bool, pass_accept.values())):,}; "
          f"closed form agrees on {same_accept:,}")
    print(f"lots of redeeming customers: {len(pass_lots):,}; closed form agrees (remaining, expired) on {same_lots:,}")
    differing = [(k, v, closed_lots.get(k)) for k, v in pass_lots.items() if closed_lots.get(k) != v]
    for k, v, c in differing[:3]:
        print("  seq", k, "pass (remaining, expired)", v, "closed form", c)
    if differing and "-v" in sys.argv:
        ((holder,),) = con.sql(f"SELECT holder FROM cf_lots WHERE seq = {differing[0][0]}").fetchall()
        print(con.sql(f"SELECT * FROM cf_lots WHERE holder = '{holder}' ORDER BY seq LIMIT 12"))
        print(con.sql(f"SELECT * FROM {n}_red WHERE holder = '{holder}'"))
        print(con.sql(f"SELECT * FROM cf_intervals WHERE holder = '{holder}'"))
        print([row for row in lots if int(row[0]) == differing[0][0]], as_of)


if __name__ == "__main__":
    main()
