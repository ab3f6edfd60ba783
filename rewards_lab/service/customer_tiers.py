"""A customer's tier and tier history (issue 33, T5; reports/i33-tiers-plan.md sections 2.2 and 4.4).

`GET /customers/{id}/tier` reads the programme's live version's tiers: without `program_id`, the one programme of
the tenant whose live version has tiers (none: `tiers_not_defined`; several: `field_required`). The state is the
stored one with the reviews due by now applied (`engine.tier_status`), as the customer's next event would find it.
The history pages `tier_changes` by their instant, in one programme or all.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.pagination import PageRequest, check_page_request
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.money import format_amount
from rewards_lab.domain.tiers import TierModel
from rewards_lab.engine.rule_book import programme_row
from rewards_lab.engine.tier_status import TierReading, model_of, read_tier
from rewards_lab.service.customers import customer_row
from rewards_lab.store.api import Store, reader
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import ProgrammeRow, Repositories, VersionRow
from rewards_lab.store.tiers import TierChangeRow

HISTORY_SORTS = ("at",)


def live_tiered(uow: Repositories, scope: Scope, program_id: str | None) -> tuple[ProgrammeRow, VersionRow]:
    """The programme (named, else the tenant's only one with tiers) and its live version, which has tiers."""
    if program_id is not None:
        programme = programme_row(uow, scope, program_id, "program_id")
        version = _live(uow, scope, programme)
        if version is None or version.tiers is None:
            raise ServiceError("tiers_not_defined", field="program_id", program_id=program_id)
        return programme, version
    found = []
    for live in uow.programmes.live_versions(scope):
        version = uow.programmes.get_version(scope, live.id)
        if version is not None and version.tiers is not None:
            found.append(version)
    if not found:
        raise ServiceError("tiers_not_defined", "no programme's live version defines tiers", field="program_id")
    if len(found) > 1:
        raise ServiceError(
            "field_required", "program_id is required: several programmes define tiers", field="program_id"
        )
    return programme_row(uow, scope, found[0].program_id), found[0]


def _live(uow: Repositories, scope: Scope, programme: ProgrammeRow) -> VersionRow | None:
    if programme.current_version is None:
        return None
    return uow.programmes.get_version_by_number(scope, programme.id, programme.current_version)


def customer_tier(database: Store, scope: Scope, reference: str, *, program_id: str | None = None) -> r.TierStatus:
    """The customer's tier now, with its progress and what the next level and keeping this one need."""
    uow = reader(database)
    customer = customer_row(uow, scope, reference)
    programme, version = live_tiered(uow, scope, program_id)
    reading = read_tier(uow, scope, version, programme.asset_id, customer.id, utcnow())
    return tier_status(customer.id, reading)


def tier_status(customer_id: str, reading: TierReading) -> r.TierStatus:
    model, state, stored = reading.model, reading.state, reading.stored
    level = model.level(state.rank)
    progress = reading.progress
    following = model.levels[state.rank] if state.rank < len(model.levels) else None
    keep_window = reading.keep_window
    keep = None
    if keep_window is not None:
        judged = reading.metric(*keep_window)
        keep = r.TierKeep(
            retain=_amount(model, level.keep),
            needed=_amount(model, max(level.keep - judged, 0)),
            window=_window(keep_window, state.enrolled),
        )
    version_number = reading.version.number
    assert version_number is not None
    return r.TierStatus(
        customer_id=customer_id,
        program_id=reading.program_id,
        program_version=version_number,
        tier=level_ref(model, state.rank),
        since=_maybe_utc(state.since),
        enrolled_at=None if stored is None else _utc(stored.enrolled_at),
        metric=reading.tiers.metric_type,
        progress=_amount(model, progress),
        window=_window(reading.upgrade_window, state.enrolled),
        next=None
        if following is None
        else r.TierNext(
            code=following.code,
            name=following.name,
            entry=_amount(model, following.entry),
            needed=_amount(model, max(following.entry - progress, 0)),
        ),
        keep=keep,
        review_at=_maybe_utc(state.review_at),
        grace_until=_maybe_utc(state.grace_until),
        grace_target=None if state.grace_target is None else model.level(state.grace_target).code,
    )


def level_ref(model: TierModel, rank: int) -> r.TierLevelRef:
    level = model.level(rank)
    return r.TierLevelRef(code=level.code, name=level.name, rank=rank, multiplier=str(level.multiplier))


def _amount(model: TierModel, minor: int) -> str:
    return format_amount(minor, model.decimals)


def _window(window: tuple[date, date], enrolled: date) -> r.TierWindow:
    """A window as shown: a lifetime window starts at the enrolment."""
    first, last = window
    return r.TierWindow(start=enrolled if first == date.min else first, end=last)


def customer_tier_history(
    database: Store, scope: Scope, reference: str, page: PageRequest, *, program_id: str | None = None
) -> r.Page[r.TierChange]:
    """The customer's tier changes (in `program_id`'s programme, or every programme), paged by instant."""
    sort = check_page_request(page, HISTORY_SORTS)
    assert sort == "at"
    uow = reader(database)
    customer = customer_row(uow, scope, reference)
    if program_id is not None:
        programme_row(uow, scope, program_id, "program_id")
    rows = uow.tiers.history_page(scope, customer.id, program_id, page)
    versions: dict[str, VersionRow | None] = {}
    models: dict[str, TierModel | None] = {}
    for row in rows.rows:
        if row.version_id not in versions:
            version = uow.programmes.get_version(scope, row.version_id)
            versions[row.version_id] = version
            models[row.version_id] = _model(uow, scope, version)
    data = [_change(row, versions[row.version_id], models[row.version_id]) for row in rows.rows]
    return r.Page[r.TierChange](data=data, next_cursor=rows.next_cursor, has_more=rows.has_more)


def _model(uow: Repositories, scope: Scope, version: VersionRow | None) -> TierModel | None:
    if version is None or version.tiers is None:
        return None
    return model_of(uow, scope, version, version.tiers, programme_row(uow, scope, version.program_id).asset_id)


def _change(row: TierChangeRow, version: VersionRow | None, model: TierModel | None) -> r.TierChange:
    metric = None
    if row.metric_minor is not None and model is not None:
        metric = _amount(model, row.metric_minor)
    window = None
    if row.window_start is not None and row.window_end is not None:
        window = r.TierWindow(start=row.window_start, end=row.window_end)
    return r.TierChange(
        id=row.id,
        program_id=row.program_id,
        customer_id=row.customer_id,
        at=_utc(row.changed_at),
        kind=row.kind,
        from_tier=row.from_tier,
        to_tier=row.to_tier,
        metric=metric,
        window=window,
        event_id=row.event_id,
        program_version=None if version is None else version.number,
        review_at=_maybe_utc(row.review_at),
        grace_until=_maybe_utc(row.grace_until),
        grace_target=row.grace_target,
    )


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC)


def _maybe_utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else _utc(moment)
