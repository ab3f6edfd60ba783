"""Reversals: how much a refund takes back of one reward, and how much of that a wallet gives (pure; no I/O).

A reverse action names its original event; every reward the original received from the same programme is
reversed on its own:

- its **target** is what remains of it (issued minus what earlier reversals targeted) for a whole reversal, or
  `floor(issued x fraction)` for a partial one, never more than what remains: rounding down each partial
  reversal keeps the sum of any number of them at most the reward;
- the **clawback** policy decides what the wallet gives when it holds less than the target: `available` takes
  what it holds, `negative` takes the whole target (the wallet may go below zero), `none` takes nothing unless
  it holds the whole target; what is not taken is the **shortfall**, always recorded;
- the caps and budget the reward counted in get back what the wallet gave, and the reward stops counting once all
  of it has been taken back, over all its reversals (`all_taken_back`).

A reverse action fails, in this order: its original is not known (`original_not_found`), the refund's customer
is not the original's and the action does not say `any_customer` (`original_customer_mismatch`), the original's
value cannot divide (`fraction_invalid`): `refusal` and `fraction_of`.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

from rewards_lab.domain.rules import ReversalCall

ORIGINAL_NOT_FOUND = "original_not_found"
CUSTOMER_MISMATCH = "original_customer_mismatch"


def refusal(found: bool, same_customer: bool) -> str | None:
    """The code failing a reverse action whose original is `found` (or not) and whose refund's customer is the
    original's or may take back from any customer (`same_customer`); None: it reverses."""
    if not found:
        return ORIGINAL_NOT_FOUND
    if not same_customer:
        return CUSTOMER_MISMATCH
    return None


def fraction_of(call: ReversalCall, original_value: Decimal | None) -> Decimal | None:
    """The share a call takes back: its constant, or its numerator over the original's value, clamped to
    [0, 1]; None when the whole of what remains is taken. Raises ValueError when the original's value cannot
    divide (missing, not a number, or not above zero)."""
    if call.of is None:
        return call.fraction
    if original_value is None or original_value <= 0:
        raise ValueError(f"the original's field '{call.of}' is missing, not a number or not above zero")
    assert call.numerator is not None
    return min(Decimal(1), max(Decimal(0), call.numerator / original_value))


def reversal_target(issued_minor: int, reversed_minor: int, fraction: Decimal | None) -> int:
    """What to take back of one reward: all that remains (fraction None), or floor(issued x fraction) capped
    at what remains."""
    remaining = max(0, issued_minor - reversed_minor)
    if fraction is None:
        return remaining
    share = int((Decimal(issued_minor) * fraction).to_integral_value(rounding=ROUND_FLOOR))
    return min(remaining, max(0, share))


def all_taken_back(taken_back_minor: int, issued_minor: int) -> bool:
    """Whether a reward of `issued_minor` has been taken back whole (`taken_back_minor`: what the wallets gave over
    all its reversals): it then counts in its caps and budget no more."""
    return taken_back_minor >= issued_minor


def clawback_take(target_minor: int, balance_minor: int, policy: str) -> int:
    """What the wallet gives of a target under a clawback policy, holding `balance_minor`."""
    if policy == "negative":
        return target_minor
    if policy == "none":
        return target_minor if balance_minor >= target_minor else 0
    return max(0, min(target_minor, balance_minor))
