"""Processing order (rewards_lab.domain.processing_order): refunds after their originals, the one algorithm the
live worker (a batch's order) and both replay engines (a history's processing keys) place refunds with, held to a
plain model of the worker's order; segments; a history's time order."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.processing_order import (
    follows_of,
    note_original,
    processing_keys,
    processing_order,
    refunds_after_originals,
    segments,
    time_positions,
)

references_lists = st.lists(st.lists(st.integers(0, 11), max_size=3), min_size=1, max_size=12)


def batch(references: list[list[int]]) -> tuple[list[str], list[list[str]]]:
    ids = [f"e{i}" for i in range(len(references))]
    return ids, [[f"e{j}" for j in refs] for refs in references]


def model_order(external_ids: Sequence[str], references: Sequence[Sequence[str]]) -> list[int]:
    """The worker's order as it was first written (recursive): each event that is not moved, then, right after
    any event, the events held after it in their own order."""
    position = {external_id: index for index, external_id in enumerate(external_ids)}
    held: dict[int, list[int]] = {}
    for index, names in enumerate(references):
        later = [position[name] for name in names if position.get(name, -1) > index]
        if later:
            held.setdefault(max(later), []).append(index)
    moved = {index for indices in held.values() for index in indices}
    order: list[int] = []

    def emit(index: int) -> None:
        order.append(index)
        for follower in held.get(index, []):
            emit(follower)

    for index in range(len(external_ids)):
        if index not in moved:
            emit(index)
    return order


@settings(max_examples=300, deadline=None)
@given(references_lists)
def test_the_order_is_the_workers_model(references: list[list[int]]) -> None:
    ids, named = batch(references)
    assert refunds_after_originals(ids, named) == model_order(ids, named)


@settings(max_examples=300, deadline=None)
@given(references_lists)
def test_sorting_by_processing_keys_is_the_processing_order(references: list[list[int]]) -> None:
    """What a replay sorts by (anchor, sub) is what the worker processes in."""
    ids, named = batch(references)
    follows = follows_of(ids, named)
    keys = processing_keys(follows)
    assert set(keys) == set(follows)
    by_key = sorted(range(len(ids)), key=lambda i: keys.get(i, (i, 0)))
    assert by_key == processing_order(len(ids), follows) == refunds_after_originals(ids, named)


@settings(max_examples=300, deadline=None)
@given(references_lists)
def test_refunds_come_after_their_originals(references: list[list[int]]) -> None:
    """A permutation in which every event that is not moved keeps its place relative to the others, a moved
    event comes after the event it follows, and every event comes after each later original it names that is not
    itself moved (an original moved after something later takes its place there)."""
    ids, named = batch(references)
    order = refunds_after_originals(ids, named)
    assert sorted(order) == list(range(len(ids)))
    place = {index: at for at, index in enumerate(order)}
    follows = follows_of(ids, named)
    fixed = [index for index in order if index not in follows]
    assert fixed == sorted(fixed)
    for index, original in follows.items():
        assert place[index] > place[original]
    for index, refs in enumerate(references):
        for original in refs:
            if index < original < len(ids) and original not in follows:
                assert place[index] > place[original]


def test_a_refund_follows_the_last_of_its_later_originals_and_chains_follow_it() -> None:
    ids, named = batch([[2, 1], [3], [], [], [0]])
    assert follows_of(ids, named) == {0: 2, 1: 3}  # event 4's original comes before it: not moved
    assert refunds_after_originals(ids, named) == [2, 0, 3, 1, 4]
    follows: dict[int, int] = {}
    for position, original in ((0, 2), (0, 1), (1, 0), (5, 7)):
        note_original(follows, position, original)
    assert follows == {0: 2, 5: 7}
    assert processing_keys({0: 1, 1: 3, 2: 3, 4: 5}) == {1: (3, 1), 0: (3, 2), 2: (3, 3), 4: (5, 1)}


@settings(max_examples=200, deadline=None)
@given(references_lists)
def test_segments_cut_before_a_refund_of_an_event_of_the_same_segment(references: list[list[int]]) -> None:
    ids, named = batch(references)
    order = refunds_after_originals(ids, named)
    parts = segments(order, ids, named)
    assert [index for part in parts for index in part] == order
    for part in parts:
        seen: set[str] = set()
        for index in part:
            assert not seen.intersection(named[index])
            seen.add(ids[index])


@given(st.lists(st.integers(-5, 5), max_size=40))
def test_a_history_is_processed_by_time_ties_in_input_order(times: list[int]) -> None:
    positions = time_positions(np.asarray(times, dtype=np.int64))
    expected = sorted(range(len(times)), key=lambda i: (times[i], i))
    assert positions.dtype == np.int64
    assert [int(p) for p in positions] == [expected.index(i) for i in range(len(times))]
