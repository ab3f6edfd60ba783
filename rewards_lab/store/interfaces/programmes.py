"""The programmes repository as the services see it: any store (DuckDB today) implements this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.store.queries import RowPage


@dataclass(frozen=True, slots=True)
class Schedule:
    """A version's timezone (IANA) and window of event times (starts_at <= t < ends_at; naive UTC, None: open)."""

    timezone: str = "UTC"
    starts_at: datetime | None = None
    ends_at: datetime | None = None


OPEN_SCHEDULE = Schedule()  # UTC, no bounds: what every version had before schedules existed


@dataclass(frozen=True, slots=True)
class ProgrammeRow:
    """A programme, with its DRAFT version's schedule (`timezone`, `starts_at`, `ends_at`)."""

    id: str
    organization_id: str
    environment: str
    name: str
    asset_id: str
    description: str | None
    current_version: int | None  # the number of the live version; None before the first publication
    draft_version_id: str
    created_at: datetime
    status: str  # active | inactive: an inactive programme's versions are never live
    timezone: str
    starts_at: datetime | None
    ends_at: datetime | None
    spending: str | None  # the draft's programme-wide caps, budget and clawback (JSON; None: none)
    guards: str | None = None  # the draft's forecast guards (JSON list; None: none)

    @property
    def draft_schedule(self) -> Schedule:
        return Schedule(self.timezone, self.starts_at, self.ends_at)


@dataclass(frozen=True, slots=True)
class VersionRow:
    id: str
    organization_id: str
    environment: str
    program_id: str
    number: int | None  # None while a draft
    status: str
    based_on: int | None
    published_at: datetime | None
    created_at: datetime
    timezone: str
    starts_at: datetime | None
    ends_at: datetime | None
    spending: str | None  # the version's programme-wide caps, budget and clawback (JSON; None: none)
    guards: str | None = None  # the version's forecast guards (JSON list; None: none)
    guard_override: str | None = None  # published despite a failed guard (JSON: reason, given_by, given_at)

    @property
    def schedule(self) -> Schedule:
        return Schedule(self.timezone, self.starts_at, self.ends_at)


@dataclass(frozen=True, slots=True)
class LiveVersion:
    """A programme's live version (of an active programme) and the programme's asset."""

    id: str
    program_id: str
    number: int
    asset_id: str


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One version's copy of a rule (`conditions` and `actions` as JSON text), with its version's number and
    status."""

    id: str
    version_id: str
    organization_id: str
    environment: str
    program_id: str
    event_type: str
    conditions: str
    actions: str
    position: int
    created_at: datetime
    priority: int
    stop_processing: bool
    limits: str  # the rule's caps (JSON list)
    name: str | None  # a short human name (NULL: none)
    version_number: int | None
    version_status: str


class ProgrammeStore(Protocol):
    """What the services need of the programme rows (DuckDB: store.programmes.ProgrammeRepository)."""

    def add(
        self,
        scope: Scope,
        program_id: str,
        draft_version_id: str,
        fields: dict[str, Any],
        schedule: Schedule = OPEN_SCHEDULE,
        spending: str | None = None,
        guards: str | None = None,
    ) -> ProgrammeRow: ...

    def get(self, scope: Scope, program_id: str) -> ProgrammeRow | None: ...

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: dict[str, Any]) -> RowPage[ProgrammeRow]: ...

    def set_current(self, scope: Scope, program_id: str, number: int, draft_version_id: str) -> None: ...

    def update(self, scope: Scope, program_id: str, name: str, description: str | None) -> None: ...

    def set_status(self, scope: Scope, program_id: str, status: str) -> None: ...

    def add_version(
        self,
        scope: Scope,
        version_id: str,
        program_id: str,
        based_on: int | None,
        schedule: Schedule = OPEN_SCHEDULE,
        spending: str | None = None,
        guards: str | None = None,
    ) -> None: ...

    def set_schedule(self, scope: Scope, version_id: str, schedule: Schedule) -> None: ...

    def set_spending(self, scope: Scope, version_id: str, spending: str | None) -> None: ...

    def set_guards(self, scope: Scope, version_id: str, guards: str | None) -> None: ...

    def record_guard_override(self, scope: Scope, version_id: str, override: str) -> None: ...

    def get_version(self, scope: Scope, version_id: str) -> VersionRow | None: ...

    def get_version_by_number(self, scope: Scope, program_id: str, number: int) -> VersionRow | None: ...

    def versions(self, scope: Scope, program_id: str) -> list[VersionRow]: ...

    def publish_version(self, scope: Scope, version_id: str, number: int) -> None: ...

    def live_versions(self, scope: Scope, event_types: list[str] | None = None) -> list[LiveVersion]: ...

    def add_rule(
        self, scope: Scope, rule_id: str, version_id: str, program_id: str, body: dict[str, Any], position: int
    ) -> None: ...

    def copy_rules(self, scope: Scope, from_version_id: str, to_version_id: str) -> None: ...

    def restore_draft(self, scope: Scope, draft_version_id: str, source_version_id: str) -> None: ...

    def update_rule(self, scope: Scope, rule_id: str, version_id: str, body: dict[str, Any]) -> None: ...

    def delete_rule(self, scope: Scope, rule_id: str, version_id: str) -> None: ...

    def rules_of(self, scope: Scope, version_ids: list[str]) -> list[RuleRow]: ...

    def rule_digests(self, scope: Scope, version_id: str) -> list[tuple[str, str]]: ...

    def rule_revisions(self, scope: Scope, rule_id: str) -> list[RuleRow]: ...

    def has_reversals(self, scope: Scope) -> bool: ...

    def next_position(self, scope: Scope, version_id: str) -> int: ...
