"""The audit of authentication events, written durably: it survives a crash right after the answer.

Unlike the request log (batched in memory, at most about a second of it lost in a crash), every event here is
committed before the client hears the answer: API key creation and revocation in the same transaction as the
change itself (`add`), logins, logouts and every 401 or 403 answer by `AuditWriter` (group commit), whose
commit the HTTP layer awaits before it sends the response. A row never holds a password, token, key secret or second
factor: `reason` is the registered error code of a refusal, and an attempted email is used only to find the
account it names (an email that names no account is not stored at all).

The HTTP layer puts what it knows of the request into `REQUEST` (a context variable, which Starlette's thread
pool carries into the service call), so that events written by the service carry the request id and address.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from rewards_lab import presenters
from rewards_lab.contract import developer as d
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import parse_instant
from rewards_lab.presenters import utc
from rewards_lab.store.api import Store, reader, unit_of_work
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import AuditFilter, AuditRow, AuthAuditStore, Repositories

log = logging.getLogger(__name__)
Outcome = Literal["succeeded", "failed"]
AUDIT_SORTS = ("created_at",)
KINDS = ("login", "logout", "api_key_created", "api_key_revoked", "access_denied", "guard_overridden")
OUTCOMES = ("succeeded", "failed")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the HTTP layer knows of the request being served."""

    request_id: str | None = None
    method: str | None = None
    path: str | None = None
    address: str | None = None
    sdk_version: str | None = None
    # The request's ASGI state: authentication leaves the principal there after this context is made, and an
    # event written by the service without an actor is filed under that principal's actor.
    state: dict[str, Any] | None = None

    def actor_id(self) -> str | None:
        principal = (self.state or {}).get("principal")
        actor = getattr(principal, "actor_id", None)
        return actor if isinstance(actor, str) else None


REQUEST: ContextVar[RequestContext | None] = ContextVar("rewards_lab_audit_request", default=None)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    kind: str
    outcome: Outcome
    organization_id: str | None = None
    environment: str | None = None
    reason: str | None = None
    status: int | None = None
    actor_id: str | None = None
    subject_id: str | None = None
    request_id: str | None = None
    method: str | None = None
    path: str | None = None
    address: str | None = None
    sdk_version: str | None = None


def _with_request(event: AuditEvent) -> AuditEvent:
    """The event, completed with the request in `REQUEST` where the caller did not say."""
    context = REQUEST.get()
    if context is None:
        return event
    return replace(
        event,
        request_id=event.request_id or context.request_id,
        method=event.method or context.method,
        path=event.path or context.path,
        address=event.address or context.address,
        sdk_version=event.sdk_version or context.sdk_version,
        actor_id=event.actor_id or context.actor_id(),
    )


def add(uow: Repositories, event: AuditEvent) -> None:
    """Write `event` inside the caller's unit of work: it commits (or not) with the action it records."""
    uow.auth_audit.add(_row(_with_request(event)))


def _row(event: AuditEvent) -> AuditRow:
    return AuditRow(id=new_id("auth_audit"), created_at=utcnow(), **asdict(event))


def write(database: Store, event: AuditEvent, *, email: str | None = None) -> None:
    """Commit `event` in a transaction of its own, filing it under the tenant it concerns when the event itself
    does not say: the account an attempted `email` names, or the owner of the key or session in `subject_id`."""
    with unit_of_work(database) as uow:
        uow.auth_audit.add(_row(_with_request(_attributed(uow.auth_audit, event, email))))


def write_many(database: Store, events: list[tuple[AuditEvent, str | None]]) -> None:
    """Commit many (event, attempted email) in ONE transaction beside the writer's (`Store.side_unit_of_work`,
    on the calling thread's own connection): the table is append-only and touched by no other writer but
    retention (which deletes only old rows), so this transaction needs neither the single writer's lock nor waits
    for an event batch."""
    with database.side_unit_of_work() as uow:
        repository = uow.auth_audit
        repository.add_many([_row(_attributed(repository, event, email)) for event, email in events])


def _attributed(repository: AuthAuditStore, event: AuditEvent, email: str | None) -> AuditEvent:
    """The event filed under the tenant it concerns when it does not say: the account an attempted `email` names,
    or the owner of the key or session in `subject_id`."""
    if event.organization_id is not None:
        return event
    subject = event.subject_id or ""
    if email is not None:
        owner = repository.account_owner(email.strip().lower())
    elif subject.startswith("key_"):
        owner = repository.api_key_owner(subject)
    elif subject.startswith("ses_"):
        owner = repository.session_owner(subject)
    else:
        owner = None
    if owner is None:
        return event
    environment = owner.environment if owner.environment is not None else event.environment
    return replace(event, organization_id=owner.organization_id, environment=environment, actor_id=owner.actor_id)


def _choice(value: str | None, allowed: tuple[str, ...], field: str) -> str | None:
    if value is not None and value not in allowed:
        raise ServiceError("field_invalid", f"{field} is one of {', '.join(allowed)}", field=field)
    return value


def list_audit(
    database: Store,
    scope: Scope,
    page: PageRequest,
    *,
    kind: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> r.Page[d.AuthAuditEntry]:
    """The tenant's authentication events (this environment's and the organization-wide ones), newest first
    unless `direction=asc`; committed before each answer, so complete at once."""
    check_page_request(page, AUDIT_SORTS)
    where = AuditFilter(
        kind=_choice(kind, KINDS, "kind"),
        outcome=_choice(outcome, OUTCOMES, "outcome"),
        since=parse_instant(since, "from"),
        until=parse_instant(until, "to"),
    )
    if where.since is not None and where.until is not None and where.until <= where.since:
        raise ServiceError("period_invalid", "to must be after from", field="to")
    rows = reader(database).auth_audit.page(scope, where, page)
    return presenters.page(r.Page[d.AuthAuditEntry], rows, _entry)


def _entry(row: AuditRow) -> d.AuthAuditEntry:
    fields = {key: value for key, value in row._asdict().items() if key != "organization_id"}
    fields["created_at"] = utc(row.created_at)
    return d.AuthAuditEntry(**fields)
