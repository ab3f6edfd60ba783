"""The replay plan's logical tables: what each holds, its columns, and its name on an executor.

Both executors hold the same tables with the same columns (design: reports/i30-replay-plan.md, section 2). A table's
name on an executor is the replay's prefix and the table's suffix (`{prefix}_pe` for `amounts`): the suffixes are
the ones the DuckDB engine has always used, so that the paths not yet on the plan (caps, budgets, reversals,
redemptions, expiry, a customers table) read the same tables. Types are portable names: `WIDE` is HUGEINT on DuckDB
and DECIMAL(38, 0) on Spark; `TIMESTAMP` a UTC instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["source", "driver", "view", "stored"]


@dataclass(frozen=True)
class Table:
    """A logical table: `suffix` names it on an executor; `columns` (name, portable type), `...` for a source's
    own columns."""

    name: str
    suffix: str
    kind: Kind
    columns: tuple[tuple[str, str], ...]
    about: str

    def on(self, prefix: str) -> str:
        """The table's name on an executor for the replay named `prefix`."""
        return f"{prefix}_{self.suffix}"


ORDERED = Table(
    "ordered",
    "ordered",
    "source",
    (("__pos", "BIGINT"), ("external_event_id", "VARCHAR"), ("type", "VARCHAR"), ("customer_id", "VARCHAR"),
     ("occurred_at", "TIMESTAMP"), ("...", "the events' data columns and beneficiary references")),
    "the events in processing order: `__pos` (seq = __pos * slots + slot); made by the entry point",
)  # fmt: skip
SLOTS = Table(
    "slots",
    "slots",
    "driver",
    (("k", "INTEGER"), ("i", "INTEGER"), ("slot", "INTEGER"), ("rule_index", "INTEGER"), ("action_index", "INTEGER"),
     ("event_type", "VARCHAR")),
    "per rule action (slot): its event type's index k and its field c{i} of `a`, its rule and action",
)  # fmt: skip
AMOUNTS = Table(
    "amounts",
    "pe",
    "stored",
    (("pos", "BIGINT"), ("customer_id", "VARCHAR"), ("day", "INTEGER"),
     ("a", "STRUCT(k INTEGER, c1 .. cW BIGINT, b<i> VARCHAR)")),
    "one row per event: its type's rule actions' amounts (0: nothing; TOO_LARGE, beneficiary codes), UTC day",
)  # fmt: skip
FALLBACK_ROWS = Table(
    "fallback_rows",
    "fallback_rows",
    "driver",
    (("pos", "BIGINT"), ("slot", "INTEGER"), ("m", "BIGINT"), ("b", "VARCHAR")),
    "the exotic events' outcomes from the live evaluation (rewards_lab.replay.fallback): one row per outcome",
)
FALLBACK_AMOUNTS = Table(
    "fallback_amounts", "fallback_pe", "view", AMOUNTS.columns, "the fallback's rows in the form of `amounts`"
)
CANDIDATES = Table(
    "candidates",
    "candidates",
    "view",
    (("pos", "BIGINT"), ("customer_id", "VARCHAR"), ("day", "INTEGER"), ("k", "INTEGER"), ("i", "INTEGER"),
     ("m", "BIGINT")),
    "one row per amount (m <> 0) of `amounts`; customer_id is the one the amount rewards",
)  # fmt: skip
CELLS = Table(
    "cells",
    "cand",
    "stored",
    (("day", "INTEGER"), ("slot", "INTEGER"), ("p", "WIDE"), ("n", "BIGINT"), ("x", "BIGINT"), ("y", "BIGINT"),
     ("z", "BIGINT")),
    "per UTC day and slot: positive amounts' sum p and count n; refusals too large x, beneficiary missing y, "
    "beneficiary not found z",
)  # fmt: skip
CEILING_KEPT = Table(
    "ceiling_kept",
    "kept",
    "driver",
    (("pos", "BIGINT"), ("day", "INTEGER"), ("k", "INTEGER"), ("i", "INTEGER"), ("m", "BIGINT")),
    "every issuance on or after the ceiling's boundary day that is issued (before it, every positive amount is)",
)
ISSUANCES = Table(
    "issuances",
    "issuances",
    "view",
    (("...", "rewards_lab.replay.engine.ISSUANCE_COLUMNS"),),
    "one row per attempted issuance",
)

PLAN_TABLES = (ORDERED, SLOTS, AMOUNTS, FALLBACK_ROWS, FALLBACK_AMOUNTS, CANDIDATES, CELLS, CEILING_KEPT, ISSUANCES)

# expiry (rewards_lab.replay.plan.expiry) ----------------------------------------------------------------------
MONTHS = Table(
    "months",
    "xmonths",
    "view",
    (("mon", "BIGINT"),),
    "the events' local months (`at_end_of`: domain.expiry.month_index)",
)
MONTH_ENDS = Table(
    "month_ends",
    "xends",
    "driver",
    (("mon", "BIGINT"), ("exp", "BIGINT")),
    "per local month of the history, when a lot issued in it expires (domain.expiry.month_end; `at_end_of`)",
)
EXPIRY_TIMES = Table(
    "expiry_times",
    "xt",
    "view",
    (("pos", "BIGINT"), ("t", "BIGINT"), ("exp", "BIGINT")),
    "per event, its time and when a lot it issues expires (epoch microseconds)",
)
ISSUED = Table(
    "issued",
    "issued",
    "source",
    (("seq", "BIGINT"), ("customer_id", "VARCHAR"), ("amount_minor", "BIGINT")),
    "every issued reward (the customer it rewards): made by the entry point from its decisions",
)
LOTTED = Table(
    "lotted", "lotted", "stored", (("holder", "VARCHAR"),), "the customers whose lots the ordered pass keeps"
)
PASS_LOTS = Table(
    "pass_lots",
    "plots",
    "stored",
    (("seq", "BIGINT"), ("holder", "VARCHAR"), ("lot_issued", "BIGINT"), ("lot_expires", "BIGINT"),
     ("lot_amount", "BIGINT"), ("lot_remaining", "BIGINT"), ("lot_expired", "BIGINT")),
    "the ordered pass's lots (rewards_lab.replay.lot_pass.LOTS) of the `lotted` customers",
)  # fmt: skip
LOTS = Table(
    "lots",
    "lots",
    "stored",
    (("seq", "BIGINT"), ("holder", "VARCHAR"), ("issued", "BIGINT"), ("expires", "BIGINT"), ("amount", "BIGINT"),
     ("remaining", "BIGINT"), ("expired", "BIGINT")),
    "every lot: the pass's, and one per issued reward of the other customers (closed form)",
)  # fmt: skip

EXPIRY_TABLES = (MONTHS, MONTH_ENDS, EXPIRY_TIMES, ISSUED, LOTTED, PASS_LOTS, LOTS)
