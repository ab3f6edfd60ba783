"""ipywidgets for the lab: a rule builder, a simulator and a replay explorer.

Each widget only gathers values and calls package functions (`LabProgramme`, `forecast`, `plots`); results go
into HTML and Image widgets (not `Output` captures), so the widgets behave the same headless: tests set values
and call `button.click()`. Errors are the contract's `ServiceError`s, shown with their code and field.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
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
from rewards_lab.contract.operators import OPERATORS as OPERATOR_ENTRIES
from rewards_lab.contract.requests import FixedAmount, RuleAction
from rewards_lab.contract.rule_requests import (
    AllGroup,
    AnyGroup,
    Condition,
    ConditionItem,
    NotGroup,
)
from rewards_lab.domain.actions import ACTIONS
from rewards_lab.domain.limits import PERIODS
from rewards_lab.forecasting import forecast
from rewards_lab.forecasting.labels import SEPARATOR, rule_label, rule_number
from rewards_lab.forecasting.liability import forecast_liability
from rewards_lab.forecasting.tables import table_html
from rewards_lab.lab import plots
from rewards_lab.lab.figure_widgets import figure_size, show_figure
from rewards_lab.lab.workbench import LabProgramme, describe_rule
from rewards_lab.replay.engine import ReplayResult
from rewards_lab.replay.spark_engine import SparkReplayResult

NEW_RULE = -1
OPERATORS = list(OPERATOR_ENTRIES)
GROUP_KINDS = [("all of", "all"), ("any of", "any"), ("not", "not")]
CAP_MEASURES = [("max amount", "max_amount"), ("max count", "max_count")]
ACTION_KINDS = [(kind.label, name) for name, kind in ACTIONS.items()]
FRACTION_KINDS = [("all that remains", "whole"), ("a constant share", "constant"), ("refund field / original", "of")]


# The contract's wording of an empty text (pydantic's), as a designer reads it in a form.
_PLAIN_WORDS = {"String should have at least 1 character": "is empty: fill it in"}


def error_html(error: ServiceError, labels: Callable[[str], str | None] = lambda field: None) -> str:
    """An error as an alert: its code, the field (by the form's label when `labels` knows it, with the
    contract's path beside it) and the message (without the field it repeats)."""
    field = error.details.get("field")
    message = error.message
    where = ""
    if field:
        path = str(field)
        message = message.removeprefix(f"{path}: ")
        label = labels(path)
        shown = f"{label} ({path})" if label and label != path else path
        where = f" <b>{html.escape(shown)}</b>:"
    message = _PLAIN_WORDS.get(message, message)
    return (
        '<div role="alert" style="color:#b00;background:#fdecea;border-left:3px solid #b00;padding:2px 6px">'
        f"{html.escape(error.code)}{where} {html.escape(message)}</div>"
    )


class Markup(str):
    """HTML an action returns to `_guard`, shown as it is (a plain `str` is a success message, escaped)."""


def ok_html(text: str) -> str:
    if isinstance(text, Markup):
        return str(text)
    return f'<span style="color:#070">{html.escape(text)}</span>'


def _unexpected(error: Exception) -> ServiceError:
    """An error that is not the contract's, as one (so it is shown like the others, never only logged)."""
    return ServiceError("internal_error", f"{type(error).__name__}: {error}")


def _guard(
    message: w.HTML,
    action: Callable[[], str],
    *,
    stale: Sequence[w.Image | w.HTML] = (),
    labels: Callable[[str], str | None] = lambda field: None,
) -> bool:
    """Run a button's action and show its outcome in `message`: its success text, or the error (the service's,
    with code and field; any other as `internal_error`). On an error the outputs of the last run (`stale`:
    plots and tables) are emptied and hidden, so that the error stands in their place and nothing under it
    belongs to an earlier run. Every widget's buttons go through here. True when the action succeeded."""
    try:
        text = action()
    except ServiceError as error:
        failure = error
    except Exception as error:  # noqa: BLE001 (shown in the widget: a callback's exception is otherwise lost)
        failure = _unexpected(error)
    else:
        message.value = ok_html(text)
        return True
    for output in stale:
        _clear(output)
    message.value = error_html(failure, labels)
    return False


def _clear(output: w.Image | w.HTML) -> None:
    if isinstance(output, w.Image):
        _show(output, b"")
    else:
        output.value = ""


def _button(description: str, **options: Any) -> w.Button:
    """A button as wide as its label (ipywidgets' fixed default width cuts longer labels)."""
    return w.Button(description=description, layout=w.Layout(width="auto", min_width="6em"), **options)


def _toggles(options: Sequence[tuple[str, str]], value: str) -> w.ToggleButtons:
    """Toggle buttons each as wide as its label."""
    return w.ToggleButtons(options=options, value=value, style={"button_width": "auto"})


def _number(text: str) -> Any:
    """The text as typed: the contract parses decimal strings exactly and refuses anything else with its field."""
    return text.strip()


def _on_values(controls: Sequence[w.ValueWidget], callback: Callable[[], None]) -> None:
    """Call `callback` whenever one of `controls` changes value."""
    for control in controls:
        control.observe(lambda _: callback(), names="value")


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


VALUE_HINTS = {name: entry.hint for name, entry in OPERATOR_ENTRIES.items()}


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
        self,
        on_remove: Callable[[ConditionRow], None],
        field: str = "",
        operator: str = "gte",
        value: str = "",
        on_edit: Callable[[], None] = lambda: None,
    ):
        self.field = w.Text(value=field, placeholder="field, e.g. amount", layout=w.Layout(width="12em"))
        self.operator = w.Dropdown(options=OPERATORS, value=operator, layout=w.Layout(width="8em"))
        self.value = w.Text(value=value, layout=w.Layout(width="16em"))
        self.remove = _button("remove")
        self.remove.on_click(lambda _: on_remove(self))
        self.operator.observe(lambda _: self._fit_value(), names="value")
        _on_values([self.field, self.operator, self.value], on_edit)
        self._fit_value()
        self.view = w.HBox([self.field, self.operator, self.value, self.remove])

    def _fit_value(self) -> None:
        self.value.placeholder = VALUE_HINTS[self.operator.value]
        self.value.disabled = not OPERATOR_ENTRIES[self.operator.value].takes_value

    def payload(self, where: str = "conditions[0]") -> dict[str, Any]:
        """The condition's body (`where`, its path, is for the errors only groups raise)."""
        body: dict[str, Any] = {"field": self.field.value.strip(), "operator": self.operator.value}
        value = parse_value(self.value.value) if OPERATOR_ENTRIES[self.operator.value].takes_value else None
        if value is not None:
            body["value"] = value
        return body


class ConditionList:
    """An ordered list of conditions and groups: the rule's top level (all must hold) and each group's parts."""

    def __init__(self, on_change: Callable[[], None] = lambda: None, on_edit: Callable[[], None] = lambda: None):
        """`on_change`: called when a row is added or removed; `on_edit`: also when a value in a row changes."""
        self.rows: list[ConditionRow | GroupRow] = []
        self.box = w.VBox([])
        self.on_change = on_change
        self.on_edit = on_edit

    def add_condition_row(self, field: str = "", operator: str = "gte", value: str = "") -> ConditionRow:
        row = ConditionRow(self._remove, field, operator, value, on_edit=self.on_edit)
        self.set_rows([*self.rows, row])
        return row

    def add_group_row(self, kind: str = "any") -> GroupRow:
        row = GroupRow(self._remove, kind, on_edit=self.on_edit)
        self.set_rows([*self.rows, row])
        return row

    def _remove(self, row: ConditionRow | GroupRow) -> None:
        self.set_rows([r for r in self.rows if r is not row])

    def set_rows(self, rows: list[ConditionRow | GroupRow]) -> None:
        self.rows = rows
        self.box.children = [row.view for row in rows]
        self.on_change()
        self.on_edit()

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

    def __init__(
        self, on_remove: Callable[[GroupRow], None], kind: str = "any", on_edit: Callable[[], None] = lambda: None
    ) -> None:
        self.kind = w.Dropdown(options=GROUP_KINDS, value=kind, layout=w.Layout(width="8em"))
        self.add_condition = _button("add condition")
        self.add_group = _button("add group")
        self.remove = _button("remove")
        self.parts = ConditionList(self._fit_buttons, on_edit)
        _on_values([self.kind], on_edit)
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
        reason = "a not group holds exactly one condition: remove it, or use all of / any of" if full else ""
        self.add_condition.tooltip = self.add_group.tooltip = reason

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
        self,
        on_remove: Callable[[CapRow], None],
        period: str = "month",
        measure: str = "max_amount",
        value: str = "",
        on_edit: Callable[[], None] = lambda: None,
    ) -> None:
        self.period = w.Dropdown(options=list(PERIODS), value=period, layout=w.Layout(width="8em"))
        self.measure = w.Dropdown(options=CAP_MEASURES, value=measure, layout=w.Layout(width="9em"))
        self.value = w.Text(value=value, placeholder="500 or 3", layout=w.Layout(width="10em"))
        self.remove = _button("remove")
        self.remove.on_click(lambda _: on_remove(self))
        _on_values([self.period, self.measure, self.value], on_edit)
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
        self.tree = ConditionList(on_edit=self._edited)
        self.conditions = self.tree.box
        self.add_condition = _button("add condition")
        self.add_group = _button("add group")
        self.priority = w.IntText(description="priority", value=0)
        self.stop_processing = w.Checkbox(description="stop processing", value=False)
        self.kind = _toggles(ACTION_KINDS, "fixed")
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
        self.fraction_kind = _toggles(FRACTION_KINDS, "whole")
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
        self.add_cap = _button("add cap")
        self.save = _button("save to draft", button_style="primary")
        self.remove = _button("remove rule", button_style="danger")
        self.message = w.HTML()
        self.draft = w.HTML()
        self.add_condition.on_click(lambda _: self.add_condition_row())
        self.add_group.on_click(lambda _: self.add_group_row())
        self.add_cap.on_click(lambda _: self.add_cap_row())
        self.kind.observe(lambda _: self._fit_action(), names="value")
        self.fraction_kind.observe(lambda _: self._fit_action(), names="value")
        self.rule.observe(lambda _: self._load_selected(), names="value")
        self.save.on_click(lambda _: _guard(self.message, self._save, labels=form_label))
        self.remove.on_click(lambda _: _guard(self.message, self._remove, labels=form_label))
        # Any edit of the form makes the last save's message stale: it is cleared (a save then sets its own).
        edits = [self.event_type, self.priority, self.stop_processing, self.kind, self.fixed, self.per, self.rate]
        edits += [self.beneficiary, self.original, self.fraction_kind, self.fraction, self.fraction_field]
        _on_values([*edits, self.fraction_of, self.any_customer], self._edited)
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

    def _edited(self) -> None:
        self.message.value = ""

    def _fit_action(self) -> None:
        """Show only the fields of the chosen action: a fixed amount, or a field and a rate (each with its
        beneficiary), or what a reversal takes back."""
        kind = self.kind.value
        self.issue_box.layout.display = "none" if kind == "reverse" else None
        self.fixed.layout.display = None if kind == "fixed" else "none"
        self.per.layout.display = self.rate.layout.display = None if kind == "per" else "none"
        self.reverse_box.layout.display = None if kind == "reverse" else "none"
        share = self.fraction_kind.value
        self.fraction.layout.display = None if share == "constant" else "none"
        self.fraction_field.layout.display = self.fraction_of.layout.display = None if share == "of" else "none"

    def add_cap_row(self, period: str = "month", measure: str = "max_amount", value: str = "") -> CapRow:
        row = CapRow(self._remove_cap, period, measure, value, on_edit=self._edited)
        self._set_caps([*self.cap_rows, row])
        return row

    def _remove_cap(self, row: CapRow) -> None:
        self._set_caps([r for r in self.cap_rows if r is not row])

    def _set_caps(self, rows: list[CapRow]) -> None:
        self.cap_rows = rows
        self.caps.children = [row.view for row in rows]
        self._edited()

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
        options = [("new rule", NEW_RULE)] + [(_rule_option(i, rule), i) for i, rule in enumerate(rules)]
        self.rule.options = options
        self.rule.value = select if select < len(rules) else NEW_RULE
        self.draft.value = _rules_html(rules)
        self._fit_remove()

    def _fit_remove(self) -> None:
        """Only a rule of the draft can be removed: with "new rule" chosen the button is disabled, saying why."""
        new = self.rule.value in (None, NEW_RULE)
        self.remove.disabled = new
        chosen = "choose a rule of the draft to remove"
        self.remove.tooltip = chosen if new else f"remove {rule_number(self.rule.value)}"

    def _clear_action(self) -> None:
        for text in (self.fixed, self.per, self.rate, self.beneficiary, self.original, self.fraction):
            text.value = ""
        self.fraction_field.value = self.fraction_of.value = ""
        self.kind.value, self.fraction_kind.value = "fixed", "whole"
        self.any_customer.value = False

    def _load_selected(self) -> None:
        self._fit_remove()
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
            return f"{rule_number(index)} added to the draft"
        index = self.rule.value
        # The form edits the first action; a rule's further actions are kept as they are.
        current = [a.model_dump(mode="json", exclude_none=True) for a in self.programme.rules()[index].actions]
        actions = [self._first_action(current[0]), *current[1:]]
        self.programme.update_rule(
            index, event_type=self.event_type.value.strip(), conditions=conditions, actions=actions, **flags
        )
        self.refresh(select=index)
        return f"{rule_number(index)} updated in the draft"

    def _remove(self) -> str:
        if self.rule.value == NEW_RULE:
            raise ServiceError("rule_not_found", "choose a rule of the draft to remove", field="rule")
        index = self.rule.value
        self.programme.remove_rule(index)
        self.refresh()
        return f"{rule_number(index)} removed from the draft"


_FORM_LABELS = [
    (r"event_type", "event type"),
    (r"actions\[0\]\.amount\.fixed", "fixed"),
    (r"actions\[0\]\.amount\.per", "per field"),
    (r"actions\[0\]\.amount\.rate", "rate"),
    (r"actions\[0\]\.beneficiary", "beneficiary field"),
    (r"actions\[0\]\.original", "original event field"),
    (r"actions\[0\]\.fraction\.field", "refund field"),
    (r"actions\[0\]\.fraction\.of", "over the original's field"),
    (r"actions\[0\]\.fraction", "fraction"),
    (r"priority", "priority"),
]


def form_label(path: str) -> str | None:
    """The rule builder's label for a field the contract names by its path (`actions[0].amount.fixed` is the
    `fixed` box, `conditions[1].any[0].value` is condition 2, `limits[0].max_amount` is cap 1); None when the
    form has no such control."""
    for pattern, label in _FORM_LABELS:
        if re.match(pattern + r"(\.|\[|$)", path):
            return label
    numbered = re.match(r"(conditions|limits)\[(\d+)\]", path)
    if numbered:
        return f"{'condition' if numbered[1] == 'conditions' else 'cap'} {int(numbered[2]) + 1}"
    return None


def _rule_option(position: int, rule: r.Rule) -> str:
    """A rule in the builder's list: its position and name (`forecasting.labels`), then all it does."""
    if rule.name:
        return f"{rule_label(position, rule)}: {describe_rule(rule)}"
    return f"{position + 1}{SEPARATOR}{describe_rule(rule)}"


def _rules_html(rules: list[r.Rule]) -> str:
    items = "".join(
        f"<li>{f'<b>{html.escape(rule.name)}</b>: ' if rule.name else ''}{html.escape(describe_rule(rule))}</li>"
        for rule in rules
    )
    return f"<b>draft</b> ({len(rules)} rules)<ol start='1'>{items}</ol>"


def needs_rules(programme: LabProgramme, version: int | str, field: str = "version") -> None:
    """Refuse, saying so, to replay a version without rules (the engine's own refusal speaks of exporting)."""
    if not programme.rules(version):
        message = f"{_version_label(version)} has no rules to replay: add one with the rule builder first"
        raise ServiceError("programme_draft_empty", message, field=field)


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
        self.run = _button("simulate", button_style="primary")
        self.result = w.HTML()
        self.outcome: r.Simulation | None = None
        self.run.on_click(lambda _: _guard(self.result, self._run))
        self.view = w.VBox([self.version, self.event, self.customer, self.run, self.result])
        self.refresh()

    def refresh(self) -> None:
        self.version.options = _version_options(self.programme)
        self.version.value = "draft"

    def _run(self) -> Markup:
        self.outcome = None
        try:
            event = jsonutil.loads(self.event.value)
        except ValueError as error:
            raise ServiceError("request_malformed", f"not valid JSON: {error}", field="event") from error
        if not isinstance(event, dict):
            found = type(event).__name__
            message = f'the event must be a JSON object such as {{"type": "order.completed"}}, not a {found}'
            raise ServiceError("field_invalid", message, field="event")
        customer = self.customer.value.strip() or None
        self.outcome = self.programme.simulate(event, version=self.version.value, customer_id=customer)
        return Markup(_simulation_html(self.outcome, self.programme.rules(self.version.value)))


def _simulation_html(outcome: r.Simulation, rules: list[r.Rule]) -> str:
    """The outcome as a table: each rule by its label (position and name, in the order the rules applied), whether
    it matched, what it issues and every reason, whole (`forecasting.tables`)."""
    totals = ", ".join(t.amount for t in outcome.totals) or "nothing"
    labels = {rule.id: rule_label(position, rule) for position, rule in enumerate(rules)}
    rows = []
    for rule in outcome.rules:
        amount = sum((Decimal(a.amount) for a in rule.actions if a.issues), Decimal(0))
        texts = [rule.reason, *(a.reason for a in rule.actions), *(a.limit_reason or "" for a in rule.actions)]
        rows.append(
            {
                "rule": labels.get(rule.rule_id, rule.rule_id),
                "event type": rule.event_type,
                "matched": "yes" if rule.matched else "no",
                "amount": amount,
                "why": "\n".join(text for text in texts if text),
            }
        )
    frame = pd.DataFrame(rows, columns=["rule", "event type", "matched", "amount", "why"])
    return f"<p><b>issues {html.escape(totals)}</b></p>{table_html(frame.set_index('rule'))}"


REPLAY_HINT = "<i>choose a version and a date range, then <b>replay</b>: the plots appear here</i>"


def _plot_image() -> w.Image:
    """An image widget hidden while it has no plot: an empty Image renders as a broken image in the browser."""
    return w.Image(format="png", layout=w.Layout(display="none"))


def _show(image: w.Image, png: bytes) -> None:
    """Set a plot image; an empty one is hidden rather than drawn broken."""
    image.value = png
    image.layout.display = None if png else "none"


def _version_label(version: int | str | None) -> str:
    """How the explorer's figures name a version: "the draft", "version 2"."""
    return "the draft" if version == "draft" else f"version {version}"


class ReplayExplorer(Panel):
    """Replay a history (a DataFrame) through a version over a date range; optionally compare with a second
    version; plots liability (forecasting.liability's, as the liability widget) with its projection, issuance per rule,
    and the comparison."""

    def __init__(self, programme: LabProgramme, events: pd.DataFrame, *, opening_supply: Decimal | int | str = 0):
        self.programme = programme
        self.events = events
        self.opening_supply = opening_supply
        days = pd.to_datetime(events["occurred_at"], utc=True).dt.date
        self.version = w.Dropdown(description="version")
        # the label whole: the default description width showed "compare ..."
        self.compare_with = w.Dropdown(description="compare with", style={"description_width": "initial"})
        self.start = w.DatePicker(description="from", value=days.min())
        self.end = w.DatePicker(description="to", value=days.max())
        self.days_ahead = w.IntSlider(description="project days", value=30, min=7, max=365)
        self.run = _button("replay", button_style="primary")
        self.summary = w.HTML(REPLAY_HINT)
        self.cumulative = _plot_image()
        self.per_rule = _plot_image()
        self.comparison = _plot_image()
        self.result: ReplayResult | SparkReplayResult | None = None
        self.compared: forecast.Comparison | None = None
        plots_shown = [self.cumulative, self.per_rule, self.comparison]
        self.run.on_click(lambda _: _guard(self.summary, self._run, stale=plots_shown))
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
        """The events between the two dates (both included); a reversed range or a range outside the history is
        refused saying so."""
        occurred = pd.to_datetime(self.events["occurred_at"], utc=True).dt.date
        start: date | None = self.start.value
        end: date | None = self.end.value
        if start is not None and end is not None and start > end:
            message = f"the start date ({start}) is after the end date ({end}): swap them"
            raise ServiceError("field_invalid", message, field="from")
        keep = pd.Series(True, index=self.events.index)
        if start is not None:
            keep &= occurred >= start
        if end is not None:
            keep &= occurred <= end
        chosen = self.events[keep]
        if chosen.empty:
            first, last = (occurred.min(), occurred.max()) if len(occurred) else (None, None)
            held = f"the history runs from {first} to {last}" if first is not None else "the history has no events"
            message = f"no events from {start or 'its start'} to {end or 'its end'}: {held}"
            raise ServiceError("field_invalid", message, field="from")
        return chosen

    def _run(self) -> str:
        self.result, self.compared = None, None
        if self.compare_with.value is not None and self.compare_with.value == self.version.value:
            message = f"{_version_label(self.version.value)} compared with itself: choose another version, or nothing"
            raise ServiceError("field_invalid", message, field="compare with")
        events = self.window()
        needs_rules(self.programme, self.version.value)
        if self.compare_with.value is not None:
            needs_rules(self.programme, self.compare_with.value, field="compare with")
        self.result = self.programme.replay(events, version=self.version.value, opening_supply=self.opening_supply)
        h = forecast.history(self.result, label=_version_label(self.version.value))
        # forecasting.liability's liability (net of what the version's expiry took), as the liability widget draws it
        outlook = forecast_liability(self.result, days=self.days_ahead.value)
        show_figure(self.cumulative, plots.liability(outlook, label=h.label, size=figure_size(0.5)))
        show_figure(self.per_rule, plots.per_rule(h, size=figure_size(0.4)))
        self.compared = None
        _show(self.comparison, b"")
        if self.compare_with.value is not None:
            other = self.programme.replay(events, version=self.compare_with.value, opening_supply=self.opening_supply)
            labels = (_version_label(self.version.value), _version_label(self.compare_with.value))
            self.compared = forecast.compare(h, forecast.history(other, label=labels[1]), labels)
            show_figure(self.comparison, plots.compare(self.compared, size=figure_size(0.42)))
        issued = forecast.amount(int(h.issued_rows["amount_minor"].sum()), h.decimals)
        ends = forecast.exhaustion(h)
        text = f"{len(events)} events, issued {issued}; ceiling: {ends.kind}" + (f" {ends.on}" if ends.on else "")
        if self.compared is not None:
            difference: Any = self.compared.totals.set_index("metric").loc["issued", "difference"]
            text += f"; {self.compared.labels[1]} minus {self.compared.labels[0]}: {difference}"
        return text
