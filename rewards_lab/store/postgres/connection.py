"""A DuckDB-shaped connection over psycopg, so that the repositories' canonical SQL runs on PostgreSQL unchanged.

Each statement is rendered by `store.dialect.render` (cached per text) and run with the same parameters: `?`
becomes `%s` (a list), `$name` becomes `%(name)s` (a dict). What the repositories read of a DuckDB result is
given back in DuckDB's shape: `fetchone`/`fetchall`/`description`, and for INSERT/UPDATE/DELETE one row holding
the count of rows touched. NUMERIC comes back as `int` (scale 0: every amount column is NUMERIC(38, 0)).
`register(name, arrow_table)` (DuckDB's view over an Arrow table) becomes a TEMP table filled by COPY, dropped by
`unregister`. Errors are raised as the DuckDB exceptions the repositories catch (`ConstraintException`,
`OutOfRangeException`), their message naming the constraint's definition, so `ledger._invariant` reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
from psycopg import errors as pg_errors
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus

from rewards_lab.store.dialect import render
from rewards_lab.store.interfaces import WriteConflict

Params = Sequence[Any] | Mapping[str, Any] | None


class NumericLoader(Loader):
    """NUMERIC as `int` when it has no fraction (every NUMERIC column here is NUMERIC(38, 0), DuckDB's HUGEINT
    reads back as int), as `Decimal` otherwise."""

    def load(self, data: Any) -> int | Decimal:
        text = bytes(data).decode("ascii")
        if "." in text or text in ("NaN", "Infinity", "-Infinity"):
            return Decimal(text)
        return int(text)


def configure(conn: psycopg.Connection[Any]) -> None:
    """Every connection of the store: UTC (naive timestamps mean UTC), NUMERIC read as int."""
    conn.adapters.register_loader("numeric", NumericLoader)


class Result:
    """A statement's answer as DuckDB's cursor gives it."""

    def __init__(self, rows: list[tuple[Any, ...]], description: list[tuple[Any, ...]] | None) -> None:
        self._rows = rows
        self.description = description

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        if not self._rows:
            return None
        return self._rows.pop(0)


def _arrow_type(arrow: pa.DataType) -> str:
    """The column type of a registered Arrow column. A column Arrow typed `null` (every value None, inferred by
    `pa.table`) becomes TEXT: the registered tables feed text columns there (webhooks' `outbox_id`)."""
    if pa.types.is_null(arrow):
        return "TEXT"
    if pa.types.is_int8(arrow) or pa.types.is_int16(arrow) or pa.types.is_int32(arrow):
        return "INTEGER"
    if pa.types.is_integer(arrow):
        return "BIGINT"
    if pa.types.is_decimal(arrow):
        return f"NUMERIC({arrow.precision}, {arrow.scale})"
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMP"
    if pa.types.is_floating(arrow):
        return "DOUBLE PRECISION"
    if pa.types.is_boolean(arrow):
        return "BOOLEAN"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "TEXT"
    raise TypeError(f"no PostgreSQL column type for Arrow {arrow}")


class PgConnection:
    """The adapter the repositories take in place of a DuckDB connection (see the module's docstring)."""

    def __init__(
        self, conn: psycopg.Connection[Any], constraints: Mapping[str, str] | None = None, *, writes: bool = False
    ) -> None:
        self.conn = conn
        self._constraints = constraints or {}
        # A unit of work's connection (a read-write transaction): the repositories take their row locks on it
        # (plan 5.2); a reader, a snapshot or the intake reads without them.
        self.writes = writes

    def execute(self, sql: str, params: Params = None) -> Result:
        with self._translated():
            cursor = self.conn.execute(render(sql), _params(params))
            return self._result(cursor)

    def execute_native(self, sql: str, params: Params = None) -> Result:
        """PostgreSQL's own text (per-store code), with psycopg's parameters."""
        with self._translated():
            return self._result(self.conn.execute(sql, _params(params)))

    def copy_rows(self, copy_sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """`COPY ... FROM STDIN` (text format) of `rows`, inside the current transaction."""
        with self._translated(), self.conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row(row)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Result:
        with self._translated(), self.conn.cursor() as cursor:
            cursor.executemany(render(sql), [list(p) for p in params])
            return Result([(cursor.rowcount,)], None)

    def register(self, name: str, table: pa.Table) -> None:
        """A TEMP table `name` holding `table`'s rows (inside the current transaction, if any)."""
        columns = ", ".join(f"{f.name} {_arrow_type(f.type)}" for f in table.schema)
        names = ", ".join(table.schema.names)
        with self._translated():
            self.conn.execute(f"DROP TABLE IF EXISTS pg_temp.{name}")
            self.conn.execute(f"CREATE TEMP TABLE {name} ({columns})")
            with self.conn.cursor().copy(f"COPY {name} ({names}) FROM STDIN") as copy:
                for row in zip(*(column.to_pylist() for column in table.columns), strict=True):
                    copy.write_row(row)

    def unregister(self, name: str) -> None:
        """Drop `register`'s table; in a failed transaction the rollback does it."""
        if self.conn.info.transaction_status != TransactionStatus.INERROR:
            self.conn.execute(f"DROP TABLE IF EXISTS pg_temp.{name}")

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction when inside one (a failed statement then spoils only it), nothing otherwise."""
        if self.conn.info.transaction_status == TransactionStatus.IDLE:
            yield
        else:
            with self.conn.transaction():
                yield

    def interrupt(self) -> None:
        """Cancel the statement running on this connection (from another thread), as DuckDB's `interrupt`: it
        fails with `duckdb.InterruptException` (the forecast's deadline)."""
        self.conn.cancel_safe()

    def _result(self, cursor: psycopg.Cursor[Any]) -> Result:
        if cursor.description is None:
            return Result([(cursor.rowcount,)], None)
        description = [(c.name, c.type_code, None, None, None, None, None) for c in cursor.description]
        return Result(cursor.fetchall(), description)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except pg_errors.IntegrityError as error:
            raise duckdb.ConstraintException(self._explain(error)) from error
        except pg_errors.NumericValueOutOfRange as error:
            raise duckdb.OutOfRangeException(str(error)) from error
        except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as error:
            raise WriteConflict(str(error)) from error
        except pg_errors.QueryCanceled as error:  # `interrupt`, or a statement_timeout
            raise duckdb.InterruptException(str(error)) from error

    def _explain(self, error: psycopg.Error) -> str:
        name = error.diag.constraint_name
        definition = self._constraints.get(name or "", "")
        return f"{error} [{name}: {definition}]" if name else str(error)


def _params(params: Params) -> Sequence[Any] | Mapping[str, Any]:
    """Never None: psycopg leaves the text alone without parameters, and the rendered text doubles every `%`."""
    if params is None:
        return []
    if isinstance(params, Mapping):
        return dict(params)
    return list(params)
