"""The commands that talk to a deployment (`push`, `api ...`, `history pull`) take one set of target options
(cli.common.add_target_arguments) and fail alike without them: exit 2 naming what is missing."""

from __future__ import annotations

import argparse
import io
import os
from contextlib import redirect_stderr
from pathlib import Path
from unittest import mock

import pytest

from rewards_lab.cli.main import build_parser, main

TARGET = {"--base-url", "--org", "--env"}


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _target(parser: argparse.ArgumentParser) -> dict[str, tuple[str | None, object]]:
    return {
        option: (action.help, action.choices)
        for action in parser._actions
        for option in action.option_strings
        if option in TARGET
    }


def test_push_api_and_history_share_one_definition_of_the_target_options() -> None:
    parser = build_parser()
    push = _target(_subparser(parser, "push"))
    assert set(push) == TARGET
    assert _target(_subparser(parser, "history", "pull")) == push
    assert _target(_subparser(parser, "api", "events", "list")) == push


@pytest.mark.parametrize(
    "argv",
    [
        ["history", "pull", "--since", "2026-01-01T00:00:00Z", "--out", "x.parquet"],
        ["api", "events", "list"],
    ],
)
def test_a_missing_target_is_a_usage_error_alike(argv: list[str], tmp_path: Path) -> None:
    err = io.StringIO()
    cleared = dict.fromkeys(("REWARDS_BASE_URL", "REWARDS_ORGANIZATION_ID", "REWARDS_ENVIRONMENT"), "")
    with mock.patch.dict(os.environ, {**cleared, "REWARDS_API_KEY": "k"}), redirect_stderr(err):
        status = main([*argv, "--org", "org_x", "--env", "sandbox"])
    assert (status, err.getvalue().strip()) == (2, "error: missing --base-url")
