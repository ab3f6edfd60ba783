"""The rows an engine cannot read exactly in SQL, evaluated by the live engine's own rule evaluation.

Both executors run it the same way: the plan's `exotic` view (the events SQL cannot read exactly, with what the
rules read of them: `RowReader`) through `map_partitions` without a key, Arrow in and Arrow out (`Evaluate`,
picklable: Spark runs it on its executors, DuckDB in process). The rules read what the SQL reads: the event data,
its time (`occurred_at`) and its customer's facts from the customers table (rewards_lab.domain.conditions.
EventFacts). A beneficiary's reference comes out unresolved; the plan's `fallback_rows` step resolves it with the
customers lookup, as `resolved_amount` encodes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa

from rewards_lab.contract import jsonutil
from rewards_lab.domain.conditions import CustomerFacts, EventFacts
from rewards_lab.domain.rule_evaluation import evaluate
from rewards_lab.domain.rules import BENEFICIARY_MISSING as MISSING_CODE
from rewards_lab.domain.rules import RuleSpec
from rewards_lab.domain.schedule import instant
from rewards_lab.replay.compiler import BENEFICIARY_MISSING, NOT_FOUND_BASE, TOO_LARGE
from rewards_lab.replay.sql_values import NUMBER_RE

Outcome = tuple[int, int, str | None]  # (slot, m, the beneficiary's reference or None)
# (slot, the code failing it or None, the original's external id, the fraction's number as text or None)
ReverseOutcome = tuple[int, str | None, str | None, str | None]


Reading = Literal["value", "json", "csv", "document"]  # how an attribute's column reads (document: a JSON object's key)


def text_scalar(text: str) -> Any:
    """A CSV cell as the JSON scalar it spells: a number (exact), true/false, or else the string itself."""
    if re.fullmatch(NUMBER_RE, text):
        return Decimal(text)
    return {"true": True, "false": False}.get(text, text)


@dataclass(frozen=True)
class FactsReader:
    """Builds an event's CustomerFacts from the customer columns joined to it (picklable: Spark's executors run
    it): `found` is NULL when no customer has the event's reference."""

    found: str
    country: str | None
    segments: str
    document: str | None  # the JSON `attributes` text, when an attribute read comes from it
    attributes: tuple[tuple[str, str, Reading], ...]  # (attribute, column, how it reads)

    @property
    def columns(self) -> list[str]:
        names = [self.found, *([self.country] if self.country else []), self.segments]
        names += [self.document] if self.document else []
        return names + [column for _, column, reading in self.attributes if reading != "document"]

    def facts(self, values: Mapping[str, Any]) -> CustomerFacts | None:
        if values.get(self.found) is None:
            return None
        text = values.get(self.document) if self.document else None
        document = jsonutil.loads(text) if text is not None else {}
        attributes: dict[str, Any] = {}
        for attribute, column, reading in self.attributes:
            if reading == "document":
                attributes[attribute] = document.get(attribute) if isinstance(document, dict) else None
                continue
            value = values.get(column)
            if value is not None and reading == "json":
                value = jsonutil.loads(value)
            elif value is not None and reading == "csv":
                value = text_scalar(value)
            attributes[attribute] = value
        country = values.get(self.country) if self.country else None
        return CustomerFacts(attributes, country, tuple(values.get(self.segments) or ()))


def slot_outcomes(
    specs: Sequence[RuleSpec],
    first_slot: Sequence[int],
    events: Sequence[tuple[str, Mapping[str, Any]]],
    facts: Sequence[EventFacts] | None = None,
) -> list[list[Outcome]]:
    """Per event (type, data): (slot, m, reference) of every issue action that issues something or is refused, in
    processing order; m is the amount, TOO_LARGE or BENEFICIARY_MISSING; the reference is the beneficiary named
    (unresolved) of an action that issues to one."""
    return [issues for issues, _ in all_outcomes(specs, first_slot, events, facts)]


def all_outcomes(
    specs: Sequence[RuleSpec],
    first_slot: Sequence[int],
    events: Sequence[tuple[str, Mapping[str, Any]]],
    facts: Sequence[EventFacts] | None = None,
) -> list[tuple[list[Outcome], list[ReverseOutcome]]]:
    """Per event: its issue actions' outcomes (`slot_outcomes`) and its matched reverse actions' (`ReverseOutcome`:
    the code failing the action, else the original's external id and the fraction's number as exact text)."""
    result = []
    for matches in evaluate(specs, events, facts=facts):
        amounts: list[Outcome] = []
        reversals: list[ReverseOutcome] = []
        for verdict in matches:
            for action in verdict.actions:
                slot = first_slot[int(verdict.rule_id)] + action.action_index
                if specs[int(verdict.rule_id)].actions[action.action_index].reverse_of is not None:
                    call = action.reversal
                    if call is None:
                        reversals.append((slot, action.error_code, None, None))
                    else:
                        numerator = None if call.numerator is None else str(call.numerator)
                        reversals.append((slot, None, call.original, numerator))
                    continue
                if not action.issues and action.error_code is None:
                    continue
                if action.error_code == MISSING_CODE:
                    amounts.append((slot, BENEFICIARY_MISSING, None))
                elif action.error_code is not None:
                    amounts.append((slot, TOO_LARGE, None))
                else:
                    amounts.append((slot, action.amount_minor, action.beneficiary))
        result.append((amounts, reversals))
    return result


def resolved_amount(m: int, reference: str | None, resolved: Mapping[str, str] | None) -> tuple[int, str | None]:
    """(m, customer) of an outcome once its beneficiary is looked up in the customers table (`resolved`:
    reference -> id; None without a table, when the reference itself is the customer): an unknown reference
    refuses the action as beneficiary_not_found (NOT_FOUND_BASE - m), its customer the reference."""
    if reference is None or m <= 0 or resolved is None:
        return m, reference
    found = resolved.get(reference)
    return (m, found) if found is not None else (NOT_FOUND_BASE - m, reference)


def fallback_column(index: int) -> str:
    """The name of the i-th data column the fallback reads (a field's name may hold dots)."""
    return f"__field{index}"


TIME = "__t"  # an exotic event's occurred_at in epoch microseconds
OUTCOMES = pa.schema(
    [pa.field("pos", pa.int64()), pa.field("slot", pa.int32()), pa.field("m", pa.int64()), pa.field("r", pa.string())]
)  # the plan's `fallback_outcomes`: slot NULL marks an evaluated event (one per event)


@dataclass(frozen=True)
class RowReader:
    """Reads one exotic row's data and facts as the live engine reads them (picklable): json mode reads the
    object in `data` (text); otherwise the columns `fallback_column(i)` hold the top-level `columns`, JSON text for
    `json_columns`, CSV cells when `csv`."""

    mode: str
    json_columns: frozenset[str]
    columns: tuple[str, ...]
    csv: bool = False
    customers: FactsReader | None = None

    def data(self, row: Mapping[str, Any]) -> dict[str, Any]:
        if self.mode == "json":
            text = row.get("data")
            value = jsonutil.loads(text) if text is not None else {}
            return value if isinstance(value, dict) else {}
        data = {}
        for index, name in enumerate(self.columns):
            value = row.get(fallback_column(index))
            if value is None:
                continue
            if name in self.json_columns:
                value = jsonutil.loads(value)
            elif self.csv:
                value = text_scalar(value)
            data[name] = value
        return data

    def facts(self, row: Mapping[str, Any]) -> EventFacts:
        """The event's time (`TIME`, else an `occurred_at` instant) and its customer's facts."""
        customer = self.customers.facts(row) if self.customers is not None else None
        at = instant(int(row[TIME])) if TIME in row else row.get("occurred_at")
        return EventFacts(at, customer)


@dataclass(frozen=True)
class Evaluate:
    """The live evaluation as a `map_partitions` function: exotic events (`RowReader`'s columns, `__pos`, `type`,
    `TIME`) in, their outcomes (`OUTCOMES`) out."""

    specs: tuple[RuleSpec, ...]
    first_slot: tuple[int, ...]
    reader: RowReader

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = batch.to_pylist(maps_as_pydicts="strict")
            events = [(str(row["type"]), self.reader.data(row)) for row in rows]
            facts = [self.reader.facts(row) for row in rows]
            pos: list[int] = []
            slots: list[int | None] = []
            amounts: list[int | None] = []
            references: list[str | None] = []
            for row, found in zip(rows, slot_outcomes(self.specs, self.first_slot, events, facts), strict=True):
                for slot, m, reference in [(None, None, None), *found]:
                    pos.append(int(row["__pos"]))
                    slots.append(slot)
                    amounts.append(m)
                    references.append(reference)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(pos, pa.int64()),
                    pa.array(slots, pa.int32()),
                    pa.array(amounts, pa.int64()),
                    pa.array(references, pa.string()),
                ],
                schema=OUTCOMES,
            )
