"""What changed between two versions as a table a designer reads: one row per changed setting or rule field
(rule / field / old / new), each value in words (`amount >= 20`, `issue amount x 0.05`, `500 a month`), rendered
as HTML in notebooks and as text in a terminal.

`ProgrammeDiff` (contract.programme_file) tells rules apart by behaviour only: an edited rule is one removed and
one added. Here a removed rule and the added rule most like it (same name, else same event type) are read as that
rule edited, and shown field by field; any other is shown whole, as new or removed."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rewards_lab.contract import jsonutil
from rewards_lab.contract.programme_file import FileRule, ProgrammeDiff, RuleChange
from rewards_lab.contract.rule_requests import condition_payload
from rewards_lab.domain.conditions import describe_node
from rewards_lab.domain.rules import condition_node
from rewards_lab.forecasting import labels
from rewards_lab.lab.workbench import describe_amount, describe_limits

NEW, REMOVED, NONE = "(new)", "(removed)", "-"


def rule_label(index: int, rule: FileRule) -> str:
    """`rule 2 · Welcome bonus`, or `rule 4 · referral.converted` for an unnamed rule: the label every list of
    rules shows (forecasting.labels), as a row of the table refers to it."""
    return f"rule {labels.rule_label(index, rule)}"


def conditions_text(rule: FileRule) -> str:
    nodes = [condition_node(condition_payload(item)) for item in rule.conditions]
    return " and ".join(describe_node(node) for node in nodes) or "always"


def actions_text(rule: FileRule) -> str:
    """`issue amount x 0.05`, `take back what order_id issued`: each action says what it does."""
    texts = [describe_amount(action) for action in rule.actions]  # type: ignore[arg-type]
    return ", ".join(text if text.startswith("take back") else f"issue {text}" for text in texts)


# A rule's fields as the table shows them, in the order a rule reads.
RULE_FIELDS: list[tuple[str, Callable[[FileRule], str]]] = [
    ("name", lambda rule: str(getattr(rule, "name", None) or NONE)),
    ("event type", lambda rule: rule.event_type),
    ("conditions", conditions_text),
    ("actions", actions_text),
    ("priority", lambda rule: str(rule.priority)),
    ("stop processing", lambda rule: "yes" if rule.stop_processing else "no"),
    ("caps", lambda rule: describe_limits(rule.limits) or "none"),
]


def rule_text(rule: FileRule) -> str:
    """A whole rule in one cell: `order.completed when amount >= 20: amount x 0.05`, with its other fields."""
    extra = ([f"priority {rule.priority}"] if rule.priority else []) + (["stops"] if rule.stop_processing else [])
    extra += [f"caps {describe_limits(rule.limits)}"] if rule.limits else []
    suffix = f" [{', '.join(extra)}]" if extra else ""
    return f"{rule.event_type} when {conditions_text(rule)}: {actions_text(rule)}{suffix}"


_PER = {"day": "a day", "week": "a week", "month": "a month", "year": "a year", "lifetime": "in all"}


def setting_text(value: Any) -> str:
    """A programme or asset setting in words where it has a shape the lab knows (a cap or a budget: `10000 a
    month`, `3 rewards a day`), else as it is (JSON for other lists and objects; `-` for none)."""
    if value is None:
        return NONE
    if isinstance(value, str | int | float | bool):
        return str(value)
    if isinstance(value, dict) and "period" in value and ("max_amount" in value or "max_count" in value):
        per = _PER.get(value["period"], f"per {value['period']}")
        return f"{value['max_amount']} {per}" if "max_amount" in value else f"{value['max_count']} rewards {per}"
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return ", ".join(setting_text(item) for item in value)
    return jsonutil.dumps(value)


@dataclass(frozen=True)
class DiffTable:
    """The changes from `labels[0]` (e.g. the published version) to `labels[1]` (e.g. the draft)."""

    diff: ProgrammeDiff
    labels: tuple[str, str] = ("published", "draft")

    @property
    def is_empty(self) -> bool:
        return self.diff.is_empty

    def rows(self) -> pd.DataFrame:
        """One row per change: `rule` (programme, asset or the rule), `field`, the old value, the new value."""
        old, new = self.labels
        rows = [
            {"rule": "programme", "field": name, old: setting_text(before), new: setting_text(after)}
            for name, (before, after) in self.diff.programme_changes.items()
        ]
        rows += [
            {"rule": "asset", "field": name, old: setting_text(before), new: setting_text(after)}
            for name, (before, after) in self.diff.asset_changes.items()
        ]
        changed = _rule_rows(self.diff, old)
        rows += [{"rule": rule, "field": field, old: a, new: b} for rule, field, a, b in changed]
        return pd.DataFrame(rows, columns=["rule", "field", old, new])

    def text(self) -> str:
        if self.is_empty:
            return f"no changes between the {self.labels[0]} version and the {self.labels[1]}"
        return str(self.rows().to_string(index=False))

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        if self.is_empty:
            return f"<p>{html.escape(self.text())}</p>"
        table = self.rows()
        head = "".join(f"<th style='text-align:left'>{html.escape(str(name))}</th>" for name in table.columns)
        body = []
        for values in table.itertuples(index=False):
            cells = []
            for value in values:
                colour = {NEW: "#e6f4ea", REMOVED: "#fdecea"}.get(str(value))
                style = "text-align:left;vertical-align:top;white-space:pre-wrap;word-break:break-word"
                style += f";background:{colour}" if colour else ""
                cells.append(f"<td style='{style}'>{html.escape(str(value))}</td>")
            body.append(f"<tr>{''.join(cells)}</tr>")
        return f"<table class='rewards-diff'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _rule_rows(diff: ProgrammeDiff, old: str) -> list[tuple[str, str, str, str]]:
    """The rule changes: a removed rule paired with the added one it most resembles (`pairs`) field by field,
    the others whole (as removed or new), in the order of the rules. Rules are numbered as in the new version;
    a removed one as in the old (`published rule 2`)."""
    removed = [change for change in diff.rule_changes if change.kind == "removed"]
    added = [change for change in diff.rule_changes if change.kind == "added"]
    rows: list[tuple[int, str, str, str, str]] = []
    matched = pairs(removed, added)
    for before in removed:
        after = matched.get(before.index)
        if after is not None:
            rows += _edited(after.index, before, after)
        else:
            label = f"{old} {rule_label(before.index, before.rule)}"
            rows.append((before.index, label, "rule", rule_text(before.rule), REMOVED))
    paired = {after.index for after in matched.values()}
    for after in added:
        if after.index not in paired:
            rows.append((after.index, rule_label(after.index, after.rule), "rule", NEW, rule_text(after.rule)))
    return [row[1:] for row in sorted(rows, key=lambda row: row[0])]


def pairs(removed: list[RuleChange], added: list[RuleChange]) -> dict[int, RuleChange]:
    """Which added rule is which removed rule edited (by the removed rule's index): a file's rules have no
    identity, so a pair must have the same name when both have one, else the same event type; among those the
    one with the most fields alike, then the nearest position, wins."""
    found: dict[int, RuleChange] = {}
    free = list(added)
    for before in removed:
        candidates = [after for after in free if _may_pair(before.rule, after.rule)]
        if not candidates:
            continue
        best = max(candidates, key=lambda after: (_alike(before.rule, after.rule), -abs(after.index - before.index)))
        found[before.index] = best
        free.remove(best)
    return found


def _may_pair(old: FileRule, new: FileRule) -> bool:
    old_name, new_name = getattr(old, "name", None), getattr(new, "name", None)
    if old_name and new_name:
        return bool(old_name == new_name)
    return old.event_type == new.event_type


def _alike(old: FileRule, new: FileRule) -> int:
    return sum(read(old) == read(new) for _, read in RULE_FIELDS)


def _edited(index: int, before: RuleChange, after: RuleChange) -> list[tuple[int, str, str, str, str]]:
    label = rule_label(index, after.rule)
    rows = []
    for field, read in RULE_FIELDS:
        old, new = read(before.rule), read(after.rule)
        if old != new:
            rows.append((index, label, field, old, new))
    if not rows:  # the same in words, different in the file (e.g. a number's spelling): show the files' bodies
        rows.append((index, label, "rule", jsonutil.dumps(before.rule.payload()), jsonutil.dumps(after.rule.payload())))
    return rows
