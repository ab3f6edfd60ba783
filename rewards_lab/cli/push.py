"""`rewards-lab push FILE`: plan, confirm, apply, verify. The API key comes from $REWARDS_API_KEY only."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from rewards_lab.cli.common import (
    EXIT_API_ERROR,
    EXIT_GATE,
    EXIT_USAGE,
    UsageError,
    add_target_arguments,
    client_from,
    explain,
    fail,
)

if TYPE_CHECKING:
    from rewards_lab.client import ApiError, RewardsClient
    from rewards_lab.contract.programme_file import ProgrammeDefinition
    from rewards_lab.lab.push import ApplyResult, Plan


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="programme file (JSON), e.g. data/programmes/spring_launch.json")
    add_target_arguments(parser)
    parser.add_argument("--plan-only", action="store_true", help="show what would change and stop")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    parser.add_argument("--no-verify", action="store_true", help="skip the comparison of live and lab simulations")
    parser.add_argument("--json", action="store_true", help="print the plan, result and verification as JSON")
    gate = parser.add_argument_group("forecast gate (README: Forecast gate)")
    gate.add_argument(
        "--history",
        metavar="EVENTS",
        help="replay these events (.parquet, .csv, .jsonl) through the file and the published version and check "
        "the file's guards before publishing; a failed guard publishes nothing (exit 3)",
    )
    gate.add_argument("--redemptions", metavar="FILE", help="what customers spent during the history (replay)")
    gate.add_argument(
        "--override",
        metavar="REASON",
        help="publish despite a failed guard, the local one (--history) or the server's (recorded with the version; "
        "the server's needs a key holding rewards.guards.override)",
    )
    gate.add_argument("--days", type=int, default=90, help="how far the liability forecast looks ahead (90)")
    parser.set_defaults(run=run)


def _confirmed(args: argparse.Namespace) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print("Not applied: pass --yes to apply without a terminal.", file=sys.stderr)
        return False
    return input("Apply these changes? [y/N] ").strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    from rewards_lab.client import ApiError
    from rewards_lab.contract.errors import ServiceError
    from rewards_lab.contract.programme_file import load_programme
    from rewards_lab.lab.push import PushError, apply, make_plan
    from rewards_lab.lab.push_verify import verify

    report: dict[str, object] = {}
    try:
        if args.override is not None and not args.override.strip():
            raise UsageError("--override needs a reason (it is recorded with the version)")
        definition = load_programme(args.file)
        with client_from(args) as client:
            plan = make_plan(definition, client)
            report["plan"] = plan.to_dict()
            if not args.json:
                print(plan.text())
            failed = _gate(args, plan, report)
            refused = failed and args.override is None
            if args.plan_only:
                return _finish(args, report, EXIT_GATE if refused else 0)
            if plan.changes:
                if not _confirmed(args):
                    return _finish(args, report, EXIT_USAGE)
                override = args.override if failed else None
                try:
                    result = apply(plan, client, publish=not refused, guard_override=override)
                except ApiError as error:
                    if error.code != "forecast_guard_failed" or args.override is None:
                        raise
                    result = _override_server(args, report, error, definition, client)
                report["applied"] = result.executed
                if not args.json:
                    print(result.text())
            if refused:
                message = "Not published: a forecast guard failed (the draft holds the file; --override REASON)."
                print(message, file=sys.stderr)
                return _finish(args, report, EXIT_GATE)
            if args.no_verify:
                return _finish(args, report, 0)
            verification = verify(definition, client)
            report["verification"] = verification.to_dict()
            if not args.json:
                print(verification.text())
            return _finish(args, report, 0 if verification.ok else EXIT_API_ERROR)
    except UsageError as error:
        return fail(f"error: {error}", EXIT_USAGE)
    except OverrideDenied as error:
        message = (
            f"{error}\nNot published: this API key may not override the server's forecast gate (it needs "
            "rewards.guards.override). The draft holds the file; publish it with a key that holds the permission."
        )
        print(message, file=sys.stderr)
        gate = report.get("server_gate")
        if isinstance(gate, dict):
            gate["overridden"] = None  # asked for, refused: the key lacks the permission
            gate["override_refused"] = "rewards.guards.override"
        return _finish(args, report, EXIT_GATE)
    except ApiError as error:
        if error.code == "forecast_guard_failed":  # the server's own gate, on its stored events (issue 31)
            return _server_refused(args, report, error.details)
        return fail(explain(error, args.env), EXIT_API_ERROR)
    except PushError as error:
        return fail(f"error: {error}", EXIT_API_ERROR)
    except ServiceError as error:  # the programme file itself
        return fail(f"error: {error.type.value} {error.code}: {error.message}", EXIT_USAGE)


def _show_server_table(
    args: argparse.Namespace, report: dict[str, object], details: dict[str, Any], overridden: str | None = None
) -> None:
    from rewards_lab.lab.server_gate import server_table, server_text

    gate: dict[str, object] = {"passed": False, "guards": server_table(details).to_dict(orient="records")}
    if overridden is not None:
        gate["overridden"] = overridden
    report["server_gate"] = gate
    if not args.json:
        print(server_text(details))


def _server_refused(args: argparse.Namespace, report: dict[str, object], details: dict[str, Any]) -> int:
    """The deployment refused to publish: its guard table, and nothing published (exit 3)."""
    _show_server_table(args, report, details)
    message = (
        "Not published: the server's forecast gate refused the draft on its stored events (the draft holds the "
        "file). Publishing past it: --override REASON, with a key holding rewards.guards.override."
    )
    print(message, file=sys.stderr)
    return _finish(args, report, EXIT_GATE)


class OverrideDenied(Exception):
    """The server refused the override: the key lacks rewards.guards.override."""


def _override_server(
    args: argparse.Namespace,
    report: dict[str, object],
    refusal: ApiError,
    definition: ProgrammeDefinition,
    client: RewardsClient,
) -> ApplyResult:
    """The server refused what the local gate let through (or push had no history): show its table and publish
    again with the override reason (the draft already holds the file)."""
    from rewards_lab.client import ApiError
    from rewards_lab.lab.push import apply, make_plan

    _show_server_table(args, report, refusal.details, overridden=args.override)
    if not args.json:
        print(f"Overridden: publishing past the server's gate with the reason recorded: {args.override}")
    try:
        return apply(make_plan(definition, client), client, guard_override=args.override)
    except ApiError as error:
        if error.code == "permission_denied":
            raise OverrideDenied(explain(error, args.env)) from None
        raise


def _gate(args: argparse.Namespace, plan: Plan, report: dict[str, object]) -> bool:
    """Evaluate the forecast gate when a history is given and the plan publishes; whether a guard failed."""
    from rewards_lab.lab.push_gate import gate_for, publishes

    if args.history is None:
        return False
    if not publishes(plan):
        if not args.json:
            print("Forecast gate: nothing to publish, the published version already holds the file.")
        return False
    gate = gate_for(plan, args.history, redemptions=args.redemptions, days=args.days)
    report["gate"] = {"passed": gate.passed, "guards": gate.table().to_dict(orient="records")}
    if not args.json:
        print(gate.text())
        if not gate.passed and args.override is not None:
            print(f"Overridden: publishing with the reason recorded: {args.override}")
    return not gate.passed


def _finish(args: argparse.Namespace, report: dict[str, object], status: int) -> int:
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return status
