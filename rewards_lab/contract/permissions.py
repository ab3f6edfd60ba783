"""Permission codes. The seed names the ones its standard loop uses; the rest follow the same `area.action` form.

A key holding exactly the seed's standard-loop permissions (Authentication, rule 3: `customers.create`,
`wallets.view`, `assets.edit`, `rewards.edit`, `rewards.activate`, `events.write`, `developers.webhooks.manage`)
can run the whole six-step loop: creating a customer's wallet is gated by `customers.create` (the seed lists no
wallet-creation permission), reading balances by `wallets.view`.
"""

from __future__ import annotations

from enum import StrEnum


class Permission(StrEnum):
    CUSTOMERS_VIEW = "customers.view"
    CUSTOMERS_CREATE = "customers.create"
    CUSTOMERS_UPDATE = "customers.update"  # PATCH /customers/{id}; granted beside customers.create (migration 14)
    WALLETS_VIEW = "wallets.view"
    WALLETS_MANAGE = "wallets.manage"
    ASSETS_VIEW = "assets.view"
    ASSETS_EDIT = "assets.edit"
    LEDGER_VIEW = "ledger.view"
    LEDGER_ISSUE = "ledger.issue"
    LEDGER_REDEEM = "ledger.redeem"
    LEDGER_TRANSFER = "ledger.transfer"
    REWARDS_VIEW = "rewards.view"
    REWARDS_EDIT = "rewards.edit"
    REWARDS_ACTIVATE = "rewards.activate"
    # Publishing past a failed forecast guard, and removing or loosening guards (issue 31); granted to keys and
    # accounts that held every permission before it (migration 24), to no one else.
    REWARDS_GUARDS_OVERRIDE = "rewards.guards.override"
    EVENTS_VIEW = "events.view"
    EVENTS_WRITE = "events.write"
    WEBHOOKS_VIEW = "developers.webhooks.view"
    WEBHOOKS_MANAGE = "developers.webhooks.manage"
    API_KEYS_MANAGE = "developers.api_keys.manage"
    LOGS_VIEW = "developers.logs.view"
    USAGE_VIEW = "developers.usage.view"
    AI_USE = "ai.use"


ALL_PERMISSIONS: frozenset[str] = frozenset(p.value for p in Permission)
