"""Both stores end with one schema (issue 32): DuckDB migrated through its history (versions 1 to 24 and on), a new
PostgreSQL database through the baseline (store/schema_postgres.py) and the versions after it, each statement
rendered by store.dialect. Compared from each database's own catalog: tables and views, every column in order (the
code inserts by position and selects `*`) with its type, nullability and default, the primary and unique keys, and
the checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import duckdb
import psycopg
import pytest

from rewards_lab.store.dialect import render
from rewards_lab.store.schema import MIGRATIONS, steps
from rewards_lab.store.schema_postgres import BASELINE_VERSION

# DuckDB's type -> PostgreSQL's, as information_schema names them (HUGEINT: NUMERIC(38, 0), checked below)
TYPES = {
    "VARCHAR": "text",  # SQLGlot renders VARCHAR (no length) as TEXT: one type in PostgreSQL
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "numeric",
    "DOUBLE": "double precision",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp without time zone",
    "DATE": "date",  # first used by migration 25 (tiers)
}
Catalog = dict[str, Any]
# What only PostgreSQL has, by design (migration 26): the key DuckDB leaves out (an ART index doubled the ledger's
# batch insert, migration 6), and the B-tree indexes for what DuckDB answers by zone maps (and the claims' scans),
# as pg_indexes spells them.
POSTGRES_ONLY_KEYS = {("transactions", "PRIMARY KEY", ("id",))}
POSTGRES_ONLY_INDEXES = {
    "transactions_source": "(organization_id, environment, source_account_id)",
    "transactions_destination": "(organization_id, environment, destination_account_id)",
    "events_received": "(id) WHERE (status = 'received')",
    "events_customer": "(organization_id, environment, customer_id)",
    "webhook_deliveries_due": "(next_attempt_at) WHERE (status = 'pending')",
    "lots_due": "(expires_at) WHERE (remaining_minor > (0)::numeric)",
    "lots_wallet": "(wallet_id, asset_id)",
    "outbox_undispatched": "(id) WHERE (dispatched_at IS NULL)",
}


@pytest.fixture(scope="module")
def duckdb_catalog() -> Catalog:
    con = duckdb.connect()
    for step in steps("duckdb", ()):
        for sql in step.statements:
            con.execute(sql)
    columns = [
        (table, position, name, TYPES[kind], nullable, _default(default))
        for table, position, name, kind, nullable, default in con.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
        ).fetchall()
    ]
    keys = {
        (table, kind, tuple(names))
        for table, kind, names in con.execute(
            "SELECT table_name, constraint_type, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
        ).fetchall()
    }
    checks = sorted(
        (table, _check(text))
        for table, text in con.execute(
            "SELECT table_name, expression FROM duckdb_constraints() WHERE constraint_type = 'CHECK'"
        ).fetchall()
    )
    tables = set(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    con.close()
    return {"tables": tables, "columns": columns, "keys": keys, "checks": checks}


@pytest.fixture
def postgres_catalog(pg_database: str) -> Iterator[Catalog]:
    with psycopg.connect(pg_database, autocommit=True) as con:
        for step in steps("postgres", ()):
            with con.transaction():
                for sql in step.statements:
                    con.execute(render(sql).replace("%%", "%"))
        columns = []
        for table, position, name, kind, nullable, default, precision, scale in con.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default, "
            "numeric_precision, numeric_scale FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position"
        ):
            if kind == "numeric":
                assert (precision, scale) == (38, 0), (table, name)  # HUGEINT's bound (plan, section 3)
            columns.append((table, position, name, kind, nullable, _default(default)))
        keys = {
            (table, "PRIMARY KEY" if kind == "p" else "UNIQUE", tuple(names))
            for table, kind, names in con.execute(
                "SELECT c.conrelid::regclass::text, c.contype, "
                "array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i) "
                "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) "
                "FROM pg_constraint c JOIN pg_namespace s ON s.oid = c.connamespace "
                "WHERE s.nspname = 'public' AND c.contype IN ('p', 'u')"
            )
        }
        checks = sorted(
            (table, _check(text))
            for table, text in con.execute(
                "SELECT c.conrelid::regclass::text, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_namespace s ON s.oid = c.connamespace WHERE s.nspname = 'public' AND c.contype = 'c'"
            )
        )
        tables = set(
            con.execute(
                "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
        )
        indexes = {
            name: re.sub(r"^.* USING btree ", "", definition).replace("::text", "")
            for name, definition in con.execute(
                "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = 'public' AND NOT EXISTS "
                "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
            )
        }
        yield {"tables": tables, "columns": columns, "keys": keys, "checks": checks, "indexes": indexes}


def _default(text: str | None) -> str | None:
    """A default as both catalogs agree to spell it: PostgreSQL's `'{}'::text` is DuckDB's `'{}'`."""
    return None if text is None else re.sub(r"::[a-z ]+$", "", text)


def _check(text: str) -> str:
    """A check's expression without its spelling: `CHECK ((a >= (0)::numeric))` and `(a >= 0)` are one check."""
    return re.sub(r"::[a-z ]+|[()\s]", "", text.removeprefix("CHECK")).replace("!=", "<>").lower()


def test_both_stores_have_one_schema(duckdb_catalog: Catalog, postgres_catalog: Catalog) -> None:
    assert len(duckdb_catalog["columns"]) > 250  # the catalog query read the schema, not an empty one
    for part in ("tables", "columns", "keys", "checks"):
        only_duckdb = sorted(set(duckdb_catalog[part]) - set(postgres_catalog[part]), key=str)
        only_postgres = sorted(set(postgres_catalog[part]) - set(duckdb_catalog[part]), key=str)
        if part == "keys":
            assert POSTGRES_ONLY_KEYS <= set(only_postgres)
            only_postgres = sorted(set(only_postgres) - POSTGRES_ONLY_KEYS, key=str)
        assert not only_duckdb and not only_postgres, (
            f"{part}: DuckDB {only_duckdb[:8]}, PostgreSQL {only_postgres[:8]}"
        )
    assert duckdb_catalog["checks"] == postgres_catalog["checks"]  # the same checks, as many times


def test_postgres_has_its_own_indexes_and_duckdb_the_lease_columns(
    duckdb_catalog: Catalog, postgres_catalog: Catalog
) -> None:
    assert postgres_catalog["indexes"] == POSTGRES_ONLY_INDEXES
    for catalog in (duckdb_catalog, postgres_catalog):  # the lease: the last two columns, nullable, on both
        deliveries = [c[1:5] for c in catalog["columns"] if c[0] == "webhook_deliveries"]
        assert deliveries[-2:] == [
            (14, "lease_until", "timestamp without time zone", "YES"),
            (15, "leased_by", "text", "YES"),
        ]


def test_a_new_postgres_database_records_the_baseline_as_the_versions_it_stands_for() -> None:
    (baseline, *later) = steps("postgres", ())
    history = sorted(m.version for m in MIGRATIONS)
    assert baseline.versions == tuple(v for v in history if v <= BASELINE_VERSION)
    assert [s.versions for s in later] == [(v,) for v in history if v > BASELINE_VERSION]
    assert steps("postgres", history) == [] and steps("duckdb", history) == []
    assert [s.versions for s in steps("duckdb", ())] == [(v,) for v in history]  # DuckDB replays its history
