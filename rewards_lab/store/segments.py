"""The activity figures customer segments are derived from."""

from __future__ import annotations

from datetime import datetime

import duckdb

from rewards_lab.contract.scope import Scope


class SegmentQueries:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def event_activity(self, scope: Scope, refs: list[str], since: datetime) -> tuple[datetime | None, int]:
        """(time of the last event ever, events since `since`) for a customer named by any of `refs`."""
        row = self.con.execute(
            "SELECT max(coalesce(occurred_at, received_at)), count(*) FILTER (coalesce(occurred_at, received_at) >= ?) "
            "FROM events WHERE organization_id = ? AND environment = ? AND customer_id IN (SELECT unnest(?))",
            [since, *scope.params, refs],
        ).fetchone()
        assert row is not None
        return row[0], int(row[1])

    def high_value_assets(
        self, scope: Scope, customer_id: str, since: datetime, quantile: float, min_peers: int
    ) -> list[str]:
        """Assets for which the customer's rewards since `since` reach the quantile of all customers'."""
        rows = self.con.execute(
            """
            WITH totals AS (
                SELECT w.customer_id, t.asset_id, sum(t.amount_minor) AS issued
                FROM transactions t JOIN wallets w ON w.id = t.destination_account_id
                WHERE t.organization_id = ? AND t.environment = ? AND t.kind IN ('reward', 'issue')
                  AND t.created_at >= ?
                GROUP BY ALL
            ), cutoffs AS (
                SELECT asset_id, quantile_cont(issued, ?) AS cutoff, count(*) AS peers FROM totals GROUP BY asset_id
            )
            SELECT t.asset_id FROM totals t JOIN cutoffs c USING (asset_id)
            WHERE t.customer_id = ? AND c.peers >= ? AND t.issued >= c.cutoff ORDER BY t.asset_id
            """,
            [*scope.params, since, quantile, customer_id, min_peers],
        ).fetchall()
        return [str(row[0]) for row in rows]
