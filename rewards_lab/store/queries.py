"""Small helpers shared by the repositories: rows as dicts, and keyset pagination in SQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from rewards_lab.contract.pagination import CursorPosition, PageRequest, decode_cursor, encode_cursor

Row = dict[str, Any]


def fetch_all(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[Row]:
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Row | None:
    rows = fetch_all(con, sql, params)
    return rows[0] if rows else None


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    row = con.execute(sql, params or []).fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True, slots=True)
class RowPage:
    rows: list[Row]
    next_cursor: str | None
    has_more: bool


def _cursor_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def paginate(
    con: duckdb.DuckDBPyConnection,
    *,
    list_name: str,
    select_sql: str,
    params: list[Any],
    page: PageRequest,
    sort: str,
    sort_sql: str | None = None,
) -> RowPage:
    """Keyset pagination over `select_sql` (which must expose `id` and the sort column, and end in a WHERE).

    Rows are ordered by (sort, id) so that equal sort values page deterministically; no offset is ever used.
    """
    column = sort_sql or sort
    comparison = ">" if page.direction == "asc" else "<"
    order = "ASC" if page.direction == "asc" else "DESC"
    sql = f"SELECT * FROM ({select_sql}) AS listed"
    args = list(params)
    if page.cursor is not None:
        position = decode_cursor(page.cursor, list_name, sort, page.direction)
        sql += f" WHERE ({column} {comparison} ? OR ({column} = ? AND id {comparison} ?))"
        args += [position.sort_value, position.sort_value, position.last_id]
    sql += f" ORDER BY {column} {order}, id {order} LIMIT ?"
    args.append(page.limit + 1)
    rows = fetch_all(con, sql, args)
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    next_cursor = None
    if has_more:
        last = rows[-1]
        position = CursorPosition(_cursor_value(last[sort]), last["id"])
        next_cursor = encode_cursor(list_name, sort, page.direction, position)
    return RowPage(rows, next_cursor, has_more)
