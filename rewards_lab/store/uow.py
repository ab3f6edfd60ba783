"""The unit of work: every repository over one connection, inside one database transaction when writing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from rewards_lab.store.accounts import AccountRepository, SessionRepository
from rewards_lab.store.api_keys import ApiKeyRepository
from rewards_lab.store.assets import AssetRepository
from rewards_lab.store.auth_audit import AuthAuditRepository
from rewards_lab.store.conversations import ConversationRepository
from rewards_lab.store.customers import CustomerRepository
from rewards_lab.store.database import DuckDBStore
from rewards_lab.store.events import EventRepository
from rewards_lab.store.executions import ExecutionRepository
from rewards_lab.store.idempotency import IdempotencyRepository
from rewards_lab.store.interfaces import EventStore
from rewards_lab.store.ledger import LedgerRepository
from rewards_lab.store.limit_usage import LimitUsageRepository
from rewards_lab.store.lots import LotRepository
from rewards_lab.store.organizations import OrganizationRepository
from rewards_lab.store.outbox import OutboxRepository
from rewards_lab.store.programmes import ProgrammeRepository
from rewards_lab.store.request_log import RequestLogRepository
from rewards_lab.store.segments import SegmentQueries
from rewards_lab.store.tiers import TierRepository
from rewards_lab.store.wallets import WalletRepository
from rewards_lab.store.webhooks import WebhookRepository


class DuckDBRepositories:
    """The DuckDB implementation of `store.interfaces.Repositories`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, database: DuckDBStore | None = None) -> None:
        self.con = con
        self.database = database
        self.organizations = OrganizationRepository(con)
        self.customers = CustomerRepository(con)
        self.wallets = WalletRepository(con, database)
        self.assets = AssetRepository(con, database)
        self.programmes = ProgrammeRepository(con)
        self.events = EventRepository(con)
        self.ledger = LedgerRepository(con, database)
        self.executions = ExecutionRepository(con)
        self.idempotency = IdempotencyRepository(con)
        self.outbox = OutboxRepository(con)
        self.api_keys = ApiKeyRepository(con)
        self.webhooks = WebhookRepository(con)
        self.accounts = AccountRepository(con)
        self.sessions = SessionRepository(con)
        self.request_log = RequestLogRepository(con)
        self.auth_audit = AuthAuditRepository(con)
        self.segments = SegmentQueries(con)
        self.limit_usage = LimitUsageRepository(con)
        self.lots = LotRepository(con)
        self.conversations = ConversationRepository(con)
        self.tiers = TierRepository(con)


@contextmanager
def unit_of_work(database: DuckDBStore) -> Iterator[DuckDBRepositories]:
    """One atomic database transaction: all of it commits, or (on any exception) none of it does."""
    with database.transaction() as con:
        yield DuckDBRepositories(con, database)


@contextmanager
def snapshot(database: DuckDBStore) -> Iterator[DuckDBRepositories]:
    """Repositories over this thread's read cursor inside one read transaction: every read sees the same committed
    state (a resource and its children read in two statements cannot straddle a writer's commit)."""
    con = database.reader()
    con.execute("BEGIN TRANSACTION")
    try:
        yield DuckDBRepositories(con, database)
    finally:
        con.execute("COMMIT")


@contextmanager
def intake_events(database: DuckDBStore) -> Iterator[EventStore]:
    """The events repository on the event intake's own cursor, outside any transaction: each statement is its
    own transaction (the intake's fast path: one INSERT, one commit)."""
    with database.intake_cursor() as con:
        yield EventRepository(con)


@contextmanager
def intake_unit_of_work(database: DuckDBStore) -> Iterator[DuckDBRepositories]:
    """`unit_of_work` on the event intake's own cursor (`DuckDBStore.intake_transaction`), so that accepting events
    never waits for the worker's processing batch."""
    with database.intake_transaction() as con:
        yield DuckDBRepositories(con, database)


def reader(database: DuckDBStore) -> DuckDBRepositories:
    """Repositories over this thread's read cursor: committed data only, no transaction held."""
    return DuckDBRepositories(database.reader(), database)
