"""API keys and the principal behind a request.

A key's secret is shown once; only its SHA-256 hash and a visible prefix are stored. Secrets are 256 bits of
randomness, so a fast hash is the right one (as for GitHub and Stripe tokens): there is nothing to brute-force.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
import weakref
from dataclasses import dataclass

from rewards_lab import presenters
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.permissions import ALL_PERMISSIONS
from rewards_lab.contract.scope import Scope
from rewards_lab.presenters import utc
from rewards_lab.security import auth_audit
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.interfaces import ApiKeyRow

SECRET_PREFIX = "rlk"
# Enterprise limits are configurable (`bootstrap --rate-limit`); without a figure this one applies.
ENTERPRISE_DEFAULT_LIMIT_PER_MINUTE = 10_000
VISIBLE_PREFIX_LENGTH = 16
# Principals are remembered briefly so that a busy client costs no database read per request. Revocation in
# this process forgets the key at once (one process owns the file); the TTL bounds anything else. Not on a store
# several processes serve (`Store.shared_state()`): a key revoked through one process must be refused by every
# other at once, and a revocation in one process cannot reach another's memory, so each request reads the key.
PRINCIPAL_CACHE_TTL_S = 5.0
_principal_cache: weakref.WeakKeyDictionary[Store, dict[str, tuple[float, Principal]]] = weakref.WeakKeyDictionary()
_principal_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: one key (or session), one organization, one environment, a set of permissions."""

    key_id: str  # the API key's id, or the session's id
    scope: Scope
    permissions: frozenset[str]
    rate_limit_per_minute: int
    account_id: str | None = None  # set when a person's session acts

    @property
    def actor_id(self) -> str:
        """Who is accountable: the session's account, else the key (request log, `created_by`)."""
        return self.account_id or self.key_id

    def require(self, permission: str) -> None:
        if permission not in self.permissions:
            raise ServiceError("permission_denied", f"this operation requires '{permission}'", permission=permission)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _resource(row: ApiKeyRow) -> r.ApiKey:
    return r.ApiKey(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        environment=row.environment,
        permissions=json.loads(row.permissions),
        created_at=utc(row.created_at),
        revoked_at=utc(row.revoked_at) if row.revoked_at else None,
    )


def create_api_key(
    database: Store, scope: Scope, name: str, permissions: list[str], *, creator: Principal | None = None
) -> r.ApiKeyCreated:
    """A new key scoped to one organization and environment. A key never holds more than its creator."""
    unknown = sorted(set(permissions) - ALL_PERMISSIONS)
    if unknown:
        raise ServiceError("permission_unknown", field="permissions", unknown=unknown)
    if creator is not None:
        beyond = sorted(set(permissions) - creator.permissions)
        if beyond:
            raise ServiceError("permission_escalation", field="permissions", beyond=beyond)
    secret = f"{SECRET_PREFIX}_{scope.environment[:4]}_{secrets.token_urlsafe(32)}"
    with unit_of_work(database) as uow:
        row = uow.api_keys.add(
            scope,
            new_id("api_key"),
            name,
            secret[:VISIBLE_PREFIX_LENGTH],
            hash_secret(secret),
            permissions,
            creator.actor_id if creator else None,
        )
        auth_audit.add(  # committed with the key itself
            uow,
            auth_audit.AuditEvent(
                "api_key_created",
                "succeeded",
                scope.organization_id,
                scope.environment,
                actor_id=creator.actor_id if creator else None,
                subject_id=row.id,
            ),
        )
    return r.ApiKeyCreated(**_resource(row).model_dump(), secret=secret)


API_KEY_SORTS = ("created_at", "name")
API_KEY_STATUSES = ("active", "revoked")


def list_api_keys(database: Store, scope: Scope, page: PageRequest, *, status: str | None = None) -> r.Page[r.ApiKey]:
    """The scope's keys, prefix and metadata only (never a secret or its hash); revoked keys stay listed with
    their `revoked_at`: a revocation keeps the key's history."""
    sort = check_page_request(page, API_KEY_SORTS)
    if status and status not in API_KEY_STATUSES:  # an empty `status=` filters nothing, as on the other lists
        raise ServiceError("field_invalid", "status must be active or revoked", field="status")
    rows = reader(database).api_keys.page(scope, page, sort, status or None)
    return presenters.page(r.Page[r.ApiKey], rows, _resource)


def authenticate(database: Store, secret: str) -> Principal:
    """The principal a bearer secret stands for; `credentials_invalid` or `api_key_revoked` otherwise."""
    digest = hash_secret(secret)
    if database.shared_state() is not None:
        return _load_principal(database, digest)
    with _principal_cache_lock:
        cached = _principal_cache.setdefault(database, {}).get(digest)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    principal = _load_principal(database, digest)
    with _principal_cache_lock:
        _principal_cache.setdefault(database, {})[digest] = (time.monotonic() + PRINCIPAL_CACHE_TTL_S, principal)
    return principal


def forget_principals(database: Store) -> None:
    """Drop every remembered principal of `database` (after a revocation or a permission change)."""
    with _principal_cache_lock:
        _principal_cache.pop(database, None)


def _load_principal(database: Store, digest: str) -> Principal:
    row = reader(database).api_keys.by_hash(digest)
    if row is None or not hmac.compare_digest(row.secret_hash, digest):
        raise ServiceError("credentials_invalid")
    if row.revoked_at is not None:
        raise ServiceError("api_key_revoked", key_id=row.id)
    scope = Scope(row.organization_id, row.environment)
    organization = reader(database).organizations.get(row.organization_id)
    assert organization is not None
    limit = organization.rate_limit_per_minute or ENTERPRISE_DEFAULT_LIMIT_PER_MINUTE
    return Principal(row.id, scope, frozenset(json.loads(row.permissions)), int(limit))


def revoke_api_key(database: Store, scope: Scope, key_id: str, *, revoker: Principal | None = None) -> r.ApiKey:
    """Revoke a key for good; the revocation is audited in the same transaction (`revoker`: who did it)."""
    with unit_of_work(database) as uow:
        row = uow.api_keys.get(scope, key_id)
        if row is None:
            raise ServiceError("api_key_not_found", key_id=key_id)
        if row.revoked_at is not None:
            raise ServiceError("api_key_already_revoked", key_id=key_id)
        uow.api_keys.revoke(scope, key_id)
        auth_audit.add(
            uow,
            auth_audit.AuditEvent(
                "api_key_revoked",
                "succeeded",
                scope.organization_id,
                scope.environment,
                actor_id=revoker.actor_id if revoker else None,
                subject_id=key_id,
            ),
        )
        updated = uow.api_keys.get(scope, key_id)
    forget_principals(database)
    assert updated is not None
    return _resource(updated)
