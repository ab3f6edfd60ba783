"""Lots in the replay's sequential pass (issue 19): what the customers whose lots get consumed hold, lot by lot,
and when their lots expire, by the domain's own rules over lot indices (rewards_lab.domain.lots: `credited`,
`fifo_place`, `debit_order`, `take_in_turn`).

Only customers with redemptions or reversals (or every customer, when the pass enforces the ceiling) have their
lots here; every other customer's lots are never consumed, and expire whole (closed form, in SQL). Expiry is the
ideal worker's: a lot expires at its `expires_at`, before the first operation at or after that instant, and at
the end before `as_of`. The worker runs before an event (not between the operations of one event, nor between
an original and the refunds processed right after it: one anchor `k1`) and before each redemption; checked lazily
at the next operation, which sees the same state. Expiry runs on one clock for every customer, in processing
order: the clocks of the operations never decrease along it (events are processed in `occurred_at` order, a
moved refund at its original's place and time, a redemption after the last event at or before it), so a lot
expired at the first operation of anyone at or after its time is the lot its own customer's next operation
would have found expired, and the worker of the live service (every wallet at once) is what the pass runs.
Expired and spent lots leave the book at once: what it holds is the lots still open (issue 27: a per-customer
clock kept every lot of a customer who never came back, 6.4 GiB at 10M events).

Times are epoch microseconds; a customer's open lots are kept in FIFO order, (issued_at, creation).
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from rewards_lab.domain.lots import credited, debit_order, fifo_place, take_in_turn

NEVER = -(2**63)  # the expiry of a lot that never expires: below every instant, those before 1970 included

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


class LotBook:
    """Open lots per customer, their expiry order, and the lots finished (spent or expired) as LOTS rows.

    Compact, since a long history holds millions of open lots at once (issue 27: the pass peaked at 6.4 GiB at 10M
    events with a Python object per lot): a lot is a slot in typed arrays (slots are reused once the lot is
    finished and no longer queued), a customer's open lots an array of slots, and the expiry order a queue of
    slots (lots are made in processing order, so their expiries mostly arrive in order; the others wait in a
    small heap). A customer's open lots are kept in FIFO order, so a debit takes from the first few."""

    def __init__(self, as_of: int) -> None:
        self.as_of = as_of
        self.open: dict[str, array[int]] = {}  # holder -> slots of their open lots, in FIFO order
        self._seq, self._issued, self._expires = array("q"), array("q"), array("q")  # per slot; NEVER: no expiry
        self._amount, self._remaining = array("q"), array("q")
        self._holder: list[str] = []
        self._free = array("q")  # slots to reuse
        self._queue, self._head = array("q"), 0  # slots of expiring lots, by expiry (from _head on)
        self._late: list[tuple[int, int, int]] = []  # (expires, made, slot) of lots that expire out of order
        self._count = 0
        self._checked: int | None = None  # the last anchor the worker ran before
        self.rows: dict[str, list[Any]] = {name: [] for name in LOTS.names}

    def due(self, anchor: int, clock: int, redemption: bool) -> list[tuple[str, int]]:
        """Run the worker before an operation at `clock` (its anchor event `anchor`): (holder, amount) of every
        lot it expires."""
        if not redemption and self._checked == anchor:
            return []
        self._checked = anchor
        return self._expire(clock)

    def credit(self, holder: str, seq: int, amount: int, balance_after: int, issued: int, expires: int | None) -> None:
        """A reward of `amount` issued to `holder` (leaving the balance at `balance_after`): its lot, if any."""
        room = credited(amount, balance_after)
        if room <= 0:
            return
        self._count += 1
        holder = sys.intern(holder)
        slot = self._slot(seq, holder, issued, NEVER if expires is None else expires, room)
        held = self.open.get(holder)
        if held is None:
            held = self.open[holder] = array("q")
        held.insert(fifo_place(held, self._issued, issued), slot)  # one processed late (a moved refund's) goes back
        if expires is None:
            return
        queue = self._queue
        if len(queue) == self._head or self._expires[queue[-1]] <= expires:
            queue.append(slot)
        else:
            heapq.heappush(self._late, (expires, self._count, slot))

    def debit(self, holder: str, amount: int, first: int | None = None) -> None:
        """A debit of `holder` (a redemption, or what a reversal took, first from reward `first`'s lot).

        The domain's `debit_order` and `take_in_turn` over the customer's open lots, kept in FIFO order (a heavy
        customer holds hundreds of open lots; a debit touches a few)."""
        held = self.open.get(holder)
        if not held:
            return
        remaining, seqs = self._remaining, self._seq
        preferred = [slot for slot in held if seqs[slot] == first] if first is not None else []
        for slot, _ in take_in_turn(remaining, debit_order(held, preferred), amount):
            if remaining[slot] == 0:
                held.remove(slot)
                self._finish(slot, 0)
        if not held:
            del self.open[holder]

    def held(self, holder: str) -> list[int]:
        """What each open lot of `holder` still holds, oldest first."""
        return [self._remaining[slot] for slot in self.open.get(holder, ())]

    def finish(self, chunk: int = 65_536) -> Iterator[tuple[list[tuple[str, int]], pa.RecordBatch]]:
        """The worker's last run, at `as_of`, then every lot still open, `chunk` lots at a time (millions of lots
        may still be open at the end): (holder, amount) of what it expired and the lots finished."""
        while True:
            expired = self._expire(self.as_of, chunk)
            if not expired and not self.rows["seq"]:
                break
            yield expired, self.batch()
        for slots in self.open.values():
            for slot in slots:
                if self._remaining[slot] > 0:
                    self._finish(slot, 0)
            if len(self.rows["seq"]) >= chunk:
                yield [], self.batch()
        self.open.clear()
        yield [], self.batch()

    def batch(self) -> pa.RecordBatch:
        """The lots finished since the last batch."""
        made = pa.RecordBatch.from_pydict(self.rows, LOTS)
        self.rows = {name: [] for name in LOTS.names}
        return made

    def _slot(self, seq: int, holder: str, issued: int, expires: int, amount: int) -> int:
        values = (seq, issued, expires, amount, amount)
        columns = (self._seq, self._issued, self._expires, self._amount, self._remaining)
        if self._free:
            slot = self._free.pop()
            for column, value in zip(columns, values, strict=True):
                column[slot] = value
            self._holder[slot] = holder
            return slot
        for column, value in zip(columns, values, strict=True):
            column.append(value)
        self._holder.append(holder)
        return len(self._holder) - 1

    def _expire(self, clock: int, most: int | None = None) -> list[tuple[str, int]]:
        """Every queued lot that expires by `clock` (at most `most` of those still open): expired when it still
        holds points; its slot freed."""
        expired: list[tuple[str, int]] = []
        queue, late, remaining = self._queue, self._late, self._remaining
        while most is None or len(expired) < most:
            if self._head < len(queue) and self._expires[queue[self._head]] <= clock:
                slot = queue[self._head]
                self._head += 1
            elif late and late[0][0] <= clock:
                slot = heapq.heappop(late)[2]
            else:
                break
            amount = remaining[slot]
            if amount > 0:  # still open: it leaves its customer's open lots (mostly the first of them)
                holder = self._holder[slot]
                remaining[slot] = 0
                expired.append((holder, amount))
                held = self.open[holder]
                held.remove(slot)
                if not held:
                    del self.open[holder]
                self._finish(slot, amount)
            self._free.append(slot)
        if self._head > 65_536 and self._head * 2 > len(queue):
            del queue[: self._head]
            self._head = 0
        return expired

    def _finish(self, slot: int, expired: int) -> None:
        """A lot spent or expired: its LOTS row (a spent lot that never expires frees its slot now; one that
        expires keeps it until its expiry leaves the queue)."""
        expires = self._expires[slot]
        values = (
            self._seq[slot],
            self._holder[slot],
            self._issued[slot],
            None if expires == NEVER else expires,
            self._amount[slot],
            self._remaining[slot],
            expired,
        )
        for name, value in zip(LOTS.names, values, strict=True):
            self.rows[name].append(value)
        if expires == NEVER:
            self._free.append(slot)
