"""Where a refund goes in the worker's processing order (pure functions over a batch's external ids).

A refund (an event with a reverse action) is processed after its original: when the original is in the same
batch at a later position, or arrives in a later batch while the refund waits, the refund is processed right
after it (several such refunds of one original in their order of arrival). Its position is therefore
max(its own, its original's + 1), which is what replay computes too. A refund whose original is not known yet
waits (up to `REFUND_WAIT`) instead of being processed, and a segment boundary before a refund whose original is
processed earlier in the same batch lets the original's rewards be written before they are reversed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

REFUND_WAIT = timedelta(days=7)  # how long a refund waits for an original that has not arrived


def refunds_after_originals(external_ids: Sequence[str], references: Sequence[Sequence[str]]) -> list[int]:
    """The processing order (indices) of a batch: each event at its place, except that an event whose references
    (the originals its reverse actions name) include a later event of the batch moves right after the last of
    them; events moved after the same original keep their order."""
    position = {external_id: index for index, external_id in enumerate(external_ids)}
    held: dict[int, list[int]] = {}
    order: list[int] = []
    for index, names in enumerate(references):
        later = [position[name] for name in names if position.get(name, -1) > index]
        if later:
            held.setdefault(max(later), []).append(index)
    moved = {index for indices in held.values() for index in indices}

    def emit(index: int) -> None:
        order.append(index)
        for follower in held.get(index, []):
            emit(follower)

    for index in range(len(external_ids)):
        if index not in moved:
            emit(index)
    return order


def segments(order: Sequence[int], external_ids: Sequence[str], references: Sequence[Sequence[str]]) -> list[list[int]]:
    """`order` cut before every event that reverses an original processed earlier in the same segment, so that
    the original's rewards are written (and can be read back) before they are taken back."""
    cut: list[list[int]] = [[]]
    seen: set[str] = set()
    for index in order:
        if any(name in seen for name in references[index]):
            cut.append([])
            seen = set()
        cut[-1].append(index)
        seen.add(external_ids[index])
    return [part for part in cut if part]
