"""Issue 30 design check: the closed forms of section 5 against the domain's own functions on random streams.

1. One family of caps (one counter key: max_amount B and/or max_count N, no reversal): the grant of the i-th reward
   (1-based) is  [i <= N] * (min(B, S_i) - min(B, S_{i-1}))  with S the running requested total.
2. Reversals of a reward no binding counter counts (no redemption, no expiry): done_k = min(issued, sum of
   floor(issued * f_j) for j <= k, or issued for a whole reversal), target_k = done_k - done_{k-1}.
3. The prefix rule: a counter cannot cut a reward while its requested running total (this one included) is within
   B and its count within N, whatever the other counters and reversals did.

    PYTHONPATH=. /work/main/.venv/bin/python reports/i30/closed_form_check.py
"""

from __future__ import annotations

import random
from datetime import date
from decimal import Decimal

from rewards_lab.domain.limits import Allowance, Cap, CapCheck
from rewards_lab.domain.reversals import reversal_target


def cap(scope: str, amount: int | None, count: int | None) -> Cap:
    return Cap(scope=scope, period="month", max_amount_minor=amount, max_count=count)  # type: ignore[arg-type]


def single_family(rng: random.Random) -> None:
    b = rng.choice([None, rng.randint(1, 500)])
    n = rng.choice([None, rng.randint(1, 8)]) if b is not None else rng.randint(1, 8)
    caps = [cap("rule", b, None)] if b is not None else []
    caps += [cap("rule", None, n)] if n is not None else []
    checks = [CapCheck(c, ("p", "r", "c", "2026-01-01"), date(2026, 1, 1)) for c in caps]  # one key: one family
    allowance = Allowance()
    s_prev = 0
    for i in range(1, rng.randint(1, 30) + 1):
        m = rng.randint(1, 200)
        s = s_prev + m
        big = 10**30
        closed = (min(b if b is not None else big, s) - min(b if b is not None else big, s_prev)) if (n is None or i <= n) else 0
        assert allowance.grant(m, checks).amount_minor == closed, (b, n, i)
        s_prev = s


def reversals(rng: random.Random) -> None:
    issued = rng.randint(1, 10**6)
    done_live, total = 0, 0
    for _ in range(rng.randint(1, 5)):
        fraction = None if rng.random() < 0.2 else Decimal(rng.randint(0, 1000)) / Decimal(rng.randint(1, 1000))
        fraction = None if fraction is None else min(Decimal(1), fraction)
        target = reversal_target(issued, done_live, fraction)
        done_live += target
        share = issued if fraction is None else int((Decimal(issued) * fraction).to_integral_value(rounding="ROUND_FLOOR"))
        closed_done = min(issued, total + share)
        assert target == closed_done - min(issued, total), (issued, fraction)
        total += share


def prefix(rng: random.Random) -> None:
    # two families on one stream: A (amount B) and C (count N) on different keys; plus random give-backs
    b, n = rng.randint(50, 400), rng.randint(2, 6)
    a_check = CapCheck(cap("programme", b, None), ("p", "", "c", "a"), date(2026, 1, 1))
    c_check = CapCheck(cap("rule", None, n), ("p", "r", "c", "c"), date(2026, 1, 1))
    allowance, s, c = Allowance(), 0, 0
    for _ in range(rng.randint(1, 30)):
        m = rng.randint(1, 100)
        in_c = rng.random() < 0.5
        s += m
        c += 1 if in_c else 0
        checks = [a_check] + ([c_check] if in_c else [])
        grant = allowance.grant(m, checks)
        if s <= b and (not in_c or c <= n):
            assert grant.amount_minor == m and grant.cut is None
        if grant.keys and rng.random() < 0.2:
            allowance.give_back(grant.keys, rng.randint(0, grant.amount_minor), whole=False)


def main() -> None:
    rng = random.Random(30)
    for _ in range(20_000):
        single_family(rng)
        reversals(rng)
        prefix(rng)
    print("closed forms agree with domain.limits.Allowance and domain.reversals.reversal_target on 20,000 streams each")


if __name__ == "__main__":
    main()
