"""Push a programme file to a live /v1 deployment: plan what would change, apply it idempotently.

Live resources are matched by their natural keys: the asset by `symbol`, the programme by `name` (and asset),
a rule by its behaviour (`FileRule.fingerprint()`, which covers its caps and reverse actions; a rule that
behaves the same under another name is renamed, not replaced). The target is:
the asset active, the programme's draft holding exactly the file's rules, schedule and spending settings (caps,
budget, clawback, expiry, the bound on a live event's age), and the latest published version holding them too.

Every write carries an Idempotency-Key derived from the organization, environment, the file's content, the step
and the ids it acts on, so a write retried after a crash (answer lost, process killed) is deduplicated by the
service; the re-run's plan, read from the live side, never repeats what already happened.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from rewards_lab.client import RewardsClient
from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.event_age import DEFAULT_MAX_EVENT_AGE_DAYS
from rewards_lab.contract.expiry_requests import ExpiryAfterDays, ExpiryAtEndOf
from rewards_lab.contract.guard_requests import DEFAULT_GUARD_WINDOW_DAYS, Guard
from rewards_lab.contract.limit_requests import DEFAULT_CLAWBACK, AmountLimit, Budget, Limit
from rewards_lab.contract.programme_file import FileRule, ProgrammeDefinition, ProgrammeInfo
from rewards_lab.contract.rule_requests import condition_payload

StepKind = Literal[
    "create_asset",
    "activate_asset",
    "create_programme",
    "update_schedule",
    "update_spending",
    "update_guards",
    "remove_rule",
    "add_rule",
    "rename_rule",
    "publish",
]
MAX_APPLY_ROUNDS = 3


class PushError(Exception):
    """The live side cannot be brought to the file (a blocker), or did not converge after applying."""


@dataclass(frozen=True)
class Step:
    kind: StepKind
    description: str
    rule: FileRule | None = None  # add_rule, rename_rule (the rule as the file has it)
    rule_id: str | None = None  # remove_rule, rename_rule
    occurrence: int = 0  # add_rule: which copy of identical rules

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "description": self.description}
        if self.rule is not None:
            data["rule"] = self.rule.payload()
            data["fingerprint"] = self.rule.fingerprint()
        if self.rule_id is not None:
            data["rule_id"] = self.rule_id
        return data


@dataclass
class Plan:
    """What would change on the live side (`steps`), what already matches, and what push cannot fix."""

    definition: ProgrammeDefinition
    organization_id: str
    environment: str
    base_url: str
    digest: str  # of the file's content
    asset: r.Asset | None = None
    programme: r.Programme | None = None
    draft: r.ProgrammeVersion | None = None
    published: r.ProgrammeVersion | None = None
    steps: list[Step] = field(default_factory=list)
    matches: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": {
                "base_url": self.base_url,
                "organization": self.organization_id,
                "environment": self.environment,
            },
            "programme": self.definition.programme.name,
            "asset": self.definition.asset.symbol,
            "file_digest": self.digest,
            "asset_id": self.asset.id if self.asset else None,
            "program_id": self.programme.id if self.programme else None,
            "steps": [step.to_dict() for step in self.steps],
            "matches": list(self.matches),
            "blockers": list(self.blockers),
            "notes": list(self.notes),
        }

    def text(self) -> str:
        title = (
            f"Push '{self.definition.programme.name}' to {self.base_url} ({self.organization_id}, {self.environment})"
        )
        lines = [title]
        lines += [f"  = {item}" for item in self.matches]
        lines += [f"  {_SIGNS[step.kind]} {step.description}" for step in self.steps]
        lines += [f"  ! {item}" for item in self.blockers]
        lines += [f"  note: {item}" for item in self.notes]
        lines.append(f"{len(self.steps)} change(s)" if self.steps else "No changes: the live side matches the file.")
        return "\n".join(lines)


_SIGNS: dict[str, str] = {
    "create_asset": "+",
    "activate_asset": "~",
    "create_programme": "+",
    "update_schedule": "~",
    "update_spending": "~",
    "update_guards": "~",
    "remove_rule": "-",
    "add_rule": "+",
    "rename_rule": "~",
    "publish": "^",
}


def file_digest(definition: ProgrammeDefinition) -> str:
    return jsonutil.canonical_hash(definition.payload())


def rule_summary(rule: FileRule) -> str:
    payload = rule.payload()
    return f"{rule.event_type} {jsonutil.dumps(payload['conditions'])} -> {jsonutil.dumps(payload['actions'])}"


def live_fingerprint(rule: r.Rule, asset_id: str) -> str:
    """The fingerprint of a live rule as the file would write it; an action on another asset never matches."""
    foreign = [
        getattr(a, "asset_id", None) for a in rule.actions if getattr(a, "asset_id", None) not in (None, asset_id)
    ]
    as_file = FileRule.model_validate(
        {
            "event_type": rule.event_type,
            "conditions": [condition_payload(condition) for condition in rule.conditions],
            "actions": [a.model_dump(mode="json", exclude={"asset_id"}) for a in rule.actions],
            "priority": rule.priority,
            "stop_processing": rule.stop_processing,
            "limits": [limit.model_dump(mode="json") for limit in rule.limits],
        }
    )
    return as_file.fingerprint() + (f"+foreign:{','.join(map(str, foreign))}" if foreign else "")


def _multiset(rules: list[r.Rule], asset_id: str) -> Counter[tuple[str, str | None]]:
    """What a version's rules do and what they are called: a version holds a file's rules when these are equal."""
    return Counter((live_fingerprint(rule, asset_id), rule.name) for rule in rules)


def _wanted(definition: ProgrammeDefinition) -> Counter[tuple[str, str | None]]:
    return Counter((rule.fingerprint(), rule.name) for rule in definition.rules)


def _pair_rules(
    definition: ProgrammeDefinition, live_rules: list[r.Rule], asset_id: str
) -> tuple[list[tuple[FileRule, r.Rule]], list[FileRule], list[r.Rule]]:
    """The file's rules paired with the draft's rules that behave the same (under the same name first, then in
    order): (pairs, file rules to add, draft rules to remove, in the draft's order)."""
    candidates: dict[str, list[r.Rule]] = {}
    for live in live_rules:
        candidates.setdefault(live_fingerprint(live, asset_id), []).append(live)
    pairs: dict[int, tuple[FileRule, r.Rule]] = {}
    for named in (True, False):
        for index, rule in enumerate(definition.rules):
            found = candidates.get(rule.fingerprint(), [])
            match = next((live for live in found if not named or live.name == rule.name), None)
            if index not in pairs and match is not None:
                found.remove(match)
                pairs[index] = (rule, match)
    paired = {live.id for _, live in pairs.values()}
    missing = [rule for index, rule in enumerate(definition.rules) if index not in pairs]
    return [pairs[index] for index in sorted(pairs)], missing, [live for live in live_rules if live.id not in paired]


def _find_asset(client: RewardsClient, definition: ProgrammeDefinition) -> r.Asset | None:
    symbol = definition.asset.symbol
    found = [asset for asset in client.iter_assets(limit=100) if asset.symbol == symbol]
    order = {"active": 0, "paused": 1, "configured": 2}
    return min(found, key=lambda asset: (order[asset.status], asset.created_at), default=None)


def _find_programme(client: RewardsClient, definition: ProgrammeDefinition, asset_id: str) -> r.Programme | None:
    name = definition.programme.name
    found = [p for p in client.iter_programmes(asset_id=asset_id, limit=100) if p.name == name]
    return min(found, key=lambda programme: programme.created_at, default=None)


def _number(text: str | None) -> Decimal | None:
    return Decimal(text) if text is not None else None


def _asset_steps(plan: Plan) -> None:
    wanted = plan.definition.asset
    asset = plan.asset
    if asset is None:
        plan.steps.append(Step("create_asset", f"create asset {wanted.symbol} ({wanted.name}, {wanted.type.value})"))
        plan.steps.append(Step("activate_asset", f"activate asset {wanted.symbol}"))
        return
    for name in ("type", "decimals"):
        live, mine = getattr(asset, name), getattr(wanted, name)
        if str(live) != str(mine):
            plan.blockers.append(f"asset {asset.symbol} ({asset.id}) has {name} {live}, the file says {mine}")
    if asset.name != wanted.name:
        plan.notes.append(f"asset {asset.symbol} is named '{asset.name}' live, '{wanted.name}' in the file")
    if _number(asset.supply_ceiling) != _number(wanted.supply_ceiling):
        plan.notes.append(
            f"asset {asset.symbol} has supply ceiling {asset.supply_ceiling} live, {wanted.supply_ceiling} in the file"
        )
    if _expiry(asset.expiry) != _expiry(wanted.expiry):  # set when an asset is made, never changed after
        plan.notes.append(
            f"asset {asset.symbol} has expiry {_expiry(asset.expiry)} live, {_expiry(wanted.expiry)} in the file"
        )
    if asset.status == "configured":
        plan.steps.append(Step("activate_asset", f"activate asset {asset.symbol} ({asset.id})"))
    elif asset.status == "paused":
        plan.blockers.append(f"asset {asset.symbol} ({asset.id}) is paused: resume it by hand before pushing")
    else:
        plan.matches.append(f"asset {asset.symbol} ({asset.id}) is active")


Schedule = tuple[str, datetime | None, datetime | None]  # (timezone, starts_at, ends_at), bounds aware UTC


def file_schedule(definition: ProgrammeDefinition) -> Schedule:
    info = definition.programme
    return (info.zone, _utc(info.starts_at), _utc(info.ends_at))


def live_schedule(version: r.ProgrammeVersion) -> Schedule:
    return (version.timezone, _utc(version.starts_at), _utc(version.ends_at))


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def describe_schedule(schedule: Schedule) -> str:
    zone, starts, ends = schedule
    window = f"from {starts.isoformat() if starts else 'always'} until {ends.isoformat() if ends else 'ever after'}"
    return f"timezone {zone}, {window}"


def _schedule_steps(plan: Plan) -> bool:
    """Bring the draft's schedule to the file's; whether the published version's schedule differs from it."""
    wanted = file_schedule(plan.definition)
    draft = live_schedule(plan.draft) if plan.draft else None
    if draft is not None and draft != wanted:
        plan.steps.append(Step("update_schedule", f"set the draft's schedule: {describe_schedule(wanted)}"))
    elif draft is not None and wanted != ("UTC", None, None):  # a file without a schedule says nothing of it
        plan.matches.append(f"the draft's schedule is the file's ({describe_schedule(wanted)})")
    return plan.published is not None and live_schedule(plan.published) != wanted


# (caps as (period, measure, value), budget as (period, amount), clawback, expiry as JSON text or None, the bound
# on a live event's age in days or None): amounts compared by value
Spending = tuple[tuple[tuple[str, str, Decimal | int], ...], tuple[str, Decimal] | None, str, str | None, int | None]
NO_SPENDING: Spending = ((), None, DEFAULT_CLAWBACK, None, DEFAULT_MAX_EVENT_AGE_DAYS)


def _expiry(expiry: ExpiryAfterDays | ExpiryAtEndOf | None) -> str | None:
    """An expiry as comparable text (`{"after_days": 30}`), None for none."""
    return None if expiry is None else jsonutil.dumps(expiry.model_dump(mode="json"))


def _spending(
    limits: list[Limit],
    budget: Budget | None,
    clawback: str,
    expiry: ExpiryAfterDays | ExpiryAtEndOf | None,
    max_event_age_days: int | None,
) -> Spending:
    caps = tuple(
        (c.period, "max_amount", Decimal(c.max_amount))
        if isinstance(c, AmountLimit)
        else (c.period, "max_count", c.max_count)
        for c in limits
    )
    amount = None if budget is None else (budget.period, Decimal(budget.max_amount))
    return caps, amount, clawback, _expiry(expiry), max_event_age_days


def file_spending(definition: ProgrammeDefinition) -> Spending:
    info = definition.programme
    return _spending(info.limits, info.budget, info.clawback, info.expiry, info.max_event_age_days)


def live_spending(version: r.ProgrammeVersion) -> Spending:
    return _spending(version.limits, version.budget, version.clawback, version.expiry, version.max_event_age_days)


def spending_body(info: ProgrammeInfo) -> dict[str, Any]:
    """The file's caps, budget, clawback, expiry and bound on a live event's age as `PATCH /reward-programs/{id}`
    takes them (every one sent: the draft becomes exactly the file's)."""
    return {
        "limits": [limit.model_dump(mode="json") for limit in info.limits],
        "budget": None if info.budget is None else info.budget.model_dump(mode="json"),
        "clawback": info.clawback,
        "expiry": None if info.expiry is None else info.expiry.model_dump(mode="json"),
        "max_event_age_days": info.max_event_age_days,
    }


def describe_spending(info: ProgrammeInfo) -> str:
    body = spending_body(info)
    caps = jsonutil.dumps(body["limits"]) if body["limits"] else "none"
    budget = jsonutil.dumps(body["budget"]) if body["budget"] else "none"
    described = f"caps {caps}, budget {budget}, clawback {body['clawback']}"
    if body["expiry"] is not None:
        described = f"{described}, expiry {jsonutil.dumps(body['expiry'])}"
    age = body["max_event_age_days"]
    return f"{described}, max event age {'none' if age is None else f'{age} days'}"


def _spending_steps(plan: Plan) -> bool:
    """Bring the draft's caps, budget and clawback to the file's; whether the published version's differ."""
    wanted = file_spending(plan.definition)
    described = describe_spending(plan.definition.programme)
    draft = live_spending(plan.draft) if plan.draft else None
    if draft is not None and draft != wanted:
        plan.steps.append(Step("update_spending", f"set the draft's {described}"))
    elif draft is not None and wanted != NO_SPENDING:  # a file without them says nothing of them
        plan.matches.append(f"the draft's caps, budget and clawback are the file's ({described})")
    return plan.published is not None and live_spending(plan.published) != wanted


def file_guards(definition: ProgrammeDefinition) -> str:
    """The file's forecast guards and their window, comparable with a version's (limits by value)."""
    return _guards_key(definition.programme.guards, definition.programme.guard_window_days)


def live_guards(version: r.ProgrammeVersion) -> str:
    return _guards_key(version.guards, version.guard_window_days)


def _guards_key(guards: list[Guard], window_days: int) -> str:
    return jsonutil.canonical_hash([[guard.model_dump(mode="json") for guard in guards], window_days])


def guards_body(info: ProgrammeInfo) -> list[dict[str, Any]]:
    return [guard.model_dump(mode="json") for guard in info.guards]


def _guards_text(info: ProgrammeInfo) -> str:
    """The guards as the plan shows them, with the window when it is not the default."""
    text = jsonutil.dumps(guards_body(info))
    if info.guard_window_days != DEFAULT_GUARD_WINDOW_DAYS:
        text += f", checked on the last {info.guard_window_days} days of stored events"
    return text


def _guard_steps(plan: Plan) -> bool:
    """Bring the draft's forecast guards to the file's; whether the published version's differ."""
    wanted = file_guards(plan.definition)
    described = _guards_text(plan.definition.programme)
    if plan.draft is not None and live_guards(plan.draft) != wanted:
        plan.steps.append(Step("update_guards", f"set the draft's forecast guards: {described}"))
    elif plan.draft is not None and plan.definition.programme.guards:  # a file without them says nothing of them
        plan.matches.append(f"the draft's forecast guards are the file's ({described})")
    return plan.published is not None and live_guards(plan.published) != wanted


def _rule_steps(plan: Plan, asset_id: str, schedule_differs: bool = False) -> None:
    """Bring the draft to the file's rules (a rule that behaves the same under another name is renamed); publish
    when the live version differs from the file."""
    draft_rules = plan.draft.rules if plan.draft else []
    pairs, missing, extra = _pair_rules(plan.definition, draft_rules, asset_id)
    for live in extra:
        description = f"remove rule {live.id} from the draft (not in the file): {live.name or live.event_type}"
        plan.steps.append(Step("remove_rule", description, rule_id=live.id))
    to_add = {id(rule) for rule in missing}
    seen: Counter[str] = Counter()
    for rule in plan.definition.rules:  # the file's order; `occurrence` tells identical rules apart in keys
        fingerprint = rule.fingerprint()
        seen[fingerprint] += 1
        if id(rule) in to_add:
            description = f"add rule to the draft: {_named(rule)}{rule_summary(rule)}"
            plan.steps.append(Step("add_rule", description, rule=rule, occurrence=seen[fingerprint]))
    renames = [(rule, live) for rule, live in pairs if rule.name != live.name]
    for rule, live in renames:
        description = f"rename rule {live.id} in the draft ({live.event_type}): {live.name!r} -> {rule.name!r}"
        plan.steps.append(Step("rename_rule", description, rule=rule, rule_id=live.id))
    if plan.programme is not None and not missing and not extra and not renames:
        plan.matches.append(f"the draft holds the file's {len(plan.definition.rules)} rule(s)")
    published = plan.published
    holds = published is not None and _multiset(published.rules, asset_id) == _wanted(plan.definition)
    if published is not None and holds and not schedule_differs:
        plan.matches.append(f"published version {published.number} holds the file's rules")
    else:
        number = (published.number or 0) + 1 if published else 1
        plan.steps.append(Step("publish", f"publish the draft as version {number}"))


def _named(rule: FileRule) -> str:
    return f"'{rule.name}': " if rule.name else ""


def make_plan(definition: ProgrammeDefinition, client: RewardsClient) -> Plan:
    """Read the live side (reads only) and compare it with the file. A file with tiers is refused before anything
    is read: the server does not store them yet (issue 33, T2), and pushing the rest would publish the programme
    without them."""
    if definition.programme.tiers is not None:
        message = "programme.tiers: the server does not take tiers yet; this file cannot be pushed"
        raise ServiceError("field_invalid", message, field="programme.tiers")
    config = client.config
    plan = Plan(definition, config.organization_id, config.environment, config.base_url, file_digest(definition))
    plan.asset = _find_asset(client, definition)
    _asset_steps(plan)
    programme_name = definition.programme.name
    if plan.asset is not None:
        plan.programme = _find_programme(client, definition, plan.asset.id)
    if plan.programme is None:
        plan.steps.append(Step("create_programme", f"create programme '{programme_name}'"))
        _rule_steps(plan, plan.asset.id if plan.asset else "")
        return plan
    programme = plan.programme
    plan.matches.append(f"programme '{programme_name}' ({programme.id}) exists")
    if (programme.description or None) != (definition.programme.description or None):
        plan.notes.append(f"programme '{programme_name}' has another description live than in the file")
    versions = list(client.iter_versions(programme.id))
    plan.draft = next((v for v in versions if v.status == "draft"), None)
    published = [v for v in versions if v.status == "published"]
    plan.published = max(published, key=lambda v: v.number or 0, default=None)
    assert plan.asset is not None
    schedule_differs = _schedule_steps(plan)
    spending_differs = _spending_steps(plan)
    guards_differ = _guard_steps(plan)
    _rule_steps(plan, plan.asset.id, schedule_differs or spending_differs or guards_differ)
    return plan


@dataclass
class ApplyResult:
    plan: Plan
    executed: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.executed)

    def text(self) -> str:
        if not self.executed:
            return "Nothing to apply: the live side already matched the file."
        lines = [f"Applied {len(self.executed)} step(s):"]
        lines += [f"  {item['kind']}: {item['id']}" for item in self.executed]
        return "\n".join(lines)


def idempotency_key(plan: Plan, step: str, *parts: object) -> str:
    """Deterministic: the same file, step and targets give the same key in any run, so the service deduplicates
    a write that a crashed run already made."""
    material = jsonutil.dumps([plan.organization_id, plan.environment, plan.digest, step, *map(str, parts)])
    return "push_" + hashlib.sha256(material.encode()).hexdigest()[:48]


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _rule_body(rule: FileRule) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    payload = rule.payload()
    return payload["conditions"], payload["actions"], payload.get("limits", [])


def _execute(
    plan: Plan, client: RewardsClient, round_number: int, guard_override: str | None = None
) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = []
    wanted = plan.definition.asset
    asset = plan.asset
    programme = plan.programme
    draft_id = plan.draft.id if plan.draft else (programme.draft_version_id if programme else None)
    for step in plan.steps:
        if step.kind == "create_asset":
            key = idempotency_key(plan, "asset.create", wanted.symbol, round_number)
            asset = client.create_asset(
                wanted.name,
                wanted.symbol,
                wanted.type.value,
                wanted.decimals,
                supply_ceiling=wanted.supply_ceiling,
                expiry=None if wanted.expiry is None else wanted.expiry.model_dump(mode="json"),
                value_per_unit=wanted.value_per_unit,
                idempotency_key=key,
            )
            done.append({"kind": step.kind, "id": asset.id})
        elif step.kind == "activate_asset":
            assert asset is not None
            asset = client.activate_asset(asset.id, idempotency_key=idempotency_key(plan, "asset.activate", asset.id))
            done.append({"kind": step.kind, "id": asset.id})
        elif step.kind == "create_programme":
            assert asset is not None
            key = idempotency_key(plan, "programme.create", asset.id, round_number)
            info = plan.definition.programme
            spending = spending_body(info)  # sent only when the file has them, as before they existed
            programme = client.create_programme(
                info.name,
                asset.id,
                description=info.description,
                timezone=info.timezone,
                starts_at=_text(info.starts_at),
                ends_at=_text(info.ends_at),
                limits=spending["limits"] or None,
                budget=spending["budget"],
                clawback=None if info.clawback == DEFAULT_CLAWBACK else info.clawback,
                expiry=spending["expiry"],
                guards=guards_body(info) or None,
                guard_window_days=info.guard_window_days,
                **_event_age(info),
                idempotency_key=key,
            )
            draft_id = programme.draft_version_id
            done.append({"kind": step.kind, "id": programme.id})
        elif step.kind == "update_schedule":
            assert programme is not None
            info = plan.definition.programme
            key = idempotency_key(plan, "programme.schedule", programme.id, draft_id, round_number)
            client.update_programme(
                programme.id,
                timezone=info.zone,
                starts_at=_text(info.starts_at),
                ends_at=_text(info.ends_at),
                idempotency_key=key,
            )
            done.append({"kind": step.kind, "id": programme.id})
        elif step.kind == "update_spending":
            assert programme is not None
            key = idempotency_key(plan, "programme.spending", programme.id, draft_id, round_number)
            client.update_programme(programme.id, **spending_body(plan.definition.programme), idempotency_key=key)
            done.append({"kind": step.kind, "id": programme.id})
        elif step.kind == "update_guards":
            assert programme is not None
            key = idempotency_key(plan, "programme.guards", programme.id, draft_id, round_number)
            guards = guards_body(plan.definition.programme)
            window = plan.definition.programme.guard_window_days
            client.update_programme(programme.id, guards=guards or None, guard_window_days=window, idempotency_key=key)
            done.append({"kind": step.kind, "id": programme.id})
        elif step.kind == "remove_rule":
            assert step.rule_id is not None
            client.delete_rule(step.rule_id, idempotency_key=idempotency_key(plan, "rule.delete", step.rule_id))
            done.append({"kind": step.kind, "id": step.rule_id})
        elif step.kind == "add_rule":
            assert programme is not None and step.rule is not None
            conditions, actions, limits = _rule_body(step.rule)
            key = idempotency_key(
                plan, "rule.create", programme.id, draft_id, step.rule.fingerprint(), step.occurrence, round_number
            )
            rule = client.create_rule(
                programme.id,
                step.rule.event_type,
                actions,
                conditions=conditions,
                priority=step.rule.priority or None,
                stop_processing=step.rule.stop_processing or None,
                limits=limits or None,
                name=step.rule.name,  # sent only when the file names the rule
                idempotency_key=key,
            )
            done.append({"kind": step.kind, "id": rule.id})
        elif step.kind == "rename_rule":
            assert step.rule_id is not None and step.rule is not None
            name = step.rule.name
            key = idempotency_key(plan, "rule.rename", step.rule_id, draft_id, name or "", round_number)
            client.update_rule(step.rule_id, name=name, idempotency_key=key)  # None clears it
            done.append({"kind": step.kind, "id": step.rule_id})
        else:
            assert programme is not None and asset is not None
            if not _draft_holds_the_file(plan, client, programme.id, asset.id):
                break  # a stale idempotent answer or a concurrent edit: the next round re-plans
            overridden = () if guard_override is None else (guard_override,)
            key = idempotency_key(plan, "publish", programme.id, draft_id, *overridden)
            result = client.publish(programme.id, guard_override=guard_override, idempotency_key=key)
            done.append({"kind": step.kind, "id": result.version.id, "version": result.version.number})
    return done


def _event_age(info: ProgrammeInfo) -> dict[str, Any]:
    """The file's bound on a live event's age, sent only when it is not the service's default (as the other
    optional settings are sent only when the file has them)."""
    age = info.max_event_age_days
    return {} if age == DEFAULT_MAX_EVENT_AGE_DAYS else {"max_event_age_days": age}


def _draft_holds_the_file(plan: Plan, client: RewardsClient, program_id: str, asset_id: str) -> bool:
    """Checked right before publishing, so that a version is never published short of a rule (or of its caps)
    or with another schedule, caps, budget or clawback than the file's."""
    draft = next((v for v in client.iter_versions(program_id) if v.status == "draft"), None)
    return (
        draft is not None
        and _multiset(draft.rules, asset_id) == _wanted(plan.definition)
        and live_schedule(draft) == file_schedule(plan.definition)
        and live_spending(draft) == file_spending(plan.definition)
        and live_guards(draft) == file_guards(plan.definition)
    )


def without_publishing(plan: Plan) -> Plan:
    """The plan short of its publish step: the draft is brought to the file, nothing is published (the forecast
    gate refused)."""
    return replace(plan, steps=[step for step in plan.steps if step.kind != "publish"])


def apply(plan: Plan, client: RewardsClient, *, publish: bool = True, guard_override: str | None = None) -> ApplyResult:
    """Execute the plan; then read the live side again until it matches the file (at most a few rounds: a stale
    idempotent answer, e.g. a rule deleted by hand since, is made again under a fresh key). `publish=False`
    updates the draft only; `guard_override` (a reason) is recorded on the version published."""
    if plan.blockers:
        raise PushError("cannot push: " + "; ".join(plan.blockers))
    result = ApplyResult(plan)
    current = plan if publish else without_publishing(plan)
    for round_number in range(MAX_APPLY_ROUNDS):
        if not current.changes:
            return result
        result.executed += _execute(current, client, round_number, guard_override)
        result.rounds = round_number + 1
        current = make_plan(plan.definition, client)
        current = current if publish else without_publishing(current)
        if current.blockers:
            raise PushError("cannot push: " + "; ".join(current.blockers))
    if current.changes:
        raise PushError("the live side still differs from the file after applying:\n" + current.text())
    return result


def push(definition: ProgrammeDefinition, client: RewardsClient) -> ApplyResult:
    """Plan and apply in one go."""
    return apply(make_plan(definition, client), client)
