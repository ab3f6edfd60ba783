"""The store contract's fixtures: one `store` parametrised over both stores, and a fresh organization in it.

Every test in this package runs twice: on a DuckDB file (`db`) and on a PostgreSQL database cloned from the
migrated template (`pg_store`: `CREATE DATABASE ... TEMPLATE`, tests/pg_cluster.py). The tests speak only the
`Store` Protocol and `Repositories`; where a repository has no reader for a column, a test names it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewards_lab.contract.ids import new_id
from rewards_lab.contract.scope import Scope
from rewards_lab.store.api import Store


@pytest.fixture(params=["duckdb", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The test's store: a DuckDB file (`db`) or a PostgreSQL database cloned from the migrated template; the
    ledger verifies at the end on both (`db` checks DuckDB's itself)."""
    store: Store = request.getfixturevalue("db" if request.param == "duckdb" else "pg_store")
    yield store
    if request.param == "postgres":
        report = store.verify_ledger()
        assert report.ok, report.problems


@pytest.fixture
def scope(store: Store) -> Scope:
    """A new organization's sandbox, made through the Protocol."""
    organization_id = new_id("organization")
    with store.unit_of_work() as uow:
        uow.organizations.add(organization_id, "Contract Ltd", "business", None)
    return Scope(organization_id, "sandbox")
