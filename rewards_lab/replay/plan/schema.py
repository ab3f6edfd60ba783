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
    "view",
    (("pos", "BIGINT"), ("slot", "INTEGER"), ("m", "BIGINT"), ("b", "VARCHAR")),
    "the exotic events' outcomes, one row per outcome, beneficiaries resolved (b: the customer it rewards)",
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

# customers and the fallback (increment 4) ------------------------------------------------------------------------
EVENTS = Table(
    "events",
    "source",
    "source",
    (("external_event_id", "VARCHAR"), ("type", "VARCHAR"), ("customer_id", "VARCHAR"), ("occurred_at", "TIMESTAMP"),
     ("...", "the events' data columns")),
    "the events before their customer's facts: on DuckDB as read, on Spark in processing order (with `__pos`)",
)  # fmt: skip
CUSTOMERS = Table(
    "customers",
    "customers_input",
    "source",
    (("id", "VARCHAR"), ("external_id", "VARCHAR"), ("...", "country, segments, attributes, other columns")),
    "the customers table as given (rewards_lab.replay.customers reads it)",
)
CUSTOMERS_LOOKUP = Table(
    "customers_lookup",
    "customers",
    "stored",
    (("__ref", "VARCHAR"), ("__cid", "VARCHAR"), ("...", "the facts the rules read: __cc, __cs, __cattr, __ca<i>")),
    "one row per reference (a customer's id or external_id): the customer's id and facts",
)
FACTS = Table(
    "facts",
    "facts",
    "view",
    (("...", "`events`' columns"), ("...", "the lookup's columns"), ("<b>", "VARCHAR"), ("<b>_id", "VARCHAR")),
    "the events with their customer's facts, each beneficiary field's reference and the id it resolves to",
)
EXOTIC = Table(
    "exotic",
    "exotic",
    "view",
    (("__pos", "BIGINT"), ("type", "VARCHAR"), ("__t", "BIGINT"), ("...", "what the live evaluation reads")),
    "the events SQL cannot read exactly, with the columns the live evaluation reads (fallback.RowReader)",
)
FALLBACK_OUTCOMES = Table(
    "fallback_outcomes",
    "fallback_out",
    "stored",
    (("pos", "BIGINT"), ("slot", "INTEGER"), ("m", "BIGINT"), ("r", "VARCHAR")),
    "the live evaluation's outcomes (map_partitions over `exotic`): one row per outcome, the beneficiary's "
    "reference unresolved, and one row per event with slot NULL (they count the exotic events)",
)
# end of increment 4's tables ----------------------------------------------------------------------------------

PLAN_TABLES: tuple[Table, ...] = (
    EVENTS, CUSTOMERS, CUSTOMERS_LOOKUP, FACTS, ORDERED, SLOTS, AMOUNTS, EXOTIC, FALLBACK_OUTCOMES, FALLBACK_ROWS,
    FALLBACK_AMOUNTS, CANDIDATES, CELLS, CEILING_KEPT, ISSUANCES,
)  # fmt: skip

# reverse actions and redemptions (rewards_lab.replay.plan.reversals, rewards_lab.replay.plan.redemptions) -------
HOLDERS = Table(
    "holders",
    "holders",
    "driver",
    (("__ref", "VARCHAR"), ("__cid", "VARCHAR")),
    "a customer reference -> the customer id it resolves to (a customers table's lookup; empty without one: a "
    "customer is then its reference)",
)
REVERSE_FALLBACK = Table(
    "reverse_fallback",
    "ra_fallback",
    "driver",
    (("pos", "BIGINT"), ("slot", "INTEGER"), ("t", "BIGINT"), ("code", "VARCHAR"), ("ref", "VARCHAR"),
     ("num", "VARCHAR")),
    "the reverse actions of the exotic events (the live evaluation: rewards_lab.replay.fallback)",
)  # fmt: skip
REVERSE_ACTIONS = Table(
    "reverse_actions",
    "ra",
    "stored",
    REVERSE_FALLBACK.columns,
    "every matched reverse action: its event's position, slot and time (epoch microseconds), the failure the "
    "live evaluation gave (exotic events only), the original's external id and the numerator as exact text",
)
ORIGINALS = Table(
    "originals",
    "orig",
    "stored",
    (("ref", "VARCHAR"), ("opos", "BIGINT"), ("t", "BIGINT"), ("c", "VARCHAR"), ("v<i>", "VARCHAR"),
     ("x<i>", "BOOLEAN")),
    "each original a reverse action names (the first event of its external id): position, time, customer and "
    "per divisor field its exact text v<i> (x<i>: Python must read it)",
)  # fmt: skip
DIVISORS = Table(
    "divisors",
    "div",
    "driver",
    (("opos", "BIGINT"), ("of", "VARCHAR"), ("dv", "VARCHAR")),
    "the divisors Python read (originals with x<i>): the original's position, the field, its number as text",
)
ACTIONS = Table(
    "actions",
    "act",
    "view",
    (("pos", "BIGINT"), ("slot", "INTEGER"), ("code", "VARCHAR"), ("ref", "VARCHAR"), ("num", "VARCHAR"),
     ("opos", "BIGINT"), ("dv", "VARCHAR"), ("t", "BIGINT"), ("ot", "BIGINT"), ("rh", "VARCHAR"),
     ("oholder", "VARCHAR")),
    "what each reverse action is decided from: its original, divisor, times, and both customers as resolved",
)  # fmt: skip
DECIDED = Table(
    "decided",
    "decided",
    "stored",
    (("seq", "BIGINT"), ("pos", "BIGINT"), ("slot", "INTEGER"), ("code", "VARCHAR"), ("opos", "BIGINT"),
     ("fraction", "VARCHAR"), ("refers", "BOOLEAN"), ("t", "BIGINT"), ("ot", "BIGINT"), ("oholder", "VARCHAR")),
    "each reverse action's decision (rewards_lab.replay.reversal_actions.decide, mapped without order)",
)  # fmt: skip
MOVED = Table(
    "moved",
    "moved",
    "driver",
    (("pos", "BIGINT"), ("ppos", "BIGINT"), ("psub", "INTEGER"), ("pt", "BIGINT")),
    "the refunds processed after an original that comes later: their processing key (ppos, psub) and the time "
    "of the event they are processed after (domain.processing_order)",
)
DECISIONS = Table(
    "decisions",
    "rad",
    "stored",
    (*DECIDED.columns, ("pday", "INTEGER")),
    "the decisions with the UTC day of their place in processing order",
)
REDEMPTION_INPUT = Table(
    "redemption_input",
    "red_input",
    "driver",
    (("idx", "BIGINT"), ("customer_id", "VARCHAR"), ("amount_minor", "BIGINT"), ("t", "BIGINT"), ("rank", "BIGINT"),
     ("anchor", "BIGINT")),
    "the redemptions (rewards_lab.replay.redemptions.SCHEMA) with their anchor: the last event at or before them",
)  # fmt: skip
EVENT_BUCKETS = Table(
    "event_buckets",
    "buckets",
    "stored",
    (("b", "BIGINT"), ("n", "BIGINT")),
    "per batch of events, how many fall in each bucket b (the first redemption at or after them, by time)",
)
REDEMPTIONS = Table(
    "redemptions",
    "red",
    "stored",
    (("idx", "BIGINT"), ("holder", "VARCHAR"), ("amount", "BIGINT"), ("t", "BIGINT"), ("rank", "BIGINT"),
     ("anchor", "BIGINT")),
    "the redemptions in the pass's terms: the customer as resolved, the anchor event",
)  # fmt: skip

PLAN_TABLES += (HOLDERS, REVERSE_FALLBACK, REVERSE_ACTIONS, ORIGINALS, DIVISORS, ACTIONS, DECIDED, MOVED, DECISIONS,
                REDEMPTION_INPUT, EVENT_BUCKETS, REDEMPTIONS)  # fmt: skip

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

EXPIRY_TABLES: tuple[Table, ...] = (MONTHS, MONTH_ENDS, EXPIRY_TIMES, ISSUED, LOTTED, PASS_LOTS, LOTS)
PLAN_TABLES += EXPIRY_TABLES

# limits and the ordered pass (rewards_lab.replay.plan.limits) ---------------------------------------------------
REWARDS = Table(
    "rewards",
    "rewards",
    "view",
    (("seq", "BIGINT"), ("pos", "BIGINT"), ("slot", "INTEGER"), ("rule_index", "INTEGER"), ("holder", "VARCHAR"),
     ("m", "BIGINT"), ("d_<period>", "INTEGER")),
    "every positive candidate reward with its holder and the first local day of each period its counters count",
)  # fmt: skip
BOUND = Table(
    "bound",
    "bind",
    "stored",
    (("g", "INTEGER"), ("holder", "VARCHAR"), ("start", "INTEGER")),
    "the counters that can bind: family g (limits_plan.LimitsPlan.groupings), holder ('' for a budget), period start",
)
NEEDED = Table(
    "needed",
    "needed",
    "view",
    REWARDS.columns,
    "the rewards the pass may need (`rewards`, or on DuckDB only those of the events it can need)",
)
MASKED_ROWS = Table(
    "masked_rows",
    "mrows",
    "stored",
    (*REWARDS.columns, ("mask", "INTEGER"), ("keep", "BOOLEAN"), ("tracked", "BOOLEAN")),
    "the rewards the pass needs: mask (the checks whose counter can bind), keep (a refund names their event), "
    "tracked (their customer's balance is followed: redemptions or expiry)",
)
TAIL = Table(
    "tail",
    "tail",
    "stored",
    (("...", "rewards_lab.replay.sequential.DECISIONS"),),
    "the rewards surely cut to nothing by a single cap, decided before the pass (none on Spark today)",
)
OPS = Table(
    "ops",
    "ops",
    "view",
    (("k1", "BIGINT"), ("k2", "INTEGER"), ("k3", "INTEGER"), ("k4", "BIGINT"), ("op", "INTEGER"), ("seq", "BIGINT"),
     ("holder", "VARCHAR"), ("m", "BIGINT"), ("rule", "INTEGER"), ("mask", "INTEGER"), ("d_<period>", "INTEGER"),
     ("keep", "BOOLEAN"), ("ref", "BIGINT"), ("sequential", "BOOLEAN"), ("fraction", "VARCHAR"),
     ("tracked", "BOOLEAN"), ("credit", "WIDE"), ("clock, issued, exp", "BIGINT (expiry only)")),
    "the ordered pass's operations in processing key (k1..k4): grants (op 0), reversal items (1), redemptions "
    "(2); credit: what set-based rewards gave a tracked holder before the operation",
)  # fmt: skip
PASS_OUT = Table(
    "pass_out",
    "passout",
    "stored",
    (("...", "rewards_lab.replay.sequential.OUTCOMES"),),
    "the ordered pass's outcome (map_partitions over `ops`, by holder or as one task): kind d/i/r/l",
)

REDEEMED = Table(
    "redeemed",
    "redout",
    "stored",
    (("idx", "BIGINT"), ("accepted", "BOOLEAN")),
    "the pass's outcome of kind r: whether each redemption was covered (none when the pass did not run)",
)

TAKEN = Table(
    "taken",
    "items",
    "stored",
    (("seq", "BIGINT"), ("reward", "BIGINT"), ("holder", "VARCHAR"), ("target", "BIGINT"), ("taken", "BIGINT")),
    "the pass's outcome of kind i: what each reverse action took back of each reward (seq: the action's)",
)

DECIDED_REWARDS = Table(
    "decided_rewards",
    "dec",
    "stored",
    (("...", "rewards_lab.replay.sequential.DECISIONS"),),
    "the pass's outcome of kind d (with the tail's): each reward it decided, granted g of requested, and what cut it",
)

CORRECTIONS = Table(
    "corrections",
    "corr",
    "stored",
    (*DECIDED_REWARDS.columns, ("day", "INTEGER"), ("slot", "INTEGER")),
    "`decided_rewards` with each reward's UTC day and slot: what the featured summaries correct the cells by",
)

LIMITS_TABLES: tuple[Table, ...] = (
    REWARDS, BOUND, NEEDED, MASKED_ROWS, TAIL, OPS, PASS_OUT, REDEEMED, TAKEN, DECIDED_REWARDS, CORRECTIONS
)  # fmt: skip
PLAN_TABLES += LIMITS_TABLES
