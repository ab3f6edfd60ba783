"""Issue 27, items 3 and 5, in replay: the scenarios of tests/api/test_reversals_give_back_http.py run by the live
engine in process (tests/replay_live.py, a real DuckDB file, the ledger verified) and replayed on DuckDB and on
Spark, which must give the live engine's rows, reversals, balances and redemptions.

- spend, then refund: a reversal gives the caps back only what the wallet gave, so cycles of order, redeem,
  refund never reopen a daily cap; a reward stops counting only once all of it has been taken back;
- a refund by another customer takes nothing (`original_customer_mismatch` on the refund) unless the reverse
  action says `any_customer`; a reversal belongs to the original event's customer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rewards_lab.contract.programme_file import ProgrammeDefinition
from rewards_lab.replay.engine import replay
from rewards_lab.replay.spark_engine import replay_spark
from tests.replay.test_replay_caps_reversals import order, programme, refund, spend
from tests.replay_live import Outcome, redemptions_frame, replayed_outcome, run_live


def _all_agree(
    tmp_path: Path,
    spark: Any,
    definition: ProgrammeDefinition,
    stream: list[dict[str, Any]],
    spends: list[dict[str, Any]],
) -> Outcome:
    """The live engine, DuckDB and Spark over one history; returns the live outcome once all three agree."""
    live = run_live(tmp_path / "live.duckdb", definition, stream, spends)
    expected = live.outcome.sorted()
    frame = redemptions_frame(spends, definition.asset.decimals) if spends else None
    events = pd.DataFrame(live.submitted)
    duck = replay(events, definition, customers=live.customers, redemptions=frame)
    assert replayed_outcome(duck).sorted() == expected
    on_spark = replay_spark(events, definition, spark=spark, customers=live.customers, redemptions=frame)
    assert replayed_outcome(on_spark, spark=True).sorted() == expected
    return live.outcome


def _rows(outcome: Outcome) -> dict[str, tuple[Any, ...]]:
    """external event id -> (amount, status, error code, customer)."""
    return {row[0]: (row[3], row[4], row[5], row[6]) for row in outcome.rows}


@pytest.mark.parametrize("clawback", ["available", "none"])
def test_spend_then_refund_cycles_do_not_reopen_the_cap(tmp_path: Path, spark: Any, clawback: str) -> None:
    """Order 100, spend it, refund in full, three times in a day under a daily cap of 100: 100 issued, not 300;
    then a day later a refund of points still held gives them back, and the next order fits again."""
    definition = programme(rule={"limits": [{"period": "day", "max_amount": "100"}]}, info={"clawback": clawback})
    stream, spends = [], []
    for cycle in range(3):
        stream += [
            order(f"o{cycle}", "alice", 3 * cycle, 100),
            refund(f"r{cycle}", "alice", 3 * cycle + 2, order_id=f"o{cycle}"),
        ]
        spends.append(spend("alice", 3 * cycle + 1, 100))
    stream += [order("d1", "alice", 24, 100), refund("d2", "alice", 25, order_id="d1"), order("d3", "alice", 26, 100)]
    outcome = _all_agree(tmp_path, spark, definition, stream, spends)
    rows = _rows(outcome)
    alice = rows["o0"][3]
    assert [rows[f"o{cycle}"][:2] for cycle in range(3)] == [(100, "issued"), (0, "limited"), (0, "limited")]
    assert [rows[f"r{cycle}"][:2] for cycle in range(3)] == [(0, "reversed")] * 3
    assert outcome.redeemed == [True, False, False]
    assert (rows["d2"][:2], rows["d3"][:2]) == ((100, "reversed"), (100, "issued"))  # held points give room back
    assert outcome.balances == {alice: 100}


def test_a_partly_spent_reward_gives_back_what_was_taken_and_keeps_counting(tmp_path: Path, spark: Any) -> None:
    """Spent 60 of 100 before a full refund under `available`: 40 of the daily amount comes back (the next order
    gets 40) but the reward still counts under a count cap of 2 (the order after is limited); a reward refunded
    while held stops counting (the order after that gets through)."""
    caps = [{"period": "day", "max_amount": "100"}, {"period": "day", "max_count": 2}]
    definition = programme(rule={"limits": caps}, info={"clawback": "available"})
    stream = [
        order("o1", "alice", 0, 100),
        refund("r1", "alice", 2, order_id="o1"),
        order("o2", "alice", 3, 100),
        order("o3", "alice", 4, 1),
        refund("r2", "alice", 5, order_id="o2"),
        order("o4", "alice", 6, 100),
    ]
    outcome = _all_agree(tmp_path, spark, definition, stream, [spend("alice", 1, 60)])
    rows = _rows(outcome)
    assert [rows[name][:2] for name in ("r1", "o2", "o3", "r2", "o4")] == [
        (40, "reversed"),
        (40, "issued"),
        (0, "limited"),
        (40, "reversed"),
        (40, "issued"),
    ]


def test_a_refund_by_another_customer_takes_nothing_by_default(tmp_path: Path, spark: Any) -> None:
    """Bob refunds Alice's order (early, before it, and after it): both fail `original_customer_mismatch` under
    Bob and take nothing; Alice's own refund takes her reward back, recorded under her."""
    definition = programme()
    stream = [
        refund("b0", "bob", 0, order_id="o1"),  # before its order: processed after it, then refused
        order("o1", "alice", 1, 70),
        order("o2", "bob", 2, 5),
        refund("b1", "bob", 3, order_id="o1"),
        refund("a1", "alice", 4, order_id="o1"),
    ]
    outcome = _all_agree(tmp_path, spark, definition, stream, [])
    rows = _rows(outcome)
    alice, bob = rows["o1"][3], rows["o2"][3]
    assert rows["b0"] == rows["b1"] == (0, "failed", "original_customer_mismatch", bob)
    assert rows["a1"] == (70, "reversed", None, alice)
    assert outcome.balances == {bob: 5}


def test_with_any_customer_another_customers_refund_takes_back_under_the_owner(tmp_path: Path, spark: Any) -> None:
    """A marketplace rule: the seller's refund of the buyer's order takes the buyer's reward back, and the
    reversal (its execution and its reward) is the buyer's, not the refunding seller's."""
    definition = programme(reverse={"any_customer": True, "fraction": "0.5"})
    stream = [order("o1", "alice", 1, 70), order("o2", "bob", 2, 5), refund("s1", "bob", 3, order_id="o1")]
    outcome = _all_agree(tmp_path, spark, definition, stream, [])
    rows = _rows(outcome)
    alice, bob = rows["o1"][3], rows["o2"][3]
    assert rows["s1"] == (35, "reversed", None, alice)
    assert [(item[6], item[7], item[8]) for item in outcome.items] == [(alice, 35, 35)]
    assert outcome.balances == {alice: 35, bob: 5}
