"""Where each rule action's amount sits in an event's `a` STRUCT (the `amounts` table): the layout of a compiled
programme, and the DuckDB text of a type's STRUCT (`struct_sql`: the featured path's `store.create` and the plan's
`amounts` step on DuckDB write the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rewards_lab.replay.compiler import CompiledProgramme


@dataclass(frozen=True)
class Layout:
    """Where each rule action's amount sits in `a`: slot numbers (the programme's actions in file order) per
    event type, in processing order within an event."""

    slots: int  # actions in the programme: the width of one event's seq range (seq = pos * slots + slot)
    types: tuple[str, ...]  # event types that have rules; k indexes them
    slots_of: tuple[tuple[int, ...], ...]  # per type: its slots in order (field c{i + 1} holds slots_of[k][i])
    expressions: tuple[tuple[str, ...], ...]  # per type: SQL of each slot's amount (0 when nothing is issued)
    refusing: frozenset[int]  # slots whose amount may be TOO_LARGE (or a beneficiary's refusal)
    largest: tuple[int, ...]  # per slot: no amount is above this
    rule_of: tuple[tuple[int, int], ...]  # per slot: (rule index, action index)
    # per type: SQL of the customer each field's action rewards (None: the event's customer), when an action
    # names a beneficiary; fields b{i} of `a` hold them
    recipients: tuple[tuple[str | None, ...], ...] = ()

    @property
    def beneficiary_fields(self) -> list[int]:
        """Field numbers i whose b{i} names a beneficiary for some event type."""
        width = self.width
        return [i for i in range(1, width + 1) if any(len(r) >= i and r[i - 1] is not None for r in self.recipients)]

    @property
    def width(self) -> int:
        """Fields c1 .. cW of `a`: the most actions any event type has."""
        return max((len(s) for s in self.slots_of), default=1)

    @property
    def fields(self) -> list[str]:
        return [f"a.c{index}" for index in range(1, self.width + 1)]

    def refuses(self, index: int) -> bool:
        """Whether field c{index} may hold TOO_LARGE for some event type."""
        return any(len(s) >= index and s[index - 1] in self.refusing for s in self.slots_of)

    def where(self, slot: int) -> tuple[int, int]:
        """(k, field number) of a slot."""
        for k, slots in enumerate(self.slots_of):
            if slot in slots:
                return k, slots.index(slot) + 1
        raise KeyError(slot)

    def positive(self, index: int) -> str:
        """SQL: field c{index} where it issues, else 0."""
        return f"greatest(a.c{index}, 0)" if self.refuses(index) else f"a.c{index}"

    def event_total(self) -> str:
        """SQL: the sum of an event's positive amounts (HUGEINT arithmetic only where BIGINT could overflow)."""
        parts = [self.positive(index) for index in range(1, self.width + 1)]
        fits = all(sum(self.largest[slot] for slot in slots) < 2**63 for slots in self.slots_of)
        return " + ".join(parts if fits else [f"CAST({p} AS HUGEINT)" for p in parts])

    def event_count(self) -> str:
        """SQL: how many of an event's amounts are positive."""
        parts = [
            f"CAST(a.c{i} > 0 AS INTEGER)" if self.refuses(i) or self.width > 100 else f"sign(a.c{i})"
            for i in range(1, self.width + 1)
        ]
        return " + ".join(parts)


def layout(plan: CompiledProgramme) -> Layout:
    refusing: set[int] = set()
    largest, rule_of = [0] * plan.slots, [(0, 0)] * plan.slots  # by slot: slots follow processing order
    for rule in plan.rules:
        for action, part in enumerate(rule.parts):
            slot = plan.first_slot[rule.index] + action
            rule_of[slot] = (rule.index, action)
            largest[slot] = part.largest
            if part.may_refuse or rule.recipient(action) is not None:
                refusing.add(slot)
    recipients = tuple(tuple(None if r is None else plan.render(r) for r in group.recipients) for group in plan.by_type)
    return Layout(
        slots=plan.slots,
        types=tuple(group.event_type for group in plan.by_type),
        slots_of=tuple(group.slots for group in plan.by_type),
        expressions=tuple(tuple(plan.render(amount) for amount in group.amounts) for group in plan.by_type),
        refusing=frozenset(refusing),
        largest=tuple(largest),
        rule_of=tuple(rule_of),
        recipients=recipients if any(r is not None for group in recipients for r in group) else (),
    )


def struct_sql(k: str, values: Sequence[str], width: int, recipients: dict[int, str] | None = None) -> str:
    """`a`: k, the amounts c1 .. cW and, for the fields of `recipients` (field number -> SQL), b{i}."""
    padded = [*values, *["0"] * (width - len(values))]
    fields = "".join(f", 'c{index + 1}': {value}" for index, value in enumerate(padded))
    fields += "".join(f", 'b{index}': {value}" for index, value in (recipients or {}).items())
    return "{'k': " + k + fields + "}"


def recipients_of(lay: Layout, k: int) -> dict[int, str]:
    """The b{i} fields of type k's struct: its beneficiaries, NULL for the other fields; always VARCHAR (a reference
    the SQL cannot read, left to the fallback, is a NULL literal, and the fallback's rows must fit the column)."""
    own = lay.recipients[k] if lay.recipients else ()
    found: dict[int, str] = {}
    for i in lay.beneficiary_fields:
        recipient = own[i - 1] if i <= len(own) else None
        found[i] = f"CAST({recipient if recipient is not None else 'NULL'} AS VARCHAR)"  # a bare NULL has no type
    return found
