"""The event worker's cache of compiled published versions: a bounded LRU, one per database (issue 27).

A published version's rules never change, so the worker compiles them once and keeps them; but a tenant that
publishes large versions again and again must not grow the process without bound. The cache holds at most
`MAX_ENTRIES` versions and `MAX_ESTIMATED_BYTES` of their estimated size (`estimated_bytes`, from the stored
rules' text); beyond either, a version another version of its programme superseded goes first (it is no longer
live: only a failed event's replay still names it), then the least recently used. An evicted version is
compiled again if an event needs it.

Below the versions, each compiled rule is remembered by everything it is compiled from (`compiled_rule`, at most
`MAX_MEMO_TEXT_BYTES` of rule text): a new draft is a copy of the published version, so publishing again, and
simulating the same version again, compile only the rules that changed.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, cast

from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.scope import Scope
from rewards_lab.domain.expiry import ExpiryPolicy
from rewards_lab.domain.limits import Cap, Limit
from rewards_lab.domain.rules import RuleSpec, compile_rule
from rewards_lab.domain.schedule import epoch_us, within_window
from rewards_lab.domain.settings import Tiers
from rewards_lab.domain.tiers import TierModel, tier_model
from rewards_lab.engine.postings import asset_row
from rewards_lab.store.interfaces import (
    PendingEvent,
    ProgrammeRow,
    Repositories,
    RuleRow,
)
from rewards_lab.store.settings_json import limits_text

MAX_ENTRIES = 256
MAX_ESTIMATED_BYTES = 256 * 1_048_576
# Compiled rules take about 3 bytes of Python objects per byte of stored rule text (measured on 200 rules of
# 53 kB: 10.6 MB of text, 32 MB compiled), plus a fixed cost per rule.
BYTES_PER_TEXT_BYTE = 4
BYTES_PER_RULE = 4_096
MAX_MEMO_TEXT_BYTES = 16 * 1_048_576

ValueT = TypeVar("ValueT")
Key = tuple[Scope, str]


def estimated_bytes(rows: Sequence[RuleRow]) -> int:
    """What a version's compiled rules are taken to weigh, from their stored text."""
    text = sum(len(row.conditions) + len(row.actions) + len(limits_text(row.limits)) for row in rows)
    return text * BYTES_PER_TEXT_BYTE + len(rows) * BYTES_PER_RULE


@dataclass(slots=True)
class _Entry(Generic[ValueT]):
    value: ValueT
    program_id: str
    number: int
    size: int
    superseded: bool = False


class CompiledVersions(Generic[ValueT]):
    """(scope, version id) -> compiled value, least recently used first; thread-safe."""

    def __init__(self, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        self.max_entries = MAX_ENTRIES if max_entries is None else max_entries
        self.max_bytes = MAX_ESTIMATED_BYTES if max_bytes is None else max_bytes
        self._entries: OrderedDict[Key, _Entry[ValueT]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, scope: Scope, version_id: str) -> ValueT | None:
        with self._lock:
            entry = self._entries.get((scope, version_id))
            if entry is None:
                return None
            self._entries.move_to_end((scope, version_id))
            return entry.value

    def put(self, scope: Scope, version_id: str, value: ValueT, program_id: str, number: int, size: int) -> None:
        """Keep a published version; older versions of its programme are marked superseded (evicted first)."""
        with self._lock:
            key = (scope, version_id)
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            entry = _Entry(value, program_id, number, size)
            for (other_scope, _), other in self._entries.items():
                if other_scope == scope and other.program_id == program_id:
                    if other.number < number:
                        other.superseded = True
                    elif other.number > number:
                        entry.superseded = True
            self._entries[key] = entry
            self._bytes += size
            self._evict()

    def _evict(self) -> None:
        while len(self._entries) > self.max_entries or (self._bytes > self.max_bytes and len(self._entries) > 1):
            victim = next((key for key, entry in self._entries.items() if entry.superseded), None)
            if victim is None:
                victim = next(iter(self._entries))
            self._bytes -= self._entries.pop(victim).size

    def stats(self) -> tuple[int, int]:
        """(entries, estimated bytes) held now."""
        with self._lock:
            return len(self._entries), self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_CACHES: weakref.WeakKeyDictionary[object, CompiledVersions[object]] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(database: object) -> CompiledVersions[object]:
    """The database's cache (one per open database, dropped with it)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(database)
        if cache is None:
            cache = _CACHES[database] = CompiledVersions()
        return cache


RuleKey = tuple[str, str, str, str, str, str, tuple[Limit, ...], int, bool, str, str, str | None, int | None]


class _RuleMemo:
    """Compiled rules by their key (the row's text and what compiling reads besides), least recently used first,
    bounded by the text they were compiled from."""

    def __init__(self) -> None:
        self._items: OrderedDict[RuleKey, tuple[RuleSpec, int]] = OrderedDict()
        self._text = 0
        self._lock = threading.Lock()

    def get_or_compile(self, key: RuleKey, compile_rule: Callable[[], RuleSpec]) -> RuleSpec:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found[0]
        spec = compile_rule()  # outside the memo's lock: compiling is the slow part
        size = sum(len(part) for part in key[3:6]) + len(limits_text(key[6]))  # the rule's stored text
        with self._lock:
            if key not in self._items:
                self._items[key] = (spec, size)
                self._text += size
                while self._text > MAX_MEMO_TEXT_BYTES and len(self._items) > 1:
                    self._text -= self._items.popitem(last=False)[1][1]
        return spec


_RULES = _RuleMemo()


def compiled_rule(
    row: RuleRow,
    default_asset_id: str,
    timezone: str,
    compile_rule: Callable[[], RuleSpec],
    position: int | None = None,
) -> RuleSpec:
    """The rule compiled (a frozen RuleSpec, shared): remembered, or compiled now by `compile_rule`. An asset's
    decimals never change, so the row, its programme's asset and its version's time zone decide the result."""
    key: RuleKey = (
        row.organization_id,
        row.environment,
        row.id,
        row.event_type,
        row.conditions,
        row.actions,
        row.limits,
        row.priority,
        row.stop_processing,
        default_asset_id,
        timezone,
        row.name,  # reasons quote the rule by name, else by its position in the version
        position,
    )
    return _RULES.get_or_compile(key, compile_rule)


def programme_row(uow: Repositories, scope: Scope, program_id: str, field: str | None = None) -> ProgrammeRow:
    row = uow.programmes.get(scope, program_id)
    if row is None:
        details: dict[str, Any] = {"program_id": program_id}
        if field:
            details["field"] = field
        raise ServiceError("programme_not_found", **details)
    return row


def version_id_of(uow: Repositories, scope: Scope, program_id: str, version: int | str | None) -> str:
    """Resolve `version` (a number, "draft", "live" or None for the draft) to a version id."""
    programme = programme_row(uow, scope, program_id)
    if version is None or version == "draft":
        return str(programme.draft_version_id)
    if version == "live":
        if programme.current_version is None:
            raise ServiceError(
                "programme_version_not_found", "the programme has no published version", program_id=program_id
            )
        version = int(programme.current_version)
    row = uow.programmes.get_version_by_number(scope, program_id, int(version))
    if row is None:
        raise ServiceError("programme_version_not_found", program_id=program_id, version=version)
    return str(row.id)


def compile_rows(
    uow: Repositories,
    scope: Scope,
    rule_rows: list[RuleRow],
    default_asset_id: str,
    timezone: str = "UTC",
    *,
    whole_version: bool = True,
) -> list[RuleSpec]:
    """Stored rules as RuleSpecs ready for the engine (decimals looked up once per asset); `timezone` is their
    version's, in which they read the time fields. With `whole_version` (the version's rules in order) each spec
    knows its position in the list, which reasons quote when the rule has no name."""
    decimals: dict[str, int] = {}

    def decimals_of(asset_id: str) -> int:
        if asset_id not in decimals:
            decimals[asset_id] = int(asset_row(uow, scope, asset_id).decimals)
        return decimals[asset_id]

    def compile_row(row: RuleRow, position: int | None) -> RuleSpec:
        return compile_rule(
            row.id,
            row.event_type,
            row.condition_items(),
            row.action_items(),
            default_asset_id,
            decimals_of,
            priority=row.priority,
            stop_processing=row.stop_processing,
            timezone=timezone,
            limits=row.limits,  # typed by the store
            name=row.name,
            position=position,
        )

    # Remembered per rule (`service.compiled_versions.compiled_rule`): a version copied from another compiles
    # only its changed rules.
    return [
        compiled_rule(row, default_asset_id, timezone, partial(compile_row, row, position), position)
        for position, row in ((index if whole_version else None, row) for index, row in enumerate(rule_rows))
    ]


@dataclass(frozen=True, slots=True)
class VersionMeta:
    """What an execution records of the programme version whose rule it ran, and the version's schedule: its
    IANA timezone and the window of event times it rewards (epoch microseconds, UTC; None: unbounded)."""

    version_id: str
    program_id: str
    number: int
    asset_id: str
    published: bool
    timezone: str = "UTC"
    starts_at_us: int | None = None
    ends_at_us: int | None = None
    caps: tuple[Cap, ...] = ()  # the programme's caps per customer, then its budget (domain.limits)
    clawback: str = "available"
    expiry: ExpiryPolicy | None = None  # when its rewards expire (None: as the asset's points do)
    max_event_age_days: int | None = None  # how long before its receipt an event may have occurred (None: any)
    tiers: Tiers | None = None  # its tiers (issue 33; None: none)
    tier_model: TierModel | None = None  # the same, as `domain.tiers` applies them (thresholds in minor units)


Compiled = tuple[VersionMeta, list[RuleSpec]]


def compiled_cache(database: object) -> CompiledVersions[Compiled]:
    """Compiled rules of published versions, per database and (scope, version): a published version's rules,
    programme and asset decimals never change, so each batch need not read and compile them again. Bounded
    (`service.compiled_versions`)."""
    return cast(CompiledVersions[Compiled], cache_of(database))


class LiveRuleBook:
    """Compiled rules per version, loaded once per batch and scope (once per process for published versions)."""

    def __init__(self, uow: Repositories, scope: Scope) -> None:
        self.uow, self.scope = uow, scope
        self.rules: dict[str, list[RuleSpec]] = {}
        self.meta: dict[str, VersionMeta] = {}

    def live_versions(self, event_types: list[str]) -> dict[str, list[str]]:
        """event type -> ids of the live versions that have a rule for it, or whose tier metric counts it."""
        rows = self.uow.programmes.live_versions(self.scope, event_types)
        self.load([row.id for row in rows])
        by_type: dict[str, list[str]] = defaultdict(list)
        for row in rows:
            tiers = self.meta[row.id].tiers
            counted = [] if tiers is None else list(tiers.event_types)
            for event_type in [spec.event_type for spec in self.rules[row.id]] + counted:
                if row.id not in by_type[event_type]:
                    by_type[event_type].append(row.id)
        return by_type

    def in_window(self, version_ids: list[str], event: PendingEvent) -> list[str]:
        """Those of these loaded versions whose window holds the event's time (starts_at <= t < ends_at)."""
        return [
            v
            for v in version_ids
            if within_window(event.event_time_us, self.meta[v].starts_at_us, self.meta[v].ends_at_us)
        ]

    def load(self, version_ids: list[str]) -> None:
        cache = None if self.uow.database is None else compiled_cache(self.uow.database)
        for version_id in version_ids:
            found = None if cache is None or version_id in self.rules else cache.get(self.scope, version_id)
            if found is not None:
                self.meta[version_id], self.rules[version_id] = found
        missing = [v for v in version_ids if v not in self.rules]
        if not missing:
            return
        rows = self.uow.programmes.rules_of(self.scope, missing)
        for version_id in missing:
            version = self.uow.programmes.get_version(self.scope, version_id)
            assert version is not None
            programme = self.uow.programmes.get(self.scope, version.program_id)
            assert programme is not None
            assert version.number is not None, "the worker evaluates published versions only"
            spending = version.spending  # decoded by the store as it read the row
            caps: tuple[Cap, ...] = ()
            decimals = int(asset_row(self.uow, self.scope, programme.asset_id).decimals)
            if spending.capped:
                caps = spending.caps(decimals)
            tiers = version.tiers
            meta = VersionMeta(
                version_id,
                version.program_id,
                version.number,
                programme.asset_id,
                version.status != "draft",
                version.timezone,
                None if version.starts_at is None else epoch_us(version.starts_at),
                None if version.ends_at is None else epoch_us(version.ends_at),
                caps,
                spending.clawback,
                spending.expiry,
                spending.max_event_age_days,
                tiers,
                None if tiers is None else tier_model(tiers, decimals, version.timezone),
            )
            own = [row for row in rows if row.version_id == version_id]
            self.meta[version_id] = meta
            self.rules[version_id] = compile_rows(self.uow, self.scope, own, meta.asset_id, meta.timezone)
            if meta.published and cache is not None:
                value = (meta, self.rules[version_id])
                cache.put(self.scope, version_id, value, meta.program_id, meta.number, estimated_bytes(own))
