"""The audit of authentication events: one row per event, written synchronously; read per tenant."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.interfaces import AuditFilter, AuditRow, Tenant
from rewards_lab.store.queries import RowPage, created_between, paginate

COLUMNS = (
    "id",
    "organization_id",
    "environment",
    "kind",
    "outcome",
    "reason",
    "status",
    "actor_id",
    "subject_id",
    "request_id",
    "method",
    "path",
    "address",
    "sdk_version",
    "created_at",
)
_SCHEMA = pa.schema(
    [(column, pa.int32() if column == "status" else pa.string()) for column in COLUMNS[:-1]]
    + [("created_at", pa.timestamp("us"))]
)


class AuthAuditRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, row: AuditRow) -> None:
        """One event."""
        self.add_many([row])

    def add_many(self, rows: list[AuditRow]) -> None:
        """Every row in ONE statement from an Arrow table (DuckDB binds a parameter list row by row, slowly)."""
        if not rows:
            return
        table = pa.Table.from_pydict(
            {column: [getattr(row, column) for row in rows] for column in COLUMNS}, schema=_SCHEMA
        )
        self.con.register("auth_audit_batch", table)
        try:
            names = ", ".join(COLUMNS)
            self.con.execute(f"INSERT INTO auth_audit ({names}) SELECT {names} FROM auth_audit_batch")
        finally:
            self.con.unregister("auth_audit_batch")

    def page(self, scope: Scope, where: AuditFilter, page: PageRequest) -> RowPage[AuditRow]:
        """The organization's events in this environment, and its organization-wide ones (environment NULL)."""
        clauses = ["organization_id = ?", "(environment = ? OR environment IS NULL)"]
        params: list[Any] = [*scope.params]
        for column, value in (("kind", where.kind), ("outcome", where.outcome)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        created_between(clauses, params, where.since, where.until)
        select_sql = f"SELECT {', '.join(AuditRow._fields)} FROM auth_audit WHERE {' AND '.join(clauses)}"
        listed = paginate(
            self.con, list_name="auth_audit", select_sql=select_sql, params=params, page=page, sort="created_at"
        )
        return listed.typed(AuditRow)

    def api_key_owner(self, key_id: str) -> Tenant | None:
        """The tenant of an API key (to file a refused request under it), whatever its state."""
        return self._tenant("SELECT organization_id, environment, id FROM api_keys WHERE id = ?", key_id)

    def session_owner(self, session_id: str) -> Tenant | None:
        return self._tenant("SELECT organization_id, NULL, account_id FROM sessions WHERE id = ?", session_id)

    def account_owner(self, email: str) -> Tenant | None:
        return self._tenant("SELECT organization_id, NULL, id FROM accounts WHERE email = ?", email)

    def _tenant(self, sql: str, key: str) -> Tenant | None:
        rows = self.con.execute(sql, [key]).fetchall()
        return Tenant._make(rows[0]) if rows else None
