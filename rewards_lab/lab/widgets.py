"""ipywidgets for the lab: a rule builder, a simulator and a replay explorer.

Each widget only gathers values and calls package functions (`LabProgramme`, `forecast`, `plots`); results go
into HTML and Image widgets (not `Output` captures), so the widgets behave the same headless: tests set values
and call `button.click()`. Errors are the contract's `ServiceError`s, shown with their code and field.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import ipywidgets as w
import pandas as pd
import simplejson

from rewards_lab.contract import jsonutil
from rewards_lab.contract import resources as r
from rewards_lab.contract.errors import ServiceError
from rewards_lab.contract.limit_requests import AmountLimit, FractionOf, Limit, ReverseAction
from rewards_lab.contract.requests import FixedAmount, Operator, RuleAction
from rewards_lab.contract.rule_requests import (
    EQUALITY,
    MEMBERSHIP,
    ORDERING,
    PRESENCE,
    AllGroup,
    AnyGroup,
    Condition,
    ConditionItem,
    NotGroup,
)
from rewards_lab.lab import forecast, plots
from rewards_lab.lab.workbench import LabProgramme, describe_rule
from rewards_lab.replay.engine import ReplayResult
from rewards_lab.replay.spark_engine import SparkReplayResult

NEW_RULE = -1
OPERATORS = [op.value for op in Operator]
GROUP_KINDS = [("all of", "all"), ("any of", "any"), ("not", "not")]
PERIODS = ["day", "week", "month", "year", "lifetime"]
CAP_MEASURES = [("max amount", "max_amount"), ("max count", "max_count")]
ACTION_KINDS = [("fixed amount", "fixed"), ("per field x rate", "per"), ("take back (reverse)", "reverse")]
FRACTION_KINDS = [("all that remains", "whole"), ("a constant share", "constant"), ("refund field / original", "of")]


def error_html(error: ServiceError) -> str:
    field = error.details.get("field")
    where = f" <b>{html.escape(str(field))}</b>:" if field else ""
    return f'<span style="color:#b00">{html.escape(error.code)}{where} {html.escape(error.message)}</span>'


def ok_html(text: str) -> str:
    return f'<span style="color:#070">{html.escape(text)}</span>'


def _guard(message: w.HTML, action: Callable[[], str]) -> None:
    """Run a button's action; show its success text, or the service's error with code and field."""
    try:
        message.value = ok_html(action())
    except ServiceError as error:
        message.value = error_html(error)


def _number(text: str) -> Any:
    """The text as typed: the contract parses decimal strings exactly and refuses anything else with its field."""
    return text.strip()


class Panel:
    """A widget made of ipywidgets: `view` is its box; Jupyter displays the panel as that box."""

    view: Any

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The box's widget view, and in place of its text repr (`VBox(children=(...`, what a viewer that cannot
        draw the widget shows, such as JupyterLab for a notebook it does not trust) a sentence saying what to do."""
        bundle = self.view._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict) and "text/plain" in bundle:
            bundle = {**bundle, "text/plain": not_drawn_text(type(self).__name__)}
        return bundle


def not_drawn_text(class_name: str) -> str:
    """`RuleBuilder` -> what a reader sees where the rule builder widget cannot be drawn."""
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", class_name).lower()
    return f"[{words} widget: run the notebook (Run ▸ Run All Cells) to use it]"


VALUE_HINTS = {
    **dict.fromkeys(ORDERING, "a number: 20"),
    **dict.fromkeys(EQUALITY, '20, web, "20" or true'),
    **dict.fromkeys(MEMBERSHIP, '["web", "app"] or [1, 2]'),
    "between": '[10, 20] or ["2024-01-01", "2024-03-31"]',
    "contains": 'gold or "20"',
    **dict.fromkeys(PRESENCE, "(no value)"),
}


def parse_value(text: str) -> Any:
    """A condition's value as typed: JSON when it parses (a number `20`, a string `"20"`, `true`, a list
    `["web", "app"]`); any other text is that string (`web`, `2024-05-01`); empty text is no value."""
    text = text.strip()
    if not text:
        return None
    try:
        return jsonutil.loads_request(text)
    except (ValueError, RecursionError):
        return text


def value_text(value: Any) -> str:
    """A condition's value as the form shows it, written so that `parse_value` reads back the same value: a
    string plainly when that reads back as itself (`web`), else quoted (`"20"`, `"true"`); the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        read = parse_value(value)
        if isinstance(read, str) and read == value:
            return value
    shown = list(value) if isinstance(value, tuple) else value
    return str(simplejson.dumps(shown, use_decimal=True, ensure_ascii=False, separators=(", ", ": ")))


class ConditionRow(Panel):
    """A condition on one field: field, operator, value (see `parse_value`; none for exists / not_exists)."""

    def __init__(
        self, on_remove: Callable[[ConditionRow], None], field: str = "", operator: str = "gte", value: str = ""
    ):
        self.field = w.Text(value=field, placeholder="field, e.g. amount", layout=w.Layout(width="12em"))
        self.operator = w.Dropdown(options=OPERATORS, value=operator, layout=w.Layout(width="8em"))
        self.value = w.Text(value=value, layout=w.Layout(width="16em"))
        self.remove = w.Button(description="remove", layout=w.Layout(width="6em"))
        self.remove.on_click(lambda _: on_remove(self))
        self.operator.observe(lambda _: self._fit_value(), names="value")
        self._fit_value()
        self.view = w.HBox([self.field, self.operator, self.value, self.remove])

    def _fit_value(self) -> None:
        self.value.placeholder = VALUE_HINTS[self.operator.value]
        self.value.disabled = self.operator.value in PRESENCE

    def payload(self, where: str = "conditions[0]") -> dict[str, Any]:
        """The condition's body (`where`, its path, is for the errors only groups raise)."""
        body: dict[str, Any] = {"field": self.field.value.strip(), "operator": self.operator.value}
        value = None if self.operator.value in PRESENCE else parse_value(self.value.value)
        if value is not None:
            body["value"] = value
        return body


class ConditionList:
    """An ordered list of conditions and groups: the rule's top level (all must hold) and each group's parts."""

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self.rows: list[ConditionRow | GroupRow] = []
        self.box = w.VBox([])
        self.on_change = on_change

    def add_condition_row(self, field: str = "", operator: str = "gte", value: str = "") -> ConditionRow:
        row = ConditionRow(self._remove, field, operator, value)
        self.set_rows([*self.rows, row])
        return row

    def add_group_row(self, kind: str = "any") -> GroupRow:
        row = GroupRow(self._remove, kind)
        self.set_rows([*self.rows, row])
        return row

    def _remove(self, row: ConditionRow | GroupRow) -> None:
        self.set_rows([r for r in self.rows if r is not row])

    def set_rows(self, rows: list[ConditionRow | GroupRow]) -> None:
        self.rows = rows
        self.box.children = [row.view for row in rows]
        self.on_change()

    def payloads(self, where: str) -> list[dict[str, Any]]:
        """The bodies of the rows; `where` is the list's path (`conditions`, `conditions[1].any`)."""
        return [row.payload(f"{where}[{i}]") for i, row in enumerate(self.rows)]

    def load(self, item: ConditionItem) -> None:
        """Append a rule's condition or group (as the service returns it), its parts rebuilt as rows."""
        if isinstance(item, Condition):
            self.add_condition_row(item.field, item.operator.value, value_text(item.value))
            return
        kind, parts = _group_parts(item)
        group = self.add_group_row(kind)
        for part in parts:
            group.parts.load(part)


def _group_parts(group: AnyGroup | AllGroup | NotGroup) -> tuple[str, list[ConditionItem]]:
    if isinstance(group, AnyGroup):
        return "any", group.any
    if isinstance(group, AllGroup):
        return "all", group.all
    return "not", [group.not_]


class GroupRow(Panel):
    """A group: all of its parts hold, any of them holds, or (not) its one part does not hold. A `not` group
    takes no second part: its add buttons are disabled while it has one."""

    def __init__(self, on_remove: Callable[[GroupRow], None], kind: str = "any") -> None:
        self.kind = w.Dropdown(options=GROUP_KINDS, value=kind, layout=w.Layout(width="8em"))
        self.add_condition = w.Button(description="add condition")
        self.add_group = w.Button(description="add group")
        self.remove = w.Button(description="remove", layout=w.Layout(width="6em"))
        self.parts = ConditionList(self._fit_buttons)
        self.parts.box.layout = w.Layout(margin="0 0 0 2em", border_left="2px solid #ccc", padding="0 0 0 0.5em")
        self.add_condition.on_click(lambda _: self.parts.add_condition_row())
        self.add_group.on_click(lambda _: self.parts.add_group_row())
        self.remove.on_click(lambda _: on_remove(self))
        self.kind.observe(lambda _: self._fit_buttons(), names="value")
        self._fit_buttons()
        self.view = w.VBox([w.HBox([self.kind, self.add_condition, self.add_group, self.remove]), self.parts.box])

    def _fit_buttons(self) -> None:
        full = self.kind.value == "not" and len(self.parts.rows) >= 1
        self.add_condition.disabled = self.add_group.disabled = full

    def payload(self, where: str = "conditions[0]") -> dict[str, Any]:
        kind = self.kind.value
        if kind != "not":
            return {kind: self.parts.payloads(f"{where}.{kind}")}
        if not self.parts.rows:
            raise ServiceError("field_required", "a not group needs its one condition", field=f"{where}.not")
        if len(self.parts.rows) > 1:
            message = f"a not group holds exactly one condition, not {len(self.parts.rows)}: group them first"
            raise ServiceError("field_invalid", message, field=f"{where}.not")
        return {"not": self.parts.rows[0].payload(f"{where}.not")}


def _wide_text(description: str, placeholder: str) -> w.Text:
    """A labelled text box with its own layout (shown or hidden on its own)."""
    style = {"description_width": "initial"}
    return w.Text(description=description, placeholder=placeholder, style=style, layout=w.Layout(width="30em"))


class CapRow(Panel):
    """A cap on what the rule gives one customer per calendar period: a period and a max amount or count."""

    def __init__(
        self, on_remove: Callable[[CapRow], None], period: str = "month", measure: str = "max_amount", value: str = ""
    ) -> None:
        self.period = w.Dropdown(options=PERIODS, value=period, layout=w.Layout(width="8em"))
        self.measure = w.Dropdown(options=CAP_MEASURES, value=measure, layout=w.Layout(width="9em"))
        self.value = w.Text(value=value, placeholder="500 or 3", layout=w.Layout(width="10em"))
        self.remove = w.Button(description="remove", layout=w.Layout(width="6em"))
        self.remove.on_click(lambda _: on_remove(self))
        self.view = w.HBox([self.period, self.measure, self.value, self.remove])

    def payload(self) -> dict[str, Any]:
        """The cap's body: an amount as typed (a decimal string, checked by the contract), a count as the number
        it spells (any other text is sent as it is, and refused by the contract naming `limits[i].max_count`)."""
        text = self.value.value.strip()
        value: Any = text if self.measure.value == "max_amount" else parse_value(text)
        return {"per": "customer", "period": self.period.value, self.measure.value: value}

    @staticmethod
    def values(limit: Limit) -> tuple[str, str, str]:
        """A stored cap as the row's (period, measure, value)."""
        if isinstance(limit, AmountLimit):
            return limit.period, "max_amount", limit.max_amount
        return limit.period, "max_count", str(limit.max_count)


class RuleBuilder(Panel):
    """Add, edit and remove the draft's rules: event type, a tree of conditions and groups, priority,
    stop_processing, caps per customer (period and max amount or count), and the first action: an amount
    (fixed or per field x rate) with its beneficiary, or a reverse action (the field naming the original event,
    and the share taken back: all that remains, a constant, or a refund field over an original field)."""

    def __init__(self, programme: LabProgramme) -> None:
        self.programme = programme
        self.rule = w.Dropdown(description="rule", layout=w.Layout(width="40em"))
        self.event_type = w.Text(description="event type", placeholder="order.completed")
        self.tree = ConditionList()
        self.conditions = self.tree.box
        self.add_condition = w.Button(description="add condition")
        self.add_group = w.Button(description="add group")
        self.priority = w.IntText(description="priority", value=0)
        self.stop_processing = w.Checkbox(description="stop processing", value=False)
        self.kind = w.ToggleButtons(options=ACTION_KINDS, value="fixed")
        self.fixed = w.Text(description="fixed", placeholder="2.50")
        self.per = w.Text(description="per field", placeholder="amount")
        self.rate = w.Text(description="rate", placeholder="0.05")
        self.beneficiary = w.Text(
            description="beneficiary field",
            placeholder="referrer_id (empty: the event's customer)",
            style={"description_width": "initial"},
            layout=w.Layout(width="30em"),
        )
        self.original = _wide_text("original event field", "order_id")
        self.fraction_kind = w.ToggleButtons(options=FRACTION_KINDS, value="whole")
        self.fraction = _wide_text("fraction", "0.5 (0 < fraction <= 1)")
        self.fraction_field = _wide_text("refund field", "refund_amount")
        self.fraction_of = _wide_text("over the original's field", "amount")
        self.any_customer = w.Checkbox(
            value=False, description="a refund by any customer takes back (marketplace)", indent=False
        )
        self.issue_box = w.VBox([self.fixed, self.per, self.rate, self.beneficiary])
        share = [self.fraction_kind, self.fraction, self.fraction_field, self.fraction_of]
        self.reverse_box = w.VBox([self.original, *share, self.any_customer])
        self.cap_rows: list[CapRow] = []
        self.caps = w.VBox([])
        self.add_cap = w.Button(description="add cap")
        self.save = w.Button(description="save to draft", button_style="primary")
        self.remove = w.Button(description="remove rule", button_style="danger")
        self.message = w.HTML()
        self.draft = w.HTML()
        self.add_condition.on_click(lambda _: self.add_condition_row())
        self.add_group.on_click(lambda _: self.add_group_row())
        self.add_cap.on_click(lambda _: self.add_cap_row())
        self.kind.observe(lambda _: self._fit_action(), names="value")
        self.fraction_kind.observe(lambda _: self._fit_action(), names="value")
        self.rule.observe(lambda _: self._load_selected(), names="value")
        self.save.on_click(lambda _: _guard(self.message, self._save))
        self.remove.on_click(lambda _: _guard(self.message, self._remove))
        self.view = w.VBox(
            [
                self.rule,
                self.event_type,
                w.HTML("<b>conditions</b> (all must hold)"),
                self.conditions,
                w.HBox([self.add_condition, self.add_group]),
                w.HBox([self.priority, self.stop_processing]),
                self.kind,
                self.issue_box,
                self.reverse_box,
                w.HTML("<b>caps</b> on what the rule gives one customer per period (none: no cap)"),
                self.caps,
                self.add_cap,
                w.HBox([self.save, self.remove]),
                self.message,
                self.draft,
            ]
        )
        self._fit_action()
        self.refresh()

    def _fit_action(self) -> None:
        """Show the fields of the chosen action: an amount and beneficiary, or what a reversal takes back."""
        reverse = self.kind.value == "reverse"
        self.issue_box.layout.display = "none" if reverse else None
        self.reverse_box.layout.display = None if reverse else "none"
        share = self.fraction_kind.value
        self.fraction.layout.display = None if share == "constant" else "none"
        self.fraction_field.layout.display = self.fraction_of.layout.display = None if share == "of" else "none"

    def add_cap_row(self, period: str = "month", measure: str = "max_amount", value: str = "") -> CapRow:
        row = CapRow(self._remove_cap, period, measure, value)
        self._set_caps([*self.cap_rows, row])
        return row

    def _remove_cap(self, row: CapRow) -> None:
        self._set_caps([r for r in self.cap_rows if r is not row])

    def _set_caps(self, rows: list[CapRow]) -> None:
        self.cap_rows = rows
        self.caps.children = [row.view for row in rows]

    @property
    def condition_rows(self) -> list[ConditionRow | GroupRow]:
        """The top-level conditions and groups, in order."""
        return self.tree.rows

    def add_condition_row(self, field: str = "", operator: str = "gte", value: str = "") -> ConditionRow:
        return self.tree.add_condition_row(field, operator, value)

    def add_group_row(self, kind: str = "any") -> GroupRow:
        return self.tree.add_group_row(kind)

    def refresh(self, select: int = NEW_RULE) -> None:
        rules = self.programme.rules()
        options = [("new rule", NEW_RULE)] + [(f"{i}: {describe_rule(rule)}", i) for i, rule in enumerate(rules)]
        self.rule.options = options
        self.rule.value = select if select < len(rules) else NEW_RULE
        self.draft.value = _rules_html(rules)

    def _clear_action(self) -> None:
        for text in (self.fixed, self.per, self.rate, self.beneficiary, self.original, self.fraction):
            text.value = ""
        self.fraction_field.value = self.fraction_of.value = ""
        self.kind.value, self.fraction_kind.value = "fixed", "whole"
        self.any_customer.value = False

    def _load_selected(self) -> None:
        self.tree.set_rows([])
        self._set_caps([])
        self._clear_action()
        if self.rule.value is None or self.rule.value == NEW_RULE:
            self.event_type.value = ""
            self.priority.value, self.stop_processing.value = 0, False
            return
        rule = self.programme.rules()[self.rule.value]
        self.event_type.value = rule.event_type
        for item in rule.conditions:
            self.tree.load(item)
        self.priority.value, self.stop_processing.value = rule.priority, rule.stop_processing
        for limit in rule.limits:
            self.add_cap_row(*CapRow.values(limit))
        self._load_action(rule.actions[0])

    def _load_action(self, first: RuleAction) -> None:
        if isinstance(first, ReverseAction):
            self.kind.value, self.original.value = "reverse", first.original.field
            self.any_customer.value = first.any_customer
            fraction = first.fraction
            if isinstance(fraction, FractionOf):
                self.fraction_kind.value = "of"
                self.fraction_field.value, self.fraction_of.value = fraction.field, fraction.of
            elif fraction is not None:
                self.fraction_kind.value, self.fraction.value = "constant", str(fraction)
            return
        amount = first.amount
        if isinstance(amount, FixedAmount):
            self.kind.value, self.fixed.value = "fixed", amount.fixed
        else:
            self.kind.value, self.per.value, self.rate.value = "per", amount.per, str(amount.rate)
        self.beneficiary.value = first.beneficiary.field if first.beneficiary is not None else ""

    def _amount(self) -> dict[str, Any]:
        if self.kind.value == "fixed":
            return {"fixed": self.fixed.value.strip()}
        return {"per": self.per.value.strip(), "rate": _number(self.rate.value)}

    def _reverse_action(self) -> dict[str, Any]:
        """The form's reverse action: the original's field and the share (texts as typed; the contract checks)."""
        action: dict[str, Any] = {"type": "reverse", "original": {"field": self.original.value.strip()}}
        if self.fraction_kind.value == "constant":
            action["fraction"] = self.fraction.value.strip()
        elif self.fraction_kind.value == "of":
            action["fraction"] = {"field": self.fraction_field.value.strip(), "of": self.fraction_of.value.strip()}
        if self.any_customer.value:
            action["any_customer"] = True
        return action

    def _first_action(self, current: dict[str, Any] | None) -> dict[str, Any]:
        """The form's action over the rule's current first one (whose `asset_id`, if any, it keeps when both
        are issue actions)."""
        if self.kind.value == "reverse":
            return self._reverse_action()
        kept = current if current is not None and current.get("type") == "issue" else {"type": "issue"}
        action = {**kept, "amount": self._amount()}
        action.pop("beneficiary", None)
        if self.beneficiary.value.strip():
            action["beneficiary"] = {"field": self.beneficiary.value.strip()}
        return action

    def _save(self) -> str:
        conditions = self.tree.payloads("conditions")
        flags = {
            "priority": self.priority.value,
            "stop_processing": self.stop_processing.value,
            "limits": [row.payload() for row in self.cap_rows],
        }
        if self.rule.value == NEW_RULE:
            self.programme.add_rule(
                self.event_type.value.strip(), conditions=conditions, actions=[self._first_action(None)], **flags
            )
            index = len(self.programme.rules()) - 1
            self.refresh(select=index)
            return f"rule {index} added to the draft"
        index = self.rule.value
        # The form edits the first action; a rule's further actions are kept as they are.
        current = [a.model_dump(mode="json", exclude_none=True) for a in self.programme.rules()[index].actions]
        actions = [self._first_action(current[0]), *current[1:]]
        self.programme.update_rule(
            index, event_type=self.event_type.value.strip(), conditions=conditions, actions=actions, **flags
        )
        self.refresh(select=index)
        return f"rule {index} updated in the draft"

    def _remove(self) -> str:
        if self.rule.value == NEW_RULE:
            raise ServiceError("rule_not_found", "choose a rule of the draft to remove", field="rule")
        index = self.rule.value
        self.programme.remove_rule(index)
        self.refresh()
        return f"rule {index} removed from the draft"


def _rules_html(rules: list[r.Rule]) -> str:
    items = "".join(f"<li>{html.escape(describe_rule(rule))}</li>" for rule in rules)
    return f"<b>draft</b> ({len(rules)} rules)<ol start='0'>{items}</ol>"


def _version_options(programme: LabProgramme) -> list[tuple[str, int | str]]:
    options: list[tuple[str, int | str]] = []
    for version in programme.versions():
        if version.number is None:
            options.append(("draft", "draft"))
        else:
            options.append((f"version {version.number}", version.number))
    return options


class Simulator(Panel):
    """An event (JSON: `type` and the data fields) through a version: the outcome and every reason; with a
    customer, what its caps and the budget would cut (read from its counters, nothing counted)."""

    def __init__(self, programme: LabProgramme, example: dict[str, Any] | None = None) -> None:
        self.programme = programme
        self.version = w.Dropdown(description="version")
        self.event = w.Textarea(
            value=jsonutil.dumps(example or {"type": "order.completed", "amount": 42.5}),
            description="event",
            layout=w.Layout(width="40em", height="6em"),
        )
        self.customer = w.Text(
            description="customer",
            placeholder="customer_id (optional): whose attributes, caps and budget counters to read",
            layout=w.Layout(width="40em"),
        )
        self.run = w.Button(description="simulate", button_style="primary")
        self.result = w.HTML()
        self.outcome: r.Simulation | None = None
        self.run.on_click(lambda _: self._run())
        self.view = w.VBox([self.version, self.event, self.customer, self.run, self.result])
        self.refresh()

    def refresh(self) -> None:
        self.version.options = _version_options(self.programme)
        self.version.value = "draft"

    def _run(self) -> None:
        try:
            event = jsonutil.loads(self.event.value)
            if not isinstance(event, dict):
                raise ServiceError("field_invalid", "the event must be a JSON object", field="event")
            customer = self.customer.value.strip() or None
            self.outcome = self.programme.simulate(event, version=self.version.value, customer_id=customer)
        except ValueError as error:  # not JSON
            self.outcome = None
            self.result.value = error_html(ServiceError("request_malformed", f"not valid JSON: {error}", field="event"))
            return
        except ServiceError as error:
            self.outcome = None
            self.result.value = error_html(error)
            return
        self.result.value = _simulation_html(self.outcome)


def _simulation_html(outcome: r.Simulation) -> str:
    totals = ", ".join(t.amount for t in outcome.totals) or "nothing"
    rows = []
    for index, rule in enumerate(outcome.rules):
        amount = sum((Decimal(a.amount) for a in rule.actions if a.issues), Decimal(0))
        texts = [rule.reason, *(a.reason for a in rule.actions), *(a.limit_reason or "" for a in rule.actions)]
        reasons = "<br>".join(html.escape(x) for x in texts if x)
        mark = "yes" if rule.matched else "no"
        rows.append(
            f"<tr><td>{index}</td><td>{rule.event_type}</td><td>{mark}</td><td>{amount}</td><td>{reasons}</td></tr>"
        )
    head = "<tr><th>rule</th><th>event type</th><th>matched</th><th>amount</th><th>why</th></tr>"
    return f"<p><b>issues {html.escape(totals)}</b></p><table>{head}{''.join(rows)}</table>"


REPLAY_HINT = "<i>choose a version and a date range, then <b>replay</b>: the plots appear here</i>"


def _plot_image() -> w.Image:
    """An image widget hidden while it has no plot: an empty Image renders as a broken image in the browser."""
    return w.Image(format="png", layout=w.Layout(display="none"))


def _show(image: w.Image, png: bytes) -> None:
    """Set a plot image; an empty one is hidden rather than drawn broken."""
    image.value = png
    image.layout.display = None if png else "none"


class ReplayExplorer(Panel):
    """Replay a history (a DataFrame) through a version over a date range; optionally compare with a second
    version; plots liability with its projection, issuance per rule, and the comparison."""

    def __init__(self, programme: LabProgramme, events: pd.DataFrame, *, opening_supply: Decimal | int | str = 0):
        self.programme = programme
        self.events = events
        self.opening_supply = opening_supply
        days = pd.to_datetime(events["occurred_at"], utc=True).dt.date
        self.version = w.Dropdown(description="version")
        self.compare_with = w.Dropdown(description="compare with")
        self.start = w.DatePicker(description="from", value=days.min())
        self.end = w.DatePicker(description="to", value=days.max())
        self.days_ahead = w.IntSlider(description="project days", value=30, min=7, max=365)
        self.run = w.Button(description="replay", button_style="primary")
        self.summary = w.HTML(REPLAY_HINT)
        self.cumulative = _plot_image()
        self.per_rule = _plot_image()
        self.comparison = _plot_image()
        self.result: ReplayResult | SparkReplayResult | None = None
        self.compared: forecast.Comparison | None = None
        self.run.on_click(lambda _: _guard(self.summary, self._run))
        self.view = w.VBox(
            [
                w.HBox([self.version, self.compare_with]),
                w.HBox([self.start, self.end]),
                self.days_ahead,
                self.run,
                self.summary,
                self.cumulative,
                self.per_rule,
                self.comparison,
            ]
        )
        self.refresh()

    def refresh(self) -> None:
        options = _version_options(self.programme)
        self.version.options = options
        self.version.value = options[-2][1] if len(options) > 1 else "draft"  # the live version if any
        self.compare_with.options = [("nothing", None), *options]
        self.compare_with.value = None

    def window(self) -> pd.DataFrame:
        occurred = pd.to_datetime(self.events["occurred_at"], utc=True).dt.date
        start: date | None = self.start.value
        end: date | None = self.end.value
        keep = pd.Series(True, index=self.events.index)
        if start is not None:
            keep &= occurred >= start
        if end is not None:
            keep &= occurred <= end
        return self.events[keep]

    def _run(self) -> str:
        events = self.window()
        if events.empty:
            raise ServiceError("field_invalid", "no events in that date range", field="start")
        self.result = self.programme.replay(events, version=self.version.value, opening_supply=self.opening_supply)
        h = forecast.history(self.result, label=f"version {self.version.value}")
        projection = forecast.project(h, days=self.days_ahead.value) if not h.issued_rows.empty else None
        _show(self.cumulative, plots.png(plots.cumulative(h, projection)))
        _show(self.per_rule, plots.png(plots.per_rule(h)))
        self.compared = None
        _show(self.comparison, b"")
        if self.compare_with.value is not None:
            other = self.programme.replay(events, version=self.compare_with.value, opening_supply=self.opening_supply)
            labels = (f"version {self.version.value}", f"version {self.compare_with.value}")
            self.compared = forecast.compare(h, forecast.history(other, label=labels[1]), labels)
            _show(self.comparison, plots.png(plots.compare(self.compared)))
        issued = forecast.amount(int(h.issued_rows["amount_minor"].sum()), h.decimals)
        ends = forecast.exhaustion(h)
        text = f"{len(events)} events, issued {issued}; ceiling: {ends.kind}" + (f" {ends.on}" if ends.on else "")
        if self.compared is not None:
            difference: Any = self.compared.totals.set_index("metric").loc["issued", "difference"]
            text += f"; {self.compared.labels[1]} minus {self.compared.labels[0]}: {difference}"
        return text
