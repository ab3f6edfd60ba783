"""API keys: only a SHA-256 hash of the secret and a visible prefix are stored."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import ApiKeyRow
from rewards_lab.store.queries import RowPage, columns, fetch_one_as, paginate

# What a listing reads: every column but the secret's hash, which is never read for a list (an empty string in
# its place keeps the row type; the presenter drops the field anyway).
_LISTED = columns(ApiKeyRow).replace("secret_hash", "'' AS secret_hash")


class ApiKeyRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self,
        scope: Scope,
        key_id: str,
        name: str,
        prefix: str,
        secret_hash: str,
        permissions: list[str],
        created_by: str | None,
    ) -> ApiKeyRow:
        self.con.execute(
            "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            [key_id, *scope.params, name, prefix, secret_hash, json.dumps(sorted(permissions)), created_by, utcnow()],
        )
        row = self.get(scope, key_id)
        assert row is not None
        return row

    def get(self, scope: Scope, key_id: str) -> ApiKeyRow | None:
        return fetch_one_as(
            self.con,
            ApiKeyRow,
            f"SELECT {columns(ApiKeyRow)} FROM api_keys WHERE organization_id = ? AND environment = ? AND id = ?",
            [*scope.params, key_id],
        )

    def page(self, scope: Scope, page: PageRequest, sort: str, status: str | None) -> RowPage[ApiKeyRow]:
        """The scope's keys, revoked ones included (`status`: only `active` or only `revoked` ones)."""
        sql = f"SELECT {_LISTED} FROM api_keys WHERE organization_id = ? AND environment = ?"
        params: list[Any] = list(scope.params)
        if status == "active":
            sql += " AND revoked_at IS NULL"
        elif status == "revoked":
            sql += " AND revoked_at IS NOT NULL"
        listed = paginate(self.con, list_name="api_keys", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(ApiKeyRow)

    def by_hash(self, secret_hash: str) -> ApiKeyRow | None:
        """The key whose secret hashes to this (any tenant: the key itself names its tenant)."""
        sql = f"SELECT {columns(ApiKeyRow)} FROM api_keys WHERE secret_hash = ?"
        return fetch_one_as(self.con, ApiKeyRow, sql, [secret_hash])

    def revoke(self, scope: Scope, key_id: str) -> None:
        self.con.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE organization_id = ? AND environment = ? AND id = ?",
            [utcnow(), *scope.params, key_id],
        )
