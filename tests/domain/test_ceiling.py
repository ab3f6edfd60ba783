"""The supply ceiling (rewards_lab.domain.ceiling): `resolve`, the replay's vectorised rounds, against `fits`, the
ledger's rule applied one issuance at a time, and the posting policy reading the same rule."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.ceiling import first_over, fits, resolve, room_under


def plain(amounts: list[int], room: int) -> list[int]:
    """The indices issued when `fits` decides each issuance in order against the room left."""
    left, issued = room, []
    for index, value in enumerate(amounts):
        if fits(value, left):
            issued.append(index)
            left -= value
    return issued


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 60), max_size=60), st.integers(-20, 900))
def test_issued_never_pass_the_ceiling_and_a_refusal_changes_nothing(amounts: list[int], room: int) -> None:
    first, after = resolve(np.asarray(amounts, dtype=np.int64), room)
    issued = list(range(min(first, len(amounts)))) + after.tolist()
    assert issued == plain(amounts, room)
    assert sum(amounts[i] for i in issued) <= max(room, 0)
    if first < len(amounts):  # the first refusal is the first amount past the room left
        assert sum(amounts[:first]) + amounts[first] > room


def test_the_rule_for_one_issuance() -> None:
    assert room_under(None, 10) is None and fits(10**30, None)
    assert room_under(100, 40) == 60
    assert fits(60, 60) and not fits(61, 60)
    assert not fits(1, room_under(100, 120))  # outstanding above the ceiling: nothing fits
    assert first_over(np.asarray([5, 5, 5], dtype=np.int64), 11) == (2, 10)
    assert first_over(np.asarray([], dtype=np.int64), 0) == (0, 0)
