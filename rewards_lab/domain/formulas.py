"""Whole-number formulas written once for Python and for the replay's vectorised engines (pure).

A calendar rule the replay computes over millions of rows (the Monday opening a week, a month's index) is written
in the domain as a formula over `Whole`: Python integers, and equally a SQL expression tree (sqlglot, which the
DuckDB replay renders) or a Spark column, whose operators build the same arithmetic as an expression. The live
engine calls the formula on integers; the replay engines call it on their column expressions, so the rule has one
text. A formula must therefore read the same under Python's floored `%` and SQL's truncated one (a remainder is
taken as ((x % n) + n) % n), and use only +, -, * and %.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast


class Whole(Protocol):
    """A whole number, or an expression of one (a sqlglot expression, a Spark column)."""

    def __add__(self, other: Any, /) -> Any: ...

    def __sub__(self, other: Any, /) -> Any: ...

    def __mul__(self, other: Any, /) -> Any: ...

    def __mod__(self, other: Any, /) -> Any: ...


W = TypeVar("W", bound=Whole)


def remainder(value: W, divisor: int) -> W:
    """value mod divisor, in [0, divisor), under floored and truncated `%` alike."""
    return cast(W, (value % divisor + divisor) % divisor)
