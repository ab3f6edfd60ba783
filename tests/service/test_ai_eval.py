"""The support assistant's evaluation set (tests/service/ai_eval_questions.json) over a seeded tenant: the right
source among an answer's first three citations for at least 90% of the questions (benchmarks/ai_eval.py writes the
same run to reports/ai-eval.md)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.ai_eval import GOAL, TOP, evaluate, hit_rate, questions, seed
from rewards_lab.store.database import Database


def test_the_evaluation_set_is_large_and_covers_every_kind_of_question() -> None:
    items = questions()
    assert len(items) >= 40 and len({item["id"] for item in items}) == len(items)
    kinds = {item["id"].split("-")[0] for item in items}
    assert {"event", "balance", "live", "docs", "follow"} <= kinds
    assert all(item["expect"] for item in items)


def test_the_right_source_is_in_the_top_three_for_at_least_nine_questions_in_ten(tmp_path: Path) -> None:
    with Database(tmp_path / "eval.duckdb") as database:
        names = seed(database)
        results = evaluate(database, names, questions())
    rate = hit_rate(results)
    misses = [(result.id, result.cited[:TOP]) for result in results if not result.hit]
    print(f"\nai eval: hit rate {rate:.1%} over {len(results)} questions; misses: {misses}")
    assert rate >= GOAL, misses
