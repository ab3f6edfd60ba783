"""Shared fixtures: a real DuckDB file per test, tenants, and a small builder for the standard loop."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.service import assets, customers, organizations, programmes
from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger
from tests.http_helpers import live_client
from tests.live_server import LiveServer
from tests.pg_cluster import pg_cluster, pg_database, pg_store, pg_store_url, pg_template  # noqa: F401  (the PostgreSQL fixtures, for every folder)


@pytest.fixture(scope="session")
def empty_database_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new database file, migrated and closed, made once per test process (creating one costs its migrations)."""
    path = tmp_path_factory.mktemp("empty") / "rewards.duckdb"
    Database(path).close()
    assert not Path(f"{path}.wal").exists()  # everything is in the file the tests copy
    return path


@pytest.fixture
def db(tmp_path: Path, empty_database_file: Path) -> Iterator[Database]:
    """A database file of the test's own: a copy of the empty one with its key file (modes kept: both private)."""
    path = tmp_path / "rewards.duckdb"
    for suffix in ("", ".secret-key"):
        shutil.copy2(f"{empty_database_file}{suffix}", f"{path}{suffix}")
    database = Database(path)
    yield database
    report = verify_ledger(database.reader())
    database.close()
    assert report.ok, report.problems


@pytest.fixture
def scope(db: Database) -> Scope:
    org = organizations.create_organization(db, "Test organization")
    return Scope(org.id, "sandbox")


class World:
    """Builds resources through the service layer, the way a client would."""

    def __init__(self, db: Database, scope: Scope) -> None:
        self.db, self.scope = db, scope
        self._customers = 0

    def customer(self, external_id: str | None = None, **fields: Any) -> r.Customer:
        self._customers += 1
        body = {"external_id": external_id or f"customer-{self._customers}", **fields}
        return customers.create_customer(self.db, self.scope, validate(rq.CustomerCreate, body))

    def wallet(self, customer: r.Customer | None = None, **fields: Any) -> r.Wallet:
        owner = customer or self.customer()
        body = {"customer_id": owner.id, "type": "customer", **fields}
        return customers.create_wallet(self.db, self.scope, validate(rq.WalletCreate, body))

    def asset(self, *, activate: bool = True, **fields: Any) -> r.Asset:
        body = {"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2, **fields}
        created = assets.create_asset(self.db, self.scope, validate(rq.AssetCreate, body))
        return assets.activate_asset(self.db, self.scope, created.id) if activate else created

    def programme(self, asset: r.Asset, name: str = "Spring launch") -> r.Programme:
        body = {"name": name, "asset_id": asset.id}
        return programmes.create_programme(self.db, self.scope, validate(rq.ProgrammeCreate, body))

    def rule(
        self,
        programme: r.Programme,
        event_type: str = "order.completed",
        *,
        conditions: list[dict[str, Any]] | None = None,
        amount: dict[str, Any] | None = None,
    ) -> r.Rule:
        body = {
            "program_id": programme.id,
            "event_type": event_type,
            "conditions": conditions if conditions is not None else [],
            "actions": [{"type": "issue", "amount": amount or {"fixed": "10.00"}}],
        }
        return programmes.create_rule(self.db, self.scope, validate(rq.RuleCreate, body))

    def per_rate_programme(self, asset: r.Asset, rate: str = "0.05", threshold: int = 20) -> r.Programme:
        programme = self.programme(asset)
        self.rule(
            programme,
            conditions=[{"field": "amount", "operator": "gte", "value": threshold}],
            amount={"per": "amount", "rate": Decimal(rate)},
        )
        programmes.publish(self.db, self.scope, programme.id)
        return programme


@pytest.fixture
def world(db: Database, scope: Scope) -> World:
    return World(db, scope)


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    """A client on the module's live `server` fixture (a module that needs another client defines its own)."""
    with live_client(server) as client:
        yield client


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole run (starting one takes seconds): two cores, few partitions.
    PySpark is an optional extra of the package, but `make test` installs it: a missing one fails, not skips."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter (the venv's)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rewards-lab tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
