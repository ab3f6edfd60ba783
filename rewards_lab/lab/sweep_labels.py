"""Sweep parameters as a designer reads them: a grid key is a path into the programme file
(`rules[0].actions[0].amount.rate`); a figure labels it with its rule, named as every list of rules names it
(forecasting.labels), and what the value means: `1 · Cashback on orders of 20 or more: rate`,
`2 · order.completed when amount >= 50: amount at least`, `programme cap per customer a month: max amount (SHOP)`.
A path this module does not know is written with spaces for its dots, never left as JSON."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from rewards_lab.contract.operators import OPERATORS
from rewards_lab.contract.programme_file import FileRule
from rewards_lab.forecasting import labels

OPERATOR_WORDS = {name: entry.words for name, entry in OPERATORS.items()}
_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def _parts(path: str) -> list[str | int] | None:
    parts: list[str | int] = []
    for piece in path.split("."):
        match = _PART.fullmatch(piece)
        if match is None:
            return None
        parts.append(match.group(1))
        parts += [int(index) for index in re.findall(r"\[(\d+)\]", match.group(2))]
    return parts


def _at(node: Any, parts: Iterable[str | int]) -> Any:
    """The value at `parts` in the payload, or None when the path names nothing there."""
    for part in parts:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def rule_label(index: int, rule: Mapping[str, Any]) -> str:
    """The rule's label as forecasting.labels writes it (`1 · Cashback on orders of 20 or more`), read from its JSON;
    a rule the file format refuses is still named by its number and event type."""
    try:
        return labels.rule_label(index, FileRule.model_validate(rule))
    except ValidationError:
        return f"{index + 1}{labels.SEPARATOR}{rule.get('event_type')}"


def _cap(limit: Mapping[str, Any] | None, field: str, symbol: str) -> str:
    period = (limit or {}).get("period", "")
    when = "for life" if period == "lifetime" else f"a {period}" if period else ""
    measure = f"max amount ({symbol})" if field == "max_amount" else "max rewards" if field == "max_count" else field
    return f"cap per customer {when}: {measure}".replace("  ", " ")


def _within_rule(rest: list[str | int], rule: Mapping[str, Any], symbol: str) -> str:
    """What the rest of a rule's path means: an action's amount, a condition's value, a cap."""
    head = rest[0] if rest else None
    if head == "actions" and len(rest) >= 3:
        several = len(rule.get("actions", [])) > 1
        which = f"action {int(rest[1]) + 1} " if several and isinstance(rest[1], int) else ""
        last = rest[-1]
        words = {"rate": "rate", "fixed": f"fixed amount ({symbol})", "per": "per field", "fraction": "share back"}
        return f"{which}{words.get(str(last), str(last).replace('_', ' '))}"
    if head == "conditions" and len(rest) >= 3 and rest[-1] == "value":
        condition = _at(rule, rest[:-1]) or {}
        field, operator = condition.get("field"), condition.get("operator")
        if field and operator:
            return f"{field} {OPERATOR_WORDS.get(operator, operator)}"
        return "condition value"
    if head == "limits" and len(rest) == 3:
        return _cap(_at(rule, rest[:2]), str(rest[2]), symbol)
    return " ".join(str(p).replace("_", " ") for p in rest if not isinstance(p, int))


def parameter_label(
    path: str, payload: Mapping[str, Any], rule_labels: Mapping[int, str] | None = None, symbol: str = "points"
) -> str:
    """A grid key as a figure writes it. `payload`: the programme file's JSON (`ProgrammeDefinition.payload()`);
    `rule_labels`: the forecast's labels of the rules (`History.rule_labels`), used when given."""
    parts = _parts(path)
    if parts is None:
        return path
    if parts[0] == "rules" and len(parts) >= 2 and isinstance(parts[1], int):
        rule = _at(payload, parts[:2])
        if rule is None:
            return path
        index = parts[1]
        name = (rule_labels or {}).get(index) or rule_label(index, rule)
        return f"{name}: {_within_rule(parts[2:], rule, symbol)}"
    if parts[:2] == ["programme", "limits"] and len(parts) == 4:
        return "programme " + _cap(_at(payload, parts[:3]), str(parts[3]), symbol)
    if parts[:2] == ["programme", "budget"]:
        period = _at(payload, ["programme", "budget", "period"])
        return f"programme budget a {period} ({symbol})" if period else f"programme budget ({symbol})"
    if parts == ["asset", "supply_ceiling"]:
        return f"supply ceiling ({symbol})"
    return " ".join(str(p).replace("_", " ") for p in parts if not isinstance(p, int))


def parameter_labels(
    paths: Iterable[str], payload: Mapping[str, Any], rule_labels: Mapping[int, str] | None = None
) -> dict[str, str]:
    """Each grid key's label (the asset's symbol read from the payload)."""
    symbol = str(_at(payload, ["asset", "symbol"]) or "points")
    return {path: parameter_label(path, payload, rule_labels, symbol) for path in paths}
