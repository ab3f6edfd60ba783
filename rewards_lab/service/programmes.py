"""Programmes, their versions and rules: rules attach to the draft; publish freezes it as a numbered version.

After publishing, a new draft starts as a copy of the published version (same rule ids and schedule), so a
designer edits the next version while the published one keeps applying exactly as published. Editing a
programme's schedule, its status and restoring an old version: service.programme_lifecycle.

A version's rules are bounded (`contract.programme_limits`): adding, editing and publishing check the count and
the size of the draft's rules. The work that grows with the rules (measuring them, presenting them) is done
before the write lock is taken (`service.programme_drafts`); inside it the draft's rule digests are read again,
and only rules that changed meanwhile are measured (or presented) there (docs/decisions.md,
"Rate limits and tenant fairness").
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from rewards_lab import presenters
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, PublishRequest
from rewards_lab.contract.ids import new_id
from rewards_lab.contract.limit_requests import Limit, ReverseAction
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.programme_limits import check_version_rules
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import parse_amount
from rewards_lab.engine.postings import asset_row
from rewards_lab.engine.rule_book import programme_row, version_id_of
from rewards_lab.service.programme_drafts import PreparedDraft, check_draft, refuse_early, stored_bytes
from rewards_lab.service.programme_forecast import Forecast, fingerprint, guarded_forecast, table_details
from rewards_lab.service.programme_guards import record_override, require_override
from rewards_lab.service.programme_spending import budget_consumption, checked_limits, checked_spending
from rewards_lab.service.programme_tiers import check_tier_rules, checked_tiers, tier_bytes
from rewards_lab.service.settings_requests import guards_of, limits_of, spending_of
from rewards_lab.service.writes import run_write
from rewards_lab.store.api import Store, reader, snapshot
from rewards_lab.store.interfaces import (
    NewProgramme,
    ProgrammeFilter,
    ProgrammeRow,
    Repositories,
    RuleBody,
    RuleRow,
    Schedule,
)

PROGRAMME_SORTS = ("created_at", "name")
VERSION_SORTS = ("number",)
_OPTIONAL_FIELDS = (
    "timezone",
    "starts_at",
    "ends_at",
    "limits",
    "budget",
    "clawback",
    "expiry",
    "guards",
    "max_event_age_days",
    "guard_window_days",
    "tiers",
)


def create_programme(
    database: Store, scope: Scope, body: rq.ProgrammeCreate, *, idempotency_key: str | None = None
) -> r.Programme:
    def write(uow: Repositories) -> r.Programme:
        if uow.assets.get(scope, body.asset_id) is None:
            raise ServiceError("asset_not_found", field="asset_id", asset_id=body.asset_id)
        schedule = checked_schedule(body.timezone, body.starts_at, body.ends_at)
        requested = spending_of(body.limits, body.budget, body.clawback, body.expiry, body.max_event_age_days)
        spending = checked_spending(uow, scope, body.asset_id, requested)
        programme, guards = NewProgramme(body.name, body.asset_id, body.description), guards_of(body.guards)
        window = None if body.guard_window_days == DEFAULT_GUARD_WINDOW_DAYS else body.guard_window_days
        tiers = checked_tiers(uow, scope, body.asset_id, body.tiers)
        check_version_rules(0, tier_bytes(tiers), "tiers")
        ids = new_id("programme"), new_id("programme_version")
        row = uow.programmes.add(scope, *ids, programme, schedule, spending, guards, window, tiers)
        return presenters.programme(row)

    # The schedule and spending fields count for the Idempotency-Key only when sent, so a key stored before they
    # existed still stands for the same request.
    unsent = {name for name in _OPTIONAL_FIELDS if name not in body.model_fields_set}
    return run_write(
        database,
        scope,
        "programmes.create",
        body.model_dump(mode="json", exclude=unsent),
        write,
        r.Programme,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def checked_schedule(timezone: str, starts_at: datetime | None, ends_at: datetime | None) -> Schedule:
    """A version's schedule as stored (bounds in naive UTC); the window must not be empty."""
    starts, ends = _naive_utc(starts_at), _naive_utc(ends_at)
    if starts is not None and ends is not None and ends <= starts:
        raise ServiceError("field_invalid", "ends_at must be after starts_at", field="ends_at")
    return Schedule(timezone, starts, ends)


def get_programme(database: Store, scope: Scope, program_id: str) -> r.Programme:
    """The programme, with its draft's settings and its budget's consumption per period."""
    uow = reader(database)
    row = programme_row(uow, scope, program_id)
    return presenters.programme(row, budget_consumption(uow, scope, row))


def list_programmes(
    database: Store, scope: Scope, page: PageRequest, *, asset_id: str | None = None
) -> r.Page[r.Programme]:
    sort = check_page_request(page, PROGRAMME_SORTS)
    rows = reader(database).programmes.page(scope, page, sort, ProgrammeFilter(asset_id))
    return presenters.page(r.Page[r.Programme], rows, presenters.programme)


def _rule_body(
    uow: Repositories,
    scope: Scope,
    programme: ProgrammeRow,
    event_type: str,
    conditions: list[rq.ConditionItem],
    actions: list[rq.RuleAction],
    priority: int,
    stop_processing: bool,
    limits: list[Limit],
    name: str | None = None,
) -> RuleBody:
    """A rule as written: actions carry their asset, fixed amounts and caps fit the asset's decimals; a rule that
    uses tiers (`multiply`, `customer.tier*` conditions) is refused, with or without the programme's tiers, until
    the live engine applies them (issue 33, T3): accepting it now would store a rule that the engine reads as
    untiered (`service.programme_tiers`)."""
    check_tier_rules(conditions, actions, stop_processing, has_tiers=programme.tiers is not None)
    stored_actions = []
    for index, action in enumerate(actions):
        if isinstance(action, ReverseAction):  # takes back in the assets the original was issued in
            stored_actions.append(action.model_dump(mode="json"))
            continue
        asset_id = action.asset_id or programme.asset_id
        if asset_id != programme.asset_id:
            raise ServiceError(
                "rule_asset_mismatch",
                field=f"actions[{index}].asset_id",
                programme_asset_id=programme.asset_id,
            )
        decimals = int(asset_row(uow, scope, asset_id).decimals)
        if isinstance(action.amount, rq.FixedAmount):
            parse_amount(action.amount.fixed, decimals, f"actions[{index}].amount.fixed")
        stored_actions.append({**action.model_dump(mode="json"), "asset_id": asset_id})
    return RuleBody(
        event_type,
        [condition_payload(c) for c in conditions],
        stored_actions,
        priority,
        stop_processing,
        checked_limits(uow, scope, programme.asset_id, limits_of(limits), "limits"),
        name,
    )


def _draft_rule(uow: Repositories, scope: Scope, rule_id: str) -> tuple[RuleRow, ProgrammeRow]:
    """(rule row in the draft, programme row); published-only rules are immutable."""
    revisions = uow.programmes.rule_revisions(scope, rule_id)
    if not revisions:
        raise ServiceError("rule_not_found", rule_id=rule_id)
    programme = programme_row(uow, scope, revisions[0].program_id)
    for revision in revisions:
        if revision.version_id == programme.draft_version_id:
            return revision, programme
    raise ServiceError("programme_version_immutable", "the rule exists only in published versions", rule_id=rule_id)


def create_rule(database: Store, scope: Scope, body: rq.RuleCreate, *, idempotency_key: str | None = None) -> r.Rule:
    prepared = PreparedDraft.of(database, scope, body.program_id)
    refuse_early(prepared, idempotency_key)

    def write(uow: Repositories) -> r.Rule:
        programme = programme_row(uow, scope, body.program_id, field="program_id")
        stored = _rule_body(
            uow,
            scope,
            programme,
            body.event_type,
            body.conditions,
            body.actions,
            body.priority,
            body.stop_processing,
            body.limits,
            body.name,
        )
        draft_id = programme.draft_version_id
        check_draft(uow, scope, draft_id, prepared, adding=stored_bytes(stored) + tier_bytes(programme.tiers))
        rule_id = new_id("rule")
        uow.programmes.add_rule(
            scope, rule_id, draft_id, programme.id, stored, uow.programmes.next_position(scope, draft_id)
        )
        return _rule_resource(uow, scope, rule_id)

    return run_write(
        database, scope, "rules.create", body, write, r.Rule, idempotency_key=idempotency_key, status_code=201
    )


def update_rule(
    database: Store, scope: Scope, rule_id: str, body: rq.RuleUpdate, *, idempotency_key: str | None = None
) -> r.Rule:
    """Edit a rule of the draft version; its published copies stay as published."""
    revisions = reader(database).programmes.rule_revisions(scope, rule_id)
    prepared = PreparedDraft.of(database, scope, revisions[0].program_id) if revisions else PreparedDraft(scope)

    def write(uow: Repositories) -> r.Rule:
        current, programme = _draft_rule(uow, scope, rule_id)
        old = presenters.rule(current)
        stored = _rule_body(
            uow,
            scope,
            programme,
            body.event_type or old.event_type,
            body.conditions if body.conditions is not None else old.conditions,
            body.actions if body.actions is not None else old.actions,
            body.priority if body.priority is not None else old.priority,
            body.stop_processing if body.stop_processing is not None else old.stop_processing,
            body.limits if body.limits is not None else old.limits,
            body.name if "name" in body.model_fields_set else old.name,  # null clears it
        )
        adding = stored_bytes(stored) + tier_bytes(programme.tiers)
        check_draft(uow, scope, current.version_id, prepared, without=rule_id, adding=adding)
        uow.programmes.update_rule(scope, rule_id, current.version_id, stored)
        return _rule_resource(uow, scope, rule_id)

    # `name: null` (clear) differs from an absent name; a request without a name hashes as it did before names.
    sent = body.model_dump(mode="json")
    if "name" in body.model_fields_set and body.name is None:
        sent["name"] = None
    return run_write(database, scope, f"rules.update:{rule_id}", sent, write, r.Rule, idempotency_key=idempotency_key)


def delete_rule(database: Store, scope: Scope, rule_id: str, *, idempotency_key: str | None = None) -> r.Rule:
    """Remove a rule from the draft version (published versions keep it); returns the removed rule."""

    def write(uow: Repositories) -> r.Rule:
        current, _ = _draft_rule(uow, scope, rule_id)
        removed = presenters.rule(current)
        uow.programmes.delete_rule(scope, rule_id, current.version_id)
        return removed

    return run_write(database, scope, f"rules.delete:{rule_id}", {}, write, r.Rule, idempotency_key=idempotency_key)


def _rule_resource(uow: Repositories, scope: Scope, rule_id: str) -> r.Rule:
    revisions = uow.programmes.rule_revisions(scope, rule_id)
    if not revisions:
        raise ServiceError("rule_not_found", rule_id=rule_id)
    return presenters.rule(revisions[0])


def get_rule(database: Store, scope: Scope, rule_id: str) -> r.Rule:
    """The rule as it stands in the draft if the draft has it, else as last published."""
    return _rule_resource(reader(database), scope, rule_id)


def publish(
    database: Store,
    scope: Scope,
    program_id: str,
    body: PublishRequest | None = None,
    *,
    idempotency_key: str | None = None,
    actor: str | None = None,
    may_override: bool = True,
) -> r.PublishResult:
    """Freeze the draft as version N+1 (immutable from now on) and start a new draft from it. A
    `guard_override` is recorded on the published version with `actor` (the key or account that gave it).

    A draft with guards is first checked on the stored events (`programme_forecast`, before the write lock); a
    failing one is refused (`forecast_guard_failed`, the table in its details) unless an override is given by a
    caller that `may_override` (the API: `rewards.guards.override`). Inside the unit of work the draft is read
    again: if it changed since the check, `programme_draft_changed`. The refusals are raised inside the unit of
    work, so a request already stored under its Idempotency-Key still gets its original answer."""
    override = body.guard_override if body is not None else None
    prepared = PreparedDraft.of(database, scope, program_id, present=True)
    checked: Forecast | None = None
    failure: ServiceError | None = None
    try:
        checked = guarded_forecast(database, scope, program_id)
    except ServiceError as error:  # raised in the unit of work, after a stored Idempotency-Key is looked up
        failure = error

    def write(uow: Repositories) -> r.PublishResult:
        if failure is not None:
            raise failure
        programme = programme_row(uow, scope, program_id)
        draft_id = programme.draft_version_id
        if checked is not None or programme.guards:
            if checked is None or checked.fingerprint != fingerprint(uow, scope, programme):
                raise ServiceError("programme_draft_changed", program_id=program_id)
            if not checked.result.passed:
                if override is None:
                    raise ServiceError("forecast_guard_failed", **table_details(checked.result))
                require_override(may_override, "publishing past a failed forecast guard")
        digests = prepared.read_again(uow, scope, draft_id)  # what decides the write, as it stands now
        if not digests:
            raise ServiceError("programme_draft_empty", program_id=program_id)
        check_version_rules(len(digests), 0, "rules")
        total = prepared.total(uow, scope, draft_id, digests) + tier_bytes(programme.tiers)
        check_version_rules(len(digests), total, "rules")
        number = int(programme.current_version or 0) + 1
        uow.programmes.publish_version(scope, draft_id, number)
        if override is not None:
            record_override(uow, scope, draft_id, override, actor or "unknown", datetime.now(UTC))
        new_draft = new_id("programme_version")
        schedule, spending = programme.draft_schedule, programme.spending
        if spending.expiry is not None:  # its rewards expire: the asset tracks lots
            uow.assets.start_lots(scope, programme.asset_id)
        window = programme.guard_window_days
        guards, tiers = programme.guards, programme.tiers
        uow.programmes.add_version(scope, new_draft, program_id, number, schedule, spending, guards, window, tiers)
        uow.programmes.copy_rules(scope, draft_id, new_draft)
        uow.programmes.set_current(scope, program_id, number, new_draft)
        published = uow.programmes.get_version(scope, draft_id)
        assert published is not None
        version = presenters.version_of(published, [prepared.rule(digest, number) for digest in digests])
        return r.PublishResult(program_id=program_id, version=version, draft_version_id=new_draft)

    # Without an override the request is `{}`, as it was before overrides existed (stored keys still match).
    sent = body.model_dump(mode="json", exclude_none=True) if body is not None else {}
    return run_write(
        database,
        scope,
        f"programmes.publish:{program_id}",
        sent,
        write,
        r.PublishResult,
        idempotency_key=idempotency_key,
        status_code=201,
    )


def version_resource(uow: Repositories, scope: Scope, version_id: str) -> r.ProgrammeVersion:
    row = uow.programmes.get_version(scope, version_id)
    if row is None:
        raise ServiceError("programme_version_not_found", version_id=version_id)
    return presenters.version(row, uow.programmes.rules_of(scope, [version_id]))


def get_version(database: Store, scope: Scope, program_id: str, version: int | str | None = None) -> r.ProgrammeVersion:
    uow = reader(database)
    return version_resource(uow, scope, version_id_of(uow, scope, program_id, version))


def list_versions(database: Store, scope: Scope, program_id: str, page: PageRequest) -> r.Page[r.ProgrammeVersion]:
    """A page of the version history by number, oldest first; the draft (no number) comes last."""
    sort = check_page_request(page, VERSION_SORTS)
    with snapshot(database) as store:  # the versions and their rules as of one commit
        programme_row(store, scope, program_id)
        rows = store.programmes.versions_page(scope, program_id, page, sort)
        by_version = _rules_by_version(store.programmes.rules_of(scope, [row.id for row in rows.rows]))
    return presenters.page(r.Page[r.ProgrammeVersion], rows, lambda row: presenters.version(row, by_version[row.id]))


def all_versions(database: Store, scope: Scope, program_id: str) -> list[r.ProgrammeVersion]:
    """The whole version history, oldest first, the draft last (the lab's in-process view; over HTTP it pages)."""
    with snapshot(database) as store:
        programme_row(store, scope, program_id)
        rows = store.programmes.versions(scope, program_id)
        by_version = _rules_by_version(store.programmes.rules_of(scope, [row.id for row in rows]))
    return [presenters.version(row, by_version[row.id]) for row in rows]


def _rules_by_version(rules: list[RuleRow]) -> defaultdict[str, list[RuleRow]]:
    by_version: defaultdict[str, list[RuleRow]] = defaultdict(list)
    for rule in rules:
        by_version[rule.version_id].append(rule)
    return by_version
