"""`rewards-lab api RESOURCE ACTION ...`: the command line client the seed plans, one subcommand per operation.

Each operation of the registry is one command, named in `COMMANDS` (else after its path and name); its flags are
the operation's parameters (`contract.operation_parameters`, the ones the Python client's methods take): path
parameters positional (the first one `id`), body fields and filters `--flag`s (JSON for objects and lists,
comma-separated for lists of strings), `--clear-FIELD` where null clears a field, `--limit`, `--cursor` and
`--all` on paged lists, `--idempotency-key` where one is taken. The few flags the parameters do not make are the
small tables below. Built on rewards_lab.client, so it inherits environment scoping (a sandbox key against
production fails with `environment_mismatch`). Prints the envelope's `data` as JSON (or a table); on failure
prints the error's type, code and message on stderr and exits 1. The API key comes from $REWARDS_API_KEY only.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewards_lab.cli.common import UsageError, add_target_arguments, run_with_client
from rewards_lab.contract.operation_parameters import Parameter, has_method, parameters, summary
from rewards_lab.contract.operations import OPERATIONS, Operation

if TYPE_CHECKING:
    from rewards_lab.client import RewardsClient

# The command of each operation: "RESOURCE ACTION", in the order `--help` lists them. An operation missing here
# is still a command: RESOURCE its path's first segment, ACTION its name (`tiers create-tier`).
COMMANDS: Mapping[str, str] = {
    "create_customer": "customers create",
    "get_customer": "customers get",
    "update_customer": "customers update",
    "list_customers": "customers list",
    "customer_segments": "customers segments",
    "customer_tier": "customers tier",
    "customer_tier_history": "customers tier-history",
    "create_wallet": "wallets create",
    "get_wallet": "wallets get",
    "list_wallets": "wallets list",
    "wallet_balances": "wallets balances",
    "list_wallet_lots": "wallets lots",
    "freeze_wallet": "wallets freeze",
    "unfreeze_wallet": "wallets unfreeze",
    "create_asset": "assets create",
    "get_asset": "assets get",
    "list_assets": "assets list",
    "activate_asset": "assets activate",
    "pause_asset": "assets pause",
    "resume_asset": "assets resume",
    "issue": "assets issue",
    "redeem": "assets redeem",
    "transfer": "assets transfer",
    "list_transactions": "transactions list",
    "get_transaction": "transactions get",
    "create_programme": "programmes create",
    "get_programme": "programmes get",
    "update_programme": "programmes update",
    "deactivate_programme": "programmes deactivate",
    "activate_programme": "programmes activate",
    "list_programmes": "programmes list",
    "list_versions": "programmes versions",
    "publish": "programmes publish",
    "forecast_programme": "programmes forecast",
    "restore_version": "programmes restore",
    "simulate_programme": "programmes simulate",
    "create_rule": "rules create",
    "get_rule": "rules get",
    "update_rule": "rules update",
    "delete_rule": "rules delete",
    "simulate_rule": "rules simulate",
    "submit_event": "events send",
    "get_event": "events get",
    "list_events": "events list",
    "replay_event": "events replay",
    "list_executions": "executions list",
    "create_webhook": "webhooks create",
    "get_webhook": "webhooks get",
    "list_webhooks": "webhooks list",
    "rotate_webhook_secret": "webhooks rotate-secret",
    "disable_webhook": "webhooks disable",
    "test_webhook": "webhooks test",
    "list_webhook_deliveries": "webhooks deliveries",
    "get_webhook_delivery": "webhooks delivery",
    "replay_webhook_delivery": "webhooks replay",
    "create_api_key": "api-keys create",
    "list_api_keys": "api-keys list",
    "revoke_api_key": "api-keys revoke",
    "list_request_logs": "logs list",
    "list_auth_audit": "audit list",
    "api_usage": "usage get",
    "login": "auth login",
    "logout": "auth logout",
    "knowledge_search": "ai search",
    "create_conversation": "ai start",
    "conversation_message": "ai message",
    "get_conversation": "ai conversation",
    "deprecated_search": "ai deprecated-search",
    "deprecated_message": "ai deprecated-message",
}


def _password() -> str:
    return os.environ.get("REWARDS_PASSWORD") or getpass.getpass("Password: ")


# What the command line does otherwise than the parameters say, by (operation, parameter):
DEFAULTS: Mapping[tuple[str, str], Any] = {("create_asset", "type"): "points"}  # a flag's default
AS_FLAGS = frozenset({("restore_version", "version")})  # a path parameter given as a required flag
# A value never given as a flag (it would land in shell history): read when the command runs.
PROMPTED: Mapping[tuple[str, str], tuple[Callable[[], Any], str]] = {
    ("login", "password"): (_password, "password from $REWARDS_PASSWORD or a prompt"),
}
ID_HELP = "the resource's id"


@dataclass(frozen=True)
class Command:
    """One subcommand: an operation of the registry (`contract.operations`) and its parameters, which decide its
    flags, whether it pages (`--limit`, `--cursor`, `--all`) and needs an API key."""

    resource: str
    action: str
    operation: Operation
    parameters: tuple[Parameter, ...]

    @property
    def listing(self) -> bool:
        return self.operation.listing == "page"

    @property
    def needs_key(self) -> bool:
        return not self.operation.public

    @property
    def help(self) -> str:
        prompted = [note for (op, _), (_, note) in PROMPTED.items() if op == self.operation.name]
        return f"{summary(self.operation)} ({'; '.join(prompted)})" if prompted else summary(self.operation)


def commands(operations: Mapping[str, Operation] | None = None) -> tuple[Command, ...]:
    """A command per operation with a client method, in `COMMANDS` order, then the registry's."""
    chosen = [op for op in (operations or OPERATIONS).values() if has_method(op)]
    order = {name: index for index, name in enumerate(COMMANDS)}
    chosen.sort(key=lambda op: order.get(op.name, len(order)))
    found = []
    for op in chosen:
        default = f"{op.path.strip('/').split('/')[0]} {op.name.replace('_', '-')}"
        resource, action = COMMANDS.get(op.name, default).split(" ")
        found.append(Command(resource, action, op, parameters(op)))
    return tuple(found)


def _json_arg(text: str) -> Any:
    from rewards_lab.contract import jsonutil

    try:
        return jsonutil.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error}") from None


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _dest(name: str) -> str:
    return f"field_{name}"  # apart from the parser's own (`format`, `env`, `all`, ...)


def _clear(name: str) -> str:
    return f"clear_field_{name}"


def _add(leaf: argparse.ArgumentParser, command: Command, parameter: Parameter, first_path: bool) -> None:
    """The positional or flag(s) of one parameter."""
    key = (command.operation.name, parameter.name)
    if key in PROMPTED:
        return
    text = parameter.description()
    if parameter.where == "path" and key not in AS_FLAGS:
        metavar = "id" if first_path else parameter.name
        leaf.add_argument(_dest(parameter.name), metavar=metavar, help=text or (ID_HELP if first_path else None))
        return
    options: dict[str, Any] = {"dest": _dest(parameter.name)}
    if parameter.kind == "int":
        options["type"] = int
    elif parameter.kind == "bool":
        options["action"] = argparse.BooleanOptionalAction
    elif parameter.kind in ("object", "objects", "json"):
        options["type"] = _json_arg
        text = f"JSON: {text}" if text else "JSON"
    elif parameter.kind == "strings":
        options["type"] = _csv
        text = f"comma-separated: {text}" if text else "comma-separated"
    if parameter.choices:
        options["choices"] = list(parameter.choices)
    elif parameter.kind != "bool":
        options["metavar"] = parameter.name.upper()  # not the dest's FIELD_ prefix
    if key in DEFAULTS:
        options["default"] = DEFAULTS[key]
    elif parameter.required:
        options["required"] = True
    leaf.add_argument(_flag(parameter.name), help=text or None, **options)
    if parameter.clears is not None:
        leaf.add_argument(
            _flag(f"clear_{parameter.name}"), dest=_clear(parameter.name), action="store_true", help=parameter.clears
        )


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_target_arguments(common)
    common.add_argument("--format", choices=["json", "table"], default="json", help="how to print data")
    resources = parser.add_subparsers(dest="resource", required=True, metavar="RESOURCE")
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for command in commands():
        if command.resource not in groups:
            group = resources.add_parser(command.resource, help=f"{command.resource} operations")
            groups[command.resource] = group.add_subparsers(dest="action", required=True, metavar="ACTION")
        leaf = groups[command.resource].add_parser(command.action, help=command.help, parents=[common])
        path = [p.name for p in command.parameters if p.where == "path"]
        for parameter in command.parameters:
            _add(leaf, command, parameter, first_path=bool(path) and parameter.name == path[0])
        if command.listing:
            leaf.add_argument(
                "--all", dest="all_pages", action="store_true", help="follow the cursor through every page"
            )
        leaf.set_defaults(run=run, api_command=command)


def values(command: Command, args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of the client call: every flag given, None for each `--clear-FIELD`, prompted values."""
    found: dict[str, Any] = {}
    for parameter in command.parameters:
        key = (command.operation.name, parameter.name)
        if key in PROMPTED:
            found[parameter.name] = PROMPTED[key][0]()
            continue
        given = getattr(args, _dest(parameter.name), None)
        if parameter.clears is not None and getattr(args, _clear(parameter.name)):
            if given is not None:
                flag = _flag(parameter.name)
                raise UsageError(f"{flag} and --clear-{flag[2:]} contradict each other")
            found[parameter.name] = None
        elif given is not None:
            found[parameter.name] = given
    return found


def _plain(value: Any) -> Any:
    """Models and pages as plain data (Decimals stay exact; `jsonutil.dumps` writes them as numbers)."""
    from pydantic import BaseModel

    from rewards_lab.client import Page

    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if isinstance(value, Page):
        return _plain(value.data)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _write_file(download: Any) -> int:
    """A file answer (GET /events/export) goes to stdout as it came; its headers to stderr."""
    for name in ("X-Export-Until", "X-Export-Rows", "X-Export-Next-After"):
        if name in download.headers:
            print(f"{name}: {download.headers[name]}", file=sys.stderr)
    sys.stdout.buffer.write(download.content)
    sys.stdout.flush()
    return 0


def _execute(command: Command, client: Any, args: argparse.Namespace) -> Any:
    from rewards_lab.client._build import build

    name, arguments = command.operation.name, values(command, args)
    if not command.listing:
        return _plain(client.call(build(name, arguments)))
    if not args.all_pages:
        page = client.call(build(name, arguments))
        if page.has_more:
            print(f"more: --cursor {page.next_cursor}", file=sys.stderr)
        return _plain(page.data)
    items: list[Any] = []
    while True:
        page = client.call(build(name, arguments))
        items += _plain(page.data)
        if not page.has_more or not page.next_cursor:
            return items
        arguments["cursor"] = page.next_cursor


def run(args: argparse.Namespace) -> int:
    from rewards_lab.cli.table import render
    from rewards_lab.contract import jsonutil

    command: Command = args.api_command

    def call(client: RewardsClient) -> int:
        data = _execute(command, client, args)
        if command.operation.media:
            return _write_file(data)
        print(render(data) if args.format == "table" else jsonutil.dumps(data))
        return 0

    return run_with_client(args, call, require_key=command.needs_key)
