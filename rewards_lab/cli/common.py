"""What the client-side commands (`push`, `api`) share: the target options, the key from the environment, and
errors printed with their type, code and message."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rewards_lab.client import ApiError, RewardsClient

API_KEY_VARIABLE = "REWARDS_API_KEY"
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_GATE = 3  # push: a forecast guard failed, nothing was published


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The deployment a command talks to: the one definition of these options (`push`, `api`, `history`)."""
    parser.add_argument(
        "--base-url",
        default=os.environ.get("REWARDS_BASE_URL"),
        help="the deployment's base URL, ending in /v1 (default: $REWARDS_BASE_URL)",
    )
    parser.add_argument(
        "--org",
        default=os.environ.get("REWARDS_ORGANIZATION_ID"),
        help="organization id sent as X-Organization-ID (default: $REWARDS_ORGANIZATION_ID)",
    )
    parser.add_argument(
        "--env",
        choices=["sandbox", "production"],
        default=os.environ.get("REWARDS_ENVIRONMENT"),
        help="environment sent as X-Environment (default: $REWARDS_ENVIRONMENT)",
    )


class UsageError(Exception):
    pass


def client_from(args: argparse.Namespace, *, require_key: bool = True) -> RewardsClient:
    """A client for the target options; the API key only ever comes from the environment (never a flag that
    would land in shell history)."""
    from rewards_lab.client import RewardsClient

    key = os.environ.get(API_KEY_VARIABLE, "")
    missing = [
        name for name, value in (("--base-url", args.base_url), ("--org", args.org), ("--env", args.env)) if not value
    ]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}")
    if not key and require_key:
        raise UsageError(f"set the API key in the environment variable {API_KEY_VARIABLE}")
    return RewardsClient(args.base_url, key, args.org, args.env)


def explain(error: ApiError, environment: str | None) -> str:
    """One line a person can act on: type, code and message, the request id, and a hint for the common ones."""
    line = f"error: {error.error_type} {error.code}: {error.message}"
    if error.request_id:
        line += f" (request {error.request_id})"
    if error.code == "environment_mismatch":
        own = error.details.get("key_environment", "another environment")
        line += (
            f"\nThe API key in {API_KEY_VARIABLE} belongs to {own}, not {environment}: use a {environment} "
            f"key, or --env {own}. Nothing was changed."
        )
    elif error.code == "permission_denied":
        needed = error.details.get("permission") or error.details.get("required")
        if needed:
            line += f"\nThe API key lacks the permission {needed}."
    elif error.details:
        line += f"\ndetails: {error.details}"
    return line


def fail(message: str, status: int) -> int:
    print(message, file=sys.stderr)
    return status


def run_with_client(args: argparse.Namespace, work: Callable[[RewardsClient], int], *, require_key: bool = True) -> int:
    """`work` with a client for the target options: a usage error (a missing option or key) exits 2, an API
    error 1, explained (`explain`). What `api` and `history` do around their calls."""
    from rewards_lab.client import ApiError

    try:
        with client_from(args, require_key=require_key) as client:
            return work(client)
    except UsageError as error:
        return fail(f"error: {error}", EXIT_USAGE)
    except ApiError as error:
        return fail(explain(error, args.env), EXIT_API_ERROR)
