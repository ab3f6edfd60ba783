"""Lots and FIFO (rewards_lab.domain.lots): what a debit takes from which lot, for the live engine's `Lot` objects
and for the replay's lot indices, which are the same rules; the replay's LotBook held to `take`."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from rewards_lab.domain.lots import Lot, credited, debit_order, fifo_place, take, take_in_turn
from rewards_lab.replay.lot_pass import LotBook

T0 = datetime(2026, 1, 1)
lots_spec = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40), st.integers(0, 3)), max_size=12)


def make(spec: list[tuple[int, int, int]]) -> list[Lot]:
    """Lots issued `day` days on, holding `remaining`, made by source `s<source>` (ids in creation order)."""
    return [
        Lot(f"lot_{index:04d}", T0 + timedelta(days=day), remaining, None, f"s{source}")
        for index, (day, remaining, source) in enumerate(spec)
    ]


@settings(max_examples=300, deadline=None)
@given(lots_spec, st.integers(0, 200), st.sets(st.integers(0, 3), max_size=2))
def test_a_debit_takes_at_most_what_the_lots_hold_preferred_first_then_oldest(
    spec: list[tuple[int, int, int]], amount: int, first: set[int]
) -> None:
    lots = make(spec)
    before = {lot.id: lot.remaining for lot in lots}
    sources = {f"s{source}" for source in first}
    taken = take(lots, amount, sources)
    assert sum(part for _, part in taken) == min(amount, sum(before.values()))
    for lot, part in taken:
        assert 0 < part <= before[lot.id] and lot.remaining == before[lot.id] - part
    untouched = {lot.id for lot in lots} - {lot.id for lot, _ in taken}
    assert all(lot.remaining == before[lot.id] for lot in lots if lot.id in untouched)
    expected = sorted(lots, key=lambda lot: (lot.source not in sources, lot.issued_at, lot.id))
    expected = [lot for lot in expected if before[lot.id] > 0]
    assert [lot.id for lot, _ in taken] == [lot.id for lot in expected[: len(taken)]]
    assert all(lot.remaining == 0 for lot, _ in taken[:-1])  # only the last lot taken from may keep some


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=30), st.integers(0, 400))
def test_take_in_turn_takes_in_turn(remaining: list[int], amount: int) -> None:
    held = list(remaining)
    taken = take_in_turn(held, debit_order(range(len(held))), amount)
    assert sum(part for _, part in taken) == min(amount, sum(remaining))
    assert [held[i] + part for i, part in taken] == [remaining[i] for i, _ in taken]
    assert [i for i, _ in taken] == sorted(i for i, _ in taken)


@given(st.lists(st.integers(0, 5), max_size=20))
def test_new_lots_go_in_fifo_order(issued: list[int]) -> None:
    """Lots made one after the other, each placed by fifo_place, are in (issued, creation) order."""
    order: list[int] = []
    for index, at in enumerate(issued):
        order.insert(fifo_place(order, issued, at), index)
    assert order == sorted(range(len(issued)), key=lambda i: (issued[i], i))


def test_debit_order_and_credited() -> None:
    assert list(debit_order([4, 1, 7, 2], [7, 2])) == [7, 2, 4, 1]
    assert list(debit_order([4, 1], ())) == [4, 1]
    assert credited(10, 25) == 10 and credited(10, 4) == 4 and credited(10, -3) == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("credit"), st.integers(0, 6), st.integers(1, 30)),
            st.tuples(st.just("debit"), st.integers(-1, 12), st.integers(1, 60)),
        ),
        max_size=25,
    )
)
def test_the_replays_lot_book_takes_what_the_domains_take_takes(steps: list[tuple[str, int, int]]) -> None:
    """The replay keeps lots in typed arrays and calls the index rules; the live engine's `take` over Lot objects
    decides every debit the same way (a debit names a reward to take from first, or -1)."""
    book = LotBook(as_of=10**15)
    model: list[Lot] = []
    for seq, (kind, value, amount) in enumerate(steps):
        if kind == "credit":  # issued `value` days on (a moved refund's reward may be issued earlier)
            issued = T0 + timedelta(days=value)
            micros = int((issued - datetime(1970, 1, 1)).total_seconds()) * 1_000_000
            balance = sum(lot.remaining for lot in model) + amount
            book.credit("c", seq, amount, balance, micros, None)
            model.append(Lot(f"{seq:08d}", issued, amount, None, str(seq)))
        else:
            first = None if value < 0 else value
            book.debit("c", amount, first)
            take(model, amount, () if first is None else (str(first),))
            model = [lot for lot in model if lot.remaining > 0]
        expected = [lot.remaining for lot in sorted(model, key=lambda lot: (lot.issued_at, lot.id))]
        assert book.held("c") == expected
