"""The store's SQL is written once (DuckDB's text) and rendered for PostgreSQL by `store.dialect` (issue 32). Every
statement the service runs that can be read from the source (tests/store/sql_statements.py) renders, or is on the
short list of per-store code below; the constructs seen to render wrongly are refused with the statement named; and
the renderings are PREPAREd (parsed, analysed against the schema, planned) on a throwaway PostgreSQL migrated as a
new PostgreSQL database is (the baseline, rendered through the same dialect). A few statements run on both engines
over the same rows: PostgreSQL accepting a text is necessary, not sufficient."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pytest

from rewards_lab.store.dialect import NotPortable, render, to_postgres
from rewards_lab.store.schema import steps
from tests.store.sql_statements import Statement, all_statements

# Per-store code by design (reports/i32-postgres-plan.md, section 2.2): the site, and why. A new statement the
# dialect refuses fails the lint until it is rewritten portably or added here with its reason.
PER_STORE = {
    "store.events.add": "the event intake's insert: named list parameters, one round trip; PostgreSQL's is an upsert",
    "store.database._rewrite_file": "DETACH: the DuckDB file rewrite",
    "store.database.copy_to": "DETACH: DuckDB's online copy (PostgreSQL's backups are the server's)",
    "store.database.checkpoint": "CHECKPOINT: DuckDB's write-ahead log",
}
# Statements built at run time, in part beyond the static reading: checked by the store's contract tests only.
DYNAMIC = {
    "service.event_export.open_export": "the export's filter clauses",
    "store.auth_audit.page": "the page's filter clauses",
    "store.request_log.page": "the page's filter clauses",
    "store.database._rewrite_file": "ATTACH / COPY FROM DATABASE a file name",
    "store.database.copy_to": "ATTACH / COPY FROM DATABASE a file name",
    "store.executions._write": "the Arrow batch's insert, its ON CONFLICT chosen by the caller",
    "store.queries.paginate": "the keyset cursor around any listing",
    "store.verification.verify_ledger": "each check of _CHECKS (listed from the dictionary)",
}
# The tables DuckDB reads from Arrow (replacement scans, `con.register`): TEMP tables of their schemas on PostgreSQL.
ARROW_TABLES = {
    "txn_batch": ("rewards_lab.store.ledger", "_TXN_SCHEMA"),
    "balance_deltas": ("rewards_lab.store.ledger", "_WIDE_DELTA_SCHEMA"),
    "lots_taken": ("rewards_lab.store.lots", "_TAKEN_SCHEMA"),
    "lots_made": ("rewards_lab.store.lots", "_NEW_SCHEMA"),
    "execution_batch": ("rewards_lab.store.executions", "_SCHEMA"),
    "request_log_batch": ("rewards_lab.store.request_log", "_ARROW_SCHEMA"),
    "auth_audit_batch": ("rewards_lab.store.auth_audit", "_SCHEMA"),
    "event_outcomes": ("rewards_lab.store.events", "_OUTCOME_SCHEMA"),
}
ARROW_COLUMNS = {  # built in place with pa.table({...}): the columns as the code names them
    "outbox_batch": ["id", "kind", "resource_id", "payload"],
    "delivery_batch": ["id", "organization_id", "environment", "endpoint_id", "outbox_id", "kind", "body"],
}
_TRANSACTION = re.compile(r"\s*(BEGIN|COMMIT|ROLLBACK)\b", re.I)
_DDL = re.compile(r"\s*(CREATE|ALTER|DROP)\b", re.I)


@pytest.fixture(scope="module")
def statements() -> list[Statement]:
    return all_statements()


def _rendered(statements: list[Statement]) -> Iterator[tuple[Statement, str]]:
    for statement in statements:
        if statement.resolved and statement.site not in PER_STORE:
            yield statement, render(statement.sql)


def test_every_statement_renders_for_postgres_or_is_named_per_store_code(statements: list[Statement]) -> None:
    refused: dict[str, list[str]] = {}
    for statement in statements:
        if not statement.resolved:
            continue
        try:
            to_postgres(statement.sql)
        except NotPortable as why:
            refused.setdefault(statement.site, []).append(f"line {statement.line}: {why}\n    {statement.sql[:160]}")
    unexpected = {site: why for site, why in refused.items() if site not in PER_STORE}
    assert not unexpected, "not portable (rewrite in DuckDB's text, or name it per-store):\n" + "\n".join(
        f"{site} {line}" for site, lines in unexpected.items() for line in lines
    )
    assert set(refused) == set(PER_STORE), f"per-store entries now portable or gone: {set(PER_STORE) - set(refused)}"
    assert len(statements) > 150  # the reading still finds the store's statements


def test_the_statements_beyond_the_static_reading_are_the_known_ones(statements: list[Statement]) -> None:
    dynamic = {s.site for s in statements if not s.resolved}
    assert dynamic == set(DYNAMIC), f"new: {dynamic - set(DYNAMIC)}; no longer dynamic: {set(DYNAMIC) - dynamic}"


@pytest.mark.parametrize(
    ("sql", "refusal"),
    [
        # sqlglot's own rewrite of this shape applies the LIMIT before the QUALIFY filter: other rows, no error
        ("SELECT id FROM d QUALIFY row_number() OVER (PARTITION BY org ORDER BY t) <= 1 ORDER BY t LIMIT ?", "QUALIFY"),
        ("SELECT org, min(t) FROM d GROUP BY org QUALIFY row_number() OVER (ORDER BY min(t)) = 1", "QUALIFY"),
        ("SELECT * EXCLUDE (rank) FROM d", "EXCLUDE"),
        ("UPDATE d SET v = w.v FROM (SELECT unnest(?) AS id, unnest(?) AS v) w WHERE d.id = w.id", "list parameter"),
        ("INSERT INTO d SELECT unnest(?), 1", "list parameter"),
        ("SELECT rowid, id FROM d", "rowid outside"),
        ("UPDATE d SET v = 1 WHERE rowid = ?", "rowid outside"),
        ("DELETE FROM d WHERE rowid IN (SELECT rowid FROM e LIMIT ?)", "rowid outside"),  # another table's address
        ("DELETE FROM d WHERE rowid IN (SELECT d.rowid FROM d JOIN e ON d.id = e.id LIMIT ?)", "rowid outside"),
        ("SELECT ?::VARCHAR[]", "cannot parse"),
        ("SELECT list_sum(v) FROM d", "function without a PostgreSQL hook: list_sum"),
        ("SELECT list_transform(v, x -> x + 1) FROM d", "list or struct function"),
        ("SELECT a.id FROM a ASOF JOIN b ON a.id = b.id AND a.t >= b.t", "ASOF"),
        ("CHECKPOINT", "DuckDB command"),
        ("DETACH other", "DuckDB command"),
        ("ATTACH 'x.db' AS other", "DuckDB command"),
    ],
)
def test_what_renders_wrongly_is_refused_and_named(sql: str, refusal: str) -> None:
    with pytest.raises(NotPortable, match=re.escape(refusal)):
        to_postgres(sql)


def test_the_one_list_parameter_shape_left_bare_becomes_any_and_percent_signs_survive_psycopg() -> None:
    rendered = to_postgres("SELECT id FROM d WHERE id IN (SELECT unnest(?)) AND note LIKE 'a%' AND n % 2 = ?")
    assert "= ANY(%s)" in rendered and "LIKE 'a%%'" in rendered and "n %% 2 = %s" in rendered
    assert "%(id)s" in to_postgres("SELECT $id")
    bounded = to_postgres("DELETE FROM d WHERE rowid IN (SELECT rowid FROM d WHERE t < ? LIMIT ?)")
    assert bounded == "DELETE FROM d WHERE ctid IN (SELECT ctid FROM d WHERE t < %s LIMIT %s)"


def _numbered(sql: str) -> str:
    """psycopg's text (`%s`, `%(name)s`, `%%`) as PREPARE's (`$n`, `%`)."""
    names: dict[str, int] = {}
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) == "%%":
            return "%"
        name = match.group(1)
        if name and name in names:
            return f"${names[name]}"
        count += 1
        if name:
            names[name] = count
        return f"${count}"

    return re.sub(r"%%|%\((\w+)\)s|%s", number, sql)


def _pg_type(arrow: pa.DataType) -> str:
    if pa.types.is_int32(arrow):
        return "INTEGER"
    if pa.types.is_int64(arrow):
        return "BIGINT"
    if pa.types.is_decimal(arrow):
        return "NUMERIC(38, 0)"
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMP"
    if pa.types.is_floating(arrow):
        return "DOUBLE PRECISION"
    if pa.types.is_boolean(arrow):
        return "BOOLEAN"
    return "TEXT"


def _migrate(con: psycopg.Connection[Any]) -> None:
    """What migrating a new PostgreSQL database runs (the baseline, then any later version), each statement
    rendered by the dialect."""
    for versions, _, step in steps("postgres", ()):
        for sql in step:
            try:
                con.execute(_numbered(to_postgres(sql)))
            except (NotPortable, psycopg.Error) as error:
                raise AssertionError(f"migration {versions[-1]}: {error}\n{sql}") from error


@pytest.fixture
def schema(pg_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_database, autocommit=True) as con:
        _migrate(con)
        for table, (module, attribute) in ARROW_TABLES.items():
            arrow = getattr(importlib.import_module(module), attribute)
            con.execute(f"CREATE TEMP TABLE {table} ({', '.join(f'{f.name} {_pg_type(f.type)}' for f in arrow)})")
        for table, names in ARROW_COLUMNS.items():
            con.execute(f"CREATE TEMP TABLE {table} ({', '.join(f'{n} TEXT' for n in names)})")
        yield con


def test_every_rendered_statement_prepares_on_postgres_against_the_migrated_schema(
    schema: psycopg.Connection[Any], statements: list[Statement]
) -> None:
    rendered = list(_rendered(statements))
    for _, sql in rendered:  # the store's own DDL first (schema_migrations): the rest reads it
        if _DDL.match(sql):
            schema.execute(_numbered(sql))
    refused, prepared = [], 0
    for i, (statement, sql) in enumerate(rendered):
        if _DDL.match(sql):
            continue
        if _TRANSACTION.match(sql):
            assert re.fullmatch(r"(BEGIN|COMMIT|ROLLBACK)", sql), sql  # psycopg's transaction() in the store
            continue
        try:
            schema.execute(f"PREPARE lint_{i} AS {_numbered(sql)}")
            schema.execute(f"DEALLOCATE lint_{i}")
            prepared += 1
        except psycopg.Error as error:
            refused.append(f"{statement.site} line {statement.line}: {str(error).splitlines()[0]}\n    {sql[:300]}")
    assert not refused, "PostgreSQL refuses:\n" + "\n".join(refused)
    assert prepared > 150


# The same statement on both engines over the same rows: the hooks' meaning, not only their syntax.
_ROWS = [("a1", "A", 5, "x%", datetime(1969, 12, 31, 23, 59, 59, 999999)), ("a2", "A", 2**40, None, None)]
_ROWS += [("b1", "B", 7, "yz", datetime(2026, 3, 29, 1, 0, 0, 1)), ("c1", "C", 1, "x_", datetime(1900, 1, 1))]
_BOTH: list[tuple[str, list[Any]]] = [
    ("SELECT id FROM d WHERE id IN (SELECT unnest(?)) ORDER BY id", [["a1", "b1", "zz"]]),
    ("SELECT id FROM d WHERE id NOT IN (SELECT unnest(?)) ORDER BY id", [[]]),
    ("SELECT id FROM d WHERE note LIKE 'x%' AND amount % 2 = ? ORDER BY id", [1]),
    ("SELECT id, epoch_us(t) FROM d WHERE t IS NOT NULL ORDER BY id", []),
    ("SELECT org, count(*) AS n, sum(amount) FROM d GROUP BY ALL ORDER BY org", []),
    ("SELECT id FROM d WHERE contains(note, ?) ORDER BY id", ["%"]),
    (
        "SELECT d.id, w.v FROM d JOIN (SELECT unnest(CAST(? AS VARCHAR[])) AS id, "
        "unnest(CAST(? AS HUGEINT[])) AS v) w ON d.id = w.id ORDER BY d.id",
        [["a2", "b1"], [str(2**70), "-3"]],
    ),
    (
        "SELECT id, org FROM (SELECT id, org, row_number() OVER (PARTITION BY org ORDER BY amount DESC, id) AS r "
        "FROM d) ranked WHERE r = 1 ORDER BY id LIMIT ?",
        [2],
    ),
]


def _ints(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """NUMERIC read back as Python's int (the PostgreSQL store's loader will do it: plan, section 3)."""
    return [tuple(int(v) if isinstance(v, Decimal) else v for v in row) for row in rows]


@pytest.fixture
def both(pg_database: str) -> Iterator[tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]]]:
    create = "CREATE TABLE d (id VARCHAR PRIMARY KEY, org VARCHAR NOT NULL, amount HUGEINT, note VARCHAR, t TIMESTAMP)"
    with psycopg.connect(pg_database, autocommit=True) as pg, duckdb.connect() as db:
        for con, sql in ((db, create), (pg, _numbered(to_postgres(create)))):
            con.execute(sql)
        db.executemany("INSERT INTO d VALUES (?, ?, ?, ?, ?)", _ROWS)
        pg.cursor().executemany(render("INSERT INTO d VALUES (?, ?, ?, ?, ?)"), _ROWS)
        yield db, pg


def test_the_rendered_statements_give_duckdbs_rows_on_postgres(
    both: tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]],
) -> None:
    db, pg = both
    for sql, params in _BOTH:
        expected = db.execute(sql, params).fetchall()
        assert expected, sql  # a statement that selects nothing proves nothing
        got = _ints(pg.execute(render(sql), params).fetchall())
        assert got == expected, f"{sql}\n{render(sql)}"


def test_insert_or_replace_becomes_an_upsert_on_the_tables_key(
    both: tuple[duckdb.DuckDBPyConnection, psycopg.Connection[Any]],
) -> None:
    db, pg = both
    upsert = "INSERT OR REPLACE INTO d VALUES (?, ?, ?, ?, ?)"
    keys = {"d": (("id",), ("id", "org", "amount", "note", "t"))}
    for row in [("a1", "Z", 9, None, None), ("n1", "N", 1, "new", None)]:
        db.execute(upsert, row)
        pg.execute(to_postgres(upsert, keys), row)
    read = "SELECT id, org, amount, note FROM d ORDER BY id"
    assert _ints(pg.execute(read).fetchall()) == db.execute(read).fetchall()
