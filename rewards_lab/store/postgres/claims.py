"""The background work's claims on PostgreSQL, where several processes share one database (issue 32, increment 7;
reports/i32-postgres-plan.md, section 5.3). DuckDB's repositories (one process per file) answer the same calls
without locks; these take them:

- a webhook delivery is leased to one sender (`lease_until`, `leased_by`; migration 26), picked `FOR UPDATE SKIP
  LOCKED` under the same per-endpoint and per-tenant ranks as DuckDB's `due`; recording the attempt clears the
  lease, and a killed sender's deliveries are due again once their lease passes (at least once);
- the outbox messages a fan-out turns into deliveries are locked `FOR UPDATE SKIP LOCKED` for its unit of work (the
  deliveries' insert skips a message already fanned out to an endpoint: a net);
- the lots an expiry round expires are those of the wallets whose balance rows it could lock `FOR UPDATE SKIP
  LOCKED` (every ledger write locks a wallet's balance row before its lots), then locked themselves;
- the customers a tier round reviews are those whose `customer_tiers` rows it could lock `FOR UPDATE SKIP LOCKED`,
  and the event worker reads a customer's tier row `FOR UPDATE` (waiting for a round that holds it, then reading
  what the round wrote): a review is applied by one of them, once.

Every statement here is PostgreSQL's own text (a locking clause has no DuckDB spelling), run by `execute_native`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from rewards_lab.contract.scope import Scope
from rewards_lab.store.interfaces import DueDelivery, DueLot, OutboxRow
from rewards_lab.store.lots import LotRepository
from rewards_lab.store.outbox import OutboxRepository
from rewards_lab.store.postgres.connection import PgConnection
from rewards_lab.store.queries import columns
from rewards_lab.store.tiers import TierRepository, TierStateRow, state_columns
from rewards_lab.store.webhooks import WebhookRepository

_PENDING = (
    "d.status = 'pending' AND d.next_attempt_at <= %(now)s AND (d.lease_until IS NULL OR d.lease_until <= %(now)s)"
)
# `due`'s ranks (row_number() subqueries: no window function may sit beside a locking clause), then the rows locked,
# their state checked again on the locked version (a sender that committed its lease meanwhile wins), then leased.
_CLAIM_DELIVERIES = f"""
WITH ranked AS (
    SELECT d.id, d.organization_id, d.next_attempt_at,
           row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS endpoint_rank
    FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
    WHERE {_PENDING} AND d.id <> ALL(%(exclude)s::text[])
      AND (e.status <> 'enabled' OR d.endpoint_id <> ALL(%(exclude_endpoints)s::text[]))
), fair AS (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY organization_id ORDER BY next_attempt_at, id) AS tenant_rank
        FROM ranked WHERE endpoint_rank <= %(per_endpoint)s
    ) tenant_ranked WHERE tenant_rank <= %(per_tenant)s
), claimed AS MATERIALIZED (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.id IN (SELECT id FROM fair) AND {_PENDING}
    ORDER BY d.next_attempt_at, d.id LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries w SET lease_until = %(until)s, leased_by = %(owner)s
FROM claimed c, webhook_endpoints e
WHERE w.id = c.id AND e.id = w.endpoint_id
RETURNING w.id, w.organization_id, w.environment, w.endpoint_id, w.kind, w.body, w.attempt_count, w.round_attempts,
          w.next_attempt_at, e.url, e.signing_secret, e.previous_signing_secret, e.previous_secret_expires_at,
          e.status AS endpoint_status
"""
_RELEASE_DELIVERIES = (
    "UPDATE webhook_deliveries SET lease_until = NULL, leased_by = NULL "
    "WHERE id = ANY(%(ids)s::text[]) AND leased_by = %(owner)s"
)
_CLAIM_OUTBOX = (
    f"SELECT {columns(OutboxRow)} FROM outbox WHERE dispatched_at IS NULL ORDER BY id LIMIT %(limit)s "
    "FOR UPDATE SKIP LOCKED"
)
_DUE_LOT = (
    "l.organization_id = %(org)s AND l.environment = %(env)s AND l.id = ANY(%(ids)s::text[]) "
    "AND l.remaining_minor > 0 AND l.expires_at <= %(as_of)s"
)
# The wallets' balance rows in key order (the order every writer locks them in), skipping those another writer
# holds (an expiry round in another process, a batch redeeming from the wallet), then their due lots.
_CLAIM_LOTS = f"""
WITH wanted AS (
    SELECT DISTINCT l.wallet_id, l.asset_id FROM lots l WHERE {_DUE_LOT}
), held AS MATERIALIZED (
    SELECT b.account_id, b.asset_id FROM balances b
    JOIN wanted w ON b.account_id = w.wallet_id AND b.asset_id = w.asset_id
    ORDER BY b.account_id, b.asset_id
    FOR UPDATE OF b SKIP LOCKED
)
SELECT l.organization_id, l.environment, l.id, l.wallet_id, l.asset_id, l.remaining_minor, l.expires_at
FROM lots l JOIN held h ON l.wallet_id = h.account_id AND l.asset_id = h.asset_id
WHERE {_DUE_LOT}
ORDER BY l.expires_at, l.issued_at, l.id
FOR UPDATE OF l
"""


class PgWebhookRepository(WebhookRepository):
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
        """`due`'s deliveries, leased to `owner` until `lease_until` in one statement (its own transaction on an
        autocommit reader), none another sender holds; oldest first, as `due` orders them."""
        if limit <= 0:
            return []
        rows = (
            cast(PgConnection, self.con)
            .execute_native(
                _CLAIM_DELIVERIES,
                {
                    "now": now,
                    "exclude": list(exclude),
                    "exclude_endpoints": list(exclude_endpoints),
                    "per_endpoint": per_endpoint,
                    "per_tenant": per_tenant,
                    "limit": limit,
                    "until": lease_until,
                    "owner": owner,
                },
            )
            .fetchall()
        )
        return sorted((DueDelivery(*row) for row in rows), key=lambda d: (d.next_attempt_at, d.id))

    def release(self, delivery_ids: list[str], owner: str) -> None:
        """The lease of `owner`'s claimed deliveries it will not attempt now (due again at once for any sender)."""
        if delivery_ids:
            cast(PgConnection, self.con).execute_native(_RELEASE_DELIVERIES, {"ids": delivery_ids, "owner": owner})


class PgOutboxRepository(OutboxRepository):
    def claim(self, limit: int) -> list[OutboxRow]:
        """Up to `limit` undispatched messages, oldest first, locked until the unit of work ends; another
        process's fan-out skips them, and finds them dispatched once it commits."""
        rows = cast(PgConnection, self.con).execute_native(_CLAIM_OUTBOX, {"limit": limit}).fetchall()
        return [OutboxRow(*row) for row in rows]


class PgLotClaims(LotRepository):
    """The lots' claim (store/postgres/repositories.PgLotRepository builds on it)."""

    def due_among(self, scope: Scope, lot_ids: Sequence[str], as_of: datetime) -> list[DueLot]:
        """As DuckDB's, but only the lots of wallets whose balance rows this unit of work could lock, and the lots
        locked too: two expiry rounds (two processes) never expire one lot, nor wait for each other; the lots of
        a wallet held elsewhere are left for a later round."""
        if not lot_ids:
            return []
        params = {"org": scope.organization_id, "env": scope.environment, "ids": list(lot_ids), "as_of": as_of}
        rows = cast(PgConnection, self.con).execute_native(_CLAIM_LOTS, params).fetchall()
        return [DueLot(o, e, i, w, a, int(m), t) for o, e, i, w, a, m, t in rows]


_TIER_ROWS = (
    "SELECT {columns} FROM customer_tiers WHERE organization_id = %(org)s AND environment = %(env)s "
    "AND program_id = %(program)s AND customer_id = ANY(%(customers)s::text[]) {due}"
    "ORDER BY customer_id FOR UPDATE {skip}"
)


class PgTierClaims(TierRepository):
    """Tier state read under row locks when the unit of work writes (several processes on one database)."""

    def _locked(
        self, scope: Scope, program_id: str, customer_ids: Sequence[str], as_of: datetime | None
    ) -> dict[str, TierStateRow]:
        due = "" if as_of is None else "AND (review_at <= %(as_of)s OR grace_until <= %(as_of)s) "
        sql = _TIER_ROWS.format(columns=state_columns(), due=due, skip="" if as_of is None else "SKIP LOCKED")
        params = {
            "org": scope.organization_id,
            "env": scope.environment,
            "program": program_id,
            "customers": sorted(set(customer_ids)),
            "as_of": as_of,
        }
        rows = cast(PgConnection, self.con).execute_native(sql, params).fetchall()
        return {row[1]: TierStateRow(*row) for row in rows}

    def load(self, scope: Scope, program_id: str, customer_ids: Sequence[str]) -> dict[str, TierStateRow]:
        """DuckDB's, the rows locked (in customer order) when this unit of work writes: an event waits for a tier
        round holding its customer and reads what it wrote."""
        if not customer_ids or not cast(PgConnection, self.con).writes:
            return super().load(scope, program_id, customer_ids)
        return self._locked(scope, program_id, customer_ids, None)

    def due_among(
        self, scope: Scope, program_id: str, customer_ids: Sequence[str], as_of: datetime
    ) -> dict[str, TierStateRow]:
        """DuckDB's, only the rows this unit of work could lock: a customer an event batch or another round holds is
        left for a later round (it is still due then, or the batch reviewed it)."""
        if not customer_ids:
            return {}
        return self._locked(scope, program_id, customer_ids, as_of)
