"""Lots in the replay's sequential pass (issue 19): what the customers whose lots get consumed hold, lot by lot,
and when their lots expire, by the domain's own `take` and `credited` (rewards_lab.domain.lots).

Only customers with redemptions or reversals (or every customer, when the pass enforces the ceiling) have their
lots here; every other customer's lots are never consumed, and expire whole (closed form, in SQL). Expiry is the
ideal worker's: a lot expires at its `expires_at`, before the first operation at or after that instant, and at
the end before `as_of`. The worker runs before an event (not between the operations of one event, nor between
an original and the refunds processed right after it: one anchor `k1`) and before each redemption; checked lazily
at the next operation, which sees the same state. With one clock for every customer (`shared`: the pass holds
the ceiling's room, which expired points give back) expiry runs in processing order across customers; otherwise
per customer, whose operations are in order.

Times are epoch microseconds; lot ids are creation order (zero-padded), so that FIFO is (issued_at, creation).
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from rewards_lab.domain.lots import Lot, credited, take

LOTS = pa.schema(
    [
        ("seq", pa.int64()),
        ("holder", pa.string()),
        ("lot_issued", pa.int64()),
        ("lot_expires", pa.int64()),
        ("lot_amount", pa.int64()),
        ("lot_remaining", pa.int64()),
        ("lot_expired", pa.int64()),
    ]
)
_EPOCH = datetime(1970, 1, 1)
_Made = tuple[int, str, int, int | None, int]  # a lot's (seq, holder, issued, expires, amount)


def instant(micros: int) -> datetime:
    """A naive UTC datetime of epoch microseconds (as the store keeps times)."""
    return _EPOCH + timedelta(microseconds=micros)


class LotBook:
    """Open lots per customer, their expiry order, and the lots finished (spent or expired) as LOTS rows."""

    def __init__(self, as_of: int, shared: bool) -> None:
        self.as_of, self.shared = as_of, shared
        self.open: dict[str, list[Lot]] = {}
        self._heaps: dict[str, list[tuple[int, str, Lot]]] = {}
        self._checked: dict[str, int] = {}  # per clock: the last anchor the worker ran before
        self._made: dict[str, _Made] = {}  # the open lots by id
        self._count = 0
        self.rows: dict[str, list[Any]] = {name: [] for name in LOTS.names}

    def due(self, holder: str, anchor: int, clock: int, redemption: bool) -> list[tuple[str, int]]:
        """Run the worker before an operation at `clock` (its anchor event `anchor`): (holder, amount) of every
        lot it expires."""
        key = "" if self.shared else holder
        if not redemption and self._checked.get(key) == anchor:
            return []
        self._checked[key] = anchor
        return self._expire(key, clock)

    def credit(self, holder: str, seq: int, amount: int, balance_after: int, issued: int, expires: int | None) -> None:
        """A reward of `amount` issued to `holder` (leaving the balance at `balance_after`): its lot, if any."""
        room = credited(amount, balance_after)
        if room <= 0:
            return
        self._count += 1
        lot = Lot(f"{self._count:020d}", instant(issued), room, None if expires is None else instant(expires), str(seq))
        self.open.setdefault(holder, []).append(lot)
        self._made[lot.id] = (seq, holder, issued, expires, room)
        if expires is not None:
            heapq.heappush(self._heaps.setdefault("" if self.shared else holder, []), (expires, lot.id, lot))

    def debit(self, holder: str, amount: int, first: int | None = None) -> None:
        """A debit of `holder` (a redemption, or what a reversal took, first from reward `first`'s lot)."""
        held = [lot for lot in self.open.get(holder, ()) if lot.remaining > 0]
        for lot, _ in take(held, amount, () if first is None else (str(first),)):
            if lot.remaining == 0:
                self._finish(lot, 0)
        self.open[holder] = [lot for lot in held if lot.remaining > 0]

    def finish(self) -> list[tuple[str, int]]:
        """The worker's last run, at `as_of`, then every lot still open: (holder, amount) of what it expired."""
        expired = []
        for key in list(self._heaps):
            expired += self._expire(key, self.as_of)
        for lots in self.open.values():
            for lot in lots:
                if lot.remaining > 0:
                    self._finish(lot, 0)
        self.open.clear()
        return expired

    def batch(self) -> pa.RecordBatch:
        """The lots finished since the last batch."""
        made = pa.RecordBatch.from_pydict(self.rows, LOTS)
        self.rows = {name: [] for name in LOTS.names}
        return made

    def _expire(self, key: str, clock: int) -> list[tuple[str, int]]:
        heap, expired = self._heaps.get(key), []
        while heap and heap[0][0] <= clock:
            _, _, lot = heapq.heappop(heap)
            if lot.remaining > 0:
                amount, lot.remaining = lot.remaining, 0
                expired.append((self._made[lot.id][1], amount))
                self._finish(lot, amount)
        return expired

    def _finish(self, lot: Lot, expired: int) -> None:
        seq, holder, issued, expires, amount = self._made.pop(lot.id)
        for name, value in zip(
            LOTS.names,
            (seq, holder, issued, expires, amount, lot.remaining, expired),
            strict=True,
        ):
            self.rows[name].append(value)
