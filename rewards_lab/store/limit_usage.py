"""Usage counters of caps and budgets: one row per (programme, counter, customer, period), written by the event
worker in the batch's transaction (so a rolled-back batch counts nothing)."""

from __future__ import annotations

import duckdb

from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import Usage, UsageKey

TENANT = "organization_id = ? AND environment = ?"


class LimitUsageRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def load(self, scope: Scope, keys: list[UsageKey]) -> dict[UsageKey, Usage]:
        """The counters asked for that exist (a missing one holds nothing)."""
        if not keys:
            return {}
        rows = self.con.execute(
            "SELECT u.program_id, u.counter, u.customer_id, u.period_start, u.amount_minor, u.reward_count "
            "FROM limit_usage u JOIN (SELECT unnest(CAST(? AS VARCHAR[])) AS p, unnest(CAST(? AS VARCHAR[])) AS c, "
            "unnest(CAST(? AS VARCHAR[])) AS k, unnest(CAST(? AS VARCHAR[])) AS s) w "
            "ON u.program_id = w.p AND u.counter = w.c AND u.customer_id = w.k AND u.period_start = w.s "
            "WHERE u.organization_id = ? AND u.environment = ?",
            [
                [k.program_id for k in keys],
                [k.counter for k in keys],
                [k.customer_id for k in keys],
                [k.period_start for k in keys],
                *scope.params,
            ],
        ).fetchall()
        return {UsageKey(*row[:4]): Usage(int(row[4]), int(row[5])) for row in rows}

    def save(self, scope: Scope, values: dict[UsageKey, Usage]) -> None:
        """Write these counters' new values (insert or replace)."""
        if not values:
            return
        keys = list(values)
        self.con.execute(
            "INSERT OR REPLACE INTO limit_usage SELECT ?, ?, unnest(CAST(? AS VARCHAR[])), "
            "unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), unnest(CAST(? AS VARCHAR[])), "
            "unnest(CAST(? AS HUGEINT[])), unnest(CAST(? AS BIGINT[])), ?",
            [
                *scope.params,
                [k.program_id for k in keys],
                [k.counter for k in keys],
                [k.customer_id for k in keys],
                [k.period_start for k in keys],
                [str(values[k].amount_minor) for k in keys],
                [values[k].rewards for k in keys],
                utcnow(),
            ],
        )

    def periods(self, scope: Scope, program_id: str, counter: str, limit: int) -> list[tuple[str, Usage]]:
        """One counter's periods (all customers summed), newest first."""
        rows = self.con.execute(
            "SELECT period_start, sum(amount_minor), sum(reward_count) FROM limit_usage "
            f"WHERE {TENANT} AND program_id = ? AND counter = ? GROUP BY period_start "
            "ORDER BY period_start DESC LIMIT ?",
            [*scope.params, program_id, counter, limit],
        ).fetchall()
        return [(str(row[0]), Usage(int(row[1]), int(row[2]))) for row in rows]
