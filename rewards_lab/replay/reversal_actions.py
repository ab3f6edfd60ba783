"""What each reverse action of a replay asks for, decided once per action with the live engine's functions:
the code that fails it, or the fraction it takes of each reward of its original (`domain.reversals.fraction_of`).

In the live engine's order: a refund whose original field holds no event reference fails `original_missing`; a
fraction read from the refund that is missing or negative fails `fraction_invalid` (neither names an original, so
neither moves the refund); an original that never appears in the history fails `original_not_found` (a replay
takes the history as complete: nothing waits); a refund whose customer is not the original event's (both as
resolved by the customers table) fails `original_customer_mismatch`, unless the action says `any_customer`; an
original whose divisor is missing or not above zero fails `fraction_invalid`.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from rewards_lab.domain.reversals import fraction_of, refusal
from rewards_lab.domain.rules import FRACTION_INVALID, ORIGINAL_MISSING, ReversalCall


class ActionDecision(NamedTuple):
    """A reverse action's code (None: it reverses) and fraction as exact text (None: all that remains);
    `references`: whether it names an original (the refund then follows it in processing order)."""

    code: str | None
    fraction: str | None
    references: bool


def number(text: str | None) -> Decimal | None:
    """An exact number read as text by SQL (None: no number)."""
    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def decide(
    reference: str | None,
    numerator: Decimal | None,
    constant: Decimal | None,
    of: str | None,
    found: bool,
    divisor: Decimal | None,
    code: str | None = None,
    same_customer: bool = True,
) -> ActionDecision:
    """The decision for one reverse action (`code`: a failure the live evaluation already gave, for rows the
    replay evaluates in Python; `found`: its original appears in the history; `divisor`: the original's `of`;
    `same_customer`: the refund's customer is the original's, or the action takes back from any customer)."""
    if code is not None:
        return ActionDecision(code, None, False)
    if reference is None:
        return ActionDecision(ORIGINAL_MISSING, None, False)
    if of is not None and (numerator is None or numerator < 0):
        return ActionDecision(FRACTION_INVALID, None, False)
    refused = refusal(found, same_customer)
    if refused is not None:
        return ActionDecision(refused, None, True)
    try:
        fraction = fraction_of(ReversalCall(reference, constant, numerator, of), divisor)
    except ValueError:
        return ActionDecision(FRACTION_INVALID, None, True)
    return ActionDecision(None, None if fraction is None else str(fraction), True)
