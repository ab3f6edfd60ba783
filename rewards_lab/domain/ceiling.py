"""The supply ceiling (pure): an issuance fits when outstanding + amount <= ceiling, and then adds to outstanding;
a refused one changes nothing, so a later, smaller issuance may still fit.

`fits` is the rule for one issuance (the ledger's posting policy, the replay's sequential pass); `resolve` applies
it to a whole sequence of issuances at once, as the replay engines need over millions of rows. Up to the first
refusal the issued ones are a prefix of the cumulative sum; after it, only amounts no larger than the remaining
room can ever succeed, so each round filters to those, takes the next cumulative-sum prefix, and stops at the next
refusal (numpy, no Python per row).
"""

from __future__ import annotations

import numpy as np

_SMALL = 2048  # below this many remaining candidates a plain loop is cheaper than another numpy round


def room_under(ceiling: int | None, outstanding: int) -> int | None:
    """What an asset may still issue: its ceiling less what is outstanding (None: no ceiling)."""
    return None if ceiling is None else ceiling - outstanding


def fits(amount: int, room: int | None) -> bool:
    """Whether an issuance of `amount` fits the room left under the ceiling (None: no ceiling)."""
    return room is None or amount <= room


def first_over(amounts: np.ndarray, room: int) -> tuple[int, int]:
    """(index of the first amount whose running total exceeds `room`, or len; total before it)."""
    if len(amounts) == 0:
        return 0, 0
    # Each amount is at most ~1e18 and room at most ~1e18: the running total cannot wrap before it exceeds room.
    totals = np.cumsum(amounts, dtype=np.int64)
    over = totals > room
    if not over.any():
        return len(amounts), int(totals[-1])
    first = int(np.argmax(over))
    return first, int(totals[first - 1]) if first else 0


def resolve(amounts: np.ndarray, room: int) -> tuple[int, np.ndarray]:
    """Which issuances succeed, for positive `amounts` in processing order and `room` = ceiling - outstanding.

    Returns (f, issued_after): every index below f succeeds, index f (if any) is the first refusal, and
    `issued_after` lists the indices above f that still succeed.
    """
    if room < 0:
        return 0, np.empty(0, dtype=np.int64)
    first, used = first_over(amounts, room)
    if first >= len(amounts):
        return first, np.empty(0, dtype=np.int64)
    room -= used
    positions = np.arange(first + 1, len(amounts), dtype=np.int64)
    values = amounts[first + 1 :]
    issued: list[np.ndarray] = []
    while len(values):
        keep = values <= room
        positions, values = positions[keep], values[keep]
        if len(values) <= _SMALL:
            chosen = []
            for position, value in zip(positions.tolist(), values.tolist(), strict=True):
                if fits(value, room):
                    chosen.append(position)
                    room -= value
            issued.append(np.array(chosen, dtype=np.int64))
            break
        stop, used = first_over(values, room)
        issued.append(positions[:stop])
        room -= used
        positions, values = positions[stop + 1 :], values[stop + 1 :]
    return first, np.concatenate(issued) if issued else np.empty(0, dtype=np.int64)
