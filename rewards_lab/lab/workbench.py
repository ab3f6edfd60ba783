"""The `Lab`: a designer's workbench over the engine's own service functions.

A `Lab` owns one DuckDB database (a file, or in memory) and one tenant scope in it (its own organization, the
sandbox environment). `lab.load(file)` creates the file's asset and programme through the service layer and puts
the file's rules on the draft; the returned `LabProgramme` edits the draft, simulates, publishes, lists versions,
exports a version back to a programme file, diffs, and replays event histories. Nothing here re-implements the
engine: every write is a service call and every verdict comes from `domain.rules` via `service.simulation`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rewards_lab.client import RewardsClient
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.guard_requests import Guard, GuardOverride, PublishRequest
from rewards_lab.contract.limit_requests import (
    AmountLimit,
    Budget,
    CountLimit,
    Limit,
    ReverseAction,
)
from rewards_lab.contract.pagination import PageRequest
from rewards_lab.contract.programme_file import (
    ProgrammeDefinition,
    ProgrammeDiff,
    definition_of_version,
    diff_programmes,
    load_programme,
    save_programme,
)
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.domain.actions import action_kind
from rewards_lab.domain.conditions import EventFacts, describe_node
from rewards_lab.domain.rules import condition_node
from rewards_lab.engine import simulation
from rewards_lab.forecasting.gate import DEFAULT_DAYS, GateRefused, GateReport, evaluate
from rewards_lab.forecasting.labels import rule_labels
from rewards_lab.forecasting.tables import Table, table
from rewards_lab.lab.event_rows import EventRow, event_rows
from rewards_lab.lab.server_gate import server_table
from rewards_lab.lab.sweep_labels import parameter_labels
from rewards_lab.replay.engine import ReplayResult
from rewards_lab.replay.entry import run_replay, run_sweep
from rewards_lab.service import assets, organizations, programme_forecast, programme_lifecycle, programmes
from rewards_lab.store.database import DuckDBStore

if TYPE_CHECKING:
    from rewards_lab.lab.diff_table import DiffTable
    from rewards_lab.replay.spark_engine import SparkReplayResult

Version = int | str | None  # a version number, "draft", "live", or None (the draft)
# A leaf {"field":..., "operator":..., "value":...} or (field, operator, value) or (field, "exists"); or a group
# {"any": [...]}, {"all": [...]}, {"not": ...} whose parts take any of these forms, at any depth.
ConditionLike = Mapping[str, Any] | Sequence[Any]
GROUP_KINDS = ("any", "all", "not")
SIMULATION_COLUMNS = [
    "event",
    "external_event_id",
    "event_type",
    "rule_index",
    "rule",  # how the lab names the rule (forecasting.labels): `0 · Cashback on orders of 20 or more`
    "rule_id",
    "matched",
    "amount",
    "reasons",
]
RULES_TABLE_COLUMNS = ["rule", "event_type", "priority", "stop_processing", "when", "issue"]
CAPS_COLUMN = "caps"  # added to the rules table when a rule of the version has caps
NAME_COLUMN = "name"  # added to the rules table (first) when a rule of the version has a name
# A reverse action's fraction as `add_rule(reverse=..., fraction=...)` takes it: a constant (0.5, "0.5"),
# {"field": "refund_amount", "of": "amount"} or ("refund_amount", "amount"); None takes back all that remains.
FractionLike = Decimal | float | int | str | Mapping[str, Any] | tuple[str, str] | None
_UNSET: Any = object()  # a setting `set_spending` leaves as it is (None clears it)


def _group_kind(condition: Mapping[str, Any]) -> str | None:
    """The group a dict spells (as the contract tells them apart: a group key and no `field`), else None."""
    if "field" in condition:
        return None
    return next((kind for kind in GROUP_KINDS if kind in condition), None)


def _condition(condition: ConditionLike, where: str = "conditions[0]") -> Any:
    """A condition as the contract reads it: tuples become leaf dicts, groups are rebuilt part by part. Shapes
    this cannot read are passed on as they are, so the contract refuses them naming their field."""
    if isinstance(condition, Mapping):
        kind = _group_kind(condition)
        if kind is None:
            return dict(condition)
        parts = condition[kind]
        body = dict(condition)
        if kind == "not" and isinstance(parts, Mapping | list | tuple):
            body["not"] = _condition(parts, f"{where}.not")
        elif kind != "not" and isinstance(parts, list | tuple):
            body[kind] = [_condition(part, f"{where}.{kind}[{i}]") for i, part in enumerate(parts)]
        return body
    if not isinstance(condition, list | tuple) or not condition or not isinstance(condition[0], str):
        return condition
    if len(condition) == 3:
        field, operator, value = condition
        return {"field": field, "operator": operator, "value": value}
    if len(condition) == 2:
        field, operator = condition
        return {"field": field, "operator": operator}
    message = "a condition tuple is (field, operator, value), or (field, operator) for exists and not_exists"
    raise ServiceError("field_invalid", message, field=where)


def _conditions(conditions: Iterable[ConditionLike]) -> list[Any]:
    return [_condition(c, f"conditions[{i}]") for i, c in enumerate(conditions)]


def reverse_action(original: str, fraction: FractionLike = None, any_customer: bool = False) -> dict[str, Any]:
    """A reverse action's body: take back what the event named by the `original` field issued, all that
    remains (no fraction), a constant share (`0.5`) or a share read from both events (`("refund_amount",
    "amount")` or `{"field": "refund_amount", "of": "amount"}`: the refund's field over the original's).
    Only a refund by the original's customer takes back, unless `any_customer` (marketplaces)."""
    action: dict[str, Any] = {"type": "reverse", "original": {"field": original}}
    if any_customer:
        action["any_customer"] = any_customer
    if isinstance(fraction, tuple) and len(fraction) == 2:
        action["fraction"] = {"field": fraction[0], "of": fraction[1]}
    elif isinstance(fraction, Mapping):
        action["fraction"] = dict(fraction)
    elif fraction is not None:
        action["fraction"] = str(fraction) if isinstance(fraction, float) else fraction
    return action


def _actions(
    amount: Mapping[str, Any] | None,
    actions: Sequence[Mapping[str, Any]] | None,
    beneficiary: str | None = None,
    reverse: str | None = None,
    fraction: FractionLike = None,
    any_customer: bool = False,
) -> list[dict[str, Any]]:
    if sum(value is not None for value in (amount, actions, reverse)) != 1:
        raise ServiceError("field_required", "give one of amount, reverse or actions", field="actions")
    if fraction is not None and reverse is None:
        raise ServiceError("field_invalid", "fraction goes with reverse", field="fraction")
    if any_customer and reverse is None:
        raise ServiceError("field_invalid", "any_customer goes with reverse", field="any_customer")
    if reverse is not None:
        if beneficiary is not None:
            raise ServiceError("field_invalid", "a reverse action has no beneficiary", field="beneficiary")
        return [reverse_action(reverse, fraction, any_customer)]
    if actions is not None:
        if beneficiary is not None:
            message = "beneficiary goes with amount; with actions, give each action its beneficiary"
            raise ServiceError("field_invalid", message, field="beneficiary")
        return [dict(action) for action in actions]
    assert amount is not None
    action: dict[str, Any] = {"type": "issue", "amount": dict(amount)}
    if beneficiary is not None:
        action["beneficiary"] = {"field": beneficiary}
    return [action]


def _rule_flags(
    priority: int | None, stop_processing: bool | None, limits: Sequence[Mapping[str, Any] | Limit] | None = None
) -> dict[str, Any]:
    """Priority, stop_processing and caps as a body gives them: only those given (absent keeps the default or
    the rule's current value; `limits=[]` removes the caps)."""
    flags: dict[str, Any] = {}
    if priority is not None:
        flags["priority"] = priority
    if stop_processing is not None:
        flags["stop_processing"] = stop_processing
    if limits is not None:
        flags["limits"] = [_plain_limit(limit) for limit in limits]
    return flags


def _plain_limit(limit: Mapping[str, Any] | Limit) -> Any:
    return limit.model_dump(mode="json") if isinstance(limit, AmountLimit | CountLimit) else dict(limit)


_PERIOD_WORDS = {"day": "a day", "week": "a week", "month": "a month", "year": "a year", "lifetime": "in all"}


def describe_limit(limit: Limit) -> str:
    """One cap: `500 a month`, `3 rewards a day`, `1000 in all` (lifetime)."""
    per = _PERIOD_WORDS.get(limit.period, f"per {limit.period}")
    if isinstance(limit, AmountLimit):
        return f"{limit.max_amount} {per}"
    return f"{limit.max_count} reward{'s' if limit.max_count != 1 else ''} {per}"


def describe_limits(limits: Sequence[Limit], budget: Budget | None = None) -> str:
    """Caps and a budget in one line: `500 a month, 3 rewards a day; budget 10000 a month` ("" for none)."""
    text = ", ".join(describe_limit(limit) for limit in limits)
    if budget is not None:
        spend = f"budget {budget.max_amount} {_PERIOD_WORDS.get(budget.period, budget.period)}"
        text = f"{text}; {spend}" if text else spend
    return text


def describe_conditions(rule: r.Rule) -> str:
    nodes = [condition_node(condition_payload(c)) for c in rule.conditions]
    return " and ".join(describe_node(node) for node in nodes) or "always"


def describe_amount(action: rq.RuleAction) -> str:
    """One action's amount, and who receives it when that is not the event's customer: `10.00 to referrer_id`;
    a reverse action as what it takes back: `take back what order_id issued`, `take back 0.5 of what order_id
    issued`, `take back refund_amount/amount of what order_id issued` (its type's entry says it)."""
    stored = action.model_dump(mode="python")
    return action_kind(stored).describe(stored)


def describe_amounts(rule: r.Rule) -> str:
    return ", ".join(describe_amount(action) for action in rule.actions)


def describe_actions(rule: r.Rule) -> str:
    """`issue 10.00, 5.00`; with a reverse action each action says what it does: `take back what order_id
    issued, issue 1.00`."""
    if not any(isinstance(action, ReverseAction) for action in rule.actions):
        return f"issue {describe_amounts(rule)}"
    return ", ".join(
        describe_amount(a) if isinstance(a, ReverseAction) else f"issue {describe_amount(a)}" for a in rule.actions
    )


def describe_rule(rule: r.Rule) -> str:
    """One line: `order.completed when amount >= 20: issue amount x 0.05`, then the priority, stop_processing
    and caps when they are not the defaults: `[priority 5, stops, caps 500 a month]`."""
    flags = ([f"priority {rule.priority}"] if rule.priority else []) + (["stops"] if rule.stop_processing else [])
    flags += [f"caps {describe_limits(rule.limits)}"] if rule.limits else []
    suffix = f" [{', '.join(flags)}]" if flags else ""
    return f"{rule.event_type} when {describe_conditions(rule)}: {describe_actions(rule)}{suffix}"


class Lab:
    """One database and one tenant scope for designing and trying programmes."""

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        organization_id: str | None = None,
        organization_name: str = "Rules lab",
    ) -> None:
        """`path=":memory:"` keeps everything in memory. Pass the `organization_id` of an earlier session to
        reopen its programmes in the same file; otherwise the lab creates its own organization."""
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.database = DuckDBStore(path)
        if organization_id is None:
            organization_id = str(organizations.create_organization(self.database, organization_name).id)
        self.scope = Scope(organization_id, "sandbox")

    @property
    def organization_id(self) -> str:
        return self.scope.organization_id

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # programmes -------------------------------------------------------------------------------------------
    def load(self, source: ProgrammeDefinition | str | Path) -> LabProgramme:
        """Create (or reuse) the file's asset, activate it, create the programme and add every rule to its draft."""
        definition = source if isinstance(source, ProgrammeDefinition) else load_programme(source)
        asset = self._asset_for(definition.asset)
        info = definition.programme
        body: dict[str, Any] = {"name": info.name, "asset_id": asset.id}
        if info.description is not None:
            body["description"] = info.description
        schedule = {"timezone": info.timezone, "starts_at": info.starts_at, "ends_at": info.ends_at}
        body.update({key: value for key, value in schedule.items() if value is not None})
        spending = info.model_dump(
            mode="json", include={"limits", "budget", "clawback", "expiry", "guards", "guard_window_days"}
        )
        body.update({key: value for key, value in spending.items() if value is not None})
        body["max_event_age_days"] = info.max_event_age_days  # null too: the file's "no bound"
        created = programmes.create_programme(self.database, self.scope, validate(rq.ProgrammeCreate, body))
        programme = LabProgramme(self, created.id)
        for rule in definition.rules:
            payload = rule.payload()
            programme.add_rule(
                rule.event_type,
                name=rule.name,
                conditions=payload["conditions"],
                actions=payload["actions"],
                priority=rule.priority,
                stop_processing=rule.stop_processing,
                limits=payload.get("limits", []),
            )
        return programme

    def new_programme(self, name: str, asset: Mapping[str, Any], description: str | None = None) -> LabProgramme:
        """An empty programme (no rules yet) issuing `asset` (the asset part of a programme file)."""
        created = self._asset_for(validate(rq.AssetCreate, dict(asset), "asset"))
        body: dict[str, Any] = {"name": name, "asset_id": created.id}
        if description is not None:
            body["description"] = description
        programme = programmes.create_programme(self.database, self.scope, validate(rq.ProgrammeCreate, body))
        return LabProgramme(self, programme.id)

    def open(self, program_id: str) -> LabProgramme:
        programmes.get_programme(self.database, self.scope, program_id)  # programme_not_found if absent
        return LabProgramme(self, program_id)

    def programmes(self) -> list[r.Programme]:
        found: list[r.Programme] = []
        cursor: str | None = None
        while True:
            page = programmes.list_programmes(self.database, self.scope, PageRequest(limit=100, cursor=cursor))
            found += page.data
            if not page.has_more:
                return found
            cursor = page.next_cursor

    def replay(
        self,
        events: Any,
        programme: LabProgramme | ProgrammeDefinition | str | Path,
        *,
        version: Version = "live",
        opening_supply: Decimal | int | str = 0,
        engine: str = "duckdb",
        customers: Any = None,
        redemptions: Any = None,
        **options: Any,
    ) -> ReplayResult | SparkReplayResult:
        """Replay a history through a programme of the lab (a version of it, the published one by default) or
        through a programme file as it stands, on DuckDB (default) or Spark; returns the engine's result.
        `customers`: a customers table (a path, a DataFrame or an Arrow table; docs/replay.md) for rules that
        read customer.* or name beneficiaries; `redemptions`: what customers spent (docs/replay.md)."""
        if isinstance(programme, LabProgramme):
            return programme.replay(
                events,
                version=version,
                opening_supply=opening_supply,
                engine=engine,
                customers=customers,
                redemptions=redemptions,
                **options,
            )
        definition = programme if isinstance(programme, ProgrammeDefinition) else load_programme(programme)
        return run_replay(
            events,
            definition,
            engine=engine,
            opening_supply=opening_supply,
            customers=customers,
            redemptions=redemptions,
            **options,
        )

    @staticmethod
    def history(
        base_url: str,
        since: datetime | str | None = None,
        *,
        until: datetime | str | None = None,
        out: str | Path | None = None,
        organization_id: str | None = None,
        environment: str | None = None,
        api_key: str | None = None,
        executions: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> Path:
        """Pull a deployment's events of [since, until) into a Parquet file (or NDJSON, by `out`'s suffix) and
        return its path, which `replay` (and the notebooks) take as they take any history file.
        `organization_id`, `environment` and `api_key` default to $REWARDS_ORGANIZATION_ID, $REWARDS_ENVIRONMENT
        (else sandbox) and $REWARDS_API_KEY; `out` to a file in the temporary directory named after the range,
        so that an interrupted pull resumes (rewards_lab.lab.history). `executions`: with what the server
        issued for each event."""
        from rewards_lab.lab.history import default_out, pull_history

        organization = organization_id or os.environ.get("REWARDS_ORGANIZATION_ID")
        key = api_key or os.environ.get("REWARDS_API_KEY")
        if not organization or not key:
            raise ValueError("history needs organization_id and api_key (or REWARDS_ORGANIZATION_ID, REWARDS_API_KEY)")
        env = environment or os.environ.get("REWARDS_ENVIRONMENT") or "sandbox"
        target = Path(out) if out is not None else default_out(base_url, organization, env, since, until)
        with RewardsClient(base_url, key, organization, env) as client:
            pulled = pull_history(client, target, since=since, until=until, executions=executions, progress=progress)
        return pulled.path

    def _asset_for(self, spec: rq.AssetCreate) -> r.Asset:
        """An active asset of this symbol that matches the spec is reused (a symbol names one live asset);
        one that differs is `asset_symbol_taken`, naming `asset.symbol`."""
        for existing in self._assets():
            if existing.symbol != spec.symbol or existing.status == "configured":
                continue
            same = (existing.name, existing.type, existing.decimals) == (spec.name, spec.type, spec.decimals)
            same = same and _same_amount(existing.supply_ceiling, spec.supply_ceiling)
            same = same and existing.expiry == spec.expiry
            if not same:
                raise ServiceError(
                    "asset_symbol_taken",
                    f"the lab already has a different asset {spec.symbol}",
                    field="asset.symbol",
                    symbol=spec.symbol,
                )
            return existing
        created = assets.create_asset(self.database, self.scope, spec)
        return assets.activate_asset(self.database, self.scope, created.id)

    def _assets(self) -> list[r.Asset]:
        found: list[r.Asset] = []
        cursor: str | None = None
        while True:
            page = assets.list_assets(self.database, self.scope, PageRequest(limit=100, cursor=cursor))
            found += page.data
            if not page.has_more:
                return found
            cursor = page.next_cursor


def _same_amount(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return Decimal(a) == Decimal(b)


class LabProgramme:
    """One programme of a lab: its draft (editable), its published versions, and what they would issue."""

    def __init__(self, lab: Lab, program_id: str) -> None:
        self.lab = lab
        self.id = program_id
        self.gate: GateReport | None = None  # the forecast gate's report of the last publish(history=...)

    def __repr__(self) -> str:
        info = self.info()
        return f"<LabProgramme {info.name!r} {self.id} live version {info.current_version}>"

    @property
    def _db(self) -> DuckDBStore:
        return self.lab.database

    @property
    def _scope(self) -> Scope:
        return self.lab.scope

    def info(self) -> r.Programme:
        return programmes.get_programme(self._db, self._scope, self.id)

    def asset(self) -> r.Asset:
        return assets.get_asset(self._db, self._scope, self.info().asset_id)

    # the draft ----------------------------------------------------------------------------------------------
    def rules(self, version: Version = None) -> list[r.Rule]:
        """The rules of a version (the draft by default), in order; `rule_index` elsewhere is a position here."""
        return programmes.get_version(self._db, self._scope, self.id, version).rules

    def rules_table(self, version: Version = None) -> Table:
        """The rules of a version as a readable table: position, event type, priority, stop_processing,
        conditions (`amount >= 20 and any(...)`) and amounts (with their beneficiaries: `10.00 to referrer_id`;
        reverse actions as what they take back: `take back 0.5 of what order_id issued`). When a rule of the
        version has caps, a `caps` column shows them (`500 a month, 3 rewards a day`); when one has a name, a
        `name` column comes first. A notebook shows every cell whole, wrapped (`forecasting.tables`)."""
        rules = self.rules(version)
        rows = [
            {
                "rule": i,
                NAME_COLUMN: rule.name or "",
                "event_type": rule.event_type,
                "priority": rule.priority,
                "stop_processing": rule.stop_processing,
                "when": describe_conditions(rule),
                "issue": describe_amounts(rule),
                CAPS_COLUMN: describe_limits(rule.limits),
            }
            for i, rule in enumerate(rules)
        ]
        columns = RULES_TABLE_COLUMNS + ([CAPS_COLUMN] if any(rule.limits for rule in rules) else [])
        if any(rule.name for rule in rules):
            columns.insert(1, NAME_COLUMN)
        return table(pd.DataFrame(rows, columns=columns).set_index("rule"))

    def rule_id(self, rule: int | str) -> str:
        """A draft rule by position or by id."""
        if isinstance(rule, str):
            return rule
        rules = self.rules()
        if not 0 <= rule < len(rules):
            raise ServiceError("rule_not_found", f"the draft has no rule {rule}", field="rule", rule=rule)
        return rules[rule].id

    def add_rule(
        self,
        event_type: str,
        *,
        conditions: Iterable[ConditionLike] = (),
        amount: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, Any]] | None = None,
        beneficiary: str | None = None,
        priority: int | None = None,
        stop_processing: bool | None = None,
        limits: Sequence[Mapping[str, Any] | Limit] | None = None,
        reverse: str | None = None,
        fraction: FractionLike = None,
        any_customer: bool = False,
        name: str | None = None,
    ) -> r.Rule:
        """Add a rule to the draft: `amount={"fixed": "2.50"}` or `{"per": "amount", "rate": 0.05}` (with
        `beneficiary="referrer_id"` to reward the customer that event field names), `reverse="order_id"` (take
        back what the event that field names issued: all that remains, or `fraction=0.5`, or
        `fraction=("refund_amount", "amount")` read from both events; `any_customer=True` when a refund by
        another customer than the original's may take back, as on a marketplace), or `actions`. Conditions are dicts or
        tuples, `("amount", "gte", 20)`, `("vip", "exists")`, or groups of them: `{"any": [...]}`,
        `{"all": [...]}`, `{"not": ...}`. `priority` (lower applies first) and `stop_processing` default to 0
        and False; `limits` caps what the rule gives one customer per period:
        `[{"period": "month", "max_amount": "500"}, {"period": "day", "max_count": 3}]`; `name` is a short human
        name, shown wherever the rule is listed (tables, plots, widgets). Validation errors are the contract's
        (`ServiceError` with `details.field`, e.g. `conditions[1].any[0].value`)."""
        body = {
            "program_id": self.id,
            "event_type": event_type,
            "conditions": _conditions(conditions),
            "actions": _actions(amount, actions, beneficiary, reverse, fraction, any_customer),
            **_rule_flags(priority, stop_processing, limits),
        }
        if name is not None:
            body["name"] = name
        return programmes.create_rule(self._db, self._scope, validate(rq.RuleCreate, body))

    def update_rule(
        self,
        rule: int | str,
        *,
        event_type: str | None = None,
        conditions: Iterable[ConditionLike] | None = None,
        amount: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, Any]] | None = None,
        beneficiary: str | None = None,
        priority: int | None = None,
        stop_processing: bool | None = None,
        limits: Sequence[Mapping[str, Any] | Limit] | None = None,
        reverse: str | None = None,
        fraction: FractionLike = None,
        any_customer: bool = False,
        name: str | None = _UNSET,
    ) -> r.Rule:
        """Edit a draft rule (by position or id); what is not given stays as it is (`limits=[]` removes the
        caps, `name=None` the name). Arguments as `add_rule`."""
        body: dict[str, Any] = {}
        if event_type is not None:
            body["event_type"] = event_type
        if conditions is not None:
            body["conditions"] = _conditions(conditions)
        if any(value is not None for value in (amount, actions, beneficiary, reverse, fraction)) or any_customer:
            body["actions"] = _actions(amount, actions, beneficiary, reverse, fraction, any_customer)
        body.update(_rule_flags(priority, stop_processing, limits))
        if name is not _UNSET:
            body["name"] = name
        return programmes.update_rule(self._db, self._scope, self.rule_id(rule), validate(rq.RuleUpdate, body))

    def remove_rule(self, rule: int | str) -> r.Rule:
        return programmes.delete_rule(self._db, self._scope, self.rule_id(rule))

    def set_spending(
        self,
        *,
        limits: Sequence[Mapping[str, Any] | Limit] | None = _UNSET,
        budget: Mapping[str, Any] | Budget | None = _UNSET,
        clawback: str | None = _UNSET,
        expiry: Mapping[str, Any] | None = _UNSET,
        max_event_age_days: int | None = _UNSET,
    ) -> r.Programme:
        """Set the draft's caps per customer across its rules (`[{"period": "week", "max_amount": "1000"}]`),
        its budget across customers (`{"period": "month", "max_amount": "10000"}`), its clawback policy
        (available, negative or none) and when its rewards expire (`{"after_days": 365}`,
        `{"at_end_of": "quarter", "after": 1}`), as `PATCH /reward-programs/{id}` does: what is not given stays,
        None clears (clawback: back to available; expiry: as the asset's points). `max_event_age_days` is how
        many days before its receipt a live event may have occurred and still be rewarded (None: no bound, for
        backfills; a replay receives each event when it occurred). Published versions keep theirs; `publish()`
        freezes these."""
        body: dict[str, Any] = {}
        if limits is not _UNSET:
            body["limits"] = None if limits is None else [_plain_limit(limit) for limit in limits]
        if budget is not _UNSET:
            plain = budget.model_dump(mode="json") if isinstance(budget, Budget) else budget
            body["budget"] = None if plain is None else dict(plain)
        if clawback is not _UNSET:
            body["clawback"] = clawback
        if expiry is not _UNSET:
            body["expiry"] = None if expiry is None else dict(expiry)
        if max_event_age_days is not _UNSET:
            body["max_event_age_days"] = max_event_age_days
        return programme_lifecycle.update_programme(self._db, self._scope, self.id, validate(rq.ProgrammeUpdate, body))

    # versions -----------------------------------------------------------------------------------------------
    def set_guards(self, guards: Sequence[Mapping[str, Any] | Guard] | None) -> r.Programme:
        """The draft's forecast guards (README "Forecast gate"), e.g. `[{"metric": "issued", "period": "month",
        "max": "120000"}]`; None or [] clears them. Published versions keep theirs."""
        plain = [g.model_dump(mode="json") if not isinstance(g, Mapping) else dict(g) for g in guards or []]
        body = validate(rq.ProgrammeUpdate, {"guards": plain or None})
        return programme_lifecycle.update_programme(self._db, self._scope, self.id, body)

    def publish(
        self,
        history: Any = None,
        *,
        override: str | None = None,
        days: int = DEFAULT_DAYS,
        **replay_options: Any,
    ) -> r.PublishResult:
        """Freeze the draft as the next version. With `history` (events, as `replay` takes them) the forecast
        gate runs first (`forecasting.gate`): the history is replayed through the draft and the published version, the
        draft's guards checked (`self.gate` keeps the report); a failed guard raises `GateRefused` and publishes
        nothing, unless `override` gives the reason, recorded with the version. `replay_options`: opening_supply,
        customers, redemptions, engine."""
        self.gate = None
        failed = False
        if history is not None:
            live = self.info().current_version is not None
            published = self.definition("live") if live else None
            self.gate = evaluate(self.definition("draft"), history, published=published, days=days, **replay_options)
            failed = not self.gate.passed
            if failed and override is None:
                raise GateRefused(self.gate)
        body = PublishRequest(guard_override=GuardOverride(reason=override)) if failed and override else None
        return programmes.publish(self._db, self._scope, self.id, body, actor="lab")

    def server_forecast(self) -> pd.DataFrame:
        """The guard table the service checks on publish (issue 31): the draft's guards on the events stored in
        the lab's database over the programme's guard window, without publishing."""
        answer = programme_forecast.forecast_programme(self._db, self._scope, self.id)
        return server_table(answer.model_dump(mode="json"))

    def versions(self) -> list[r.ProgrammeVersion]:
        """Published versions oldest first, then the draft."""
        return programmes.all_versions(self._db, self._scope, self.id)

    def versions_table(self) -> pd.DataFrame:
        rows = [
            {
                "version": "draft" if v.number is None else v.number,
                "status": v.status,
                "based_on": v.based_on,
                "published_at": v.published_at,
                "rules": len(v.rules),
            }
            for v in self.versions()
        ]
        table = pd.DataFrame(rows, columns=["version", "status", "based_on", "published_at", "rules"])
        return table.astype({"based_on": "Int64"})

    def definition(self, version: Version = None) -> ProgrammeDefinition:
        """A version (the draft by default) as a programme file's definition, without ids."""
        chosen = programmes.get_version(self._db, self._scope, self.id, version)
        if not chosen.rules:
            raise ServiceError("programme_draft_empty", "the version has no rules to export", field="rules")
        return definition_of_version(self.info(), chosen, self.asset())

    def schedule(self, version: Version = None) -> r.ProgrammeVersion:
        """A version (the draft by default): its timezone and window (`timezone`, `starts_at`, `ends_at`), its
        caps, budget and clawback (`limits`, `budget`, `clawback`)."""
        return programmes.get_version(self._db, self._scope, self.id, version)

    def export(self, path: str | Path, version: Version = None) -> Path:
        return save_programme(self.definition(version), path)

    def diff(self, old: Version = "live", new: Version = "draft") -> ProgrammeDiff:
        """What changed from `old` (the published version by default) to `new` (the draft)."""
        return diff_programmes(self.definition(old), self.definition(new))

    def changes(self, old: Version = "live", new: Version = "draft") -> DiffTable:
        """`diff` as a table (rule / field / old / new, in words): HTML in a notebook, text when printed."""
        from rewards_lab.lab.diff_table import DiffTable  # it reads rules in words with this module's helpers

        return DiffTable(self.diff(old, new), (_version_name(old), _version_name(new)))

    # simulation ---------------------------------------------------------------------------------------------
    def simulate(
        self,
        event: Mapping[str, Any],
        *,
        version: Version = None,
        rule: int | str | None = None,
        occurred_at: datetime | str | None = None,
        customer_id: str | None = None,
    ) -> r.Simulation:
        """The service's simulation of one event (`{"type": ..., <data fields>}`): every rule of a version, or
        one draft rule (by position or id), with the outcome of every condition and action and its reason.
        `occurred_at` and `customer_id` give the time and the customer the rules read (now and none by default)."""
        facts = {"occurred_at": occurred_at, "customer_id": customer_id}
        body = validate(
            rq.SimulationRequest, {"event": dict(event), **{k: v for k, v in facts.items() if v is not None}}
        )
        if rule is not None:
            return simulation.simulate_rule(self._db, self._scope, self.rule_id(rule), body)
        return simulation.simulate_programme(self._db, self._scope, self.id, body, version)

    def simulate_table(self, events: Any, *, version: Version = None, rule: int | str | None = None) -> Table:
        """A table of events (DataFrame, Arrow table or list of dicts with `type` and data fields or a `data`
        column) through a version or one rule: one row per event and rule with the rule's label (its position
        and name, `forecasting.labels`), matched, amount and reasons, shown whole in a notebook (`forecasting.tables`).
        The rules are compiled once; each event is evaluated by the engine's own rule evaluation."""
        specs, number, schedule = simulation.version_rules(self._db, self._scope, self.id, version)
        indices = list(range(len(specs)))
        if rule is not None:
            wanted = self.rule_id(rule)
            indices = [i for i, spec in enumerate(specs) if spec.rule_id == wanted]
            if not indices:
                raise ServiceError("rule_not_found", "the rule is not in that version", field="rule", rule=rule)
        chosen = [specs[i] for i in indices]
        rows: list[dict[str, Any]] = []
        items = list(event_rows(events))
        index_of = {specs[i].rule_id: i for i in indices}
        labels = rule_labels(self.rules(version))
        for position, item in enumerate(items):
            facts = EventFacts(item.occurred_at)  # no customer: the table names customers, not their attributes
            verdicts, window = simulation.explain_event(chosen, item.type, item.data, facts, schedule)
            outcome = simulation.outcome(verdicts, item.type, self.id, number, window)
            rows += _outcome_rows(position, item, outcome, [index_of[rule.rule_id] for rule in outcome.rules], labels)
        return table(pd.DataFrame(rows, columns=SIMULATION_COLUMNS))

    # replay -----------------------------------------------------------------------------------------------
    def replay(
        self,
        events: Any,
        *,
        version: Version = "live",
        opening_supply: Decimal | int | str = 0,
        engine: str = "duckdb",
        customers: Any = None,
        redemptions: Any = None,
        **options: Any,
    ) -> ReplayResult | SparkReplayResult:
        """Replay a history through a version (the published one by default) with the vectorised engine, on
        DuckDB (default) or Spark (`engine="spark"`; events may then be a Spark DataFrame or Parquet files);
        returns the engine's result (the same API and the same issuance rows on both). `customers`: the
        customers table rules read customer.* from and beneficiaries resolve in; `redemptions`: what customers
        spent, for clawbacks (docs/replay.md)."""
        definition = self.definition(version)
        return run_replay(
            events,
            definition,
            engine=engine,
            opening_supply=opening_supply,
            customers=customers,
            redemptions=redemptions,
            **options,
        )

    def sweep(
        self,
        events: Any,
        grid: Mapping[str, Sequence[Any]],
        *,
        version: Version = None,
        opening_supply: Decimal | int | str = 0,
        engine: str = "duckdb",
        customers: Any = None,
    ) -> pd.DataFrame:
        """A version (the draft by default) over every point of `grid` (keys are paths into the programme file,
        e.g. "rules[0].actions[0].amount.rate"): issuance, liability and exhaustion date per grid point, on
        DuckDB (default) or Spark; `customers` as for `replay`. The frame's attrs hold what its figures label
        (`plots.sweep_heatmap`): `labels` (each key as a designer reads it), `symbol` and `programme`."""
        definition = self.definition(version)
        frame = run_sweep(
            events, definition, dict(grid), engine=engine, opening_supply=opening_supply, customers=customers
        )
        frame.attrs |= {
            "labels": parameter_labels(grid, definition.payload(), rule_labels(definition.rules)),
            "symbol": definition.asset.symbol,
            "programme": definition.programme.name,
        }
        return frame


def _version_name(version: Version) -> str:
    """A version as a table heads its column: `published`, `draft`, `version 2`."""
    if version == "live":
        return "published"
    return "draft" if version in (None, "draft") else f"version {version}"


def _outcome_rows(
    position: int, item: EventRow, outcome: r.Simulation, indices: list[int], labels: Mapping[int, str]
) -> list[dict[str, Any]]:
    rows = []
    for index, rule in zip(indices, outcome.rules, strict=True):
        amount = sum((Decimal(a.amount) for a in rule.actions if a.issues), Decimal(0))
        reasons = [rule.reason, *(a.reason for a in rule.actions)]
        rows.append(
            {
                "event": position,
                "external_event_id": item.external_event_id,
                "event_type": item.type,
                "rule_index": index,
                "rule": labels.get(index, str(index)),
                "rule_id": rule.rule_id,
                "matched": rule.matched,
                "amount": amount,
                "reasons": "; ".join(reasons),
            }
        )
    return rows
