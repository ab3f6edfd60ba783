"""The store as the services see it: one Protocol per aggregate's repository, and the unit of work that holds them.

Services type against `Repositories` below, never against the DuckDB classes; `store/uow.py` is the DuckDB
composition root that satisfies it. A second store (e.g. PostgreSQL) implements these Protocols and its own
composition root, without touching the services.
"""

from __future__ import annotations

from typing import Protocol

from rewards_lab.store.interfaces.accounts import AccountStore, SessionStore
from rewards_lab.store.interfaces.api_keys import ApiKeyStore
from rewards_lab.store.interfaces.assets import AssetStore
from rewards_lab.store.interfaces.auth_audit import AuthAuditStore
from rewards_lab.store.interfaces.customers import CustomerStore
from rewards_lab.store.interfaces.events import EventStore
from rewards_lab.store.interfaces.executions import ExecutionStore
from rewards_lab.store.interfaces.idempotency import IdempotencyStore
from rewards_lab.store.interfaces.ledger import LedgerStore
from rewards_lab.store.interfaces.limit_usage import LimitUsageStore
from rewards_lab.store.interfaces.lots import LotStore
from rewards_lab.store.interfaces.organizations import OrganizationStore
from rewards_lab.store.interfaces.outbox import OutboxStore
from rewards_lab.store.interfaces.programmes import ProgrammeStore
from rewards_lab.store.interfaces.request_log import RequestLogStore
from rewards_lab.store.interfaces.segments import SegmentStore
from rewards_lab.store.interfaces.wallets import WalletStore
from rewards_lab.store.interfaces.webhooks import WebhookStore


class Repositories(Protocol):
    """Every repository of one unit of work (one transaction when writing, or one read cursor).

    Read-only attributes (properties in the Protocol) so that an implementation may hold them as plain
    attributes of a more specific type.
    """

    @property
    def database(self) -> object | None:
        """What identifies the database across units of work (process-wide caches key on it); None for a bare
        connection."""
        ...

    @property
    def organizations(self) -> OrganizationStore: ...
    @property
    def customers(self) -> CustomerStore: ...
    @property
    def wallets(self) -> WalletStore: ...
    @property
    def assets(self) -> AssetStore: ...
    @property
    def programmes(self) -> ProgrammeStore: ...
    @property
    def events(self) -> EventStore: ...
    @property
    def ledger(self) -> LedgerStore: ...
    @property
    def executions(self) -> ExecutionStore: ...
    @property
    def idempotency(self) -> IdempotencyStore: ...
    @property
    def outbox(self) -> OutboxStore: ...
    @property
    def api_keys(self) -> ApiKeyStore: ...
    @property
    def webhooks(self) -> WebhookStore: ...
    @property
    def accounts(self) -> AccountStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def request_log(self) -> RequestLogStore: ...
    @property
    def auth_audit(self) -> AuthAuditStore: ...
    @property
    def segments(self) -> SegmentStore: ...
    @property
    def limit_usage(self) -> LimitUsageStore: ...
    @property
    def lots(self) -> LotStore: ...
