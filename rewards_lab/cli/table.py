"""Plain-text tables for `--format table`: a list of records as columns, a single record as key/value rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rewards_lab.contract import jsonutil

MAX_CELL = 60


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = jsonutil.dumps(value) if isinstance(value, dict | list | bool) else str(value)
    if isinstance(value, datetime):
        text = jsonutil.dumps(value).strip('"')
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(header[i]), *(len(row[i]) for row in rows)) if rows else len(header[i]) for i in range(len(header))
    ]
    lines = ["  ".join(name.ljust(width) for name, width in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def render(data: Any) -> str:
    if isinstance(data, list):
        if not data:
            return "(no rows)"
        if all(isinstance(item, dict) for item in data):
            columns = list(dict.fromkeys(key for item in data for key in item))
            return _grid(columns, [[_cell(item.get(column)) for column in columns] for item in data])
        return _grid(["value"], [[_cell(item)] for item in data])
    if isinstance(data, dict):
        return _grid(["field", "value"], [[str(key), _cell(value)] for key, value in data.items()])
    return _cell(data)
