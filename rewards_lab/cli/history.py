"""`rewards-lab history pull --since ... --out FILE`: a deployment's events into a file the replay reads.

The target options are `push`'s and `api`'s (cli.common: --base-url, --org, --env, the key from
$REWARDS_API_KEY), and so are its errors. Progress goes to stderr; FILE appears only when complete, and an
interrupted pull resumes when run again (rewards_lab.lab.history)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rewards_lab.cli.common import EXIT_USAGE, add_target_arguments, fail, run_with_client

if TYPE_CHECKING:
    from rewards_lab.client import RewardsClient


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="history_command", required=True, metavar="ACTION")
    pull = actions.add_parser("pull", help="export a time range of events from a deployment into a file")
    add_target_arguments(pull)
    pull.add_argument("--since", required=True, help="first occurred_at included (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
    pull.add_argument("--until", help="occurred_at before which the history stops (default: now, fixed at the start)")
    pull.add_argument("--out", required=True, help="the file: .parquet, or .ndjson / .jsonl")
    pull.add_argument("--executions", action="store_true", help="with what the service issued for each event")
    pull.add_argument("--page-size", type=int, help="events per request (the service's default: 10000)")
    pull.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rewards_lab.lab.history import format_of, pull_history

    try:
        format_of(Path(args.out))
    except ValueError as error:
        return fail(f"error: {error}", EXIT_USAGE)

    def pull(client: RewardsClient) -> int:
        pulled = pull_history(
            client,
            args.out,
            since=args.since,
            until=args.until,
            executions=args.executions,
            limit=args.page_size,
            progress=lambda line: print(line, file=sys.stderr),
        )
        print(pulled.path)
        return 0

    return run_with_client(args, pull)
