"""Customers, keyed by the client's `external_id` within one organization and environment."""

from __future__ import annotations

from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import CustomerFilter, CustomerRow
from rewards_lab.store.queries import RowPage, columns, fetch_all_as, fetch_one_as, paginate

TENANT = "organization_id = ? AND environment = ?"
_COLUMNS = columns(CustomerRow)


class CustomerRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self,
        scope: Scope,
        customer_id: str,
        external_id: str,
        email: str | None,
        country: str | None,
        attributes: str = "{}",
    ) -> CustomerRow:
        self.con.execute(
            f"INSERT INTO customers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [customer_id, *scope.params, external_id, email, country, utcnow(), attributes],
        )
        row = self.get(scope, customer_id)
        assert row is not None
        return row

    def update(
        self, scope: Scope, customer_id: str, *, email: str | None, country: str | None, attributes: str
    ) -> CustomerRow:
        self.con.execute(
            f"UPDATE customers SET email = ?, country = ?, attributes = ? WHERE {TENANT} AND id = ?",
            [email, country, attributes, *scope.params, customer_id],
        )
        row = self.get(scope, customer_id)
        assert row is not None, customer_id
        return row

    def get(self, scope: Scope, customer_id: str) -> CustomerRow | None:
        return fetch_one_as(
            self.con,
            CustomerRow,
            f"SELECT {_COLUMNS} FROM customers WHERE {TENANT} AND id = ?",
            [*scope.params, customer_id],
        )

    def get_by_external_id(self, scope: Scope, external_id: str) -> CustomerRow | None:
        return fetch_one_as(
            self.con,
            CustomerRow,
            f"SELECT {_COLUMNS} FROM customers WHERE {TENANT} AND external_id = ?",
            [*scope.params, external_id],
        )

    def resolve_many(self, scope: Scope, references: list[str]) -> dict[str, CustomerRow]:
        """Map each reference to its customer row: the customer with that id, else the one with that external_id.

        An id always wins: a reference that is a customer's id never names another customer, whatever external
        ids exist (new external ids cannot take the id shape: `service.customers.check_external_id`)."""
        if not references:
            return {}
        rows = fetch_all_as(
            self.con,
            CustomerRow,
            f"SELECT {_COLUMNS} FROM customers WHERE {TENANT} AND (id IN (SELECT unnest(?)) "
            "OR external_id IN (SELECT unnest(?)))",
            [*scope.params, references, references],
        )
        by_id = {row.id: row for row in rows}
        by_external = {row.external_id: row for row in rows}
        resolved: dict[str, CustomerRow] = {}
        for reference in references:
            row = by_id.get(reference) or by_external.get(reference)
            if row is not None:
                resolved[reference] = row
        return resolved

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: CustomerFilter) -> RowPage[CustomerRow]:
        sql = f"SELECT {_COLUMNS} FROM customers WHERE {TENANT}"
        params: list[Any] = list(scope.params)
        if filters.external_id:
            sql += " AND external_id = ?"
            params.append(filters.external_id)
        return paginate(self.con, list_name="customers", select_sql=sql, params=params, page=page, sort=sort).typed(
            CustomerRow
        )
