"""A programme's lifecycle: the draft's schedule, activation and deactivation, and rolling back to a version.

The schedule (timezone, starts_at, ends_at) belongs to the draft, like its rules, and is frozen into each
version published from it. A deactivated programme rewards no event processed while it is inactive; its
versions, asset and history stay as they are. Restoring makes the draft a copy of a published version, to be
published as a new version: the history itself is never rewritten.
"""

from __future__ import annotations

import re
from dataclasses import replace

from rewards_lab import presenters
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.programme_limits import check_version_rules
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.settings import clawback_of
from rewards_lab.domain.states import programme_transition
from rewards_lab.engine.rule_book import programme_row, version_id_of
from rewards_lab.service.programme_drafts import PreparedDraft
from rewards_lab.service.programme_guards import loosens, require_override
from rewards_lab.service.programme_spending import checked_spending
from rewards_lab.service.programme_tiers import check_tiers_removable, checked_tiers, tier_bytes
from rewards_lab.service.programmes import checked_schedule, version_resource
from rewards_lab.service.settings_requests import budget_of, expiry_of, guards_of, limits_of
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store
from rewards_lab.store.interfaces import Repositories

_DIGITS_RE = re.compile(r"[0-9]+")
MAX_VERSION_DIGITS = 9  # any such number fits the INTEGER column


def update_programme(
    database: Store,
    scope: Scope,
    program_id: str,
    body: rq.ProgrammeUpdate,
    *,
    idempotency_key: str | None = None,
    may_override: bool = True,
) -> r.Programme:
    """Edit the name, description and the DRAFT's schedule and settings; absent fields stay, null clears (see
    ProgrammeUpdate; null tiers are refused while a draft rule uses them).
    Removing or loosening the draft's guards needs `may_override` (the API: `rewards.guards.override`; in-process
    callers hold every right)."""
    given = body.model_fields_set
    if "name" in given and body.name is None:
        raise ServiceError("field_invalid", "name cannot be null", field="name")
    # New tiers count against the version's size beside its rules, measured before the write lock.
    prepared = PreparedDraft.of(database, scope, program_id) if body.tiers is not None else None

    def write(uow: Repositories) -> r.Programme:
        row = programme_row(uow, scope, program_id)
        if "name" in given or "description" in given:
            name = body.name if body.name is not None else row.name
            description = body.description if "description" in given else row.description
            uow.programmes.update(scope, program_id, name, description)
        if given & {"timezone", "starts_at", "ends_at"}:
            schedule = checked_schedule(
                (body.timezone or rq.DEFAULT_TIMEZONE) if "timezone" in given else row.timezone,
                body.starts_at if "starts_at" in given else row.starts_at,
                body.ends_at if "ends_at" in given else row.ends_at,
            )
            uow.programmes.set_schedule(scope, row.draft_version_id, schedule)
        if given & {"limits", "budget", "clawback", "expiry", "max_event_age_days"}:
            current = row.spending  # the draft's, as the store decoded it; what is not given stays
            age = body.max_event_age_days if "max_event_age_days" in given else current.max_event_age_days
            spending = replace(
                current,
                limits=limits_of(body.limits) if "limits" in given else current.limits,
                budget=budget_of(body.budget) if "budget" in given else current.budget,
                clawback=clawback_of(body.clawback) if "clawback" in given else current.clawback,
                expiry=expiry_of(body.expiry) if "expiry" in given else current.expiry,
                max_event_age_days=age,
            )
            checked = checked_spending(uow, scope, row.asset_id, spending)
            uow.programmes.set_spending(scope, row.draft_version_id, checked)
        if given & {"guards", "guard_window_days"}:
            guards = guards_of(body.guards) if "guards" in given else row.guards
            days = body.guard_window_days if "guard_window_days" in given else row.guard_window_days
            if loosens(row.guards, row.guard_window_days, guards, days):
                require_override(may_override, "removing or loosening forecast guards")
            uow.programmes.set_guards(scope, row.draft_version_id, guards)
            uow.programmes.set_guard_window(scope, row.draft_version_id, days)
        if "tiers" in given:
            tiers = checked_tiers(uow, scope, row.asset_id, body.tiers)
            if tiers is None and row.tiers is not None:
                check_tiers_removable(uow, scope, row.draft_version_id)
            if prepared is not None:
                digests = prepared.read_again(uow, scope, row.draft_version_id)
                total = prepared.total(uow, scope, row.draft_version_id, digests) + tier_bytes(tiers)
                check_version_rules(len(digests), total, "tiers")
            uow.programmes.set_tiers(scope, row.draft_version_id, tiers)
        return presenters.programme(programme_row(uow, scope, program_id))

    # Absent and null differ here, so the request an Idempotency-Key stands for is the fields as sent.
    sent = body.model_dump(mode="json", exclude_unset=True)
    return run_write(
        database, scope, f"programmes.update:{program_id}", sent, write, r.Programme, idempotency_key=idempotency_key
    )


def _move(database: Store, scope: Scope, program_id: str, action: str, idempotency_key: str | None) -> r.Programme:
    def write(uow: Repositories) -> r.Programme:
        row = programme_row(uow, scope, program_id)
        uow.programmes.set_status(scope, program_id, programme_transition(action, row.status))
        return presenters.programme(programme_row(uow, scope, program_id))

    return run_write(
        database, scope, f"programmes.{action}:{program_id}", {}, write, r.Programme, idempotency_key=idempotency_key
    )


def deactivate_programme(
    database: Store, scope: Scope, program_id: str, *, idempotency_key: str | None = None
) -> r.Programme:
    """From now on the worker evaluates none of the programme's versions (events processed earlier keep their
    results; a failed event replayed later is still evaluated against the versions recorded for it)."""
    return _move(database, scope, program_id, "deactivate", idempotency_key)


def activate_programme(
    database: Store, scope: Scope, program_id: str, *, idempotency_key: str | None = None
) -> r.Programme:
    """Its live version rewards events again (those processed while it was inactive stay unrewarded)."""
    return _move(database, scope, program_id, "activate", idempotency_key)


def _restorable(version: str) -> int | str:
    """A published version named in the path: its number, or "live"; never the draft. A number too long for the
    INTEGER column names no version (0 names none either)."""
    if _DIGITS_RE.fullmatch(version):
        return int(version) if len(version) <= MAX_VERSION_DIGITS else 0
    if version == "live":
        return version
    message = "name a published version by its number (or live); the draft cannot be restored"
    raise ServiceError("field_invalid", message, field="version")


def restore_version(
    database: Store,
    scope: Scope,
    program_id: str,
    version: str,
    *,
    idempotency_key: str | None = None,
    may_override: bool = True,
) -> r.ProgrammeVersion:
    """Make the draft a copy of a published version: its rules (the same rule ids) and its schedule; returns the
    draft, which a publication then freezes as a new version. A version whose guards are looser than the
    draft's needs `may_override`, as loosening them by an edit would."""
    wanted = _restorable(version)

    def write(uow: Repositories) -> r.ProgrammeVersion:
        row = programme_row(uow, scope, program_id)
        draft_id = row.draft_version_id
        source_id = version_id_of(uow, scope, program_id, wanted)
        source = uow.programmes.get_version(scope, source_id)
        if source is not None and loosens(row.guards, row.guard_window_days, source.guards, source.guard_window_days):
            require_override(may_override, "restoring a version with looser forecast guards")
        uow.programmes.restore_draft(scope, draft_id, source_id)
        return version_resource(uow, scope, draft_id)

    return run_write(
        database,
        scope,
        f"programmes.restore:{program_id}:{version}",
        {},
        write,
        r.ProgrammeVersion,
        idempotency_key=idempotency_key,
    )
