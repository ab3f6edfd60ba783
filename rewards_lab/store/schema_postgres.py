"""PostgreSQL's baseline: the schema as DuckDB's migrations 1 to 24 leave it, which a new PostgreSQL database gets.

Written once in the canonical text (DuckDB's; store.dialect renders it), applied in one step, recorded as versions 1
to 24 (`schema.steps`). Columns are in DuckDB's order: positional inserts (`INSERT INTO t VALUES`, `INSERT
INTO t SELECT`) and `SELECT *` rely on it. tests/store/test_schema_equality.py holds the two schemas equal (columns,
types, nullability, defaults, keys, checks) from both databases' catalogs; a later migration changes both.

Not here, on purpose: `transactions` keeps DuckDB's lack of a primary key (migration 6: an ART index doubled the
batch insert's cost); PostgreSQL's key and its indexes for what DuckDB answers by zone maps come with the first
PostgreSQL-only migration (reports/i32-postgres-plan.md, section 6).
"""

from __future__ import annotations

BASELINE_VERSION = 24

_TABLES = [
    """CREATE TABLE organizations (
        id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, plan VARCHAR NOT NULL, rate_limit_per_minute INTEGER,
        created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE customers (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        external_id VARCHAR NOT NULL, email VARCHAR, country VARCHAR, created_at TIMESTAMP NOT NULL,
        attributes VARCHAR DEFAULT '{}', UNIQUE (organization_id, environment, external_id))""",
    """CREATE TABLE wallets (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        customer_id VARCHAR NOT NULL, type VARCHAR NOT NULL, status VARCHAR NOT NULL,
        transfer_policy VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE assets (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        name VARCHAR NOT NULL, symbol VARCHAR NOT NULL, type VARCHAR NOT NULL, decimals INTEGER NOT NULL,
        supply_ceiling_minor BIGINT, status VARCHAR NOT NULL, issuance_account_id VARCHAR NOT NULL,
        redemption_account_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL, activated_at TIMESTAMP,
        expiry VARCHAR, value_per_unit VARCHAR, breakage_account_id VARCHAR)""",
    """CREATE TABLE programmes (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        name VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, description VARCHAR, current_version INTEGER,
        draft_version_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL, status VARCHAR DEFAULT 'active')""",
    """CREATE TABLE programme_versions (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        program_id VARCHAR NOT NULL, number INTEGER, status VARCHAR NOT NULL, based_on INTEGER,
        published_at TIMESTAMP, created_at TIMESTAMP NOT NULL, timezone VARCHAR DEFAULT 'UTC', starts_at TIMESTAMP,
        ends_at TIMESTAMP, spending VARCHAR, guards VARCHAR, guard_override VARCHAR, guard_window_days INTEGER)""",
    """CREATE TABLE rules (
        id VARCHAR, version_id VARCHAR, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        program_id VARCHAR NOT NULL, event_type VARCHAR NOT NULL, conditions VARCHAR NOT NULL,
        actions VARCHAR NOT NULL, position INTEGER NOT NULL, created_at TIMESTAMP NOT NULL,
        priority INTEGER DEFAULT 0, stop_processing BOOLEAN DEFAULT false, limits VARCHAR DEFAULT '[]',
        name VARCHAR, PRIMARY KEY (id, version_id))""",
    """CREATE TABLE events (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        external_event_id VARCHAR NOT NULL, type VARCHAR NOT NULL, customer_id VARCHAR NOT NULL,
        occurred_at TIMESTAMP, data VARCHAR NOT NULL, payload_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
        error_code VARCHAR, error_message VARCHAR, attempts INTEGER NOT NULL, evaluated_versions VARCHAR,
        received_at TIMESTAMP NOT NULL, processed_at TIMESTAMP, waiting_for VARCHAR, wait_until TIMESTAMP,
        UNIQUE (organization_id, environment, external_event_id))""",
    """CREATE TABLE system_accounts (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        asset_id VARCHAR NOT NULL, kind VARCHAR NOT NULL)""",
    """CREATE TABLE transactions (
        id VARCHAR NOT NULL, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, kind VARCHAR NOT NULL,
        asset_id VARCHAR NOT NULL, amount_minor BIGINT NOT NULL, source_account_id VARCHAR NOT NULL,
        destination_account_id VARCHAR NOT NULL, memo VARCHAR, execution_id VARCHAR, created_at TIMESTAMP NOT NULL,
        id_time_ms BIGINT NOT NULL, CHECK (amount_minor > 0), CHECK (source_account_id <> destination_account_id))""",
    """CREATE TABLE balances (
        organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL, account_id VARCHAR, asset_id VARCHAR,
        balance_minor HUGEINT NOT NULL, floor_minor HUGEINT, updated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (account_id, asset_id), CHECK (balance_minor >= floor_minor))""",
    """CREATE TABLE reward_executions (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        event_id VARCHAR NOT NULL, external_event_id VARCHAR NOT NULL, customer_id VARCHAR NOT NULL,
        program_id VARCHAR NOT NULL, version_id VARCHAR NOT NULL, version_number INTEGER NOT NULL,
        rule_id VARCHAR NOT NULL, action_index INTEGER NOT NULL, asset_id VARCHAR NOT NULL, wallet_id VARCHAR,
        amount_minor BIGINT NOT NULL, status VARCHAR NOT NULL, error_code VARCHAR, transaction_id VARCHAR,
        inputs VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL,
        requested_minor BIGINT, limited VARCHAR, usage_keys VARCHAR, reversed_minor BIGINT DEFAULT 0,
        reversal VARCHAR, taken_back_minor BIGINT DEFAULT 0, UNIQUE (event_id, version_id, rule_id, action_index))""",
    """CREATE TABLE idempotency_keys (
        organization_id VARCHAR, environment VARCHAR, key VARCHAR, operation VARCHAR NOT NULL,
        request_hash VARCHAR NOT NULL, response VARCHAR NOT NULL, status_code INTEGER NOT NULL,
        created_at TIMESTAMP NOT NULL, PRIMARY KEY (organization_id, environment, key))""",
    """CREATE TABLE outbox (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        kind VARCHAR NOT NULL, resource_id VARCHAR NOT NULL, payload VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL, dispatched_at TIMESTAMP)""",
    """CREATE TABLE api_keys (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        name VARCHAR NOT NULL, prefix VARCHAR NOT NULL, secret_hash VARCHAR NOT NULL UNIQUE,
        permissions VARCHAR NOT NULL, created_by VARCHAR, created_at TIMESTAMP NOT NULL, revoked_at TIMESTAMP)""",
    """CREATE TABLE webhook_endpoints (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        url VARCHAR NOT NULL, events VARCHAR NOT NULL, signing_secret VARCHAR NOT NULL,
        secret_prefix VARCHAR NOT NULL, status VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
        disabled_at TIMESTAMP, previous_signing_secret VARCHAR, previous_secret_expires_at TIMESTAMP)""",
    """CREATE TABLE webhook_deliveries (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        endpoint_id VARCHAR NOT NULL, outbox_id VARCHAR, kind VARCHAR NOT NULL, body VARCHAR NOT NULL,
        status VARCHAR NOT NULL, attempt_count INTEGER NOT NULL, round_attempts INTEGER NOT NULL,
        next_attempt_at TIMESTAMP, created_at TIMESTAMP NOT NULL, completed_at TIMESTAMP,
        UNIQUE (endpoint_id, outbox_id))""",
    """CREATE TABLE webhook_attempts (
        delivery_id VARCHAR, number INTEGER, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        attempted_at TIMESTAMP NOT NULL, duration_ms INTEGER NOT NULL, status_code INTEGER, error VARCHAR,
        succeeded BOOLEAN NOT NULL, PRIMARY KEY (delivery_id, number))""",
    """CREATE TABLE accounts (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, email VARCHAR NOT NULL UNIQUE,
        role VARCHAR NOT NULL, permissions VARCHAR NOT NULL, password_hash VARCHAR NOT NULL, totp_secret VARCHAR,
        totp_last_step BIGINT, created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE sessions (
        id VARCHAR PRIMARY KEY, account_id VARCHAR NOT NULL, organization_id VARCHAR NOT NULL,
        token_hash VARCHAR NOT NULL UNIQUE, created_at TIMESTAMP NOT NULL, expires_at TIMESTAMP NOT NULL,
        revoked_at TIMESTAMP)""",
    """CREATE TABLE request_log (
        id VARCHAR NOT NULL, organization_id VARCHAR, environment VARCHAR, request_id VARCHAR NOT NULL,
        method VARCHAR NOT NULL, path VARCHAR NOT NULL, operation VARCHAR, status INTEGER NOT NULL,
        duration_ms DOUBLE NOT NULL, principal_id VARCHAR, created_at TIMESTAMP NOT NULL, sdk_version VARCHAR)""",
    """CREATE TABLE health_probe (
        id INTEGER PRIMARY KEY, written_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE auth_audit (
        id VARCHAR NOT NULL, organization_id VARCHAR, environment VARCHAR, kind VARCHAR NOT NULL,
        outcome VARCHAR NOT NULL, reason VARCHAR, status INTEGER, actor_id VARCHAR, subject_id VARCHAR,
        request_id VARCHAR, method VARCHAR, path VARCHAR, address VARCHAR, sdk_version VARCHAR,
        created_at TIMESTAMP NOT NULL)""",
    """CREATE TABLE secret_key_check (
        id INTEGER PRIMARY KEY, check_value VARCHAR NOT NULL, written_at TIMESTAMP NOT NULL, CHECK (id = 1))""",
    """CREATE TABLE limit_usage (
        organization_id VARCHAR, environment VARCHAR, program_id VARCHAR, counter VARCHAR, customer_id VARCHAR,
        period_start VARCHAR, amount_minor HUGEINT NOT NULL, reward_count BIGINT NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        PRIMARY KEY (organization_id, environment, program_id, counter, customer_id, period_start))""",
    """CREATE TABLE lots (
        id VARCHAR PRIMARY KEY, organization_id VARCHAR NOT NULL, environment VARCHAR NOT NULL,
        wallet_id VARCHAR NOT NULL, asset_id VARCHAR NOT NULL, issued_at TIMESTAMP NOT NULL, expires_at TIMESTAMP,
        amount_minor HUGEINT NOT NULL, remaining_minor HUGEINT NOT NULL, expired_minor HUGEINT NOT NULL,
        source_transaction_id VARCHAR NOT NULL, expired_transaction_id VARCHAR, created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL, CHECK (remaining_minor >= 0), CHECK (remaining_minor <= amount_minor))""",
    """CREATE TABLE conversations (
        organization_id VARCHAR, environment VARCHAR, id VARCHAR, created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL, PRIMARY KEY (organization_id, environment, id))""",
    """CREATE TABLE conversation_turns (
        organization_id VARCHAR, environment VARCHAR, conversation_id VARCHAR, position INTEGER,
        id VARCHAR NOT NULL, role VARCHAR NOT NULL, content VARCHAR NOT NULL, sources VARCHAR NOT NULL,
        context VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (organization_id, environment, conversation_id, position))""",
]

# The ledger's entries: each transaction's two legs, one row per account, signed (migration 6's view).
_VIEWS = [
    """CREATE VIEW entries AS
        SELECT id AS transaction_id, organization_id, environment, source_account_id AS account_id,
               asset_id, -amount_minor AS amount_minor, created_at FROM transactions
        UNION ALL
        SELECT id, organization_id, environment, destination_account_id, asset_id, amount_minor, created_at
        FROM transactions""",
]

BASELINE: tuple[str, ...] = (*_TABLES, *_VIEWS)
