"""Organizations: the tenants. Not tenant-scoped themselves."""

from __future__ import annotations

import duckdb

from rewards_lab.store.database import utcnow
from rewards_lab.store.queries import Row, fetch_one


class OrganizationRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, organization_id: str, name: str, plan: str, rate_limit_per_minute: int | None) -> Row:
        self.con.execute(
            "INSERT INTO organizations VALUES (?, ?, ?, ?, ?)",
            [organization_id, name, plan, rate_limit_per_minute, utcnow()],
        )
        row = self.get(organization_id)
        assert row is not None
        return row

    def get(self, organization_id: str) -> Row | None:
        return fetch_one(self.con, "SELECT * FROM organizations WHERE id = ?", [organization_id])
