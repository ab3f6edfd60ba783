"""Where each event goes in processing order (pure): refunds after their originals, events of a history by time.

A refund (an event with a reverse action) is processed after its original: when the original comes later (later
in the worker's batch, or arriving in a later batch while the refund waits), the refund is processed right after
it, several such refunds of one original in their own order, a refund of a moved refund right after that one. Its
place is therefore max(its own, its original's + 1). The live worker (`refunds_after_originals` over a batch) and
both replay engines (`processing_keys` over a whole history) place refunds with this one algorithm, `_chain`.

A refund whose original is not known yet waits (up to `REFUND_WAIT`) in the live worker; a replay takes its
history as complete, so nothing waits there. A history (a replay's events, its redemptions) is processed by time,
ties in input order (`time_positions`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from datetime import timedelta

import numpy as np

REFUND_WAIT = timedelta(days=7)  # how long a refund waits for an original that has not arrived

Follows = Mapping[int, int]  # a moved event's position -> the position of the event it is processed right after


def note_original(follows: MutableMapping[int, int], position: int, original: int) -> None:
    """Record that the event at `position` reverses the one at `original`: when the original comes later, the
    event is processed right after it (after the last of several such originals)."""
    if original > position:
        follows[position] = max(follows.get(position, original), original)


def follows_of(external_ids: Sequence[str], references: Sequence[Sequence[str]]) -> dict[int, int]:
    """The moved events of a batch: `references[i]` names the originals event i reverses (by external id);
    names that are not in the batch, or come before, do not move it."""
    position = {external_id: index for index, external_id in enumerate(external_ids)}
    follows: dict[int, int] = {}
    for index, names in enumerate(references):
        for name in names:
            note_original(follows, index, position.get(name, -1))
    return follows


def _held(follows: Follows) -> dict[int, list[int]]:
    """Position -> the moved events processed right after it, in their own order."""
    held: dict[int, list[int]] = {}
    for position in sorted(follows):
        held.setdefault(follows[position], []).append(position)
    return held


def _chain(root: int, held: Mapping[int, list[int]]) -> Iterator[int]:
    """The moved events processed after `root` (an event that is not moved), in order: depth first, each
    event's followers in their own order right after it."""
    stack = list(reversed(held.get(root, [])))
    while stack:
        position = stack.pop()
        yield position
        stack.extend(reversed(held.get(position, [])))


def processing_keys(follows: Follows) -> dict[int, tuple[int, int]]:
    """The (anchor, sub) key of every moved event: the position of the first event of its chain that is not
    moved, and 1, 2, ... in processing order. An event that is not moved has the key (its position, 0), so
    sorting every event by key gives the processing order."""
    held = _held(follows)
    keys: dict[int, tuple[int, int]] = {}
    for root in sorted(anchor for anchor in held if anchor not in follows):
        for sub, position in enumerate(_chain(root, held), start=1):
            keys[position] = (root, sub)
    return keys


def processing_order(count: int, follows: Follows) -> list[int]:
    """The processing order (positions) of `count` events: each at its place, except the moved ones."""
    held = _held(follows)
    order: list[int] = []
    for position in range(count):
        if position not in follows:
            order.append(position)
            order.extend(_chain(position, held))
    return order


def refunds_after_originals(external_ids: Sequence[str], references: Sequence[Sequence[str]]) -> list[int]:
    """The processing order (indices) of a batch: each event at its place, except that an event whose references
    (the originals its reverse actions name) include a later event of the batch moves right after the last of
    them; events moved after the same original keep their order."""
    return processing_order(len(external_ids), follows_of(external_ids, references))


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


def time_positions(times: np.ndarray) -> np.ndarray:
    """The place of each row of a history in processing order (int64): by time, ties in input order."""
    order = np.argsort(times, kind="stable")  # stable: ties keep input order
    positions = np.empty(len(times), dtype=np.int64)
    positions[order] = np.arange(len(times), dtype=np.int64)
    return positions
