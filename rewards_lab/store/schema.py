"""The schema of both stores, as numbered migrations applied in order and recorded in `schema_migrations`.

Every tenant-owned row carries `organization_id` and `environment`. Timestamps are naive UTC (`TIMESTAMP`).
Amounts are integer minor units: BIGINT for one amount, HUGEINT for balances, which are sums.

A migration's statements are written once, in the canonical text (DuckDB's; store.dialect renders them for
PostgreSQL). A new PostgreSQL database does not replay versions 1 to `BASELINE_VERSION` (DuckDB's history: migration
6's table rebuild, 8's data fix): it gets the baseline (store/schema_postgres.py), the schema as they leave it, and
records them applied; every later version is one entry for both stores (reports/i32-postgres-plan.md, section 6).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, NamedTuple

from rewards_lab.store.schema_postgres import BASELINE, BASELINE_VERSION

StoreKind = Literal["duckdb", "postgres"]


class Migration(NamedTuple):
    """One version: `statements` run by both stores, then the store's own (`postgres`, `duckdb`: an index one of
    them needs, a lease only one has; None: nothing more). A store's own statements may stand in for shared ones:
    `statements` is then empty."""

    version: int
    description: str
    statements: list[str]
    postgres: list[str] | None = None
    duckdb: list[str] | None = None

    def on(self, store: StoreKind) -> list[str]:
        """What `store` runs for this version, in order."""
        return [*self.statements, *((self.postgres if store == "postgres" else self.duckdb) or [])]


class Step(NamedTuple):
    """What migrating runs in one transaction, and the versions it records."""

    versions: tuple[int, ...]
    description: str
    statements: list[str]


def steps(store: StoreKind, applied: Collection[int]) -> list[Step]:
    """What migrating `store` runs, in order, given the versions already applied: on PostgreSQL, a database without
    any gets the baseline first (versions 1 to BASELINE_VERSION at once, in the canonical text)."""
    history = sorted(MIGRATIONS)
    if store == "postgres" and not applied:
        baseline = tuple(m.version for m in history if m.version <= BASELINE_VERSION)
        found = [Step(baseline, f"baseline: the schema of versions 1 to {BASELINE_VERSION}", list(BASELINE))]
        applied = baseline
    else:
        found = []
    return found + [Step((m.version,), m.description, m.on(store)) for m in history if m.version not in applied]


MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "engine: tenants, customers, wallets, assets, programmes, rules, events, ledger",
        [
            """CREATE TABLE organizations (
                id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, plan VARCHAR NOT NULL,
                rate_limit_per_minute INTEGER, created_at TIMESTAMP NOT NULL)""",
            """CREATE TABLE customers (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                external_id VARCHAR NOT NULL, email VARCHAR, country VARCHAR, created_at TIMESTAMP NOT NULL,
                UNIQUE (organization_id, environment, external_id))""",
            """CREATE TABLE wallets (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                customer_id VARCHAR NOT NULL, type VARCHAR NOT NULL, status VARCHAR NOT NULL,
                transfer_policy VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)""",
            """CREATE TABLE assets (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                name VARCHAR NOT NULL, symbol VARCHAR NOT NULL, type VARCHAR NOT NULL, decimals INTEGER NOT NULL,
                supply_ceiling_minor BIGINT, status VARCHAR NOT NULL,
                issuance_account_id VARCHAR NOT NULL, redemption_account_id VARCHAR NOT NULL,
                created_at TIMESTAMP NOT NULL, activated_at TIMESTAMP)""",
            """CREATE TABLE programmes (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                name VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, description VARCHAR,
                current_version INTEGER, draft_version_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)""",
            """CREATE TABLE programme_versions (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                program_id VARCHAR NOT NULL, number INTEGER, status VARCHAR NOT NULL, based_on INTEGER,
                published_at TIMESTAMP, created_at TIMESTAMP NOT NULL)""",
            """CREATE TABLE rules (
                id VARCHAR NOT NULL, version_id VARCHAR NOT NULL, organization_id VARCHAR NOT NULL,
                environment VARCHAR NOT NULL, program_id VARCHAR NOT NULL, event_type VARCHAR NOT NULL,
                conditions VARCHAR NOT NULL, actions VARCHAR NOT NULL, position INTEGER NOT NULL,
                created_at TIMESTAMP NOT NULL, PRIMARY KEY (id, version_id))""",
            """CREATE TABLE events (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                external_event_id VARCHAR NOT NULL, type VARCHAR NOT NULL, customer_id VARCHAR NOT NULL,
                occurred_at TIMESTAMP, data VARCHAR NOT NULL, payload_hash VARCHAR NOT NULL,
                status VARCHAR NOT NULL, error_code VARCHAR, error_message VARCHAR, attempts INTEGER NOT NULL,
                evaluated_versions VARCHAR, received_at TIMESTAMP NOT NULL, processed_at TIMESTAMP,
                UNIQUE (organization_id, environment, external_event_id))""",
            """CREATE TABLE system_accounts (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                asset_id VARCHAR NOT NULL, kind VARCHAR NOT NULL)""",
            # A ledger transaction is one two-legged posting (as a TigerBeetle transfer): `amount_minor` leaves the
            # source account and enters the destination account. Both legs live in one row, so a transaction is
            # never half-written and nets to zero by construction; the CHECKs hold the rest at the storage level.
            """CREATE TABLE transactions (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                kind VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, amount_minor BIGINT NOT NULL,
                source_account_id VARCHAR NOT NULL, destination_account_id VARCHAR NOT NULL,
                memo VARCHAR, execution_id VARCHAR, created_at TIMESTAMP NOT NULL,
                CHECK (amount_minor > 0), CHECK (source_account_id <> destination_account_id))""",
            # The entries: each transaction's two legs, one row per account, signed.
            """CREATE VIEW entries AS
                SELECT id AS transaction_id, organization_id, environment, source_account_id AS account_id,
                       asset_id, -amount_minor AS amount_minor, created_at FROM transactions
                UNION ALL
                SELECT id, organization_id, environment, destination_account_id, asset_id, amount_minor, created_at
                FROM transactions""",
            # The balance snapshot. `floor_minor` is the lowest balance the account may hold, enforced by the
            # storage engine itself: 0 for a wallet; for an asset's issuance account -(ceiling + redeemed), which
            # says "outstanding supply <= ceiling" (NULL: no ceiling); NULL for the redemption account.
            """CREATE TABLE balances (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, account_id VARCHAR NOT NULL,
                asset_id VARCHAR NOT NULL, balance_minor HUGEINT NOT NULL, floor_minor HUGEINT,
                updated_at TIMESTAMP NOT NULL, PRIMARY KEY (account_id, asset_id),
                CHECK (balance_minor >= floor_minor))""",
            """CREATE TABLE reward_executions (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                event_id VARCHAR NOT NULL, external_event_id VARCHAR NOT NULL, customer_id VARCHAR NOT NULL,
                program_id VARCHAR NOT NULL, version_id VARCHAR NOT NULL, version_number INTEGER NOT NULL,
                rule_id VARCHAR NOT NULL, action_index INTEGER NOT NULL, asset_id VARCHAR NOT NULL,
                wallet_id VARCHAR, amount_minor BIGINT NOT NULL, status VARCHAR NOT NULL, error_code VARCHAR,
                transaction_id VARCHAR, inputs VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
                updated_at TIMESTAMP NOT NULL, UNIQUE (event_id, version_id, rule_id, action_index))""",
            """CREATE TABLE idempotency_keys (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, key VARCHAR NOT NULL,
                operation VARCHAR NOT NULL, request_hash VARCHAR NOT NULL, response VARCHAR NOT NULL,
                status_code INTEGER NOT NULL, created_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, key))""",
            """CREATE TABLE outbox (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                kind VARCHAR NOT NULL, resource_id VARCHAR NOT NULL, payload VARCHAR NOT NULL,
                created_at TIMESTAMP NOT NULL, dispatched_at TIMESTAMP)""",
        ],
    ),
]

MIGRATIONS.append(
    Migration(
        2,
        "access: API keys (stored as hashes)",
        [
            """CREATE TABLE api_keys (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                name VARCHAR NOT NULL, prefix VARCHAR NOT NULL, secret_hash VARCHAR NOT NULL UNIQUE,
                permissions VARCHAR NOT NULL, created_by VARCHAR, created_at TIMESTAMP NOT NULL,
                revoked_at TIMESTAMP)""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        3,
        "webhooks: endpoints (signing secret kept for HMAC, never returned), deliveries and their attempts",
        [
            """CREATE TABLE webhook_endpoints (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                url VARCHAR NOT NULL, events VARCHAR NOT NULL, signing_secret VARCHAR NOT NULL,
                secret_prefix VARCHAR NOT NULL, status VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
                disabled_at TIMESTAMP)""",
            # One row per (outbox message, endpoint), created durably before anything is sent. `body` is the
            # exact JSON that is signed and sent on every attempt. `round_attempts` counts the attempts since the
            # delivery was created or last replayed, which picks the next delay of the retry schedule.
            """CREATE TABLE webhook_deliveries (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                endpoint_id VARCHAR NOT NULL, outbox_id VARCHAR, kind VARCHAR NOT NULL, body VARCHAR NOT NULL,
                status VARCHAR NOT NULL, attempt_count INTEGER NOT NULL, round_attempts INTEGER NOT NULL,
                next_attempt_at TIMESTAMP, created_at TIMESTAMP NOT NULL, completed_at TIMESTAMP,
                UNIQUE (endpoint_id, outbox_id))""",
            """CREATE TABLE webhook_attempts (
                delivery_id VARCHAR NOT NULL, number INTEGER NOT NULL, organization_id VARCHAR NOT NULL,
                environment VARCHAR NOT NULL, attempted_at TIMESTAMP NOT NULL, duration_ms INTEGER NOT NULL,
                status_code INTEGER, error VARCHAR, succeeded BOOLEAN NOT NULL, PRIMARY KEY (delivery_id, number))""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        4,
        "accounts and sessions (hashed secrets), and the request log",
        [
            # One account per email address across the service; `password_hash` is a self-describing scrypt
            # string; `totp_last_step` refuses a second use of the same one-time code.
            """CREATE TABLE accounts (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, email VARCHAR NOT NULL UNIQUE,
                role VARCHAR NOT NULL, permissions VARCHAR NOT NULL, password_hash VARCHAR NOT NULL,
                totp_secret VARCHAR, totp_last_step BIGINT, created_at TIMESTAMP NOT NULL)""",
            """CREATE TABLE sessions (
                id VARCHAR PRIMARY KEY, account_id VARCHAR NOT NULL, organization_id VARCHAR NOT NULL,
                token_hash VARCHAR NOT NULL UNIQUE, created_at TIMESTAMP NOT NULL, expires_at TIMESTAMP NOT NULL,
                revoked_at TIMESTAMP)""",
            # Written in batches by a background thread; no index, so a batch insert stays cheap. Rows of requests
            # that never authenticated have no organization and are visible to no tenant.
            """CREATE TABLE request_log (
                id VARCHAR NOT NULL, organization_id VARCHAR, environment VARCHAR, request_id VARCHAR NOT NULL,
                method VARCHAR NOT NULL, path VARCHAR NOT NULL, operation VARCHAR, status INTEGER NOT NULL,
                duration_ms DOUBLE NOT NULL, principal_id VARCHAR, created_at TIMESTAMP NOT NULL)""",
        ],
    )
)

# Migration 5 is taken by the event intake.
MIGRATIONS.append(
    Migration(
        6,
        "ledger: transactions without an index on id; id lookups prune by the id's creation millisecond",
        [
            # A primary-key index on `transactions.id` doubled the cost of the batch path's INSERT and of its
            # commit (the index is logged and checkpointed with every batch). Ids are made by the service (128 bits,
            # monotonic per process, never taken from a client), so they are unique by construction, and
            # verify_ledger checks it. A lookup by id filters on `id_time_ms`, the millisecond in the id's first
            # 48 bits: rows are appended in id order, so the column's zone maps narrow the scan to one row group.
            """CREATE TABLE transactions_v6 (
                id VARCHAR NOT NULL, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                kind VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, amount_minor BIGINT NOT NULL,
                source_account_id VARCHAR NOT NULL, destination_account_id VARCHAR NOT NULL,
                memo VARCHAR, execution_id VARCHAR, created_at TIMESTAMP NOT NULL, id_time_ms BIGINT NOT NULL,
                CHECK (amount_minor > 0), CHECK (source_account_id <> destination_account_id))""",
            """INSERT INTO transactions_v6 SELECT id, organization_id, environment, kind, asset_id, amount_minor,
                source_account_id, destination_account_id, memo, execution_id, created_at,
                ('0x' || substr(id, 5, 12))::BIGINT FROM transactions ORDER BY id""",
            "DROP VIEW entries",
            "DROP TABLE transactions",
            "ALTER TABLE transactions_v6 RENAME TO transactions",
            """CREATE VIEW entries AS
                SELECT id AS transaction_id, organization_id, environment, source_account_id AS account_id,
                       asset_id, -amount_minor AS amount_minor, created_at FROM transactions
                UNION ALL
                SELECT id, organization_id, environment, destination_account_id, asset_id, amount_minor, created_at
                FROM transactions""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        8,
        "webhooks: a rotated-out signing secret with the end of its grace period; attempt errors as coarse classes",
        [
            # Both secret columns hold sealed values (store/secret_box.py); rows from before sealing are sealed by
            # store.webhooks.seal_plaintext_webhook_secrets when the database opens (Database.seal_plaintext_secrets).
            "ALTER TABLE webhook_endpoints ADD COLUMN previous_signing_secret VARCHAR",
            "ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at TIMESTAMP",
            # Attempts recorded raw network text ("connection failed: [Errno 111] ..."); keep only its class.
            """UPDATE webhook_attempts SET error = CASE
                WHEN error IN ('timeout', 'refused', 'tls', 'dns', 'blocked_address', 'connection', 'protocol',
                               'http_3xx', 'http_4xx', 'http_5xx', 'http_other', 'endpoint_disabled', 'error')
                    THEN error
                WHEN error = 'connection refused' THEN 'refused'
                WHEN error = 'endpoint disabled' THEN 'endpoint_disabled'
                WHEN error LIKE 'HTTP 3%' THEN 'http_3xx'
                WHEN error LIKE 'HTTP 4%' THEN 'http_4xx'
                WHEN error LIKE 'HTTP 5%' THEN 'http_5xx'
                WHEN error LIKE 'HTTP %' THEN 'http_other'
                WHEN error LIKE 'connection failed:%' THEN 'connection'
                ELSE 'error' END
            WHERE error IS NOT NULL""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        9,
        "health_probe: one row that GET /v1/health/ready rewrites to prove the database takes writes",
        ["CREATE TABLE health_probe (id INTEGER PRIMARY KEY, written_at TIMESTAMP NOT NULL)"],
    )
)

MIGRATIONS.append(
    Migration(
        10,
        "audit: the durable audit of authentication events; the SDK version in the request log",
        [
            # Written synchronously (before the answer, or in the transaction of the action itself), one row per
            # login (either outcome), logout, API key creation or revocation, and 401/403 answer. `environment`
            # is NULL for organization-wide events (a person's login and logout); `organization_id` is NULL when
            # nobody could be identified (an unknown email, an unknown key), so no tenant sees those rows.
            # `reason` is the error code of a refusal, never a credential.
            """CREATE TABLE auth_audit (
                id VARCHAR NOT NULL, organization_id VARCHAR, environment VARCHAR, kind VARCHAR NOT NULL,
                outcome VARCHAR NOT NULL, reason VARCHAR, status INTEGER, actor_id VARCHAR, subject_id VARCHAR,
                request_id VARCHAR, method VARCHAR, path VARCHAR, address VARCHAR, sdk_version VARCHAR,
                created_at TIMESTAMP NOT NULL)""",
            # X-SDK-Version as the client sent it (validated and capped; NULL when absent or malformed).
            "ALTER TABLE request_log ADD COLUMN sdk_version VARCHAR",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        13,
        "secret_key_check: a check value of the key that seals this database's secrets",
        [
            # One row: HMAC-SHA256 of a constant under a key derived from the secret key (store/secret_key_check.py).
            # Written when the database is created (or, for an older one, first opened); a database refuses to
            # open under a key whose check value differs, instead of sealing new secrets under a second key.
            """CREATE TABLE secret_key_check (
                id INTEGER PRIMARY KEY CHECK (id = 1), check_value VARCHAR NOT NULL, written_at TIMESTAMP NOT NULL)""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        14,
        "customers: attributes (JSON text, '{}' for existing rows); customers.update for whoever creates customers",
        [
            # Compact JSON written by contract.attributes.to_json; a customer from before has none.
            "ALTER TABLE customers ADD COLUMN attributes VARCHAR DEFAULT '{}'",
            "UPDATE customers SET attributes = '{}' WHERE attributes IS NULL",
            # PATCH /customers/{id} needs `customers.update`, a permission new with it. Accounts and keys that can
            # create customers may edit them too (docs/decisions.md, "Identity, keys and permissions"). Stored
            # permissions are json.dumps(sorted(...)) of known codes, and "customers.update" sorts right after
            # "customers.create", so the text is edited in place and stays in the form the service writes.
            *(
                f"""UPDATE {table} SET permissions = replace(permissions, '"customers.create"',
                        '"customers.create", "customers.update"')
                    WHERE contains(permissions, '"customers.create"')
                        AND NOT contains(permissions, '"customers.update"')"""
                for table in ("accounts", "api_keys")
            ),
        ],
    )
)

MIGRATIONS.append(
    Migration(
        15,
        "programme lifecycle: each version's schedule (timezone, window of event times); a programme's status",
        [
            # A version's timezone (IANA) and the window of event times it rewards, starts_at <= t < ends_at, in
            # naive UTC (NULL: unbounded). Set on the draft, frozen by publication. Existing versions: UTC, no window.
            "ALTER TABLE programme_versions ADD COLUMN timezone VARCHAR DEFAULT 'UTC'",
            "ALTER TABLE programme_versions ADD COLUMN starts_at TIMESTAMP",
            "ALTER TABLE programme_versions ADD COLUMN ends_at TIMESTAMP",
            # active | inactive: the worker evaluates no version of an inactive programme. Existing ones: active.
            "ALTER TABLE programmes ADD COLUMN status VARCHAR DEFAULT 'active'",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        16,
        "rules: priority (lower applies first) and stop_processing (a match keeps the programme's later rules off)",
        [
            "ALTER TABLE rules ADD COLUMN priority INTEGER DEFAULT 0",
            "ALTER TABLE rules ADD COLUMN stop_processing BOOLEAN DEFAULT false",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        17,
        "caps and budgets: rule and programme limits, usage counters per customer and period, what a cap cut",
        [
            # A rule's caps (JSON list; [] none) and a version's programme-wide spending settings (JSON object of
            # limits, budget and clawback; NULL: none, clawback "available").
            "ALTER TABLE rules ADD COLUMN limits VARCHAR DEFAULT '[]'",
            "ALTER TABLE programme_versions ADD COLUMN spending VARCHAR",
            # What a programme has given in a period, per counter ("rule:<id>:<period>", "programme:<period>",
            # "budget:<period>") and customer ('' for a budget): issued amounts and rewards, net of reversals.
            """CREATE TABLE limit_usage (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, program_id VARCHAR NOT NULL,
                counter VARCHAR NOT NULL, customer_id VARCHAR NOT NULL, period_start VARCHAR NOT NULL,
                amount_minor HUGEINT NOT NULL, reward_count BIGINT NOT NULL, updated_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, program_id, counter, customer_id, period_start))""",
            # An execution's amount before its caps (NULL: not limited), the cap that cut it (JSON) and the usage
            # counters it counted in (JSON list), so that a reversal gives the allowance back where it was taken.
            "ALTER TABLE reward_executions ADD COLUMN requested_minor BIGINT",
            "ALTER TABLE reward_executions ADD COLUMN limited VARCHAR",
            "ALTER TABLE reward_executions ADD COLUMN usage_keys VARCHAR",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        18,
        "reversals: what each reward has had taken back, a reverse action's detail, refunds waiting for their original",
        [
            # How much of a reward reversals have targeted (never more than its amount), and a reverse action's
            # execution's detail (JSON: the original, and per reward taken back its target, what the wallet gave,
            # the shortfall and the transactions).
            "ALTER TABLE reward_executions ADD COLUMN reversed_minor BIGINT DEFAULT 0",
            "ALTER TABLE reward_executions ADD COLUMN reversal VARCHAR",
            # A refund that arrived before its original stays `received` and waits (until wait_until) for the event
            # whose external_event_id is waiting_for; processing that event processes the refund right after it.
            "ALTER TABLE events ADD COLUMN waiting_for VARCHAR",
            "ALTER TABLE events ADD COLUMN wait_until TIMESTAMP",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        19,
        "expiry: asset and programme expiry policies, lots per credit, the breakage account, value per unit",
        [
            # An asset's expiry (JSON; NULL: its points never expire), its value in money per unit (a decimal
            # string; NULL: not valued) and its breakage account, where expired points go (NULL until the asset
            # tracks lots: from its creation with an expiry, or from the first publication of a programme with one).
            "ALTER TABLE assets ADD COLUMN expiry VARCHAR",
            "ALTER TABLE assets ADD COLUMN value_per_unit VARCHAR",
            "ALTER TABLE assets ADD COLUMN breakage_account_id VARCHAR",
            # One row per credit of an asset that tracks lots: what it added, what remains of it, when it was issued
            # and when it expires (NULL: never); the transaction that made it and, once expired, the one that
            # took it to the breakage account. Open lots of a wallet hold max(balance, 0) (verify_ledger).
            """CREATE TABLE lots (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                wallet_id VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, issued_at TIMESTAMP NOT NULL,
                expires_at TIMESTAMP, amount_minor HUGEINT NOT NULL, remaining_minor HUGEINT NOT NULL,
                expired_minor HUGEINT NOT NULL, source_transaction_id VARCHAR NOT NULL,
                expired_transaction_id VARCHAR, created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL,
                CHECK (remaining_minor >= 0), CHECK (remaining_minor <= amount_minor))""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        20,
        "forecast guards: a version's guards, and the override a version was published with despite a failed guard",
        [
            # A version's guards (JSON list; NULL: none), frozen with it like its spending settings, and on a
            # published version the override it was published with (JSON: reason, given_by, given_at; NULL: none).
            "ALTER TABLE programme_versions ADD COLUMN guards VARCHAR",
            "ALTER TABLE programme_versions ADD COLUMN guard_override VARCHAR",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        21,
        "reversals: what reversals took back of each reward from its wallet (the counters get back only that)",
        [
            # What the wallets actually gave back of a reward over its reversals (at most `reversed_minor`, the
            # targets): its caps and budget get back this amount, and the reward stops counting once it is whole.
            "ALTER TABLE reward_executions ADD COLUMN taken_back_minor BIGINT DEFAULT 0",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        22,
        "rules: an optional name, shown wherever a rule is listed",
        [
            # A short human name (trimmed, at most 120 characters; NULL: none). Existing rules: none.
            "ALTER TABLE rules ADD COLUMN name VARCHAR",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        23,
        "ai: support conversations and their turns, per tenant and environment",
        [
            # A conversation, named by the service (`cnv_...`) or by the client on its first message; the id is
            # unique within its tenant and environment only, so one tenant's name never reaches another's.
            """CREATE TABLE conversations (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, id VARCHAR NOT NULL,
                created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, id))""",
            # One question or answer, in order (`position` from 0). `sources` (JSON list) are an answer's citations;
            # `context` (JSON object) what the turn was about: its intent and the records it named, which a
            # follow-up question that names none of its own inherits.
            """CREATE TABLE conversation_turns (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, conversation_id VARCHAR NOT NULL,
                position INTEGER NOT NULL, id VARCHAR NOT NULL, role VARCHAR NOT NULL, content VARCHAR NOT NULL,
                sources VARCHAR NOT NULL, context VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, conversation_id, position))""",
        ],
    )
)

# Every permission there was before `rewards.guards.override` (migration 24 grants it to those holding them all).
_BEFORE_GUARDS_OVERRIDE = (
    "ai.use",
    "assets.edit",
    "assets.view",
    "customers.create",
    "customers.update",
    "customers.view",
    "developers.api_keys.manage",
    "developers.logs.view",
    "developers.usage.view",
    "developers.webhooks.manage",
    "developers.webhooks.view",
    "events.view",
    "events.write",
    "ledger.issue",
    "ledger.redeem",
    "ledger.transfer",
    "ledger.view",
    "rewards.activate",
    "rewards.edit",
    "rewards.view",
    "wallets.manage",
    "wallets.view",
)

MIGRATIONS.append(
    Migration(
        24,
        "forecast guards enforced by the server: the days of history they are checked on; rewards.guards.override",
        [
            # The days of stored events before a publication the server replays to check the guards (NULL: the
            # default, 90), frozen with the version like its guards.
            "ALTER TABLE programme_versions ADD COLUMN guard_window_days INTEGER",
            # Overriding a failed guard and loosening guards take `rewards.guards.override`, a permission new with
            # it. Only the keys and accounts that held every permission before it (owners, bootstrap keys) get it:
            # a key that may publish may no longer walk around the gate. "rewards.guards.override" sorts right
            # before "rewards.view", which every such holder has, so the sorted JSON text is edited in place.
            *(
                f"""UPDATE {table} SET permissions = replace(permissions, '"rewards.view"',
                        '"rewards.guards.override", "rewards.view"')
                    WHERE NOT contains(permissions, '"rewards.guards.override"') AND """
                + " AND ".join(f"contains(permissions, '\"{code}\"')" for code in _BEFORE_GUARDS_OVERRIDE)
                for table in ("accounts", "api_keys")
            ),
        ],
    )
)

MIGRATIONS.append(
    Migration(
        25,
        "tiers: a version's tier model; customers' tier state, contributions, daily sums and history",
        [
            # A version's tiers object (JSON, store/settings_json.tiers_text; NULL: none), frozen with it.
            "ALTER TABLE programme_versions ADD COLUMN tiers VARCHAR",
            # One row per programme and enrolled customer: the level held (a code), since when, the local day the
            # review cycles count from, the next review (NULL: the base level, or a lifetime window), a grace's end
            # and the downgrade due then, the enrolment, the metric's fingerprint and the version that decided it.
            # Tier state belongs to the programme (across versions), as caps' counters do.
            """CREATE TABLE customer_tiers (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, program_id VARCHAR NOT NULL,
                customer_id VARCHAR NOT NULL, tier VARCHAR NOT NULL, since TIMESTAMP NOT NULL, anchor DATE NOT NULL,
                review_at TIMESTAMP, grace_until TIMESTAMP, grace_target VARCHAR, enrolled_at TIMESTAMP NOT NULL,
                metric_key VARCHAR NOT NULL, version_id VARCHAR NOT NULL, updated_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, program_id, customer_id))""",
            # One row per counted source (an execution for `points`, an event for `sum`/`count`) and customer, so
            # a retried batch counts nothing twice; kept for idempotency and audit, pruned past the longest window.
            """CREATE TABLE tier_contributions (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, program_id VARCHAR NOT NULL,
                metric_key VARCHAR NOT NULL, source_id VARCHAR NOT NULL, customer_id VARCHAR NOT NULL,
                day DATE NOT NULL, amount_minor HUGEINT NOT NULL, created_at TIMESTAMP NOT NULL,
                PRIMARY KEY (organization_id, environment, program_id, metric_key, source_id, customer_id))""",
            # The metric's sums per customer and local day: what the windows read.
            """CREATE TABLE tier_days (
                organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, program_id VARCHAR NOT NULL,
                metric_key VARCHAR NOT NULL, customer_id VARCHAR NOT NULL, day DATE NOT NULL,
                amount_minor HUGEINT NOT NULL,
                PRIMARY KEY (organization_id, environment, program_id, metric_key, customer_id, day))""",
            # The history (`tch_...`): what changed, when it took effect (`changed_at`; `at` is a keyword to
            # DuckDB), what the metric and window were, and the state after it, so a past state is an as-of read.
            # `kind`: enrolled | upgraded | retained | grace_started | downgraded | level_removed | schedule_changed.
            """CREATE TABLE tier_changes (
                id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
                program_id VARCHAR NOT NULL, customer_id VARCHAR NOT NULL, changed_at TIMESTAMP NOT NULL,
                kind VARCHAR NOT NULL, from_tier VARCHAR, to_tier VARCHAR NOT NULL, metric_minor HUGEINT,
                window_start DATE, window_end DATE, event_id VARCHAR, version_id VARCHAR NOT NULL,
                review_at TIMESTAMP, grace_until TIMESTAMP, grace_target VARCHAR, created_at TIMESTAMP NOT NULL,
                UNIQUE (organization_id, environment, program_id, customer_id, changed_at, kind))""",
        ],
    )
)

MIGRATIONS.append(
    Migration(
        26,
        "several processes: delivery leases; PostgreSQL's own key and indexes",
        [
            # A sender's claim on a pending delivery (issue 32): until `lease_until` no other sender takes it, and
            # recording the attempt clears it; a killed sender's deliveries are due again once it passes (at least
            # once). DuckDB has one sender per file: its deliveries are never leased (both NULL).
            "ALTER TABLE webhook_deliveries ADD COLUMN lease_until TIMESTAMP",
            "ALTER TABLE webhook_deliveries ADD COLUMN leased_by VARCHAR",
        ],
        postgres=[
            # What DuckDB answers by zone maps (or without a key: an ART index doubled the ledger's batch insert,
            # migration 6) takes a B-tree here (reports/i32-postgres-plan.md, section 6).
            "ALTER TABLE transactions ADD PRIMARY KEY (id)",
            "CREATE INDEX transactions_source ON transactions (organization_id, environment, source_account_id)",
            "CREATE INDEX transactions_destination ON transactions "
            "(organization_id, environment, destination_account_id)",
            "CREATE INDEX events_received ON events (id) WHERE status = 'received'",
            "CREATE INDEX events_customer ON events (organization_id, environment, customer_id)",
            "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'",
            "CREATE INDEX lots_due ON lots (expires_at) WHERE remaining_minor > 0",
            "CREATE INDEX lots_wallet ON lots (wallet_id, asset_id)",
            "CREATE INDEX outbox_undispatched ON outbox (id) WHERE dispatched_at IS NULL",
        ],
    )
)

# What several processes serving one database must share (issue 32, increment 8): the rate limits' counters and
# the login guard's failures. Only a PostgreSQL-backed service uses them (store/postgres/shared.py); a DuckDB file
# is served by one process, whose memory holds both (api/rate_limits.py, security/login_guard.py), and has the
# tables so that both stores keep one schema. UNLOGGED on PostgreSQL: not written to the WAL (one upsert per
# request), emptied by a crash, which forgets one-minute windows and backoffs that a restart forgot anyway.
_SHARED_COUNTERS = [
    # One row per bucket (api/rate_limits.py's key: "org/env", "address/<client_key>", "health/<client_key>") and
    # fixed one-minute window (its start, epoch seconds); windows before the current one are deleted as it starts.
    """CREATE {table} rate_counters (
        bucket VARCHAR NOT NULL, window_start BIGINT NOT NULL, count BIGINT NOT NULL,
        PRIMARY KEY (bucket, window_start))""",
    # One row per login guard key ("pair/<email>/<network>", "address/<network>", "account/<email>"): failures
    # counted and the last one's time (epoch seconds, the processes' wall clock); forgotten an hour after it.
    """CREATE {table} login_failures (
        key VARCHAR PRIMARY KEY, failures INTEGER NOT NULL, last_failure_at DOUBLE NOT NULL)""",
]

MIGRATIONS.append(
    Migration(
        27,
        "rate limits and the login guard shared by the processes serving one database",
        [],
        postgres=[statement.format(table="UNLOGGED TABLE") for statement in _SHARED_COUNTERS],
        duckdb=[statement.format(table="TABLE") for statement in _SHARED_COUNTERS],
    )
)
