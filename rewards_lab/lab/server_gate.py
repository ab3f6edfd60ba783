"""The server's forecast gate as the lab shows it (issue 31): the guard table a deployment answers on
`POST /reward-programs/{id}/forecast`, or carries in the `details` of a `forecast_guard_failed` refusal, as
plain text (the CLI), a frame (notebooks) or that frame with pass/fail highlighted. Figures are the server's
decimal strings; "never": a ceiling that never runs out; a published figure of "-": nothing published yet.

`deployment_forecast` asks a deployment for the table of a programme file's draft (notebook 05 given a
`base_url`): the draft there is what the server would publish, so the answer says whether it holds the file."""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from rewards_lab.contract import resources as r

COLUMNS = ["metric", "limit", "draft", "published", "checked", "result"]
PASS_STYLE = "color: #070; font-weight: bold"
FAIL_STYLE = "color: #b00; font-weight: bold; background-color: #fde8e8"
FAIL_ROW_STYLE = "background-color: #fde8e8"


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


def highlighted(table: pd.DataFrame) -> Styler:
    """The table with each row's verdict in colour (a failing row's figures on red), for a notebook."""

    def row_style(row: pd.Series) -> list[str]:
        failed = row["result"] == "FAIL"
        figures = FAIL_ROW_STYLE if failed else ""
        verdict = FAIL_STYLE if failed else PASS_STYLE
        return [verdict if name == "result" else figures for name in row.index]

    return table.style.apply(row_style, axis=1).hide(axis="index")


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


class ServerGateRefused(Exception):
    """The deployment's own gate fails the draft and no override reason was given."""


@dataclass(frozen=True, repr=False)
class ServerForecast:
    """What a deployment answers for a programme file's draft: its guard table (`result`; None when the
    deployment has no such programme yet) and whether its draft holds the file (else the table is the draft's
    as it is there: push brings it to the file)."""

    programme: str
    result: r.ForecastResult | None
    holds_file: bool

    @property
    def answer(self) -> dict[str, Any]:
        return {} if self.result is None else self.result.model_dump(mode="json")

    @property
    def passed(self) -> bool:
        return self.result is None or self.result.passed

    def table(self) -> pd.DataFrame:
        return server_table(self.answer)

    def styled(self) -> Styler:
        return highlighted(self.table())

    def note(self) -> str:
        if self.result is None:
            return f"The deployment has no programme '{self.programme}' yet: nothing for its gate to check."
        if self.holds_file:
            return "The deployment's draft holds the file: publishing it is what this table decides."
        return (
            "The deployment's draft differs from the file: this is the table of the draft as it is there "
            "(`rewards-lab push` brings it to the file; the server checks again then)."
        )

    def enforce(self, override: str | None = None) -> str:
        """Raise `ServerGateRefused` when the server's table fails and no override reason is given."""
        if self.passed:
            return "The server's forecast gate passes."
        if not override:
            raise ServerGateRefused("the server's forecast gate refuses the draft:\n" + self.text())
        return f"The server's gate fails, overridden: {override} (push --override; needs rewards.guards.override)"

    def text(self) -> str:
        body = "" if self.result is None else server_text(self.answer) + "\n"
        return body + self.note()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        note = f"<p>{html.escape(self.note())}</p>"
        if self.result is None:
            return note
        if not self.result.checks:
            return f"<p>{html.escape(server_text(self.answer))}</p>{note}"
        title = server_text(self.answer).splitlines()[0]
        colour = "#070" if self.passed else "#b00"
        verdict = server_text(self.answer).splitlines()[-1]
        return (
            f"<p><b>{html.escape(title)}</b></p>{self.styled().to_html()}"
            f"<p style='color:{colour};font-weight:bold'>{html.escape(verdict)}</p>{note}"
        )


def deployment_forecast(
    programme: str | Path,
    base_url: str,
    *,
    organization: str,
    environment: str = "sandbox",
    api_key: str | None = None,
) -> ServerForecast:
    """Ask a deployment for its own guard table of the programme file's draft (`POST
    /reward-programs/{id}/forecast`: the key, else $REWARDS_API_KEY, needs rewards.edit; nothing is changed)."""
    from rewards_lab.client import RewardsClient
    from rewards_lab.contract.programme_file import load_programme
    from rewards_lab.lab.paths import locate
    from rewards_lab.lab.push import make_plan

    definition = load_programme(locate(programme))
    key = api_key or os.environ.get("REWARDS_API_KEY", "")
    with RewardsClient(base_url, key, organization, environment) as client:
        plan = make_plan(definition, client)
        if plan.programme is None:
            return ServerForecast(definition.programme.name, None, False)
        holds = all(step.kind == "publish" for step in plan.steps)
        return ServerForecast(definition.programme.name, client.forecast_programme(plan.programme.id), holds)
