"""The store as the services see it, in one module (as blnk's `IDataSource`): per aggregate its typed rows and
its repository Protocol, and `Repositories`, the unit of work that holds them all.

Services and the engine type against these, never against the DuckDB classes; `store/uow.py` is the DuckDB
composition root that satisfies `Repositories`. A second store (e.g. PostgreSQL) implements these Protocols and
its own composition root, without touching the services.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from rewards_lab.contract import jsonutil
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import CapCut, CounterKey, Limit
from rewards_lab.domain.lots import Lot
from rewards_lab.domain.posting_decision import PostingDecision
from rewards_lab.domain.posting_policy import LedgerState
from rewards_lab.domain.records import ReversalRecord
from rewards_lab.domain.settings import NO_SPENDING, Guard, GuardOverride, Spending, Tiers
from rewards_lab.store.queries import RowPage

if TYPE_CHECKING:  # the tier repository is its own module (store/tiers.py: rows and statements together)
    from rewards_lab.store.tiers import TierRepository

# organizations --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OrganizationRow:
    """One tenant (`rate_limit_per_minute`: None on plans without a fixed limit)."""

    id: str
    name: str
    plan: str
    rate_limit_per_minute: int | None
    created_at: datetime


class OrganizationStore(Protocol):
    """What the services need of the organization rows (DuckDB: store.organizations.OrganizationRepository)."""

    def add(self, organization_id: str, name: str, plan: str, rate_limit_per_minute: int | None) -> OrganizationRow: ...

    def get(self, organization_id: str) -> OrganizationRow | None: ...


# customers ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CustomerRow:
    """A customer, keyed by the client's `external_id` within its tenant."""

    id: str
    organization_id: str
    environment: str
    external_id: str
    email: str | None
    country: str | None
    created_at: datetime
    # Compact JSON text (contract.attributes.to_json); '{}' when none. Read with every row, `resolve_many`'s
    # included, so that rules can read a customer's attributes without another query.
    attributes: str


@dataclass(frozen=True, slots=True)
class CustomerFilter:
    """Which customers a page lists (None: any)."""

    external_id: str | None = None


class CustomerStore(Protocol):
    """What the services need of the customer rows (DuckDB: store.customers.CustomerRepository)."""

    def add(
        self,
        scope: Scope,
        customer_id: str,
        external_id: str,
        email: str | None,
        country: str | None,
        attributes: str = "{}",
    ) -> CustomerRow: ...

    def update(
        self, scope: Scope, customer_id: str, *, email: str | None, country: str | None, attributes: str
    ) -> CustomerRow:
        """Set the three editable fields of an existing customer; returns the row as it is now."""
        ...

    def get(self, scope: Scope, customer_id: str) -> CustomerRow | None: ...

    def get_by_external_id(self, scope: Scope, external_id: str) -> CustomerRow | None: ...

    def resolve_many(self, scope: Scope, references: list[str]) -> dict[str, CustomerRow]: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: CustomerFilter) -> RowPage[CustomerRow]: ...


# wallets --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WalletRow:
    """A wallet: the ledger account a customer holds assets in (its id is the account id)."""

    id: str
    organization_id: str
    environment: str
    customer_id: str
    type: str
    status: str
    transfer_policy: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WalletFilter:
    """Which wallets a page lists (None: any)."""

    customer_id: str | None = None
    status: str | None = None


class WalletStore(Protocol):
    """What the services need of the wallet rows (DuckDB: store.wallets.WalletRepository)."""

    def add(
        self, scope: Scope, wallet_id: str, customer_id: str, wallet_type: str, transfer_policy: str
    ) -> WalletRow: ...

    def get(self, scope: Scope, wallet_id: str) -> WalletRow | None: ...

    def get_many(self, scope: Scope, wallet_ids: list[str]) -> dict[str, WalletRow]: ...

    def set_status(self, scope: Scope, wallet_id: str, status: str) -> None: ...

    def reward_wallets(self, scope: Scope, customer_ids: list[str]) -> dict[str, WalletRow]: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: WalletFilter) -> RowPage[WalletRow]: ...


# assets ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssetRow:
    """An asset with its supply so far: issued = what left its issuance account, redeemed = what entered its
    redemption account, expired = what entered its breakage account (minor units)."""

    id: str
    organization_id: str
    environment: str
    name: str
    symbol: str
    type: str
    decimals: int
    supply_ceiling_minor: int | None
    status: str
    issuance_account_id: str
    redemption_account_id: str
    created_at: datetime
    activated_at: datetime | None
    expiry: ExpiryPolicy | None  # its expiry policy (None: its points never expire)
    value_per_unit: str | None  # money per unit, a decimal string (None: not valued)
    breakage_account_id: str | None  # where expired points go, once the asset tracks lots
    issued_minor: int
    redeemed_minor: int
    expired_minor: int


@dataclass(frozen=True, slots=True)
class NewAsset:
    """An asset as created (configured): its supply ceiling in minor units (None: none), its expiry (None: its
    points never expire; with one it tracks lots from its creation) and its value per unit (None: not valued)."""

    name: str
    symbol: str
    type: str
    decimals: int
    supply_ceiling_minor: int | None = None
    expiry: ExpiryPolicy | None = None
    value_per_unit: str | None = None


@dataclass(frozen=True, slots=True)
class AssetFilter:
    """Which assets a page lists (None: any)."""

    status: str | None = None


class AssetStore(Protocol):
    """What the services need of the asset rows (DuckDB: store.assets.AssetRepository)."""

    def add(self, scope: Scope, asset_id: str, asset: NewAsset, accounts: tuple[str, str]) -> AssetRow: ...

    def get(self, scope: Scope, asset_id: str) -> AssetRow | None: ...

    def decimals(self, scope: Scope, asset_id: str) -> int | None: ...

    def get_many(self, scope: Scope, asset_ids: list[str]) -> dict[str, AssetRow]: ...

    def start_lots(self, scope: Scope, asset_id: str) -> str: ...

    def set_status(self, scope: Scope, asset_id: str, status: str, *, activated: bool = False) -> None: ...

    def symbol_in_use(self, scope: Scope, symbol: str, except_asset_id: str) -> bool: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: AssetFilter) -> RowPage[AssetRow]: ...


# programmes -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schedule:
    """A version's timezone (IANA) and window of event times (starts_at <= t < ends_at; naive UTC, None: open)."""

    timezone: str = "UTC"
    starts_at: datetime | None = None
    ends_at: datetime | None = None


OPEN_SCHEDULE = Schedule()  # UTC, no bounds: what every version had before schedules existed


@dataclass(frozen=True, slots=True)
class ProgrammeRow:
    """A programme, with its DRAFT version's schedule (`timezone`, `starts_at`, `ends_at`)."""

    id: str
    organization_id: str
    environment: str
    name: str
    asset_id: str
    description: str | None
    current_version: int | None  # the number of the live version; None before the first publication
    draft_version_id: str
    created_at: datetime
    status: str  # active | inactive: an inactive programme's versions are never live
    timezone: str
    starts_at: datetime | None
    ends_at: datetime | None
    spending: Spending = NO_SPENDING  # the draft's programme-wide caps, budget, clawback, expiry and event age
    guards: tuple[Guard, ...] = ()  # the draft's forecast guards
    guard_window_days: int | None = None  # the days of history they are checked on (None: the default)
    tiers: Tiers | None = None  # the draft's tier model (None: none)

    @property
    def draft_schedule(self) -> Schedule:
        return Schedule(self.timezone, self.starts_at, self.ends_at)


@dataclass(frozen=True, slots=True)
class VersionRow:
    id: str
    organization_id: str
    environment: str
    program_id: str
    number: int | None  # None while a draft
    status: str
    based_on: int | None
    published_at: datetime | None
    created_at: datetime
    timezone: str
    starts_at: datetime | None
    ends_at: datetime | None
    spending: Spending = NO_SPENDING  # the version's programme-wide caps, budget, clawback, expiry and event age
    guards: tuple[Guard, ...] = ()  # the version's forecast guards
    guard_override: GuardOverride | None = None  # published despite a failed guard: why, by whom, when
    guard_window_days: int | None = None  # the days of history the guards are checked on (None: the default)
    tiers: Tiers | None = None  # the version's tier model (None: none)

    @property
    def schedule(self) -> Schedule:
        return Schedule(self.timezone, self.starts_at, self.ends_at)


@dataclass(frozen=True, slots=True)
class LiveVersion:
    """A programme's live version (of an active programme) and the programme's asset."""

    id: str
    program_id: str
    number: int
    asset_id: str


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One version's copy of a rule, with its version's number and status. `conditions` and `actions` stay the
    stored JSON text: compiled rules are remembered by it (`engine.rule_book`), and `condition_items` and
    `action_items` decode it where it is read."""

    id: str
    version_id: str
    organization_id: str
    environment: str
    program_id: str
    event_type: str
    conditions: str
    actions: str
    position: int
    created_at: datetime
    priority: int
    stop_processing: bool
    limits: tuple[Limit, ...]  # the rule's caps
    name: str | None  # a short human name (NULL: none)
    version_number: int | None
    version_status: str

    def condition_items(self) -> list[Any]:
        """Its conditions, decoded (JSON values)."""
        items: list[Any] = jsonutil.loads(self.conditions)
        return items

    def action_items(self) -> list[Any]:
        """Its actions, decoded (JSON values)."""
        items: list[Any] = jsonutil.loads(self.actions)
        return items


@dataclass(frozen=True, slots=True)
class NewProgramme:
    """A programme as created (its draft version is made with it)."""

    name: str
    asset_id: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class RuleBody:
    """A rule as written to a draft: `conditions` and `actions` in their JSON form (the action's asset filled
    in), its caps typed."""

    event_type: str
    conditions: list[Any]
    actions: list[Any]
    priority: int = 0
    stop_processing: bool = False
    limits: tuple[Limit, ...] = ()
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ProgrammeFilter:
    """Which programmes a page lists (None: any)."""

    asset_id: str | None = None


class ProgrammeStore(Protocol):
    """What the services need of the programme rows (DuckDB: store.programmes.ProgrammeRepository)."""

    def add(
        self,
        scope: Scope,
        program_id: str,
        draft_version_id: str,
        programme: NewProgramme,
        schedule: Schedule = OPEN_SCHEDULE,
        spending: Spending = NO_SPENDING,
        guards: tuple[Guard, ...] = (),
        guard_window_days: int | None = None,
        tiers: Tiers | None = None,
    ) -> ProgrammeRow: ...

    def get(self, scope: Scope, program_id: str) -> ProgrammeRow | None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: ProgrammeFilter) -> RowPage[ProgrammeRow]: ...

    def set_current(self, scope: Scope, program_id: str, number: int, draft_version_id: str) -> None: ...

    def update(self, scope: Scope, program_id: str, name: str, description: str | None) -> None: ...

    def set_status(self, scope: Scope, program_id: str, status: str) -> None: ...

    def add_version(
        self,
        scope: Scope,
        version_id: str,
        program_id: str,
        based_on: int | None,
        schedule: Schedule = OPEN_SCHEDULE,
        spending: Spending = NO_SPENDING,
        guards: tuple[Guard, ...] = (),
        guard_window_days: int | None = None,
        tiers: Tiers | None = None,
    ) -> None: ...

    def set_schedule(self, scope: Scope, version_id: str, schedule: Schedule) -> None: ...

    def set_spending(self, scope: Scope, version_id: str, spending: Spending) -> None: ...

    def set_guards(self, scope: Scope, version_id: str, guards: tuple[Guard, ...]) -> None: ...

    def set_guard_window(self, scope: Scope, version_id: str, days: int | None) -> None: ...

    def set_tiers(self, scope: Scope, version_id: str, tiers: Tiers | None) -> None: ...

    def record_guard_override(self, scope: Scope, version_id: str, override: GuardOverride) -> None: ...

    def get_version(self, scope: Scope, version_id: str) -> VersionRow | None: ...

    def get_version_by_number(self, scope: Scope, program_id: str, number: int) -> VersionRow | None: ...

    def versions(self, scope: Scope, program_id: str) -> list[VersionRow]: ...

    def versions_page(self, scope: Scope, program_id: str, page: PageRequest, sort: str) -> RowPage[VersionRow]: ...

    def publish_version(self, scope: Scope, version_id: str, number: int) -> None: ...

    def live_versions(self, scope: Scope, event_types: list[str] | None = None) -> list[LiveVersion]: ...

    def add_rule(
        self, scope: Scope, rule_id: str, version_id: str, program_id: str, body: RuleBody, position: int
    ) -> None: ...

    def copy_rules(self, scope: Scope, from_version_id: str, to_version_id: str) -> None: ...

    def restore_draft(self, scope: Scope, draft_version_id: str, source_version_id: str) -> None: ...

    def update_rule(self, scope: Scope, rule_id: str, version_id: str, body: RuleBody) -> None: ...

    def delete_rule(self, scope: Scope, rule_id: str, version_id: str) -> None: ...

    def rules_of(self, scope: Scope, version_ids: list[str]) -> list[RuleRow]: ...

    def rule_digests(self, scope: Scope, version_id: str) -> list[tuple[str, str]]: ...

    def rule_revisions(self, scope: Scope, rule_id: str) -> list[RuleRow]: ...

    def has_reversals(self, scope: Scope) -> bool: ...

    def next_position(self, scope: Scope, version_id: str) -> int: ...


# events ---------------------------------------------------------------------------------------------------------------


class NewEvent(NamedTuple):
    """An accepted event as first stored (`received`): prepared by the request, outside the intake's transaction."""

    id: str
    external_event_id: str
    type: str
    customer_id: str
    occurred_at: datetime | None
    data: str  # the JSON text
    payload_hash: str


class StoredEvent(NamedTuple):
    """An event as the API shows it (`presenters.event`)."""

    id: str
    external_event_id: str
    type: str
    customer_id: str
    occurred_at: datetime | None
    data: str  # the JSON text
    payload_hash: str
    status: str
    error_code: str | None
    error_message: str | None
    attempts: int
    received_at: datetime
    processed_at: datetime | None
    waiting_for: str | None  # a refund waiting for its original: that event's external_event_id
    wait_until: datetime | None

    def data_value(self) -> Any:
        """Its data, decoded (numbers exact). The row keeps the text: POST /events answers with it as it is."""
        return jsonutil.loads(self.data)


class EventPartitions(NamedTuple):
    """The event partitions a worker holds (issue 32, plan 5.1): an event belongs to partition
    `hash(organization, environment, resolved customer) mod total`; a worker processes only the received events of
    the partitions in `held`. Every process of one database must use the same `total`."""

    total: int
    held: tuple[int, ...]


class PartitionLeases(Protocol):
    """One event worker's leases on the event partitions (PostgreSQL: session advisory locks on a connection of
    its own, so a killed process's partitions are free when its session ends)."""

    def claim(self) -> EventPartitions:
        """Between batches: give back the partitions above this worker's fair share, take free ones up to it, and
        say which are held now (none: another worker has them all, or the database is unreachable)."""
        ...

    def close(self) -> None:
        """Give every partition back."""
        ...


class WriteConflict(Exception):  # noqa: N818 - named for what happened, as the store's other refusals
    """Two units of work waited for each other's row locks and the database cancelled this one (a deadlock) or
    refused it to keep them serializable: nothing was written, and running it again once normally succeeds."""


class PendingEvent(NamedTuple):
    """What processing reads of a `received` event (not the times, hash, status and error, whose conversion to
    Python objects would cost the worker's thread the GIL)."""

    id: str
    organization_id: str
    environment: EnvironmentName
    external_event_id: str
    type: str
    customer_id: str
    data: str
    attempts: int
    evaluated_versions: str | None
    # The event's time as epoch microseconds (UTC): its occurred_at, else its time of receipt. An integer, not a
    # datetime, for the same reason; what a version's window is checked against.
    event_time_us: int
    # Set when the event (a refund) waited for its original: `pending` returns it again once its wait is over.
    waiting_for: str | None = None
    # Its time of receipt as epoch microseconds (UTC): what a programme's bound on an event's age is counted from.
    received_at_us: int = 0

    def data_value(self) -> Any:
        """Its data, decoded (numbers exact): only for events a version evaluates, so the row keeps the text."""
        return jsonutil.loads(self.data)

    def versions_value(self) -> list[str] | None:
        """The versions it was evaluated against, as recorded (None: none recorded)."""
        return None if self.evaluated_versions is None else list(jsonutil.loads(self.evaluated_versions))


class EventOutcome(NamedTuple):
    """An attempt's result for one event; `versions`: the versions it was evaluated against."""

    event_id: str
    status: str
    error_code: str | None
    error_message: str | None
    versions: list[str] | None


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a page lists (None: any); `customer_refs`: the references (id, external id) of one customer."""

    status: str | None = None
    type: str | None = None
    customer_refs: list[str] | None = None


class EventStore(Protocol):
    """What the services need of stored events (DuckDB: store.events.EventRepository)."""

    def add(self, events: list[tuple[Scope, NewEvent]], received_at: datetime) -> bool: ...

    def get(self, scope: Scope, event_id: str) -> StoredEvent | None: ...

    def get_by_external_ids(self, scope: Scope, external_ids: list[str]) -> dict[str, StoredEvent]: ...

    def pending(self, limit: int, partitions: EventPartitions | None = None) -> list[PendingEvent]: ...

    def received(self, scope: Scope, event_ids: list[str]) -> list[PendingEvent]: ...

    def wait(self, scope: Scope, waits: dict[str, str], until: datetime) -> None: ...

    def waiting_on(self, scope: Scope, external_ids: list[str]) -> list[PendingEvent]: ...

    def to_process(self, scope: Scope, event_id: str) -> PendingEvent | None: ...

    def mark_many(self, scope: Scope, outcomes: list[EventOutcome]) -> None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: EventFilter) -> RowPage[StoredEvent]: ...


# ledger ---------------------------------------------------------------------------------------------------------------


class TransactionRow(NamedTuple):
    """A ledger transaction: one two-legged posting (`amount_minor` leaves the source, enters the destination)."""

    id: str
    kind: str
    asset_id: str
    amount_minor: int
    source_account_id: str
    destination_account_id: str
    memo: str | None
    execution_id: str | None
    created_at: datetime


class WalletBalanceRow(NamedTuple):
    """A wallet's balance of one asset, from the snapshot."""

    asset_id: str
    symbol: str
    decimals: int
    balance_minor: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    """Which transactions a page lists (None: any); `wallet_id`: either leg's."""

    wallet_id: str | None = None
    asset_id: str | None = None
    kind: str | None = None


class LedgerStore(Protocol):
    """What the services need of the ledger (DuckDB: store.ledger.LedgerRepository)."""

    @property
    def written_at(self) -> datetime | None:
        """`created_at` of the transactions written last."""
        ...

    def write_postings(self, scope: Scope, decision: PostingDecision, state: LedgerState) -> None: ...

    def ledger_state(
        self, scope: Scope, wallet_ids: set[str], accounts: Mapping[str, Collection[str]]
    ) -> LedgerState: ...

    def cached_decimals(self, scope: Scope, asset_id: str) -> int | None: ...

    def balances_of(
        self, scope: Scope, account_ids: list[str], asset_ids: list[str] | None = None
    ) -> dict[tuple[str, str], int]: ...

    def wallet_balances(self, scope: Scope, wallet_id: str) -> list[WalletBalanceRow]: ...

    def get_transaction(self, scope: Scope, transaction_id: str) -> TransactionRow | None: ...

    def list_transactions(
        self, scope: Scope, page: PageRequest, sort: str, filters: TransactionFilter
    ) -> RowPage[TransactionRow]: ...


# executions -----------------------------------------------------------------------------------------------------------


class ExecutionRecord(NamedTuple):
    """One reward execution as written by the event worker: (event, version, rule, action), its outcome and the
    values the rule read (`inputs`, JSON text)."""

    id: str
    event_id: str
    external_event_id: str
    customer_id: str
    program_id: str
    version_id: str
    version_number: int
    rule_id: str
    action_index: int
    asset_id: str
    wallet_id: str | None
    amount_minor: int
    status: str
    error_code: str | None
    transaction_id: str | None
    inputs: str
    requested_minor: int | None = None  # what the rule called for, when a cap or the budget cut it
    limited: CapCut | None = None  # the cut, when one did
    usage_keys: tuple[CounterKey, ...] = ()  # the cap and budget counters it counted in, for a reversal to give back
    reversal: ReversalRecord | None = None  # a reverse action's detail


class StoredExecution(NamedTuple):
    """An execution as stored and shown: its record and when it was first written and last changed."""

    id: str
    event_id: str
    external_event_id: str
    customer_id: str
    program_id: str
    version_id: str
    version_number: int
    rule_id: str
    action_index: int
    asset_id: str
    wallet_id: str | None
    amount_minor: int
    status: str
    error_code: str | None
    transaction_id: str | None
    inputs: str
    created_at: datetime
    updated_at: datetime
    requested_minor: int | None
    limited: CapCut | None
    usage_keys: tuple[CounterKey, ...]
    reversal: ReversalRecord | None
    reversed_minor: int  # what reversals have targeted of this reward
    taken_back_minor: int  # what reversals took back of it from its wallet (at most reversed_minor)

    def inputs_value(self) -> Any:
        """The values its rule read, decoded (numbers exact): only shown, so the row keeps the text."""
        return jsonutil.loads(self.inputs)


@dataclass(frozen=True, slots=True)
class ExecutionFilter:
    """Which executions a page lists (None: any)."""

    customer_id: str | None = None
    event_id: str | None = None
    program_id: str | None = None
    rule_id: str | None = None
    status: str | None = None


class ExecutionStore(Protocol):
    """What the services need of execution records (DuckDB: store.executions.ExecutionRepository)."""

    def insert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None: ...

    def upsert_many(self, scope: Scope, records: list[ExecutionRecord]) -> None: ...

    def for_events(self, scope: Scope, event_ids: list[str]) -> list[StoredExecution]: ...

    def add_reversed(self, scope: Scope, amounts: dict[str, int]) -> None: ...

    def add_taken_back(self, scope: Scope, amounts: dict[str, int]) -> None: ...

    def page(
        self, scope: Scope, page: PageRequest, sort: str, filters: ExecutionFilter
    ) -> RowPage[StoredExecution]: ...


# idempotency ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdempotencyRow:
    """One row of `idempotency_keys`: the first request's hash and its serialised response."""

    organization_id: str
    environment: EnvironmentName
    key: str
    operation: str
    request_hash: str
    response: str
    status_code: int
    created_at: datetime

    def response_value(self) -> Any:
        """The serialised response, decoded (numbers exact)."""
        return jsonutil.loads(self.response)


class IdempotencyStore(Protocol):
    """What the services need of the idempotency rows (DuckDB: store.idempotency.IdempotencyRepository)."""

    def hold(self, scope: Scope, key: str) -> bool:
        """Take `key` for this unit of work; False when another unit (in any process) holds it now."""
        ...

    def get(self, scope: Scope, key: str) -> IdempotencyRow | None: ...

    def add(
        self, scope: Scope, key: str, operation: str, request_hash: str, response: str, status_code: int
    ) -> None: ...


# outbox ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One message of `outbox` (`payload`: the resource as JSON), written with the change that caused it."""

    id: str
    organization_id: str
    environment: EnvironmentName
    kind: str
    resource_id: str
    payload: str
    created_at: datetime
    dispatched_at: datetime | None

    def payload_value(self) -> Any:
        """Its payload, decoded (numbers exact): only for messages some endpoint takes, so the row keeps the text."""
        return jsonutil.loads(self.payload)


class OutboxStore(Protocol):
    """What the services need of the outbox rows (DuckDB: store.outbox.OutboxRepository)."""

    def add_many(self, scope: Scope, messages: list[tuple[str, str, str, str]]) -> None: ...

    def undispatched(self, limit: int) -> list[OutboxRow]: ...

    def claim(self, limit: int) -> list[OutboxRow]:
        """Undispatched messages for the unit of work's fan-out; on PostgreSQL locked, skipping another's."""
        ...

    def of_scope(self, scope: Scope) -> list[OutboxRow]: ...


# api keys -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    """One row of `api_keys` (`permissions`: a JSON list of permission names)."""

    id: str
    organization_id: str
    environment: EnvironmentName
    name: str
    prefix: str
    secret_hash: str
    permissions: str
    created_by: str | None
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyStore(Protocol):
    """What the services need of the apikey rows (DuckDB: store.api_keys.ApiKeyRepository)."""

    def add(
        self,
        scope: Scope,
        key_id: str,
        name: str,
        prefix: str,
        secret_hash: str,
        permissions: list[str],
        created_by: str | None,
    ) -> ApiKeyRow: ...

    def get(self, scope: Scope, key_id: str) -> ApiKeyRow | None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, status: str | None) -> RowPage[ApiKeyRow]: ...

    def by_hash(self, secret_hash: str) -> ApiKeyRow | None: ...

    def revoke(self, scope: Scope, key_id: str) -> None: ...


# webhooks -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndpointRow:
    """A webhook endpoint; its signing secrets are stored sealed (`security/webhook_secrets.py` opens them)."""

    id: str
    organization_id: str
    environment: str
    url: str
    events: tuple[str, ...]  # the event kinds it subscribes to
    signing_secret: str
    secret_prefix: str
    status: str
    created_at: datetime
    disabled_at: datetime | None
    previous_signing_secret: str | None
    previous_secret_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class PlaintextSecrets:
    """An endpoint whose secrets a database from before sealing still holds as given."""

    id: str
    signing_secret: str
    previous_signing_secret: str | None


class NewDelivery(NamedTuple):
    """A delivery as the fan-out creates it (pending): `body` is the exact JSON signed and sent on every attempt."""

    id: str
    organization_id: str
    environment: str
    endpoint_id: str
    outbox_id: str | None  # None: a test delivery (no outbox message)
    kind: str
    body: str


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    id: str
    organization_id: str
    environment: str
    endpoint_id: str
    outbox_id: str | None
    kind: str
    body: str  # the exact JSON signed and sent on every attempt
    status: str
    attempt_count: int
    round_attempts: int  # attempts since the delivery was created or last replayed
    next_attempt_at: datetime | None
    created_at: datetime
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A delivery due now, with what sending it needs of its endpoint."""

    id: str
    organization_id: str
    environment: str
    endpoint_id: str
    kind: str
    body: str
    attempt_count: int
    round_attempts: int
    next_attempt_at: datetime
    url: str
    signing_secret: str
    previous_signing_secret: str | None
    previous_secret_expires_at: datetime | None
    endpoint_status: str


@dataclass(frozen=True, slots=True)
class AttemptRow:
    delivery_id: str
    number: int
    organization_id: str
    environment: str
    attempted_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    succeeded: bool


class WebhookStore(Protocol):
    """What the services need of the webhook rows (DuckDB: store.webhooks.WebhookRepository)."""

    def add_endpoint(
        self, scope: Scope, endpoint_id: str, url: str, events: list[str], secret: str, secret_prefix: str
    ) -> EndpointRow: ...

    def endpoint(self, scope: Scope, endpoint_id: str) -> EndpointRow | None: ...

    def endpoints_page(
        self, scope: Scope, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[EndpointRow]: ...

    def disable_endpoint(self, scope: Scope, endpoint_id: str) -> None: ...

    def rotate_secret(
        self,
        scope: Scope,
        endpoint_id: str,
        *,
        secret: str,
        secret_prefix: str,
        previous_secret: str | None,
        previous_expires_at: datetime | None,
    ) -> None: ...

    def endpoints_with_plaintext_secrets(self) -> list[PlaintextSecrets]: ...

    def store_sealed_secrets(self, endpoint_id: str, secret: str, previous_secret: str | None) -> None: ...

    def enabled_endpoints(self) -> list[EndpointRow]: ...

    def add_deliveries(self, rows: list[NewDelivery], next_attempt_at: datetime) -> None: ...

    def delivery(self, scope: Scope, delivery_id: str) -> DeliveryRow | None: ...

    def deliveries_page(
        self, scope: Scope, endpoint_id: str, page: PageRequest, sort: str, status: str | None
    ) -> RowPage[DeliveryRow]: ...

    def due(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
    ) -> list[DueDelivery]: ...

    def claim(
        self,
        now: datetime,
        limit: int,
        exclude: list[str],
        per_endpoint: int,
        per_tenant: int,
        exclude_endpoints: list[str],
        *,
        owner: str,
        lease_until: datetime,
    ) -> list[DueDelivery]:
        """`due`'s deliveries for `owner` to attempt; on PostgreSQL leased to it until `lease_until` (one
        statement, its own transaction on a reader), skipping those another sender holds."""
        ...

    def release(self, delivery_ids: list[str], owner: str) -> None:
        """Give back claimed deliveries `owner` will not attempt now."""
        ...

    def record_attempt(
        self,
        delivery: DueDelivery,
        *,
        attempted_at: datetime,
        duration_ms: int,
        status_code: int | None,
        error: str | None,
        succeeded: bool,
        next_status: str,
        next_attempt_at: datetime | None,
    ) -> None: ...

    def requeue(self, scope: Scope, delivery_id: str, when: datetime) -> None: ...

    def attempts_of(self, delivery_ids: list[str]) -> list[AttemptRow]: ...

    def pending_count(self) -> int: ...

    def undispatched_count(self) -> int: ...

    def received_events_count(self) -> int: ...

    def mark_dispatched(self, outbox_ids: list[str]) -> None: ...


# accounts -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccountRow:
    """One row of `accounts` (`permissions`: a JSON list; `totp_secret`: sealed, or None without a second factor)."""

    id: str
    organization_id: str
    email: str
    role: str
    permissions: str
    password_hash: str
    totp_secret: str | None
    totp_last_step: int | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One row of `sessions`: only the hash of the session token is stored."""

    id: str
    account_id: str
    organization_id: str
    token_hash: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


class AccountStore(Protocol):
    """What the services need of the account rows (DuckDB: store.accounts.AccountRepository)."""

    def add(
        self,
        account_id: str,
        organization_id: str,
        email: str,
        role: str,
        permissions: list[str],
        password_hash: str,
        totp_secret: str | None,
    ) -> AccountRow: ...

    def get(self, account_id: str) -> AccountRow | None: ...

    def by_email(self, email: str) -> AccountRow | None: ...

    def unsealed_totp_secrets(self) -> list[tuple[str, str]]: ...

    def set_totp_secret(self, account_id: str, sealed: str) -> None: ...

    def use_totp_step(self, account_id: str, step: int) -> None: ...


class SessionStore(Protocol):
    """What the services need of the session rows (DuckDB: store.accounts.SessionRepository)."""

    def add(
        self, session_id: str, account_id: str, organization_id: str, token_hash: str, expires_at: datetime
    ) -> SessionRow: ...

    def get(self, session_id: str) -> SessionRow | None: ...

    def by_hash(self, token_hash: str) -> SessionRow | None: ...

    def revoke(self, session_id: str) -> None: ...


# request log ----------------------------------------------------------------------------------------------------------

NO_SDK_VERSION = "none"  # the filter value that selects requests without an SDK version


@dataclass(frozen=True, slots=True)
class LogFilter:
    status: int | None = None  # exact status
    status_class: int | None = None  # 4 for 4xx
    path_prefix: str | None = None
    request_id: str | None = None
    sdk_version: str | None = None  # exact; "none" for requests that sent no (valid) X-SDK-Version
    since: datetime | None = None  # inclusive, naive UTC
    until: datetime | None = None  # exclusive, naive UTC


class RequestLogRow(NamedTuple):
    """One /v1 request as logged."""

    id: str
    organization_id: str | None
    environment: str | None
    request_id: str
    method: str
    path: str
    operation: str | None
    status: int
    duration_ms: float
    principal_id: str | None
    created_at: datetime
    sdk_version: str | None


class DayCount(NamedTuple):
    day: date
    status_class: int
    requests: int


class OperationCount(NamedTuple):
    method: str
    operation: str  # the path template, or "(no operation)"
    status_class: int
    requests: int


class SdkVersionCount(NamedTuple):
    sdk_version: str | None
    status_class: int
    requests: int
    last_seen: datetime


class BusinessCounts(NamedTuple):
    events_received: int
    rewards_issued: int


class RequestLogStore(Protocol):
    """What the services need of the request log (DuckDB: store.request_log.RequestLogRepository)."""

    def add_batch(self, ids: list[str], records: Sequence[Sequence[Any]]) -> None: ...

    def page(self, scope: Scope, where: LogFilter, page: PageRequest) -> RowPage[RequestLogRow]: ...

    def per_day(self, scope: Scope, first: date, last: date) -> list[DayCount]: ...

    def per_operation(self, scope: Scope, first: date, last: date) -> list[OperationCount]: ...

    def per_sdk_version(self, scope: Scope, first: date, last: date) -> list[SdkVersionCount]: ...

    def business_counts(self, scope: Scope, first: date, last: date) -> BusinessCounts: ...


# auth audit -----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditFilter:
    kind: str | None = None
    outcome: str | None = None
    since: datetime | None = None  # inclusive, naive UTC
    until: datetime | None = None  # exclusive, naive UTC


class AuditRow(NamedTuple):
    """One authentication event (login, logout, key created or revoked, access denied)."""

    id: str
    organization_id: str | None
    environment: str | None
    kind: str
    outcome: str
    reason: str | None
    status: int | None
    actor_id: str | None
    subject_id: str | None
    request_id: str | None
    method: str | None
    path: str | None
    address: str | None
    sdk_version: str | None
    created_at: datetime


class Tenant(NamedTuple):
    """Whom an audit event without a tenant is filed under (the owner of a key, session or account)."""

    organization_id: str
    environment: str | None
    actor_id: str


class AuthAuditStore(Protocol):
    """What the services need of the audit trail (DuckDB: store.auth_audit.AuthAuditRepository)."""

    def add(self, row: AuditRow) -> None: ...

    def add_many(self, rows: list[AuditRow]) -> None: ...

    def page(self, scope: Scope, where: AuditFilter, page: PageRequest) -> RowPage[AuditRow]: ...

    def api_key_owner(self, key_id: str) -> Tenant | None: ...

    def session_owner(self, session_id: str) -> Tenant | None: ...

    def account_owner(self, email: str) -> Tenant | None: ...


# segments -------------------------------------------------------------------------------------------------------------


class SegmentStore(Protocol):
    """The activity figures customer segments are derived from (read-only)."""

    def event_activity(self, scope: Scope, refs: list[str], since: datetime) -> tuple[datetime | None, int]: ...

    def high_value_assets(
        self, scope: Scope, customer_id: str, since: datetime, quantile: float, min_peers: int
    ) -> list[str]: ...


# limit usage ----------------------------------------------------------------------------------------------------------


class UsageKey(NamedTuple):
    """One counter: a programme's cap of a rule ("rule:<id>:<period>"), of the programme ("programme:<period>")
    or its budget ("budget:<period>"), for one customer ('' for a budget) and one period (its first day)."""

    program_id: str
    counter: str
    customer_id: str
    period_start: str


class Usage(NamedTuple):
    """What a counter holds: the amount given (minor units, net of reversals) and the number of rewards."""

    amount_minor: int
    rewards: int


class LimitUsageStore(Protocol):
    """What the services need of the usage counters (DuckDB: store.limit_usage.LimitUsageRepository)."""

    def load(self, scope: Scope, keys: list[UsageKey]) -> dict[UsageKey, Usage]: ...

    def save(self, scope: Scope, values: dict[UsageKey, Usage]) -> None: ...

    def periods(self, scope: Scope, program_id: str, counter: str, limit: int) -> list[tuple[str, Usage]]: ...


# lots -----------------------------------------------------------------------------------------------------------------


class NewLot(NamedTuple):
    """A lot a credit makes."""

    id: str
    wallet_id: str
    asset_id: str
    issued_at: datetime
    expires_at: datetime | None
    amount_minor: int
    source_transaction_id: str


class LotTaken(NamedTuple):
    """What a debit took from a lot; `expired_by` is the expire transaction when the debit is its expiry."""

    lot_id: str
    amount_minor: int
    expired_by: str | None = None


@dataclass(frozen=True, slots=True)
class LotRow:
    id: str
    wallet_id: str
    asset_id: str
    issued_at: datetime
    expires_at: datetime | None
    amount_minor: int
    remaining_minor: int
    expired_minor: int
    source_transaction_id: str
    expired_transaction_id: str | None


class DueLot(NamedTuple):
    """An open lot past its expiry, with its tenant."""

    organization_id: str
    environment: str
    id: str
    wallet_id: str
    asset_id: str
    remaining_minor: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LotFilter:
    """Which lots of a wallet a page lists (None: any); `status`: open, expired or spent."""

    asset_id: str | None = None
    status: str | None = None


class LotStore(Protocol):
    """What the services need of lots (DuckDB: store.lots.LotRepository)."""

    def open_lots(self, scope: Scope, keys: Collection[tuple[str, str]]) -> dict[tuple[str, str], list[Lot]]: ...

    def write(self, scope: Scope, made: Sequence[NewLot], taken: Sequence[LotTaken]) -> None:
        """Make `made`, then take `taken` (which may name lots of `made`)."""
        ...

    def page(self, scope: Scope, wallet_id: str, page: PageRequest, filters: LotFilter) -> RowPage[LotRow]: ...

    def next_expiry(self, scope: Scope, wallet_id: str) -> dict[str, tuple[datetime, int]]: ...

    def due(self, as_of: datetime, limit: int) -> list[DueLot]: ...

    def due_among(self, scope: Scope, lot_ids: Sequence[str], as_of: datetime) -> list[DueLot]:
        """Of these lots, those still open and due, read inside the unit of work that expires them. On
        PostgreSQL only the lots of wallets whose balance rows it could lock (`FOR UPDATE SKIP LOCKED`), locked."""
        ...


# conversations --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One question or answer of a conversation; `sources` and `context` are JSON text (the row keeps it)."""

    id: str
    position: int
    role: str
    content: str
    sources: str
    context: str
    created_at: datetime

    def sources_value(self) -> list[Any]:
        return list(jsonutil.loads(self.sources))

    def context_value(self) -> dict[str, Any]:
        return dict(jsonutil.loads(self.context))


@dataclass(frozen=True, slots=True)
class ConversationRow:
    id: str
    created_at: datetime
    updated_at: datetime


class ConversationStore(Protocol):
    """What the services need of support conversations (DuckDB: store.conversations.ConversationRepository)."""

    def add(self, scope: Scope, conversation_id: str) -> ConversationRow: ...

    def get(self, scope: Scope, conversation_id: str) -> ConversationRow | None: ...

    def turns(self, scope: Scope, conversation_id: str) -> list[TurnRow]: ...

    def add_turns(self, scope: Scope, conversation_id: str, turns: Sequence[TurnRow]) -> None: ...


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
    @property
    def conversations(self) -> ConversationStore: ...
    @property
    def tiers(self) -> TierRepository: ...
