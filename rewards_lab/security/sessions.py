"""Owner accounts and their sessions: the `Authorization: Bearer` credential of people.

A session token is 256 random bits shown once at login and stored as its SHA-256 hash (like API keys: nothing to
brute-force, so a fast hash is right). Passwords are low-entropy, hence scrypt (`service.passwords`). A session
belongs to one account and so one organization, but to no environment: each request names its environment with
X-Environment, and the session acts there with the account's permissions.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import time
from datetime import timedelta

import pyotp

from rewards_lab.contract import developer as d
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.permissions import ALL_PERMISSIONS
from rewards_lab.contract.scope import EnvironmentName, Scope
from rewards_lab.presenters import utc
from rewards_lab.security.access import ENTERPRISE_DEFAULT_LIMIT_PER_MINUTE, Principal, hash_secret
from rewards_lab.security.login_guard import Guard
from rewards_lab.security.passwords import dummy_hash, hash_password, verify_password
from rewards_lab.store.accounts import totp_context
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import AccountRow, SessionRow

_EMAIL_RE = re.compile(r"[^@\s]{1,64}@[^@\s]{1,255}")
SESSION_PREFIX = "rls_"
DEFAULT_SESSION_LIFETIME_S = 12 * 3600
MIN_PASSWORD_LENGTH = 12
TOTP_VALID_WINDOW = 1  # the code of the previous or next 30-second step is accepted too (clock drift)


def _account(row: AccountRow) -> d.Account:
    return d.Account(
        id=row.id,
        organization_id=row.organization_id,
        email=row.email,
        role=row.role,
        second_factor=row.totp_secret is not None,
        created_at=utc(row.created_at),
    )


def _session(row: SessionRow) -> d.Session:
    return d.Session(
        id=row.id,
        account_id=row.account_id,
        organization_id=row.organization_id,
        created_at=utc(row.created_at),
        expires_at=utc(row.expires_at),
        revoked_at=utc(row.revoked_at) if row.revoked_at else None,
    )


def check_new_account(database: Store, email: str, password: str) -> str:
    """The normalized email of a new account, or the error its email or password would meet."""
    normalized = email.strip().lower()
    if not _EMAIL_RE.fullmatch(normalized):
        raise ServiceError("field_invalid", "email must be an email address", field="email")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ServiceError(
            "field_invalid", f"password must have at least {MIN_PASSWORD_LENGTH} characters", field="password"
        )
    if reader(database).accounts.by_email(normalized) is not None:
        raise ServiceError("field_invalid", "an account with this email exists", field="email")
    return normalized


def create_owner_account(
    database: Store, organization_id: str, email: str, password: str, *, totp: bool = False
) -> tuple[d.Account, str | None]:
    """An owner (every permission) of the organization; returns the account and, with `totp`, the TOTP secret
    (base32, to be shown once for the authenticator app)."""
    normalized = check_new_account(database, email, password)
    account_id = new_id("user")
    totp_secret = pyotp.random_base32() if totp else None
    # Sealed before it reaches the database: the plain secret is only ever returned here, to be shown once.
    sealed = database.secret_box.seal(totp_secret, context=totp_context(account_id)) if totp_secret else None
    password_hash = hash_password(password)
    with unit_of_work(database) as uow:
        if uow.organizations.get(organization_id) is None:
            raise ServiceError("organization_not_found", field="organization_id")
        if uow.accounts.by_email(normalized) is not None:
            raise ServiceError("field_invalid", "an account with this email exists", field="email")
        row = uow.accounts.add(
            account_id, organization_id, normalized, "owner", sorted(ALL_PERMISSIONS), password_hash, sealed
        )
    return _account(row), totp_secret


def _totp_step(secret: str, code: str, last_step: int | None, now: float) -> int | None:
    """The 30-second step whose code this is (within the drift window), unless that step was already used."""
    totp = pyotp.TOTP(secret)
    current = int(now // totp.interval)
    for step in range(current - TOTP_VALID_WINDOW, current + TOTP_VALID_WINDOW + 1):
        if hmac.compare_digest(totp.generate_otp(step), code) and (last_step is None or step > last_step):
            return step
    return None


def login(
    database: Store,
    guard: Guard,
    body: d.LoginRequest,
    *,
    address: str,
    organization_id: str | None = None,
    lifetime_s: int = DEFAULT_SESSION_LIFETIME_S,
) -> d.SessionCreated:
    """Password, then the second factor where the account has one; a session token on success. X-Organization-ID
    is optional here (the account names its organization) but, when sent, must be the account's.

    An unknown email and a wrong password are the same `credentials_invalid` and cost the same time. The second
    factor is asked for only after a correct password, and a code is accepted once. While `guard` holds the
    account or the address in backoff every attempt is `rate_limit_exceeded`, the right password included."""
    email = body.email.strip().lower()
    guard.admit(email, address)  # refused while in backoff, before the password is looked at; else a failure...
    row = reader(database).accounts.by_email(email)
    if not verify_password(body.password, row.password_hash if row else dummy_hash()) or row is None:
        guard.failed(email, address)
        raise ServiceError("credentials_invalid", "the email or the password is wrong", field="password")
    step: int | None = None
    if row.totp_secret is not None:
        if not body.totp_code:
            guard.not_a_guess(email, address)  # ...given back: the right password, the code still to come
            raise ServiceError("second_factor_required", "send totp_code from the authenticator app", field="totp_code")
        secret = database.secret_box.open(row.totp_secret, context=totp_context(row.id))
        step = _totp_step(secret, body.totp_code, row.totp_last_step, time.time())
        if step is None:
            guard.failed(email, address)
            raise ServiceError("second_factor_invalid", field="totp_code")
    guard.succeeded(email, address)  # ...or cleared: the right credentials
    if organization_id is not None and organization_id != row.organization_id:
        raise ServiceError("organization_mismatch", field="X-Organization-ID")
    token = f"{SESSION_PREFIX}{secrets.token_urlsafe(32)}"
    with unit_of_work(database) as uow:
        if step is not None:
            current = uow.accounts.get(row.id)
            assert current is not None
            if current.totp_last_step is not None and step <= current.totp_last_step:
                raise ServiceError("second_factor_invalid", field="totp_code")  # a concurrent login used it
            uow.accounts.use_totp_step(row.id, step)
        expires_at = utcnow() + timedelta(seconds=lifetime_s)
        session = uow.sessions.add(new_id("session"), row.id, row.organization_id, hash_secret(token), expires_at)
    return d.SessionCreated(**_session(session).model_dump(), token=token, token_type="bearer", account=_account(row))


def is_session_token(token: str) -> bool:
    return token.startswith(SESSION_PREFIX)


def _live_session(database: Store, token: str) -> SessionRow:
    digest = hash_secret(token)
    row = reader(database).sessions.by_hash(digest)
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise ServiceError("credentials_invalid")
    if row.revoked_at is not None:
        raise ServiceError("session_revoked", session_id=row.id)
    if row.expires_at <= utcnow():
        raise ServiceError("session_expired", session_id=row.id)
    return row


def authenticate_session(database: Store, token: str, environment: EnvironmentName) -> Principal:
    """The principal of a live session acting in `environment`: the account's permissions, its organization."""
    session = _live_session(database, token)
    repositories = reader(database)
    account = repositories.accounts.get(session.account_id)
    organization = repositories.organizations.get(session.organization_id)
    assert account is not None and organization is not None
    limit = organization.rate_limit_per_minute or ENTERPRISE_DEFAULT_LIMIT_PER_MINUTE
    return Principal(
        session.id,
        Scope(session.organization_id, environment),
        frozenset(json.loads(account.permissions)),
        int(limit),
        account_id=account.id,
    )


def logout(database: Store, token: str) -> d.Session:
    """End the session the token stands for (it is revoked, not deleted)."""
    session = _live_session(database, token)
    with unit_of_work(database) as uow:
        uow.sessions.revoke(session.id)
        row = uow.sessions.get(session.id)
    assert row is not None
    return _session(row)
