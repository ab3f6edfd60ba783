"""Resources the service returns inside the envelope's `data`. Amounts are decimal strings."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from rewards_lab.contract.expiry_requests import Expiry
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, Guard
from rewards_lab.contract.limit_requests import Budget, Clawback, Limit
from rewards_lab.contract.requests import AssetType, ConditionItem, RuleAction, TransferPolicy, WalletType
from rewards_lab.contract.tier_requests import Tiers

T = TypeVar("T")


class Resource(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A customer's attributes as stored (contract/attributes.py): numbers are exact, written digit for digit.
_ATTRIBUTE_VALUE_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
CustomerAttributes = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", "additionalProperties": _ATTRIBUTE_VALUE_SCHEMA})
]


class Customer(Resource):
    # `attributes` is always sent, so the document makes it required; its default reads answers stored before it
    # existed (an Idempotency-Key's record of an earlier creation).
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    id: str
    external_id: str
    email: str | None
    country: str | None
    created_at: datetime
    attributes: CustomerAttributes = Field(default_factory=dict)  # {} when the customer has none


class Wallet(Resource):
    id: str
    customer_id: str
    type: WalletType
    status: Literal["active", "frozen"]
    transfer_policy: TransferPolicy
    created_at: datetime


class Asset(Resource):
    id: str
    name: str
    symbol: str
    type: AssetType
    decimals: int
    supply_ceiling: str | None
    status: Literal["configured", "active", "paused"]
    issued: str
    redeemed: str
    outstanding_supply: str
    created_at: datetime
    activated_at: datetime | None
    expiry: Expiry | None = None  # when its points expire (null: never, unless a programme's expiry says so)
    value_per_unit: str | None = None  # money per unit, for liability reports
    expired: str = "0"  # what has expired into its breakage account (not outstanding any more)


class Rule(Resource):
    id: str
    name: str | None = None  # a short human name (issue 28); null: unnamed, listed by position and event type
    program_id: str
    version: int | None  # None while the rule belongs to the draft
    event_type: str
    conditions: list[ConditionItem]
    actions: list[RuleAction]
    priority: int = 0
    stop_processing: bool = False
    limits: list[Limit] = []  # caps on what the rule gives one customer per period
    created_at: datetime


class GuardOverrideRecord(Resource):
    """Why a version was published although a guard of the gate failed, who said so (the API key or the
    person's account) and when."""

    reason: str
    given_by: str
    given_at: datetime


class ProgrammeVersion(Resource):
    id: str
    program_id: str
    number: int | None  # None for the draft; published versions count from 1
    status: Literal["draft", "published"]
    based_on: int | None
    published_at: datetime | None
    rules: list[Rule]
    # The version's schedule: events whose time t (occurred_at, else receipt) has starts_at <= t < ends_at.
    timezone: str = "UTC"
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    # Its caps per customer across its rules, its budget across customers, its clawback policy.
    limits: list[Limit] = []
    budget: Budget | None = None
    clawback: Clawback = "available"
    expiry: Expiry | None = None  # when its rewards expire (null: as the asset's points do)
    # How many days before its receipt a live event may have occurred and still be rewarded (null: no bound).
    max_event_age_days: int | None = None
    # Its forecast guards, and on a published version the override it was published with despite a failed guard.
    guards: list[Guard] = []
    guard_window_days: int = DEFAULT_GUARD_WINDOW_DAYS  # the days of stored events the guards are checked on
    guard_override: GuardOverrideRecord | None = None
    tiers: Tiers | None = None  # its tier model (null: none); issue 33, not yet applied to rewards


class BudgetConsumption(Resource):
    """One period of a programme's budget: what was issued in it (net of reversals) against the maximum."""

    period: str
    period_start: date  # the period's first day in the programme's timezone (1970-01-01 for lifetime)
    max_amount: str | None  # the live version's budget (null: it has none now)
    consumed: str
    remaining: str | None


class Programme(Resource):
    id: str
    name: str
    asset_id: str
    description: str | None
    current_version: int | None  # the number of the live (latest published) version
    draft_version_id: str
    created_at: datetime
    status: Literal["active", "inactive"] = "active"  # an inactive programme rewards nothing
    # The DRAFT version's schedule (what the next publication freezes); each version shows its own.
    timezone: str = "UTC"
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    # The DRAFT version's caps, budget and clawback policy (each version shows its own).
    limits: list[Limit] = []
    budget: Budget | None = None
    clawback: Clawback = "available"
    expiry: Expiry | None = None
    # How many days before its receipt a live event may have occurred and still be rewarded (null: no bound).
    max_event_age_days: int | None = None
    # The DRAFT version's forecast guards, and the days of stored events they are checked on.
    guards: list[Guard] = []
    guard_window_days: int = DEFAULT_GUARD_WINDOW_DAYS
    tiers: Tiers | None = None  # the DRAFT version's tier model (null: none); issue 33, not yet applied to rewards
    # What the programme has issued against its budget, per period, newest first (the live version's budget).
    budget_consumption: list[BudgetConsumption] = []


class GuardCheckResult(Resource):
    """One row of the guard table: a guard, its limit, what the draft and the live version show over the window,
    the figure the limit judges (the draft's; for liability_delta the difference) and the verdict. Figures are
    decimal strings of the asset's units (days for the ceiling guard); "never": the ceiling never runs out."""

    metric: str  # "issued per day", "liability_delta", "ceiling_exhausted_within_days"
    limit: str  # "<= 120000", ">= 90"
    draft: str
    published: str | None  # null: nothing is published yet
    checked: str
    passed: bool
    guard: Guard


class ForecastResult(Resource):
    """The draft's guards checked on the tenant's stored events of the window (nothing published: the draft alone,
    a liability delta then against the opening supply)."""

    program_id: str
    draft_version_id: str
    published_version: int | None  # the live version the draft is compared with (null: none)
    passed: bool
    window_days: int
    window_start: datetime
    window_end: datetime
    events: int  # the stored events of the window that were replayed
    forecast_days: int  # how far the liability forecast looks ahead of the window
    checks: list[GuardCheckResult]


class PublishResult(Resource):
    program_id: str
    version: ProgrammeVersion
    draft_version_id: str


class NextExpiry(Resource):
    """What expires next of a balance: the instant and the amount (every lot expiring then)."""

    at: datetime
    amount: str


class Balance(Resource):
    asset_id: str
    symbol: str
    decimals: int
    balance: str
    updated_at: datetime | None
    next_expiry: NextExpiry | None = None  # null: nothing of it expires (or the asset has no expiry)


class Lot(Resource):
    """One credit of an asset that tracks lots, and what is left of it. Debits take from the oldest lots first
    (issued_at, then creation); a lot expires at `expires_at` (null: never) and what remains goes to breakage."""

    id: str
    wallet_id: str
    asset_id: str
    amount: str
    remaining: str
    expired: str
    status: Literal["open", "spent", "expired"]
    issued_at: datetime
    expires_at: datetime | None
    source_transaction_id: str | None  # null for an opening lot (the balance held when the asset began tracking)
    expired_transaction_id: str | None


class WalletBalances(Resource):
    wallet_id: str
    customer_id: str
    status: Literal["active", "frozen"]
    balances: list[Balance]


class Entry(Resource):
    account_id: str
    amount: str  # signed: negative leaves the account, positive enters it


class LedgerTransaction(Resource):
    id: str
    kind: Literal["issue", "redemption", "transfer", "reward", "reversal", "expire"]
    asset_id: str
    amount: str
    wallet_id: str | None
    from_wallet_id: str | None
    to_wallet_id: str | None
    memo: str | None  # the reason of an issue, the reference of a redemption or transfer
    entries: list[Entry]
    created_at: datetime


class EventError(Resource):
    code: str
    message: str


class Event(Resource):
    id: str
    external_event_id: str
    type: str
    customer_id: str
    occurred_at: datetime | None
    data: dict[str, Any]
    status: Literal["received", "processed", "failed"]
    error: EventError | None
    attempts: int
    received_at: datetime
    processed_at: datetime | None
    # A refund waiting for its original (still `received`): that event's external_event_id, and until when it
    # waits; absent otherwise.
    waiting_for: str | None = Field(default=None, exclude_if=lambda value: value is None)
    wait_until: datetime | None = Field(default=None, exclude_if=lambda value: value is None)


class LimitCut(Resource):
    """What cut a reward: a cap of its rule (`rule`), of its programme (`programme`) or the budget (`budget`)."""

    scope: Literal["rule", "programme", "budget"]
    period: str
    period_start: date
    max_amount: str | None
    max_count: int | None
    cut: str  # the amount taken off what the rule called for


class ReversedReward(Resource):
    """One reward a reverse action took back from: the original execution and transaction, the wallet, what was
    due back (`target`), what the wallet gave (`amount`, after the clawback policy) and the `shortfall`."""

    original_execution_id: str
    original_transaction_id: str | None
    customer_id: str
    wallet_id: str | None
    target: str
    amount: str
    shortfall: str
    transaction_id: str | None  # the reversal's ledger transaction (none when the wallet gave nothing)


class Reversal(Resource):
    """What a reverse action did: its original event, the fraction applied (null: all that remained), and per
    reward of the original its reversal."""

    original_event_id: str | None
    original_external_event_id: str
    fraction: str | None
    clawback: Literal["available", "negative", "none"]
    target: str
    shortfall: str
    rewards: list[ReversedReward]


class RewardExecution(Resource):
    id: str
    event_id: str
    external_event_id: str
    customer_id: str
    program_id: str
    program_version: int
    rule_id: str
    action_index: int
    asset_id: str
    wallet_id: str | None
    amount: str
    # limited: a cap or the budget cut it to nothing; reversed: a reverse action that took back (part of) rewards
    status: Literal["issued", "failed", "limited", "reversed"]
    error_code: str | None
    transaction_id: str | None
    inputs: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    requested_amount: str | None = None  # what the rule called for, when a cap or the budget cut it
    limited: LimitCut | None = None  # the cap or budget that cut it, and by how much
    reversed_amount: str | None = None  # of a reward: what reversals have taken back of it (their targets)
    reversal: Reversal | None = None  # of a reverse action: what it took back, from which rewards


class Segment(Resource):
    code: str
    name: str
    reason: str


class CustomerSegments(Resource):
    customer_id: str
    segments: list[Segment]
    as_of: datetime


class TierLevelRef(Resource):
    """A level of a programme's tiers: rank 1 is the base."""

    code: str
    name: str
    rank: int
    multiplier: str  # a decimal string ("1" when the level multiplies nothing)


class TierWindow(Resource):
    """Local days of the programme's time zone, both included."""

    start: date
    end: date


class TierNext(Resource):
    """The next level up and what its entry still needs over the upgrade window (0: the next contributing event
    upgrades)."""

    code: str
    name: str
    entry: str
    needed: str


class TierKeep(Resource):
    """What keeping the current level needs: its retain threshold over the window the next review (or, in grace,
    the upgrade window) judges, and what that window still lacks."""

    retain: str
    needed: str
    window: TierWindow


class TierStatus(Resource):
    """A customer's tier in a programme (issue 33). Amounts are in the metric's units, as decimal strings."""

    customer_id: str
    program_id: str
    program_version: int
    tier: TierLevelRef
    since: datetime | None  # null: never left the base (or not met yet)
    enrolled_at: datetime | None  # null: the programme has not met the customer
    metric: Literal["points", "sum", "count"]
    progress: str  # the metric over `window`, the upgrade window now
    window: TierWindow
    next: TierNext | None  # null at the top level
    keep: TierKeep | None  # null at the base and where nothing is reviewed (a lifetime window)
    review_at: datetime | None
    grace_until: datetime | None
    grace_target: str | None  # the level a grace period ends in unless retained


class TierChange(Resource):
    """One entry of a customer's tier history."""

    id: str
    program_id: str
    customer_id: str
    at: datetime
    kind: Literal[
        "enrolled", "upgraded", "retained", "grace_started", "downgraded", "level_removed", "schedule_changed"
    ]
    from_tier: str | None
    to_tier: str
    metric: str | None  # the metric the change was decided on, in its units (null: a grace end)
    window: TierWindow | None
    event_id: str | None  # the event that caused it (null: a review or a grace end)
    program_version: int | None
    review_at: datetime | None  # the state after the change
    grace_until: datetime | None
    grace_target: str | None


class ConditionOutcome(Resource):
    """A condition's verdict; a group's (`operator` any, all or not) has no field and holds its parts'."""

    field: str | None
    operator: str
    threshold: str | None  # the condition's value as text ("" for exists / not_exists; null for a group)
    value_read: Any
    verdict: bool
    reason: str
    path: str  # where the condition is in the rule: `conditions[2].any[0]`
    conditions: list[ConditionOutcome] = []  # a group's parts


class ActionOutcome(Resource):
    action_index: int
    asset_id: str
    amount: str  # what the action would issue (0 when nothing), after the caps and budget when they were read
    issues: bool
    reason: str
    inputs: dict[str, Any]
    error_code: str | None = None  # the code the action would fail with (amount_too_large, beneficiary_missing)
    beneficiary: str | None = None  # the customer reference rewarded instead of the event's customer
    # With `customer_id`, caps and the budget are read from the customer's current counters (nothing is counted):
    # what the rule calls for when a cap or the budget would cut it, the cut as an execution shows it, and why.
    requested_amount: str | None = Field(default=None, exclude_if=lambda value: value is None)
    limited: LimitCut | None = Field(default=None, exclude_if=lambda value: value is None)
    limit_reason: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # A reverse action whose original has been processed: what it would take back, per reward of the original,
    # against the wallets' current balances (no transaction: nothing is written).
    reversal: Reversal | None = Field(default=None, exclude_if=lambda value: value is None)


class RuleOutcome(Resource):
    rule_id: str
    event_type: str
    matched: bool
    reason: str
    conditions: list[ConditionOutcome]
    actions: list[ActionOutcome]
    priority: int = 0
    stops_processing: bool = False  # matched with stop_processing: the programme's later rules did not apply
    stopped_by: str | None = None  # the rule whose stop_processing kept this one from applying


class AssetTotal(Resource):
    asset_id: str
    amount: str


class SimulationTierAfter(Resource):
    """The event's customer after the event: its progress and its tier (an upgrade when it reaches an entry)."""

    progress: str
    tier: str


class SimulationTier(Resource):
    """The event's customer's tier as the simulation took it (issue 33): the level its conditions read and its
    multiplier, the progress at entry, what the event would add to the metric and where that leaves it."""

    code: str
    rank: int
    progress: str
    multiplier: str
    contributes: str
    after: SimulationTierAfter


class Simulation(Resource):
    event_type: str
    program_id: str | None
    program_version: int | None
    matched: bool
    rules: list[RuleOutcome]
    totals: list[AssetTotal]
    in_window: bool = True  # the version's window holds the event's time (or it has none): its rules apply
    window_reason: str = ""  # why the window holds or not ("" when the version has no window)
    # The customer's tier, when the simulated version has tiers (absent otherwise, not null).
    tier: SimulationTier | None = Field(default=None, exclude_if=lambda value: value is None)


class Page(BaseModel, Generic[T]):
    data: list[T]
    next_cursor: str | None
    has_more: bool


class WebhookEndpoint(Resource):
    id: str
    url: str
    events: list[str]
    status: Literal["enabled", "disabled"]
    secret_prefix: str  # the first characters of the signing secret, to tell secrets apart
    created_at: datetime
    # After a rotation: until then the previous secret signs deliveries too (None: only the current one signs).
    previous_secret_expires_at: datetime | None = None


class WebhookEndpointCreated(WebhookEndpoint):
    """Returned once, at creation: the only time the signing secret is ever shown."""

    signing_secret: str


class WebhookSecretRotated(WebhookEndpoint):
    """Returned once, by a rotation: the only time the new signing secret is ever shown."""

    signing_secret: str


class WebhookAttempt(Resource):
    """One try at sending a delivery: the receiver's HTTP status, or why no status came back."""

    number: int
    attempted_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None  # a coarse class: "timeout", "refused", "tls", "dns", "blocked_address", "http_5xx"...
    succeeded: bool


class WebhookDelivery(Resource):
    """One message to one endpoint. `body` is the exact JSON sent (and signed) on every attempt."""

    id: str
    webhook_id: str
    kind: str
    status: Literal["pending", "succeeded", "failed"]
    attempt_count: int
    next_attempt_at: datetime | None
    created_at: datetime
    completed_at: datetime | None
    body: str
    attempts: list[WebhookAttempt]


class WorkerHealth(Resource):
    alive: bool
    last_cycle_at: datetime | None  # when its loop last ran (a live thread stuck in one cycle shows here)


class Health(Resource):
    """For operators: no tenant data, only queue depths and whether the workers run."""

    status: Literal["ok", "degraded"]
    intake_waiting: int  # POST /events requests waiting for the next group commit (not answered yet)
    event_queue_depth: int  # events received and not yet processed (every tenant)
    outbox_undispatched: int  # webhook messages not yet fanned out to endpoint deliveries
    pending_deliveries: int  # endpoint deliveries waiting for their first or next attempt
    workers: dict[str, WorkerHealth]
    request_log_dropped: int = 0  # request-log records dropped since start because its queue was full


class ApiKey(Resource):
    id: str
    name: str
    prefix: str  # the visible start of the secret; the secret itself is never shown again
    environment: Literal["sandbox", "production"]
    permissions: list[str]
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKey):
    """Returned once, at creation: the only time the secret is ever shown."""

    secret: str


class KnowledgeHit(Resource):
    source: str
    title: str
    text: str
    score: float


class AssistantMessage(Resource):
    conversation_id: str | None
    role: Literal["assistant"]
    content: str
    sources: list[KnowledgeHit]


class ConversationTurn(Resource):
    """A question (`user`) or an answer (`assistant`, with the sources it cites) of a conversation."""

    id: str
    role: Literal["user", "assistant"]
    content: str
    sources: list[KnowledgeHit]
    created_at: datetime


class Conversation(Resource):
    id: str
    created_at: datetime
    updated_at: datetime
    turns: list[ConversationTurn]
