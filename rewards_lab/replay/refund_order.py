"""Where a refund goes in a replay's processing order: right after its original when the original comes later.

The live worker processes a refund (an event whose reverse actions name originals) at max(its own position, its
original's + 1): one whose original comes later waits for it and is processed right after it, several such
refunds of one original in their own order, a refund of a moved refund right after that one
(`engine/refund_order.py`). A replay takes the history as complete: nothing waits, and a refund whose original
never appears fails its action with `original_not_found` at its own place.

A replay's processing key is therefore (anchor, sub): (position, 0) for every event that is not moved, and
(the position of the first event of its chain that is not moved, 1, 2, ...) for moved ones, in emission order.
"""

from __future__ import annotations

from collections.abc import Mapping


def processing_keys(follows: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """The (anchor, sub) key of every moved event; `follows`: a moved event's position -> the position of the
    last of its originals that come after it (the event it is processed right after)."""
    held: dict[int, list[int]] = {}
    for position in sorted(follows):
        held.setdefault(follows[position], []).append(position)
    keys: dict[int, tuple[int, int]] = {}
    for root in sorted(anchor for anchor in held if anchor not in follows):
        sub = 0
        stack = list(reversed(held[root]))
        while stack:  # depth first, followers in their own order: the worker's `emit`
            position = stack.pop()
            sub += 1
            keys[position] = (root, sub)
            stack.extend(reversed(held.get(position, [])))
    return keys
