"""The server's forecast gate as the lab shows it (issue 31): the guard table a deployment answers on
`POST /reward-programs/{id}/forecast`, or carries in the `details` of a `forecast_guard_failed` refusal, as
plain text (the CLI) or a frame (notebooks). Figures are the server's decimal strings; "never": a ceiling that
never runs out; a published figure of "-": nothing published yet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

COLUMNS = ["metric", "limit", "draft", "published", "checked", "result"]


def server_table(answer: Mapping[str, Any]) -> pd.DataFrame:
    """The guard table of a forecast answer (or a refusal's details), a row per guard."""
    rows = [
        {
            "metric": check["metric"],
            "limit": check["limit"],
            "draft": check["draft"],
            "published": "-" if check.get("published") is None else check["published"],
            "checked": check["checked"],
            "result": "pass" if check["passed"] else "FAIL",
        }
        for check in answer.get("checks", [])
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def server_text(answer: Mapping[str, Any]) -> str:
    """A title (the window and how many stored events it held), the table and the verdict."""
    checks = answer.get("checks", [])
    if not checks:
        return "Server forecast gate: the draft declares no guards."
    failed = sum(1 for check in checks if not check["passed"])
    title = (
        f"Server forecast gate ({len(checks)} guard(s), {answer.get('events', '?')} stored event(s) of the last "
        f"{answer.get('window_days', '?')} days):"
    )
    verdict = "all guards pass" if not failed else f"{failed} guard(s) FAIL"
    return "\n".join([title, server_table(answer).to_string(index=False), verdict])
