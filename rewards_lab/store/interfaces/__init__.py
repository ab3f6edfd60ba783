"""The store as the services see it: one Protocol per aggregate's repository, and the unit of work that holds them.

Services type against `Repositories` below, never against the DuckDB classes; `store/uow.py` is the DuckDB
composition root that satisfies it. A second store (e.g. PostgreSQL) implements these Protocols and its own
composition root, without touching the services.
"""

from __future__ import annotations

from typing import Protocol

from rewards_lab.store.events import EventRepository
from rewards_lab.store.executions import ExecutionRepository
from rewards_lab.store.interfaces.accounts import AccountStore, SessionStore
from rewards_lab.store.interfaces.api_keys import ApiKeyStore
from rewards_lab.store.interfaces.assets import AssetStore
from rewards_lab.store.interfaces.customers import CustomerStore
from rewards_lab.store.interfaces.idempotency import IdempotencyStore
from rewards_lab.store.interfaces.organizations import OrganizationStore
from rewards_lab.store.interfaces.outbox import OutboxStore
from rewards_lab.store.interfaces.programmes import ProgrammeStore
from rewards_lab.store.interfaces.wallets import WalletStore
from rewards_lab.store.interfaces.webhooks import WebhookStore
from rewards_lab.store.ledger import LedgerRepository
from rewards_lab.store.request_log import RequestLogRepository


class Repositories(Protocol):
    """Every repository of one unit of work (one transaction when writing, or one read cursor).

    Read-only attributes (properties in the Protocol) so that an implementation may hold them as plain
    attributes of a more specific type. The ledger, events, executions and request-log attributes are still the
    DuckDB classes until their own Protocols exist.
    """

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
    def events(self) -> EventRepository: ...
    @property
    def ledger(self) -> LedgerRepository: ...
    @property
    def executions(self) -> ExecutionRepository: ...
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
    def request_log(self) -> RequestLogRepository: ...
