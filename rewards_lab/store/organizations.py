"""Organizations: the tenants. Not tenant-scoped themselves."""

from __future__ import annotations

import duckdb

from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import OrganizationRow
from rewards_lab.store.queries import columns, fetch_one_as


class OrganizationRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, organization_id: str, name: str, plan: str, rate_limit_per_minute: int | None) -> OrganizationRow:
        self.con.execute(
            "INSERT INTO organizations VALUES (?, ?, ?, ?, ?)",
            [organization_id, name, plan, rate_limit_per_minute, utcnow()],
        )
        row = self.get(organization_id)
        assert row is not None
        return row

    def get(self, organization_id: str) -> OrganizationRow | None:
        sql = f"SELECT {columns(OrganizationRow)} FROM organizations WHERE id = ?"
        return fetch_one_as(self.con, OrganizationRow, sql, [organization_id])
