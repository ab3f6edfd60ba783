"""Small helpers shared by the repositories: rows as dicts, and keyset pagination in SQL."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from typing import Any, Generic, TypeVar

import duckdb

from rewards_lab.contract.pagination import CursorPosition, PageRequest, decode_cursor, encode_cursor

# A row as a dict of its columns, inside the store only: `paginate` builds these, and repositories turn them into
# their typed rows (`RowPage.typed`) before they leave the store.
Row = dict[str, Any]
RowT = TypeVar("RowT")
RowTypedT = TypeVar("RowTypedT")


@cache
def columns(row_type: type[Any]) -> str:
    """The SELECT list of a typed row (a dataclass whose fields are named like the table's columns), in field order."""
    return ", ".join(field.name for field in fields(row_type))


def decoding(row_type: type[RowT], decoders: Mapping[str, Callable[[Any], Any]]) -> Callable[..., RowT]:
    """A maker of `row_type` (a dataclass or NamedTuple) that first decodes the named columns (JSON text into the
    row's typed values), given the columns by position (`fetch_all_as`) or by name (`RowPage.typed`)."""
    names: list[str] = [f.name for f in fields(row_type)] if is_dataclass(row_type) else list(row_type._fields)  # type: ignore[attr-defined]
    at = [(names.index(name), name, decode) for name, decode in decoders.items()]

    def make(*values: Any, **named: Any) -> RowT:
        listed = list(values)
        for index, name, decode in at:
            if index < len(listed):
                listed[index] = decode(listed[index])
            elif name in named:
                named[name] = decode(named[name])
        return row_type(*listed, **named)

    return make


def fetch_all_as(
    con: duckdb.DuckDBPyConnection, row_type: Callable[..., RowT], sql: str, params: list[Any] | None = None
) -> list[RowT]:
    """Typed rows straight from the cursor's tuples: `sql` must select `columns(row_type)`, in that order."""
    return [row_type(*values) for values in con.execute(sql, params or []).fetchall()]


def fetch_one_as(
    con: duckdb.DuckDBPyConnection, row_type: Callable[..., RowT], sql: str, params: list[Any] | None = None
) -> RowT | None:
    """The first typed row, if any; the result is fetched to its end (this DuckDB rejects other work on a
    connection with an unfinished result)."""
    rows = con.execute(sql, params or []).fetchall()
    return row_type(*rows[0]) if rows else None


def fetch_all(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[Row]:
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    row = con.execute(sql, params or []).fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True, slots=True)
class RowPage(Generic[RowT]):
    """One page of a list: its rows and the cursor of the next page."""

    rows: list[RowT]
    next_cursor: str | None
    has_more: bool

    def typed(self, row_type: Callable[..., RowTypedT]) -> RowPage[RowTypedT]:
        """The same page with each row (a dict of its columns) made a `row_type` by keyword."""
        return RowPage([row_type(**row) for row in self.rows], self.next_cursor, self.has_more)  # type: ignore[arg-type]


def created_between(clauses: list[str], params: list[Any], since: Any, until: Any) -> None:
    """Append `since <= created_at < until` (either bound optional) to a WHERE being built."""
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    if until is not None:
        clauses.append("created_at < ?")
        params.append(until)


def _keyset(column: str, direction: str, sort_value: Any) -> str:
    """The rows after the cursor's (sort value, id) in the page order, NULL sort values included.

    The order is `column ASC NULLS LAST, id ASC`, or its exact reverse `column DESC NULLS FIRST, id DESC`; a
    plain `column > ?` is never true for a NULL on either side, which dropped every row without a value."""
    after = ">" if direction == "asc" else "<"
    if sort_value is None:  # the cursor is among the NULLs: the rest of them, then (desc) every non-NULL row
        rest = f"({column} IS NULL AND id {after} ?)"
        return rest if direction == "asc" else f"({rest} OR {column} IS NOT NULL)"
    later = f"{column} {after} ? OR ({column} = ? AND id {after} ?)"
    return f"({later} OR {column} IS NULL)" if direction == "asc" else f"({later})"


def paginate(
    con: duckdb.DuckDBPyConnection,
    *,
    list_name: str,
    select_sql: str,
    params: list[Any],
    page: PageRequest,
    sort: str,
    sort_sql: str | None = None,
) -> RowPage[Row]:
    """Keyset pagination over `select_sql` (which must expose `id` and the sort column, and end in a WHERE).

    Rows are ordered by (sort, id) so that equal sort values page deterministically, NULL sort values last in
    ascending order (first in descending); every row appears on exactly one page. No offset is ever used. An
    empty cursor is no cursor.
    """
    column = sort_sql or sort
    order = "ASC NULLS LAST" if page.direction == "asc" else "DESC NULLS FIRST"
    id_order = "ASC" if page.direction == "asc" else "DESC"
    sql = f"SELECT * FROM ({select_sql}) AS listed"
    args = list(params)
    if page.cursor:
        position = decode_cursor(page.cursor, list_name, sort, page.direction, page.cursor_key)
        sql += f" WHERE {_keyset(column, page.direction, position.sort_value)}"
        value = position.sort_value
        args += [position.last_id] if value is None else [value, value, position.last_id]
    sql += f" ORDER BY {column} {order}, id {id_order} LIMIT ?"
    args.append(page.limit + 1)
    rows = fetch_all(con, sql, args)
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    next_cursor = None
    if has_more:
        last = rows[-1]
        position = CursorPosition(last[sort], last["id"])
        next_cursor = encode_cursor(list_name, sort, page.direction, position, page.cursor_key)
    return RowPage(rows, next_cursor, has_more)
