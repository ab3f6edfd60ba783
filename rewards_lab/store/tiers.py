"""Customers' tier state, the contributions that count toward a tier metric, their daily sums and the history of
changes (migration 25; reports/i33-tiers-plan.md section 4.1). Written by the event worker in the batch's unit of
work (issue 33, T3), so a rolled-back batch writes nothing.

Contributions are keyed by their source (an execution for `points`, an event for `sum`/`count`) and customer: one
added again is skipped, so a retried batch counts nothing twice. `tier_days` holds what the windows read. Tier
state belongs to the programme (`program_id`), across its versions; counts belong to a metric (`metric_key`, the
metric's fingerprint), so a changed metric starts afresh. `Repositories.tiers`; the event worker's `engine.tier_book`
reads and writes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from datetime import date, datetime
from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.queries import RowPage, paginate

TENANT = "organization_id = ? AND environment = ?"


@dataclass(frozen=True, slots=True)
class TierStateRow:
    """A customer's tier in a programme (one `customer_tiers` row, without the tenant and `updated_at`)."""

    program_id: str
    customer_id: str
    tier: str  # a level code
    since: datetime  # entered (event time, or the review instant)
    anchor: date  # the local day review cycles count from
    review_at: datetime | None  # the next review (None: the base level, or a lifetime window)
    grace_until: datetime | None  # in grace: when the downgrade to `grace_target` is due
    grace_target: str | None
    enrolled_at: datetime
    metric_key: str
    version_id: str  # the version that last decided it


@dataclass(frozen=True, slots=True)
class TierContribution:
    """What one source adds to one customer's metric on a local day (minor units of the metric)."""

    source_id: str
    customer_id: str
    day: date
    amount_minor: int


@dataclass(frozen=True, slots=True)
class TierChangeRow:
    """One entry of a customer's tier history (`tier_changes`, without the tenant and `created_at`)."""

    id: str
    program_id: str
    customer_id: str
    changed_at: datetime
    kind: str  # enrolled | upgraded | retained | grace_started | downgraded | level_removed | schedule_changed
    from_tier: str | None
    to_tier: str
    metric_minor: int | None
    window_start: date | None
    window_end: date | None
    event_id: str | None
    version_id: str
    review_at: datetime | None
    grace_until: datetime | None
    grace_target: str | None


_STATE = ", ".join(f.name for f in fields(TierStateRow))
# The SQL types of a TierStateRow's fields, in order (for the arrays of a batched insert).
_STATE_TYPES: tuple[str, ...] = ("VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP", "DATE", "TIMESTAMP", "TIMESTAMP")
_STATE_TYPES += ("VARCHAR", "TIMESTAMP", "VARCHAR", "VARCHAR")


def state_columns() -> str:
    """The `customer_tiers` columns a `TierStateRow` is read from, in order."""
    return _STATE


class TierRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def load(self, scope: Scope, program_id: str, customer_ids: Sequence[str]) -> dict[str, TierStateRow]:
        """The state of these customers that exists (a customer without a row is at the base level)."""
        if not customer_ids:
            return {}
        rows = self.con.execute(
            f"SELECT {_STATE} FROM customer_tiers WHERE {TENANT} AND program_id = ? "
            "AND customer_id IN (SELECT unnest(?))",
            [*scope.params, program_id, list(customer_ids)],
        ).fetchall()
        return {row[1]: TierStateRow(*row) for row in rows}

    def save(self, scope: Scope, states: Sequence[TierStateRow]) -> None:
        """Write these customers' state (insert or replace), in one statement (a period end's round writes 1,000:
        row by row took 18 ms each on DuckDB)."""
        if not states:
            return
        columns = list(zip(*(astuple(state) for state in states), strict=True))
        values = ", ".join(f"unnest(CAST(? AS {kind}[]))" for kind in _STATE_TYPES)
        self.con.execute(
            f"INSERT OR REPLACE INTO customer_tiers (organization_id, environment, {_STATE}, updated_at) "
            f"SELECT ?, ?, {values}, ?",
            [*scope.params, *[list(column) for column in columns], utcnow()],
        )

    def due(self, as_of: datetime, limit: int) -> list[tuple[str, str, str, str]]:
        """(organization, environment, programme, customer) of every tenant whose review or grace end has come
        (`review_at` or `grace_until` <= as_of), soonest first, in the active programmes whose live version has
        tiers (the others' holders wait as they are: nothing reads their state); a customer at the base has
        neither."""
        rows = self.con.execute(
            "SELECT t.organization_id, t.environment, t.program_id, t.customer_id FROM customer_tiers t "
            "JOIN programmes p ON p.id = t.program_id AND p.organization_id = t.organization_id "
            "AND p.environment = t.environment "
            "JOIN programme_versions v ON v.program_id = p.id AND v.number = p.current_version "
            "WHERE p.status = 'active' AND v.tiers IS NOT NULL AND (t.review_at <= ? OR t.grace_until <= ?) "
            "ORDER BY least(coalesce(t.review_at, t.grace_until), coalesce(t.grace_until, t.review_at)), "
            "t.organization_id, t.environment, t.program_id, t.customer_id LIMIT ?",
            [as_of, as_of, limit],
        ).fetchall()
        return [(str(o), str(e), str(p), str(c)) for o, e, p, c in rows]

    def due_among(
        self, scope: Scope, program_id: str, customer_ids: Sequence[str], as_of: datetime
    ) -> dict[str, TierStateRow]:
        """Of these customers, those still due by `as_of`, as stored now (read again inside the unit of work that
        reviews them: the event worker may have reviewed or upgraded them since)."""
        if not customer_ids:
            return {}
        rows = self.con.execute(
            f"SELECT {_STATE} FROM customer_tiers WHERE {TENANT} AND program_id = ? "
            "AND customer_id IN (SELECT unnest(?)) AND (review_at <= ? OR grace_until <= ?) ORDER BY customer_id",
            [*scope.params, program_id, sorted(set(customer_ids)), as_of, as_of],
        ).fetchall()
        return {row[1]: TierStateRow(*row) for row in rows}

    def known_sources(
        self, scope: Scope, program_id: str, metric_key: str, source_ids: Sequence[str]
    ) -> set[tuple[str, str]]:
        """(source, customer) pairs already counted for these sources."""
        if not source_ids:
            return set()
        rows = self.con.execute(
            f"SELECT source_id, customer_id FROM tier_contributions WHERE {TENANT} AND program_id = ? "
            "AND metric_key = ? AND source_id IN (SELECT unnest(?))",
            [*scope.params, program_id, metric_key, sorted(set(source_ids))],
        ).fetchall()
        return {(str(row[0]), str(row[1])) for row in rows}

    def add_contributions(
        self, scope: Scope, program_id: str, metric_key: str, contributions: Sequence[TierContribution]
    ) -> list[TierContribution]:
        """Count the contributions not counted before (by source and customer; the first of duplicates in the
        list) into `tier_contributions` and their days' sums; returns those added."""
        known = self.known_sources(scope, program_id, metric_key, [c.source_id for c in contributions])
        added: list[TierContribution] = []
        for contribution in contributions:
            key = (contribution.source_id, contribution.customer_id)
            if key not in known:
                known.add(key)
                added.append(contribution)
        if not added:
            return added
        self.con.execute(
            "INSERT INTO tier_contributions SELECT ?, ?, ?, ?, unnest(CAST(? AS VARCHAR[])), "
            "unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS DATE[])), unnest(CAST(? AS HUGEINT[])), ?",
            [
                *scope.params,
                program_id,
                metric_key,
                [c.source_id for c in added],
                [c.customer_id for c in added],
                [c.day for c in added],
                [str(c.amount_minor) for c in added],
                utcnow(),
            ],
        )
        self._add_to_days(scope, program_id, metric_key, added)
        return added

    def _add_to_days(self, scope: Scope, program_id: str, metric_key: str, added: Sequence[TierContribution]) -> None:
        sums: defaultdict[tuple[str, date], int] = defaultdict(int)
        for contribution in added:
            sums[(contribution.customer_id, contribution.day)] += contribution.amount_minor
        days = [day for _, day in sums]
        rows = self.con.execute(
            f"SELECT customer_id, day, amount_minor FROM tier_days WHERE {TENANT} AND program_id = ? "
            "AND metric_key = ? AND customer_id IN (SELECT unnest(?)) AND day >= ? AND day <= ?",
            [*scope.params, program_id, metric_key, sorted({c for c, _ in sums}), min(days), max(days)],
        ).fetchall()
        for customer_id, day, amount in rows:
            if (customer_id, day) in sums:
                sums[(customer_id, day)] += int(amount)
        keys = list(sums)
        self.con.execute(
            "INSERT OR REPLACE INTO tier_days SELECT ?, ?, ?, ?, unnest(CAST(? AS VARCHAR[])), "
            "unnest(CAST(? AS DATE[])), unnest(CAST(? AS HUGEINT[]))",
            [
                *scope.params,
                program_id,
                metric_key,
                [customer for customer, _ in keys],
                [day for _, day in keys],
                [str(sums[key]) for key in keys],
            ],
        )

    def window_sums(
        self,
        scope: Scope,
        program_id: str,
        metric_key: str,
        customer_ids: Sequence[str],
        first_day: date,
        last_day: date,
    ) -> dict[str, int]:
        """Each customer's metric over the local days first_day..last_day (both included); absent: nothing."""
        if not customer_ids:
            return {}
        rows = self.con.execute(
            f"SELECT customer_id, sum(amount_minor) FROM tier_days WHERE {TENANT} AND program_id = ? "
            "AND metric_key = ? AND customer_id IN (SELECT unnest(?)) AND day >= ? AND day <= ? GROUP BY customer_id",
            [*scope.params, program_id, metric_key, list(customer_ids), first_day, last_day],
        ).fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    def days(
        self, scope: Scope, program_id: str, metric_key: str, customer_ids: Sequence[str]
    ) -> dict[str, dict[date, int]]:
        """Each customer's metric per local day (the days with a count)."""
        if not customer_ids:
            return {}
        rows = self.con.execute(
            f"SELECT customer_id, day, amount_minor FROM tier_days WHERE {TENANT} AND program_id = ? "
            "AND metric_key = ? AND customer_id IN (SELECT unnest(?))",
            [*scope.params, program_id, metric_key, list(customer_ids)],
        ).fetchall()
        found: dict[str, dict[date, int]] = defaultdict(dict)
        for customer_id, day, amount in rows:
            found[str(customer_id)][day] = int(amount)
        return dict(found)

    def changes_between(
        self, scope: Scope, program_id: str, customer_ids: Sequence[str], first: datetime, last: datetime
    ) -> set[tuple[str, datetime, str]]:
        """(customer, instant, kind) of these customers' history rows at instants first..last (both included; the
        table keeps one per customer, instant and kind)."""
        if not customer_ids:
            return set()
        rows = self.con.execute(
            f"SELECT customer_id, changed_at, kind FROM tier_changes WHERE {TENANT} AND program_id = ? "
            "AND customer_id IN (SELECT unnest(?)) AND changed_at >= ? AND changed_at <= ?",
            [*scope.params, program_id, sorted(set(customer_ids)), first, last],
        ).fetchall()
        return {(str(row[0]), row[1], str(row[2])) for row in rows}

    def add_changes(self, scope: Scope, changes: Sequence[TierChangeRow]) -> None:
        """Append to the history (one row per change; a change already recorded at the same instant and of the
        same kind is refused by the table's unique key)."""
        if not changes:
            return
        columns: list[list[Any]] = [list(column) for column in zip(*(astuple(c) for c in changes), strict=True)]
        columns[7] = [None if amount is None else str(amount) for amount in columns[7]]  # metric_minor, as HUGEINT
        self.con.execute(
            "INSERT INTO tier_changes (id, organization_id, environment, program_id, customer_id, changed_at, "
            "kind, from_tier, to_tier, metric_minor, window_start, window_end, event_id, version_id, review_at, "
            "grace_until, grace_target, created_at) SELECT unnest(CAST(? AS VARCHAR[])), ?, ?, "
            "unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS TIMESTAMP[])), "
            "unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), "
            "unnest(CAST(? AS HUGEINT[])), unnest(CAST(? AS DATE[])), unnest(CAST(? AS DATE[])), "
            "unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS TIMESTAMP[])), "
            "unnest(CAST(? AS TIMESTAMP[])), unnest(CAST(? AS VARCHAR[])), ?",
            [columns[0], *scope.params, *columns[1:], utcnow()],
        )

    def history(self, scope: Scope, program_id: str, customer_id: str, limit: int) -> list[TierChangeRow]:
        """A customer's changes, newest first."""
        names = ", ".join(f.name for f in fields(TierChangeRow))
        rows = self.con.execute(
            f"SELECT {names} FROM tier_changes WHERE {TENANT} AND program_id = ? AND customer_id = ? "
            "ORDER BY changed_at DESC, id DESC LIMIT ?",
            [*scope.params, program_id, customer_id, limit],
        ).fetchall()
        return [TierChangeRow(*_with_int_metric(list(row))) for row in rows]

    def history_page(
        self, scope: Scope, customer_id: str, program_id: str | None, page: PageRequest
    ) -> RowPage[TierChangeRow]:
        """A customer's changes (in one programme, or all), paged by their instant (the sort `at`)."""
        names = ", ".join(f.name for f in fields(TierChangeRow))
        # `at` is a keyword to DuckDB: the rows carry it quoted for the cursor, the keyset reads `changed_at`.
        sql = f'SELECT {names}, changed_at AS "at" FROM tier_changes WHERE {TENANT} AND customer_id = ?'
        params: list[Any] = [*scope.params, customer_id]
        if program_id is not None:
            sql += " AND program_id = ?"
            params.append(program_id)
        listed = paginate(
            self.con,
            list_name="tier_changes",
            select_sql=sql,
            params=params,
            page=page,
            sort="at",
            sort_sql="changed_at",
        )
        rows = [TierChangeRow(*_with_int_metric([row[f.name] for f in fields(TierChangeRow)])) for row in listed.rows]
        return RowPage(rows, listed.next_cursor, listed.has_more)


def _with_int_metric(values: list[Any]) -> list[Any]:
    """PostgreSQL answers NUMERIC as a Decimal: the metric (`metric_minor`) as an int."""
    values[7] = None if values[7] is None else int(values[7])
    return values
