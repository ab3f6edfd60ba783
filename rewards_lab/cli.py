"""The `rewards-lab` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rewards_lab.store.database import Database
from rewards_lab.store.verification import verify_ledger


def _demo(args: argparse.Namespace) -> int:
    from rewards_lab.demo import main as demo

    demo(args.db)
    return 0


def _verify(args: argparse.Namespace) -> int:
    with Database(args.db) as database:
        report = verify_ledger(database.reader())
    print(
        json.dumps(
            {
                "ok": report.ok,
                "transactions": report.transactions,
                "entries": report.entries,
                "balances": report.balances,
                "problems": report.problems,
            },
            indent=2,
        )
    )
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewards-lab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the standard integration loop in-process over a DuckDB file")
    demo.add_argument("--db", default="data/demo.duckdb", help="DuckDB file (created if absent)")
    demo.set_defaults(run=_demo)
    verify = commands.add_parser("verify", help="recompute every balance from the ledger entries and check it")
    verify.add_argument("--db", required=True)
    verify.set_defaults(run=_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
