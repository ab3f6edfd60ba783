"""The contract of accounts, sessions, the request log and usage: request bodies and resources."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from rewards_lab.contract.requests import RequestModel


class LoginRequest(RequestModel):
    """`totp_code` is the six-digit code of the account's authenticator app, when the account has one."""

    email: Annotated[str, Field(min_length=3, max_length=320)]
    password: Annotated[str, Field(min_length=1, max_length=1024)]
    totp_code: Annotated[str | None, Field(max_length=16)] = None


class _Resource(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Account(_Resource):
    id: str
    organization_id: str
    email: str
    role: Literal["owner"]
    second_factor: bool
    created_at: datetime


class Session(_Resource):
    id: str
    account_id: str
    organization_id: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


class SessionCreated(Session):
    """Returned once, at login: the only time the token is ever shown (it is stored as a hash)."""

    token: str
    token_type: Literal["bearer"]
    account: Account


class RequestLogEntry(_Resource):
    id: str
    request_id: str
    method: str
    path: str
    operation: str | None  # the path template of the operation, e.g. /v1/customers/{customer_id}
    status: int
    duration_ms: float
    principal_id: str | None  # the API key's id, or the session's account id
    environment: Literal["sandbox", "production"]
    created_at: datetime
    sdk_version: str | None = None  # X-SDK-Version as sent (validated, at most 64 characters); null when absent


class StatusCounts(_Resource):
    total: int
    by_status_class: dict[str, int]  # "2xx", "4xx"... : only classes seen


class UsageDay(StatusCounts):
    date: date


class UsageOperation(_Resource):
    method: str
    operation: str
    status_class: str
    requests: int


class BusinessCounts(_Resource):
    events_received: int
    rewards_issued: int


class UsageSdkVersion(_Resource):
    """Requests of one SDK version over the period (null: requests that sent no X-SDK-Version)."""

    sdk_version: str | None
    total: int
    by_status_class: dict[str, int]
    last_seen_at: datetime | None


class Usage(_Resource):
    period_from: date
    period_to: date  # inclusive
    requests: StatusCounts
    days: list[UsageDay]  # every day of the period, oldest first, zeros included
    operations: list[UsageOperation]
    business: BusinessCounts
    sdk_versions: list[UsageSdkVersion] = []  # by X-SDK-Version, so that deprecations can be aimed at versions


AuthAuditKind = Literal["login", "logout", "api_key_created", "api_key_revoked", "access_denied", "guard_overridden"]


class AuthAuditEntry(_Resource):
    """One authentication event, written durably before the answer (or with the action itself). `reason` is the
    error code of a refusal (`credentials_invalid`, `permission_denied`...), never a credential; for
    `guard_overridden` (a version published although a forecast guard failed) it is the reason given, and
    `subject_id` is the version published."""

    id: str
    kind: AuthAuditKind
    outcome: Literal["succeeded", "failed"]
    reason: str | None
    status: int | None  # the HTTP status answered
    actor_id: str | None  # the account or API key that acted (or tried to)
    subject_id: str | None  # the session or API key the event is about
    environment: Literal["sandbox", "production"] | None  # null: organization-wide (a person's login, logout)
    request_id: str | None
    method: str | None
    path: str | None
    address: str | None  # the client address as the server saw it
    sdk_version: str | None
    created_at: datetime
