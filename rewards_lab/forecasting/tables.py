"""Tables a designer reads whole: conditions, reasons and actions wrapped in their cells, never cut.

pandas cuts every cell of a notebook's table at `display.max_colwidth` (50 characters: `customer.attri…`), and
a long reason is exactly what a designer came to read. A `Table` is a DataFrame (everything pandas does still
works, and its slices are Tables) whose notebook display is a plain HTML table with every cell whole, wrapped at
white space, left-aligned and top-aligned, with inline styles only (a notebook opened untrusted keeps them, where
it drops `<style>` blocks), and deterministic (no random ids), so that committed outputs compare equal.

`caption(table, text)` puts a sentence under the table (what a reader must know to read it: segments overlap);
`percent(table, column)` shows a column of fractions as percentages.
"""

from __future__ import annotations

import html
import math
from decimal import Decimal
from typing import Any

import pandas as pd

CAPTION = "caption"
PERCENT = "percent_columns"
_CELL = "white-space: pre-wrap; text-align: left; vertical-align: top; overflow-wrap: anywhere; padding: 0.3em 0.6em"
_HEAD = "text-align: left; vertical-align: bottom; white-space: nowrap; padding: 0.3em 0.6em"


class Table(pd.DataFrame):
    """A DataFrame shown whole in a notebook (see the module)."""

    @property
    def _constructor(self) -> type[Table]:
        return Table

    def _repr_html_(self) -> str:
        return table_html(self)


def table(frame: pd.DataFrame, *, caption: str | None = None, percent: tuple[str, ...] = ()) -> Table:
    """`frame` as a Table, with a caption under it and columns of fractions shown as percentages."""
    out = Table(frame)
    out.attrs = dict(frame.attrs)
    if caption is not None:
        out.attrs[CAPTION] = caption
    if percent:
        out.attrs[PERCENT] = [*out.attrs.get(PERCENT, []), *percent]
    return out


def cell_text(value: Any, *, as_percent: bool = False) -> str:
    """A value as its cell shows it: whole; fractions as percentages where asked; empty for missing values."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT:
        return ""
    if as_percent and isinstance(value, float | int | Decimal) and not isinstance(value, bool):
        return f"{float(value):.1%}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def table_html(frame: pd.DataFrame) -> str:
    """The frame as an HTML table: its index and columns, every cell whole and wrapped."""
    percent = set(frame.attrs.get(PERCENT, []))
    names = list(frame.index.names)
    head = "".join(f'<th style="{_HEAD}">{html.escape("" if n is None else str(n))}</th>' for n in names)
    head += "".join(f'<th style="{_HEAD}">{html.escape(str(column))}</th>' for column in frame.columns)
    shown, notes = frame, []
    limit = pd.get_option("display.max_rows")
    if limit is not None and len(frame) > limit:  # as pandas does: the first and last rows of a long table
        half = max(1, (pd.get_option("display.min_rows") or 10) // 2)
        shown = pd.concat([frame.iloc[:half], frame.iloc[-half:]])
        notes.append(f"{len(frame)} rows in all: the first {half} and the last {half} are shown")
    rows = []
    for position, (key, values) in enumerate(zip(shown.index, shown.itertuples(index=False, name=None), strict=True)):
        if shown is not frame and position == len(shown) // 2:
            rows.append(f'<tr><td style="{_CELL}" colspan="{len(names) + len(frame.columns)}">⋮</td></tr>')
        keys = key if isinstance(key, tuple) else (key,)
        cells = "".join(f'<th style="{_CELL}">{html.escape(cell_text(k))}</th>' for k in keys)
        cells += "".join(
            f'<td style="{_CELL}">{html.escape(cell_text(value, as_percent=column in percent))}</td>'
            for column, value in zip(frame.columns, values, strict=True)
        )
        rows.append(f"<tr>{cells}</tr>")
    caption = frame.attrs.get(CAPTION)
    notes += [str(caption)] if caption else []
    style = "margin: 0.3em 0; font-style: italic"
    below = "".join(f'<p style="{style}">{html.escape(note)}</p>' for note in notes)
    return (
        f'<div><table style="border-collapse: collapse"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>{below}</div>"
    )
