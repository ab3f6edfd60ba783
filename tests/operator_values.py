"""Condition values drawn from an operator's entry (its `shape` and `kinds`, contract/operators.py), so that every
test drawing conditions (the operator registry's, the replay differential) draws every operator, a new one too."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from rewards_lab.contract.operators import OperatorEntry


def kind_for(entry: OperatorEntry, wanted: str) -> str:
    """`wanted` when the operator takes values of that kind, else the first kind it takes."""
    return wanted if wanted in entry.kinds else entry.kinds[0]


def wire_value(
    draw: st.DrawFn,
    entry: OperatorEntry,
    kind: str,
    numbers: st.SearchStrategy[Decimal],
    strings: tuple[str, ...],
) -> Any:
    """A value for the operator as a client sends it (a list for lists and pairs; None without a value), of
    `kind` when the operator takes it (numbers from `numbers`, strings from `strings`, and booleans beside the
    strings where the operator takes them)."""
    if entry.shape == "none":
        return None
    kind = kind_for(entry, kind)
    items: st.SearchStrategy[Any] = numbers if kind == "number" else st.sampled_from(strings)
    if entry.shape == "one":
        if kind == "string" and "boolean" in entry.kinds:
            return draw(st.sampled_from([*strings, True, False]))
        return draw(items)
    if entry.shape == "list":
        return list(dict.fromkeys(draw(st.lists(items, min_size=1, max_size=3))))
    if kind == "string":  # a pair of strings: none spelling a number (a decimal string is its number there)
        items = st.sampled_from([text for text in strings if not text.isdigit()])
    return sorted(draw(st.lists(items, min_size=2, max_size=2)))
