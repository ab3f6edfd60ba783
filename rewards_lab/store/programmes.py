"""Programmes, their versions (one draft, numbered published ones) and the rules each version holds.

A rule keeps its id across versions: the row key is (rule id, version id), so a published version's rules are
never touched again and provenance (event, version, rule) names exactly the rule that was applied.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import duckdb

from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.settings import NO_SPENDING, Guard, GuardOverride, Spending, Tiers
from rewards_lab.store.database import utcnow
from rewards_lab.store.interfaces import (
    OPEN_SCHEDULE,
    LiveVersion,
    NewProgramme,
    ProgrammeFilter,
    ProgrammeRow,
    RuleBody,
    RuleRow,
    Schedule,
    VersionRow,
)
from rewards_lab.store.queries import RowPage, columns, decoding, fetch_all_as, fetch_one_as, paginate, scalar
from rewards_lab.store.settings_json import (
    guards_from,
    guards_text,
    limits_from,
    limits_text,
    override_from,
    override_text,
    spending_from,
    spending_text,
    tiers_from,
    tiers_text,
)

TENANT = "organization_id = ? AND environment = ?"
_DRAFT_SCHEDULE = ("timezone", "starts_at", "ends_at", "spending", "guards", "guard_window_days", "tiers")
# A programme (`p`) with its draft version's (`d`) schedule.
_PROGRAMME = (
    "SELECT "
    + ", ".join(("d." if f.name in _DRAFT_SCHEDULE else "p.") + f.name for f in fields(ProgrammeRow))
    + " FROM programmes p JOIN programme_versions d ON d.id = p.draft_version_id "
    "WHERE p.organization_id = ? AND p.environment = ?"
)
_VERSION = columns(VersionRow)
# The rows with their JSON settings decoded, once, as they are read.
_PROGRAMME_ROW = decoding(ProgrammeRow, {"spending": spending_from, "guards": guards_from, "tiers": tiers_from})
_VERSION_ROW = decoding(
    VersionRow,
    {"spending": spending_from, "guards": guards_from, "guard_override": override_from, "tiers": tiers_from},
)
_RULE_ROW = decoding(RuleRow, {"limits": limits_from})
# A rule with its version's number and status (`r` the rule, `v` its version).
_RULE = ", ".join(
    [*("r." + f.name for f in fields(RuleRow))][:-2] + ["v.number AS version_number", "v.status AS version_status"]
)


class ProgrammeRepository:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # programmes -----------------------------------------------------------------------------------------
    def add(
        self,
        scope: Scope,
        program_id: str,
        draft_version_id: str,
        programme: NewProgramme,
        schedule: Schedule = OPEN_SCHEDULE,
        spending: Spending = NO_SPENDING,
        guards: tuple[Guard, ...] = (),
        guard_window_days: int | None = None,
        tiers: Tiers | None = None,
    ) -> ProgrammeRow:
        now = utcnow()
        self.con.execute(
            "INSERT INTO programmes (id, organization_id, environment, name, asset_id, description, "
            "current_version, draft_version_id, created_at, status) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, 'active')",
            [
                program_id,
                *scope.params,
                programme.name,
                programme.asset_id,
                programme.description,
                draft_version_id,
                now,
            ],
        )
        self.add_version(
            scope, draft_version_id, program_id, None, schedule, spending, guards, guard_window_days, tiers
        )
        row = self.get(scope, program_id)
        assert row is not None
        return row

    def get(self, scope: Scope, program_id: str) -> ProgrammeRow | None:
        sql = f"{_PROGRAMME} AND p.id = ?"
        return fetch_one_as(self.con, _PROGRAMME_ROW, sql, [*scope.params, program_id])

    def page(self, scope: Scope, page: PageRequest, sort: str, filters: ProgrammeFilter) -> RowPage[ProgrammeRow]:
        sql = _PROGRAMME
        params: list[Any] = list(scope.params)
        if filters.asset_id:
            sql += " AND p.asset_id = ?"
            params.append(filters.asset_id)
        listed = paginate(self.con, list_name="programmes", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(_PROGRAMME_ROW)

    def set_current(self, scope: Scope, program_id: str, number: int, draft_version_id: str) -> None:
        self.con.execute(
            f"UPDATE programmes SET current_version = ?, draft_version_id = ? WHERE {TENANT} AND id = ?",
            [number, draft_version_id, *scope.params, program_id],
        )

    def update(self, scope: Scope, program_id: str, name: str, description: str | None) -> None:
        self.con.execute(
            f"UPDATE programmes SET name = ?, description = ? WHERE {TENANT} AND id = ?",
            [name, description, *scope.params, program_id],
        )

    def set_status(self, scope: Scope, program_id: str, status: str) -> None:
        self.con.execute(
            f"UPDATE programmes SET status = ? WHERE {TENANT} AND id = ?", [status, *scope.params, program_id]
        )

    # versions -------------------------------------------------------------------------------------------
    def add_version(
        self,
        scope: Scope,
        version_id: str,
        program_id: str,
        based_on: int | None,
        schedule: Schedule = OPEN_SCHEDULE,
        spending: Spending = NO_SPENDING,
        guards: tuple[Guard, ...] = (),
        guard_window_days: int | None = None,
        tiers: Tiers | None = None,
    ) -> None:
        self.con.execute(
            "INSERT INTO programme_versions (id, organization_id, environment, program_id, number, status, "
            "based_on, published_at, created_at, timezone, starts_at, ends_at, spending, guards, guard_window_days, "
            "tiers) VALUES (?, ?, ?, ?, NULL, 'draft', ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                version_id,
                *scope.params,
                program_id,
                based_on,
                utcnow(),
                schedule.timezone,
                schedule.starts_at,
                schedule.ends_at,
                spending_text(spending),
                guards_text(guards),
                guard_window_days,
                tiers_text(tiers),
            ],
        )

    def set_spending(self, scope: Scope, version_id: str, spending: Spending) -> None:
        """Only a draft's caps, budget and clawback change: a published version's are frozen with it."""
        self.con.execute(
            f"UPDATE programme_versions SET spending = ? WHERE {TENANT} AND id = ? AND status = 'draft'",
            [spending_text(spending), *scope.params, version_id],
        )

    def set_guards(self, scope: Scope, version_id: str, guards: tuple[Guard, ...]) -> None:
        """Only a draft's guards change: a published version's are frozen with it."""
        self.con.execute(
            f"UPDATE programme_versions SET guards = ? WHERE {TENANT} AND id = ? AND status = 'draft'",
            [guards_text(guards), *scope.params, version_id],
        )

    def set_guard_window(self, scope: Scope, version_id: str, days: int | None) -> None:
        """The days of history a draft's guards are checked on (None: the default); frozen with each version."""
        self.con.execute(
            f"UPDATE programme_versions SET guard_window_days = ? WHERE {TENANT} AND id = ? AND status = 'draft'",
            [days, *scope.params, version_id],
        )

    def set_tiers(self, scope: Scope, version_id: str, tiers: Tiers | None) -> None:
        """Only a draft's tiers change: a published version's are frozen with it."""
        self.con.execute(
            f"UPDATE programme_versions SET tiers = ? WHERE {TENANT} AND id = ? AND status = 'draft'",
            [tiers_text(tiers), *scope.params, version_id],
        )

    def record_guard_override(self, scope: Scope, version_id: str, override: GuardOverride) -> None:
        """Set once, as the version is published (the publication's own transaction)."""
        self.con.execute(
            f"UPDATE programme_versions SET guard_override = ? WHERE {TENANT} AND id = ?",
            [override_text(override), *scope.params, version_id],
        )

    def set_schedule(self, scope: Scope, version_id: str, schedule: Schedule) -> None:
        """Only a draft's schedule changes: a published version's is frozen with it."""
        self.con.execute(
            "UPDATE programme_versions SET timezone = ?, starts_at = ?, ends_at = ? "
            f"WHERE {TENANT} AND id = ? AND status = 'draft'",
            [schedule.timezone, schedule.starts_at, schedule.ends_at, *scope.params, version_id],
        )

    def get_version(self, scope: Scope, version_id: str) -> VersionRow | None:
        return fetch_one_as(
            self.con,
            _VERSION_ROW,
            f"SELECT {_VERSION} FROM programme_versions WHERE {TENANT} AND id = ?",
            [*scope.params, version_id],
        )

    def get_version_by_number(self, scope: Scope, program_id: str, number: int) -> VersionRow | None:
        return fetch_one_as(
            self.con,
            _VERSION_ROW,
            f"SELECT {_VERSION} FROM programme_versions WHERE {TENANT} AND program_id = ? AND number = ?",
            [*scope.params, program_id, number],
        )

    def versions(self, scope: Scope, program_id: str) -> list[VersionRow]:
        return fetch_all_as(
            self.con,
            _VERSION_ROW,
            f"SELECT {_VERSION} FROM programme_versions WHERE {TENANT} AND program_id = ? ORDER BY id",
            [*scope.params, program_id],
        )

    def versions_page(self, scope: Scope, program_id: str, page: PageRequest, sort: str) -> RowPage[VersionRow]:
        """A page of the programme's versions; by `number`, the draft (no number yet) comes last."""
        sql = f"SELECT {_VERSION} FROM programme_versions WHERE {TENANT} AND program_id = ?"
        params: list[Any] = [*scope.params, program_id]
        listed = paginate(self.con, list_name="versions", select_sql=sql, params=params, page=page, sort=sort)
        return listed.typed(_VERSION_ROW)

    def publish_version(self, scope: Scope, version_id: str, number: int) -> None:
        self.con.execute(
            f"UPDATE programme_versions SET status = 'published', number = ?, published_at = ? "
            f"WHERE {TENANT} AND id = ? AND status = 'draft'",
            [number, utcnow(), *scope.params, version_id],
        )

    def live_versions(self, scope: Scope, event_types: list[str] | None = None) -> list[LiveVersion]:
        """The latest published version of every ACTIVE programme (optionally only those with a rule for a
        type, or with tiers, whose metric may count a type no rule names): an inactive programme rewards
        nothing."""
        sql = (
            "SELECT v.id, v.program_id, v.number, p.asset_id FROM programmes p JOIN programme_versions v "
            "ON v.program_id = p.id AND v.number = p.current_version "
            "WHERE p.organization_id = ? AND p.environment = ? AND p.status = 'active' "
        )
        params: list[Any] = list(scope.params)
        if event_types is not None:
            sql += (
                "AND (v.tiers IS NOT NULL OR EXISTS "
                "(SELECT 1 FROM rules r WHERE r.version_id = v.id AND r.event_type IN (SELECT unnest(?))))"
            )
            params.append(event_types)
        return fetch_all_as(self.con, LiveVersion, sql + " ORDER BY p.id", params)

    # rules ----------------------------------------------------------------------------------------------
    def add_rule(
        self,
        scope: Scope,
        rule_id: str,
        version_id: str,
        program_id: str,
        body: RuleBody,
        position: int,
    ) -> None:
        self.con.execute(
            "INSERT INTO rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                rule_id,
                version_id,
                *scope.params,
                program_id,
                body.event_type,
                json.dumps(body.conditions),
                json.dumps(body.actions),
                position,
                utcnow(),
                body.priority,
                body.stop_processing,
                limits_text(body.limits),
                body.name,
            ],
        )

    def copy_rules(self, scope: Scope, from_version_id: str, to_version_id: str) -> None:
        self.con.execute(
            "INSERT INTO rules SELECT id, ?, organization_id, environment, program_id, event_type, conditions, "
            "actions, position, created_at, priority, stop_processing, limits, name "
            f"FROM rules WHERE {TENANT} AND version_id = ?",
            [to_version_id, *scope.params, from_version_id],
        )

    def restore_draft(self, scope: Scope, draft_version_id: str, source_version_id: str) -> None:
        """Make the draft a copy of another version: its rules (same ids, bodies and positions), its schedule and
        its settings (spending, guards, tiers); the draft is then based on that version's number. The source is
        only read."""
        self.con.execute(
            "UPDATE programme_versions AS d SET timezone = s.timezone, starts_at = s.starts_at, "
            "ends_at = s.ends_at, spending = s.spending, guards = s.guards, "
            "guard_window_days = s.guard_window_days, tiers = s.tiers, based_on = s.number "
            "FROM programme_versions AS s "
            "WHERE d.organization_id = ? AND d.environment = ? AND d.id = ? AND d.status = 'draft' "
            "AND s.organization_id = d.organization_id AND s.environment = d.environment AND s.id = ?",
            [*scope.params, draft_version_id, source_version_id],
        )
        self.con.execute(f"DELETE FROM rules WHERE {TENANT} AND version_id = ?", [*scope.params, draft_version_id])
        self.copy_rules(scope, source_version_id, draft_version_id)

    def update_rule(self, scope: Scope, rule_id: str, version_id: str, body: RuleBody) -> None:
        self.con.execute(
            "UPDATE rules SET event_type = ?, conditions = ?, actions = ?, priority = ?, stop_processing = ?, "
            f"limits = ?, name = ? WHERE {TENANT} AND id = ? AND version_id = ?",
            [
                body.event_type,
                json.dumps(body.conditions),
                json.dumps(body.actions),
                body.priority,
                body.stop_processing,
                limits_text(body.limits),
                body.name,
                *scope.params,
                rule_id,
                version_id,
            ],
        )

    def delete_rule(self, scope: Scope, rule_id: str, version_id: str) -> None:
        self.con.execute(
            f"DELETE FROM rules WHERE {TENANT} AND id = ? AND version_id = ?",
            [*scope.params, rule_id, version_id],
        )

    def rules_of(self, scope: Scope, version_ids: list[str]) -> list[RuleRow]:
        return fetch_all_as(
            self.con,
            _RULE_ROW,
            f"SELECT {_RULE} FROM rules r JOIN programme_versions v ON v.id = r.version_id "
            "WHERE r.organization_id = ? AND r.environment = ? AND r.version_id IN (SELECT unnest(?)) "
            "ORDER BY r.version_id, r.position, r.id",
            [*scope.params, version_ids],
        )

    def rule_digests(self, scope: Scope, version_id: str) -> list[tuple[str, str]]:
        """(rule id, digest of everything its row holds) of a version's rules, in `rules_of`'s order: a rule whose
        digest is unchanged is the same rule (SHA-256, hashed by the database: a writer compares without reading
        bodies)."""
        rows = self.con.execute(
            "SELECT id, sha256(concat_ws(chr(31), event_type, conditions, actions, coalesce(limits, ''), priority, "
            "stop_processing, position, created_at, program_id, coalesce(name, ''), name IS NULL)) "
            f"FROM rules WHERE {TENANT} AND version_id = ? "
            "ORDER BY position, id",
            [*scope.params, version_id],
        ).fetchall()
        return [(str(rule_id), str(digest)) for rule_id, digest in rows]

    def rule_revisions(self, scope: Scope, rule_id: str) -> list[RuleRow]:
        """Every version's copy of one rule, newest version first (the draft, if it has it, comes first)."""
        return fetch_all_as(
            self.con,
            _RULE_ROW,
            f"SELECT {_RULE} FROM rules r "
            "JOIN programme_versions v ON v.id = r.version_id "
            "WHERE r.organization_id = ? AND r.environment = ? AND r.id = ? ORDER BY v.id DESC",
            [*scope.params, rule_id],
        )

    def has_reversals(self, scope: Scope) -> bool:
        """Whether any published version of the tenant has a reverse action (only then can a refund wait)."""
        value = scalar(
            self.con,
            "SELECT EXISTS (SELECT 1 FROM rules r JOIN programme_versions v ON v.id = r.version_id "
            "WHERE r.organization_id = ? AND r.environment = ? AND v.status = 'published' "
            'AND contains(r.actions, \'"type": "reverse"\'))',
            list(scope.params),
        )
        return bool(value)

    def next_position(self, scope: Scope, version_id: str) -> int:
        value = scalar(
            self.con,
            f"SELECT coalesce(max(position), -1) + 1 FROM rules WHERE {TENANT} AND version_id = ?",
            [*scope.params, version_id],
        )
        return int(value)
