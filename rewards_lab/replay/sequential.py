"""The sequential part of a replay: caps and budgets that can bind, reversals and redemptions, in processing order,
decided by the live engine's own arithmetic (`domain.limits.Allowance`, `domain.reversals.reversal_target` and
`clawback_take`), so that live and replay share it.

Both engines feed it the same operations, sorted by processing key (anchor, sub, slot, k;
`domain.processing_order`):

- **grant** (op 0): a reward whose counters can bind (`mask`, `replay.limits_plan`), or every reward when the
  supply ceiling is enforced here: cut to what its caps allow (`Allowance.grant`), then, with a ceiling, issued
  when it fits what is left (`room`), else refused and its grant given back (it counts nowhere, as live); a reward
  cut to nothing is `limited`. Its outcome is output only when it is not "the requested amount, issued" (what
  set-based SQL assumes of every other reward); the ceiling is `domain.ceiling.fits`;
- **item** (op 1): a reverse action's reward of its original (one per reward the original received): the target
  (`reversal_target`, from what earlier reversals targeted) and what the wallet gives (`clawback_take`), which is
  what the counters the reward counted in get back (the reward stops counting once all of it has been taken
  back, `domain.reversals.all_taken_back`, as live: `engine.reversals.give_back_taken`); a reward that was not
  issued is skipped;
- **redeem** (op 2): a redemption of the optional input, accepted when the customer's balance covers it
  (`domain.posting_policy.covers`, as the ledger decides).

A customer's balance is only needed where it can fall short of a target: before any redemption every issued
reward is still held, less what reversals targeted of it, so a target never exceeds the balance and every
clawback policy takes the whole target. Balances are therefore tracked only for customers with redemptions:
their operations carry `credit`, what set-based rewards gave them before that point (a running sum in SQL), to
which the pass adds its own grants, takings and redemptions.

With expiry (`as_of`), the customers whose lots get consumed (redemptions, reversals; every customer when the pass
holds the ceiling) are `tracked`, every reward of theirs goes through the pass (their credit is 0), and their lots
are kept by `replay.lot_pass.LotBook`: a grant makes a lot, a reversal and a redemption take from the lots, and
the ideal worker expires lots before the operations at or after their time, lowering the balance and giving room
back under the ceiling. Operations then also carry `clock` (their anchor's time, or a redemption's), `issued`
(the event's own time) and `exp` (when its lot expires).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

import pyarrow as pa

from rewards_lab.domain.ceiling import fits
from rewards_lab.domain.limits import Allowance, Cap, CapCheck, CounterKey, day_number, day_of
from rewards_lab.domain.posting_policy import covers
from rewards_lab.domain.reversals import all_taken_back, clawback_take, reversal_target
from rewards_lab.replay.limits_plan import PROGRAMME_ID, LimitsPlan
from rewards_lab.replay.lot_pass import LOTS, LotBook

GRANT, ITEM, REDEEM = 0, 1, 2
Columns = dict[str, list[Any]]  # a batch of operations, column by column
EXHAUSTED = "asset_supply_exhausted"
DECISIONS = pa.schema(
    [
        ("seq", pa.int64()),
        ("holder", pa.string()),
        ("requested", pa.int64()),
        ("g", pa.int64()),
        ("status", pa.string()),
        ("error_code", pa.string()),
        ("cut_scope", pa.string()),
        ("cut_period", pa.string()),
        ("cut_start", pa.int32()),
        ("cut_minor", pa.int64()),
    ]
)
ITEMS = pa.schema(
    [
        ("seq", pa.int64()),
        ("reward", pa.int64()),
        ("holder", pa.string()),
        ("target", pa.int64()),
        ("taken", pa.int64()),
    ]
)
REDEMPTIONS = pa.schema([("idx", pa.int64()), ("accepted", pa.bool_())])
# The outputs as one (Spark's mapInArrow yields one schema): `kind` d (decision), i (item), r (redemption), l (lot).
OUTCOMES = pa.schema(
    [
        pa.field("kind", pa.string()),
        *DECISIONS,
        *(f for f in ITEMS if f.name not in ("seq", "holder")),
        *REDEMPTIONS,
        *(f for f in LOTS if f.name not in ("seq", "holder")),
    ]
)


def as_outcomes(batch: pa.RecordBatch, kind: str) -> pa.RecordBatch:
    """A DECISIONS, ITEMS or REDEMPTIONS batch in the OUTCOMES schema (the other columns null)."""
    columns = [pa.array([kind] * batch.num_rows, pa.string())]
    for field_ in list(OUTCOMES)[1:]:
        index = batch.schema.get_field_index(field_.name)
        columns.append(batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, field_.type))
    return pa.RecordBatch.from_arrays(columns, schema=OUTCOMES)


@dataclass
class PassOutput:
    """What the pass decided, as Arrow record batches of DECISIONS, ITEMS, REDEMPTIONS and LOTS."""

    decisions: list[pa.RecordBatch] = field(default_factory=list)
    items: list[pa.RecordBatch] = field(default_factory=list)
    redemptions: list[pa.RecordBatch] = field(default_factory=list)
    lots: list[pa.RecordBatch] = field(default_factory=list)

    def tables(self) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table]:
        return (
            pa.Table.from_batches(self.decisions, DECISIONS),
            pa.Table.from_batches(self.items, ITEMS),
            pa.Table.from_batches(self.redemptions, REDEMPTIONS),
            pa.Table.from_batches(self.lots, LOTS),
        )


class SequentialPass:
    """The running state: counters that can bind, rewards that may be reversed, what reversals targeted, the
    balances of customers with redemptions and, when the ceiling is enforced here, the room left under it; with
    expiry (`as_of`, epoch microseconds) the tracked customers' lots."""

    def __init__(self, plan: LimitsPlan, room: int | None = None, as_of: int | None = None) -> None:
        self.plan, self.room = plan, room
        self.book = None if as_of is None else LotBook(as_of)
        self.allowance = Allowance()
        self.rewards: dict[int, int] = {}  # seq -> what was issued, of rewards a reversal names
        self._counted: dict[int, tuple[CounterKey, ...]] = {}  # seq -> the counters of those that counted in any
        self.targeted: dict[int, int] = {}  # reward seq -> what reversals targeted of it
        self.taken_back: dict[int, int] = {}  # reward seq -> what the wallet gave back of it
        self.delta: dict[str, int] = {}  # balance of customers with redemptions, beyond their SQL credit
        self._rule_checks = {rule: plan.checks(rule) for rule in plan.rule_caps}
        self._default_checks = plan.checks(-1)
        self._dates: dict[int, date] = {}
        self._fractions: dict[str, Decimal] = {}
        self._wanted: dict[tuple[int, int], list[tuple[int, Cap, str, bool]]] = {}
        self._made: dict[tuple[int, int, str, int], CapCheck] = {}

    def run(self, batches: Iterable[pa.RecordBatch]) -> PassOutput:
        out = PassOutput()
        for decisions, items, redemptions, lots in self.batches(batches):
            out.decisions.append(decisions)
            out.items.append(items)
            out.redemptions.append(redemptions)
            out.lots.append(lots)
        return out

    def batches(
        self, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[tuple[pa.RecordBatch, pa.RecordBatch, pa.RecordBatch, pa.RecordBatch]]:
        """The decisions, items, redemptions and finished lots of each batch of operations, as it is run
        (streamed); with expiry, a last batch holds the lots still open at the end."""
        book = self.book
        for batch in batches:
            decisions: list[tuple[Any, ...]] = []
            items: dict[str, list[Any]] = {name: [] for name in ITEMS.names}
            redemptions: dict[str, list[Any]] = {name: [] for name in REDEMPTIONS.names}
            columns = batch.to_pydict()
            seqs, holders, amounts, rules, masks = (columns[c] for c in ("seq", "holder", "m", "rule", "mask"))
            keeps, tracked = columns["keep"], columns["tracked"]
            for index, op in enumerate(columns["op"]):
                if book is not None and tracked[index]:
                    clock = columns["clock"][index]
                    self._expired(book.due(columns["k1"][index], clock, op == REDEEM))
                if op == GRANT:
                    checks = self._checks(columns, index, rules[index], masks[index], holders[index])
                    issued = self._grant(
                        seqs[index], holders[index], amounts[index], checks, keeps[index], tracked[index], decisions
                    )
                    if book is not None and tracked[index] and issued:
                        holder = holders[index]
                        made, expires = columns["issued"][index], columns["exp"][index]
                        book.credit(holder, seqs[index], issued, self.delta.get(holder, 0), made, expires)
                elif op == ITEM:
                    self._item(columns, index, items)
                elif op == REDEEM:
                    self._redeem(columns, index, redemptions)
            made = zip(*decisions, strict=True) if decisions else ([] for _ in DECISIONS.names)
            yield (
                pa.RecordBatch.from_arrays(
                    [pa.array(v, f.type) for v, f in zip(made, DECISIONS, strict=True)], schema=DECISIONS
                ),
                pa.RecordBatch.from_pydict(items, ITEMS),
                pa.RecordBatch.from_pydict(redemptions, REDEMPTIONS),
                _empty(LOTS) if book is None else book.batch(),
            )
        if book is not None:
            for expired, lots in book.finish():
                self._expired(expired)
                yield (_empty(DECISIONS), _empty(ITEMS), _empty(REDEMPTIONS), lots)

    def _expired(self, expired: list[tuple[str, int]]) -> None:
        """What the worker expired leaves the balance, and gives room back under the ceiling."""
        for holder, amount in expired:
            self.delta[holder] = self.delta.get(holder, 0) - amount
            if self.room is not None:
                self.room += amount

    # operations -------------------------------------------------------------------------------------------
    def _checks(self, columns: Columns, index: int, rule: int, mask: int | None, holder: str) -> list[CapCheck]:
        """The checks of a reward whose counters in `mask` can bind, in order (each counter's check made once)."""
        if not mask:
            return []
        wanted = self._wanted.get((rule, mask))
        if wanted is None:
            wanted = self._wanted[(rule, mask)] = [
                (bit, cap, f"d_{cap.period}", cap.per_customer)
                for bit, cap in self._rule_checks.get(rule, self._default_checks)
                if mask & bit
            ]
        checks = []
        for bit, cap, period, per_customer in wanted:
            days = 0 if cap.period == "lifetime" else columns[period][index]
            whose = holder if per_customer else ""
            found = self._made.get((bit, rule, whose, days))
            if found is None:
                start = self._date(days)
                found = CapCheck(cap, cap.key(PROGRAMME_ID, str(rule), holder, start), start)
                self._made[(bit, rule, whose, days)] = found
            checks.append(found)
        return checks

    def _grant(
        self,
        seq: int,
        holder: str,
        requested: int,
        checks: list[CapCheck],
        keep: bool,
        tracked: bool,
        out: list[tuple[Any, ...]],
    ) -> int:
        """Decide a reward; returns what was issued (0: nothing)."""
        amount, cut = requested, None
        keys: tuple[CounterKey, ...] = ()
        grant = None
        if checks:
            grant = self.allowance.grant(requested, checks)
            amount, cut, keys = grant.amount_minor, grant.cut, grant.keys
        status, code = "issued", None
        if amount == 0:
            status = "limited"
        elif self.room is not None and not fits(amount, self.room):  # refused: counts in no counter (as live)
            status, code = "failed", EXHAUSTED
            if grant is not None:
                self.allowance.refused(grant)
        elif self.room is not None:
            self.room -= amount
        if status == "issued":
            if keep:
                self.rewards[seq] = amount
                if keys:
                    self._counted[seq] = keys
            if tracked:
                self.delta[holder] = self.delta.get(holder, 0) + amount
        if amount == requested and status == "issued":
            return amount
        if cut is None:
            out.append((seq, holder, requested, amount, status, code, None, None, None, None))
        else:
            start = day_number(cut.period_start)
            out.append((seq, holder, requested, amount, status, code, cut.scope, cut.period, start, cut.cut_minor))
        return amount if status == "issued" else 0

    def _item(self, columns: Columns, index: int, out: dict[str, list[Any]]) -> None:
        reward, holder = columns["ref"][index], columns["holder"][index]
        if columns["sequential"][index]:
            known = self.rewards.get(reward)
            if known is None:  # cut to nothing, or refused by the ceiling: nothing was issued to take back
                return
            issued, keys = known, self._counted.get(reward, ())
        else:
            issued, keys = columns["m"][index], ()
        done = self.targeted.get(reward, 0)
        target = reversal_target(issued, done, self._fraction(columns["fraction"][index]))
        if target <= 0:
            return
        self.targeted[reward] = done + target
        if columns["tracked"][index]:
            balance = int(columns["credit"][index] or 0) + self.delta.get(holder, 0)
            taken = clawback_take(target, balance, self.plan.clawback)
            self.delta[holder] = self.delta.get(holder, 0) - taken
            if self.book is not None:  # from the reward's own lot first, then the oldest
                self.book.debit(holder, taken, reward)
        else:  # nothing was spent: the wallet still holds at least the target
            taken = clawback_take(target, target, self.plan.clawback)
        if keys and taken > 0:  # the counters get back what the wallet gave
            back = self.taken_back[reward] = self.taken_back.get(reward, 0) + taken
            self.allowance.give_back(keys, taken, whole=all_taken_back(back, issued))
        if self.room is not None:
            self.room += taken
        out["seq"].append(columns["seq"][index])
        out["reward"].append(reward)
        out["holder"].append(holder)
        out["target"].append(target)
        out["taken"].append(taken)

    def _redeem(self, columns: Columns, index: int, out: dict[str, list[Any]]) -> None:
        holder, amount = columns["holder"][index], columns["m"][index]
        balance = int(columns["credit"][index] or 0) + self.delta.get(holder, 0)
        accepted = covers(balance, amount)  # the ledger refuses a redemption the wallet cannot cover
        if accepted:
            self.delta[holder] = self.delta.get(holder, 0) - amount
            if self.book is not None:
                self.book.debit(holder, amount)
            if self.room is not None:
                self.room += amount
        out["idx"].append(columns["ref"][index])
        out["accepted"].append(accepted)

    # values -----------------------------------------------------------------------------------------------
    def _date(self, days: int) -> date:
        found = self._dates.get(days)
        if found is None:
            found = self._dates[days] = day_of(int(days))
        return found

    def _fraction(self, text: str | None) -> Decimal | None:
        if text is None:
            return None
        found = self._fractions.get(text)
        if found is None:
            found = self._fractions[text] = Decimal(text)
        return found


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({name: [] for name in schema.names}, schema)
