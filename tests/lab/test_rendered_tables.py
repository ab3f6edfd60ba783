"""Issue 28: the draft-against-published diff and the forecast gate's guard table render as tables (HTML in a
notebook, text in a terminal), on the sample programmes and events."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rewards_lab.contract.guard_requests import IssuedGuard
from rewards_lab.contract.programme_file import load_programme
from rewards_lab.forecasting.gate import evaluate
from rewards_lab.lab.push_gate import evaluate_files
from rewards_lab.lab.workbench import Lab, LabProgramme

DATA = Path(__file__).resolve().parents[2] / "data"
SPRING = DATA / "programmes" / "spring_launch.json"
GATED = DATA / "programmes" / "spring_gated.json"
EVENTS = DATA / "sample_events.parquet"
CASHBACK = "rule 1 · Cashback on orders of 20 or more"  # spring launch's first rule, numbered from 1


def cells(markup: str) -> list[list[str]]:
    """The body rows of an HTML table, cell texts unescaped enough to compare (`&gt;` as `>`)."""
    body = markup.split("<tbody>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).replace("&gt;", ">").replace("&lt;", "<")
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)
        ]
        for row in rows
    ]


@pytest.fixture
def edited() -> LabProgramme:
    spring = Lab().load(SPRING)
    spring.publish()
    spring.update_rule(0, conditions=[("amount", "gte", 30)], amount={"per": "amount", "rate": "0.07"})
    spring.update_rule(2, limits=[{"period": "month", "max_amount": "500"}])
    spring.add_rule("referral.converted", amount={"fixed": "15.00"})
    spring.set_spending(budget={"period": "month", "max_amount": "10000"})
    return spring


def test_the_diff_is_a_table_of_rule_field_published_draft_in_words(edited: LabProgramme) -> None:
    changes = edited.changes()
    table = changes.rows()
    assert list(table.columns) == ["rule", "field", "published", "draft"]
    assert table.values.tolist() == [
        ["programme", "budget", "-", "10000 a month"],
        [CASHBACK, "conditions", "amount >= 20", "amount >= 30"],  # named as every list of rules names it
        [CASHBACK, "actions", "issue amount x 0.05", "issue amount x 0.07"],
        ["rule 3 · Photo review bonus", "caps", "none", "500 a month"],
        ["rule 4 · referral.converted", "rule", "(new)", "referral.converted when always: issue 15.00"],
    ]
    markup = changes._repr_html_()
    assert markup.startswith("<table") and cells(markup) == table.values.tolist()
    assert '"actions"' not in markup and "rules[" not in markup  # no raw JSON, no file paths
    assert "rule 1" in repr(changes) and "amount >= 30" in changes.text()  # printed: the same table as text


def test_a_removed_rule_is_shown_whole_and_no_change_says_so(edited: LabProgramme) -> None:
    edited.remove_rule(1)  # the sign-up bonus: the review rule becomes rule 2
    rows = edited.changes().rows().values.tolist()
    assert rows[1:] == [
        [CASHBACK, "conditions", "amount >= 20", "amount >= 30"],
        [CASHBACK, "actions", "issue amount x 0.05", "issue amount x 0.07"],
        ["published rule 2 · Welcome bonus", "rule", "customer.signed_up when always: issue 10.00", "(removed)"],
        ["rule 2 · Photo review bonus", "caps", "none", "500 a month"],  # the review rule, edited, paired by name
        ["rule 3 · referral.converted", "rule", "(new)", "referral.converted when always: issue 15.00"],
    ]
    assert "background:#fdecea" in edited.changes()._repr_html_()
    same = edited.changes("draft", "draft")
    assert same.is_empty and "no changes" in same._repr_html_() and "<table" not in same._repr_html_()
    assert edited.changes(1, "draft").labels == ("version 1", "draft")


def test_the_guard_table_renders_with_a_verdict_per_guard_in_colour() -> None:
    report = evaluate_files(GATED, EVENTS, published=SPRING)
    markup = report._repr_html_()
    assert "<table" in markup and "<th style='text-align:left'>verdict</th>" in markup
    rows = cells(markup)
    assert [row[0] for row in rows] == [
        "issued per month",
        "liability change (draft minus published)",
        "days until the supply ceiling runs out",
    ]
    assert all(len(row) == 6 and row[5] == "pass" for row in rows)
    assert markup.count("color:#070;font-weight:bold'>pass") == 3 and "all guards pass" in markup
    text = report.text()  # the CLI keeps its plain table
    assert text.splitlines()[1].split() == ["metric", "limit", "draft", "published", "checked", "result"]
    assert repr(report) == text


def test_a_failed_guard_shows_fail_in_red() -> None:
    draft = load_programme(GATED)
    report = evaluate(draft, EVENTS, guards=[IssuedGuard(metric="issued", period="day", max="1")], days=10)
    markup = report._repr_html_()
    assert cells(markup)[0][0] == "issued per day" and cells(markup)[0][3] == "-"  # nothing published
    assert "color:#b00;font-weight:bold'>FAIL" in markup and "1 guard(s) FAIL" in markup
