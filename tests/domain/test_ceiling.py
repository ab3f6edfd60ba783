"""The supply ceiling (rewards_lab.domain.ceiling): `resolve`, the replay's vectorised rounds, against `fits`, the
ledger's rule applied one issuance at a time, and the posting policy reading the same rule."""

from __future__ import annotations

import numpy as np
import pytest
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


@pytest.mark.parametrize("seed", range(6))
def test_ceiling_resolution_matches_a_plain_loop(seed: int) -> None:
    """The numpy rounds of resolve (above the plain loop's 2,048 rows) against the rule one issuance at a time."""
    rng = np.random.default_rng(seed)
    amounts = np.concatenate([rng.integers(1, 50, 6000), rng.integers(1, 3, 6000), rng.integers(40, 500, 3000)])
    rng.shuffle(amounts)
    room = int(amounts[:4000].sum()) + int(rng.integers(0, 5000))
    expected = plain(amounts.tolist(), room)
    first, after = resolve(amounts.astype(np.int64), room)
    assert list(range(first)) + after.tolist() == expected
    assert first < len(amounts) and first not in expected


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
