"""Programme definitions as JSON files: load with errors naming file, rule and field; save; diff.

A file holds one programme, its one asset and its rules, with no identifiers: the same file can be pushed to any
organization and environment. Actions therefore never carry an `asset_id`; they issue the file's asset.

`programme.timezone` (IANA, default UTC) is the zone time fields (`occurred_at.weekday` ...) are read in, and
`programme.starts_at` / `programme.ends_at` (RFC 3339 with an offset) the window a replay rewards events in:
`starts_at <= occurred_at < ends_at`. `programme.limits`, `programme.budget` and `programme.clawback`, a rule's
`limits` and `reverse` actions are caps, budget and reversals (docs/rules.md); `programme.guards` the forecast
guards of the gate (README "Forecast gate") and `programme.guard_window_days` the days of stored events the server
checks them on (absent: 90; written only when not the default); `programme.expiry` and `asset.expiry` when rewards
expire (rewards_lab.contract.expiry_requests; the programme's overrides the asset's) and `asset.value_per_unit` what one
unit is worth; `programme.max_event_age_days` how old a live event may be (rewards_lab.contract.event_age; absent:
30 days, null: no bound; written only when not the default). All of these are optional and, when absent, not
written, so a file without them reads, saves and fingerprints as it did before they existed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import simplejson
from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import DEFAULT_MAX_EVENT_AGE_DAYS, MaxEventAgeDays
from rewards_lab.contract.expiry_requests import Expiry
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, Guards, GuardWindowDays
from rewards_lab.contract.limit_requests import DEFAULT_CLAWBACK, Budget, Clawback, Limits, ReverseAction
from rewards_lab.contract.programme_limits import check_version_rules, rule_definition_bytes, tiers_definition_bytes
from rewards_lab.contract.requests import (
    MAX_RULE_ACTIONS,
    Amount,
    AssetCreate,
    Beneficiary,
    EventType,
    Name,
    RequestModel,
    RuleAction,
)
from rewards_lab.contract.rule_requests import (
    Conditions,
    Multiply,
    Priority,
    RuleFields,
    RuleName,
    action_shape,
    condition_payload,
)
from rewards_lab.contract.tier_requests import Tiers, check_rule_tiers, check_threshold_places
from rewards_lab.contract.time_zones import check_zone_name
from rewards_lab.contract.validation import custom_error, validate

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _instant(value: object) -> object:
    """An RFC 3339 date-time with its offset (a window needs an instant, not a local time), or a datetime."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise custom_error(ServiceError("field_invalid", "must carry an offset, such as 2026-03-01T00:00:00+01:00"))
        return value
    if not (isinstance(value, str) and _RFC3339.fullmatch(value)):
        message = "must be an RFC 3339 date-time with an offset, such as 2026-03-01T00:00:00+01:00"
        raise custom_error(ServiceError("field_invalid", message))
    return value


def _in_utc_range(value: datetime) -> datetime:
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise custom_error(ServiceError("field_invalid", "must be between years 1 and 9999 in UTC")) from None
    return value


TimeZoneName = Annotated[str, Field(max_length=100), AfterValidator(check_zone_name)]
Instant = Annotated[datetime, BeforeValidator(_instant), AfterValidator(_in_utc_range)]


class ProgrammeInfo(RequestModel):
    name: Name
    description: Annotated[str, Field(max_length=2000)] | None = None
    # The zone time fields are read in (rules' occurred_at.weekday / .hour / .date); UTC when absent.
    timezone: TimeZoneName | None = Field(default=None, exclude_if=lambda value: value is None)
    # The window a replay rewards events in: starts_at <= occurred_at < ends_at (either side open when absent).
    starts_at: Instant | None = Field(default=None, exclude_if=lambda value: value is None)
    ends_at: Instant | None = Field(default=None, exclude_if=lambda value: value is None)
    # Caps per customer across the rules, the budget across customers, the clawback policy of reversals.
    limits: Limits = Field(default=[], exclude_if=lambda value: not value)
    budget: Budget | None = Field(default=None, exclude_if=lambda value: value is None)
    clawback: Clawback = Field(default=DEFAULT_CLAWBACK, exclude_if=lambda value: value == DEFAULT_CLAWBACK)
    # Forecast guards the gate checks before publishing (contract.guard_requests; README "Forecast gate").
    guards: Guards = Field(default=[], exclude_if=lambda value: not value)
    # The days of stored events the server replays to check them (1-365; absent: the default, 90).
    guard_window_days: GuardWindowDays = Field(
        default=DEFAULT_GUARD_WINDOW_DAYS, exclude_if=lambda value: value == DEFAULT_GUARD_WINDOW_DAYS
    )
    # When the programme's rewards expire, in its timezone (overrides the asset's `expiry`; absent: the asset's).
    expiry: Expiry | None = Field(default=None, exclude_if=lambda value: value is None)
    # How many days before its receipt a live event may have occurred and still be rewarded (contract.event_age);
    # absent: the default of a new programme, null: no bound (backfills). Replay receives events when they occur.
    max_event_age_days: MaxEventAgeDays | None = Field(
        default=DEFAULT_MAX_EVENT_AGE_DAYS, exclude_if=lambda value: value == DEFAULT_MAX_EVENT_AGE_DAYS
    )
    # Status levels customers earn, keep and lose (contract.tier_requests); absent: no tiers (not written).
    tiers: Tiers | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _window(self) -> ProgrammeInfo:
        if self.starts_at is not None and self.ends_at is not None and self.ends_at <= self.starts_at:
            raise custom_error(ServiceError("field_invalid", "ends_at must be after starts_at"), "programme.ends_at")
        return self

    @property
    def zone(self) -> str:
        """The programme's time zone name (UTC when the file names none)."""
        return self.timezone or "UTC"


class FileAction(RequestModel):
    """An issue action of the file's asset."""

    type: Literal["issue"]
    amount: Amount
    beneficiary: Beneficiary | None = Field(default=None, exclude_if=lambda value: value is None)
    # "tier": multiplied by the recipient's tier multiplier (needs programme.tiers); absent: not (not written).
    multiply: Multiply | None = Field(default=None, exclude_if=lambda value: value is None)


# An issue action (of the file's asset) or a reverse action (takes back what an original event issued).
FileRuleAction = Annotated[
    Annotated[FileAction, Tag("issue_action")] | Annotated[ReverseAction, Tag("reverse_action")],
    Discriminator(action_shape),
]


class FileRule(RuleFields):
    # A short human name (issue 28), shown wherever the rule is listed; not part of what the rule does, so not
    # of its fingerprint: renaming a rule keeps it the same rule.
    name: RuleName | None = Field(default=None, exclude_if=lambda value: value is None)
    event_type: EventType
    conditions: Conditions = []
    actions: Annotated[list[FileRuleAction], Field(min_length=1, max_length=MAX_RULE_ACTIONS)]
    priority: Priority = Field(default=0, exclude_if=lambda value: value == 0)
    stop_processing: bool = Field(default=False, exclude_if=lambda value: value is False)
    limits: Limits = Field(default=[], exclude_if=lambda value: not value)

    def payload(self) -> dict[str, Any]:
        """The rule as JSON-ready data (exact numbers), without programme or asset ids."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data

    def definition_bytes(self) -> int:
        """What the rule counts against a version's size limit, measured as the API measures it."""
        conditions = [condition_payload(item) for item in self.conditions]
        actions = [action.model_dump(mode="json") for action in self.actions]
        limits = [limit.model_dump(mode="json") for limit in self.limits]
        return rule_definition_bytes(self.event_type, conditions, actions, limits)

    def fingerprint(self) -> str:
        """Equal for rules that behave the same: numbers compared by value, condition and action order kept; the
        name is left out (it changes how the rule is listed, not what it does)."""
        return jsonutil.canonical_hash(self.model_dump(mode="json", exclude={"name"}))


class ProgrammeDefinition(RequestModel):
    programme: ProgrammeInfo
    asset: AssetCreate
    # Bounded as a published version is (contract.programme_limits), with the API's code and details.
    rules: Annotated[list[FileRule], Field(min_length=1)]

    @model_validator(mode="after")
    def _within_limits(self) -> ProgrammeDefinition:
        tiers = self.programme.tiers
        tier_bytes = 0 if tiers is None else tiers_definition_bytes(tiers.model_dump(mode="json"))
        try:
            check_version_rules(len(self.rules), sum(rule.definition_bytes() for rule in self.rules) + tier_bytes)
        except ServiceError as error:
            raise custom_error(error, "rules") from None
        return self

    @model_validator(mode="after")
    def _tiers_used_as_defined(self) -> ProgrammeDefinition:
        """Thresholds of a `points` metric fit the asset; rules use tiers only when the programme has them."""
        tiers = self.programme.tiers
        try:
            if tiers is not None:
                check_threshold_places(tiers, self.asset.decimals, "programme.tiers")
            for index, rule in enumerate(self.rules):
                defined, where = tiers is not None, f"rules[{index}]"
                check_rule_tiers(rule.conditions, rule.actions, rule.stop_processing, has_tiers=defined, base=where)
        except ServiceError as error:
            raise custom_error(error, str(error.details["field"])) from None
        return self

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        if self.programme.max_event_age_days is None:  # null says "no bound": absent would mean the default
            data["programme"]["max_event_age_days"] = None
        return data


def file_action(action: RuleAction) -> FileRuleAction:
    """An action as a programme file writes it (no asset id: a file has one asset)."""
    if isinstance(action, ReverseAction):
        return action
    return FileAction(type="issue", amount=action.amount, beneficiary=action.beneficiary, multiply=action.multiply)


def file_rule(rule: r.Rule) -> FileRule:
    """A rule as a programme file writes it (no ids), with its name."""
    return FileRule(
        name=rule.name,
        event_type=rule.event_type,
        conditions=rule.conditions,
        actions=[file_action(action) for action in rule.actions],
        priority=rule.priority,
        limits=rule.limits,
        stop_processing=rule.stop_processing,
    )


def _aware(moment: datetime | None) -> datetime | None:
    """A stored bound (UTC) as an aware date-time, as a programme file writes it."""
    if moment is None:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def definition_of_version(
    programme: r.Programme, version: r.ProgrammeVersion, asset: r.Asset, *, value_per_unit: str | None = None
) -> ProgrammeDefinition:
    """A programme version (draft or published) and its asset, as a programme file would hold them: the one
    conversion of API resources into what the replay and the forecast gate read, used alike by the server's gate
    (service.programme_forecast), push's gate (lab.push_gate) and the workbench's export, so that the lab and
    the server replay the same definition. `value_per_unit`: the unit's value when the asset has none (push
    takes the file's). Refused with `programme_draft_empty` when the version has no rules."""
    if not version.rules:
        raise ServiceError("programme_draft_empty", "the version has no rules", program_id=programme.id)
    info = ProgrammeInfo(
        name=programme.name,
        description=programme.description,
        timezone=None if version.timezone == "UTC" else version.timezone,
        starts_at=_aware(version.starts_at),
        ends_at=_aware(version.ends_at),
        limits=version.limits,
        budget=version.budget,
        clawback=version.clawback,
        guards=version.guards,
        guard_window_days=version.guard_window_days,
        expiry=version.expiry,
        max_event_age_days=version.max_event_age_days,
        tiers=version.tiers,
    )
    definition_asset = AssetCreate(
        name=asset.name,
        symbol=asset.symbol,
        type=asset.type,
        decimals=asset.decimals,
        supply_ceiling=asset.supply_ceiling,
        expiry=asset.expiry,
        value_per_unit=asset.value_per_unit or value_per_unit,
    )
    rules = [file_rule(rule) for rule in version.rules]
    return ProgrammeDefinition(programme=info, asset=definition_asset, rules=rules)


class ProgrammeFileError(ServiceError):
    """A programme file that cannot be used; `details` names the file and the field (e.g. `rules[1].actions[0]`)."""


def parse_programme(data: Any, source: str = "<memory>") -> ProgrammeDefinition:
    """Validate parsed JSON (numbers as Decimal) into a definition; errors carry `details.file`."""
    try:
        return validate(ProgrammeDefinition, data)
    except ServiceError as error:
        details = {"file": source, **error.details}
        raise ProgrammeFileError(error.code, f"{source}: {error.message}", **details) from None


def loads_programme(text: str, source: str = "<memory>") -> ProgrammeDefinition:
    try:
        data = jsonutil.loads(text)
    except simplejson.JSONDecodeError as error:
        raise ProgrammeFileError(
            "request_malformed",
            f"{source}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}",
            file=source,
            line=error.lineno,
            column=error.colno,
        ) from None
    return parse_programme(data, source)


def load_programme(path: str | Path) -> ProgrammeDefinition:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ProgrammeFileError("field_invalid", f"{path}: cannot be read: {error}", file=str(path)) from None
    return loads_programme(text, str(path))


def dumps_programme(definition: ProgrammeDefinition) -> str:
    """Stable, readable text: two-space indent, keys in the model's order, exact numbers, final newline."""
    return str(simplejson.dumps(definition.payload(), use_decimal=True, indent=2)) + "\n"


def save_programme(definition: ProgrammeDefinition, path: str | Path) -> Path:
    """Write atomically (temporary file, then rename), so a crash never leaves half a programme."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(dumps_programme(definition), encoding="utf-8")
    temporary.replace(path)
    return path


@dataclass(frozen=True)
class RuleChange:
    kind: Literal["added", "removed", "renamed"]
    index: int  # position in the new file for "added" and "renamed", in the old file for "removed"
    rule: FileRule  # for "renamed", the rule as the new file has it
    old_name: str | None = None  # "renamed": the name it had


@dataclass(frozen=True)
class ProgrammeDiff:
    programme_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    asset_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    rule_changes: list[RuleChange] = field(default_factory=list)
    text: str = ""

    @property
    def is_empty(self) -> bool:
        return not (self.programme_changes or self.asset_changes or self.rule_changes)

    def summary(self) -> list[str]:
        lines = [f"programme.{name}: {old!r} -> {new!r}" for name, (old, new) in self.programme_changes.items()]
        lines += [f"asset.{name}: {old!r} -> {new!r}" for name, (old, new) in self.asset_changes.items()]
        for change in self.rule_changes:
            if change.kind == "renamed":
                lines.append(f"~ rules[{change.index}] renamed: {change.old_name!r} -> {change.rule.name!r}")
                continue
            sign = "+" if change.kind == "added" else "-"
            lines.append(f"{sign} rules[{change.index}] {jsonutil.dumps(change.rule.payload())}")
        return lines or ["no changes"]


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    names = list(dict.fromkeys([*old, *new]))
    return {
        name: (old.get(name), new.get(name))
        for name in names
        if jsonutil.canonical_hash(old.get(name)) != jsonutil.canonical_hash(new.get(name))
    }


def _same_rule(a: tuple[str, int, FileRule], b: tuple[str, int, FileRule], *, named: bool) -> bool:
    """(fingerprint, index, rule) items that are the same rule (with `named`, under the same name too)."""
    return a[0] == b[0] and (not named or a[2].name == b[2].name)


def diff_programmes(old: ProgrammeDefinition, new: ProgrammeDefinition) -> ProgrammeDiff:
    """What changed from `old` to `new`. Rules have no identity in a file: a rule is "the same" when it behaves
    the same (same fingerprint), so an edited rule shows as one removed and one added, a rule that behaves the
    same under another name as renamed; reordering is no change."""
    old_rules = [(rule.fingerprint(), index, rule) for index, rule in enumerate(old.rules)]
    unmatched_new = [(rule.fingerprint(), index, rule) for index, rule in enumerate(new.rules)]
    removed: list[RuleChange] = []
    renamed: list[RuleChange] = []
    unmatched_old = []
    for item in old_rules:  # the same rule under the same name first, so that renames pair what is left
        match = next((new_item for new_item in unmatched_new if _same_rule(new_item, item, named=True)), None)
        if match is None:
            unmatched_old.append(item)
        else:
            unmatched_new.remove(match)
    for fingerprint, index, rule in unmatched_old:
        match = next((item for item in unmatched_new if item[0] == fingerprint), None)
        if match is None:
            removed.append(RuleChange("removed", index, rule))
        else:
            unmatched_new.remove(match)
            renamed.append(RuleChange("renamed", match[1], match[2], old_name=rule.name))
    added = [RuleChange("added", index, rule) for _, index, rule in unmatched_new]
    text = "".join(
        difflib.unified_diff(
            dumps_programme(old).splitlines(keepends=True),
            dumps_programme(new).splitlines(keepends=True),
            fromfile="old",
            tofile="new",
        )
    )
    return ProgrammeDiff(
        programme_changes=_field_changes(old.programme.model_dump(mode="json"), new.programme.model_dump(mode="json")),
        asset_changes=_field_changes(old.asset.model_dump(mode="json"), new.asset.model_dump(mode="json")),
        rule_changes=removed + added + sorted(renamed, key=lambda change: change.index),
        text=text,
    )
