"""`rewards-lab api`'s commands are the registry's operations and their flags the operations' parameters: every
command and flag the hand-written table had stays, every documented operation is a command, and a new field or
operation is a flag or a command with no other edit. Without a server: the parsed flags are turned into the
`Call` they would send."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from rewards_lab.cli import api as cli_api
from rewards_lab.cli.common import UsageError
from rewards_lab.client._build import build
from rewards_lab.contract import requests as rq
from rewards_lab.contract import resources as r
from rewards_lab.contract.operation_parameters import parameters
from rewards_lab.contract.operations import OPERATIONS, Operation

COMMON = {"-h", "--help", "--base-url", "--org", "--env", "--format"}
# The commands of the hand-written table this replaced (issue 29): (positionals, flags) of each.
BEFORE: dict[str, tuple[tuple[str, ...], set[str]]] = {
    "customers create": ((), {"--email", "--country", "--external-id", "--attributes", "--idempotency-key"}),
    "customers get": (("id",), set()),
    "customers update": (
        ("id",),
        {"--email", "--clear-email", "--country", "--attributes", "--clear-country", "--idempotency-key"},
    ),
    "customers list": ((), {"--external-id", "--all", "--cursor", "--limit"}),
    "customers segments": (("id",), set()),
    "wallets create": ((), {"--type", "--idempotency-key", "--customer-id", "--transfer-policy"}),
    "wallets get": (("id",), set()),
    "wallets list": ((), {"--all", "--customer-id", "--status", "--cursor", "--limit"}),
    "wallets balances": (("id",), set()),
    "wallets lots": (("id",), {"--all", "--status", "--asset-id", "--cursor", "--limit"}),
    "wallets freeze": (("id",), {"--idempotency-key"}),
    "wallets unfreeze": (("id",), {"--idempotency-key"}),
    "assets create": (
        (),
        {
            "--value-per-unit",
            "--name",
            "--supply-ceiling",
            "--decimals",
            "--symbol",
            "--type",
            "--idempotency-key",
            "--expiry",
        },
    ),
    "assets get": (("id",), set()),
    "assets list": ((), {"--all", "--cursor", "--status", "--limit"}),
    "assets activate": (("id",), {"--idempotency-key"}),
    "assets pause": (("id",), {"--idempotency-key"}),
    "assets resume": (("id",), {"--idempotency-key"}),
    "assets issue": (("id",), {"--idempotency-key", "--wallet-id", "--amount", "--reason"}),
    "assets redeem": (("id",), {"--reference", "--idempotency-key", "--wallet-id", "--amount"}),
    "assets transfer": (
        ("id",),
        {"--reference", "--from-wallet-id", "--to-wallet-id", "--idempotency-key", "--amount"},
    ),
    "transactions list": ((), {"--wallet-id", "--all", "--kind", "--asset-id", "--cursor", "--limit"}),
    "transactions get": (("id",), set()),
    "programmes create": (
        (),
        {
            "--budget",
            "--guards",
            "--description",
            "--ends-at",
            "--max-event-age-days",
            "--starts-at",
            "--timezone",
            "--name",
            "--limits",
            "--clawback",
            "--clear-max-event-age-days",
            "--idempotency-key",
            "--expiry",
            "--asset-id",
        },
    ),
    "programmes get": (("id",), set()),
    "programmes update": (
        ("id",),
        {
            "--ends-at",
            "--clear-budget",
            "--clear-starts-at",
            "--max-event-age-days",
            "--idempotency-key",
            "--timezone",
            "--name",
            "--clear-max-event-age-days",
            "--limits",
            "--description",
            "--clear-limits",
            "--clear-expiry",
            "--clawback",
            "--expiry",
            "--budget",
            "--guards",
            "--starts-at",
            "--clear-ends-at",
            "--clear-guards",
        },
    ),
    "programmes deactivate": (("id",), {"--idempotency-key"}),
    "programmes activate": (("id",), {"--idempotency-key"}),
    "programmes list": ((), {"--all", "--asset-id", "--cursor", "--limit"}),
    "programmes versions": (("id",), set()),
    "programmes publish": (("id",), {"--guard-override", "--idempotency-key"}),
    "programmes restore": (("id",), {"--idempotency-key", "--version"}),
    "programmes simulate": (("id",), {"--version", "--customer-id", "--occurred-at", "--event"}),
    "rules create": (
        (),
        {
            "--actions",
            "--stop-processing",
            "--name",
            "--conditions",
            "--program-id",
            "--no-stop-processing",
            "--event-type",
            "--idempotency-key",
            "--limits",
            "--priority",
        },
    ),
    "rules get": (("id",), set()),
    "rules update": (
        ("id",),
        {
            "--actions",
            "--stop-processing",
            "--clear-name",
            "--name",
            "--conditions",
            "--no-stop-processing",
            "--event-type",
            "--idempotency-key",
            "--limits",
            "--priority",
        },
    ),
    "rules delete": (("id",), {"--idempotency-key"}),
    "rules simulate": (("id",), {"--customer-id", "--occurred-at", "--event"}),
    "events send": ((), {"--customer-id", "--occurred-at", "--data", "--type", "--external-event-id"}),
    "events get": (("id",), set()),
    "events list": ((), {"--all", "--customer-id", "--status", "--type", "--cursor", "--limit"}),
    "events replay": (("id",), set()),
    "executions list": ((), {"--all", "--customer-id", "--status", "--event-id", "--cursor", "--limit"}),
    "webhooks create": ((), {"--url", "--events"}),
    "webhooks get": (("id",), set()),
    "webhooks list": ((), {"--all", "--cursor", "--status", "--limit"}),
    "webhooks rotate-secret": (("id",), {"--grace-period-s"}),
    "webhooks disable": (("id",), {"--idempotency-key"}),
    "webhooks test": (("id",), set()),
    "webhooks deliveries": (("id",), {"--all", "--cursor", "--status", "--limit"}),
    "webhooks delivery": (("id", "delivery_id"), set()),
    "webhooks replay": (("id", "delivery_id"), {"--idempotency-key"}),
    "api-keys create": ((), {"--permissions", "--name"}),
    "api-keys revoke": (("id",), set()),
    "logs list": (
        (),
        {"--sdk-version", "--all", "--status", "--request-id", "--since", "--path", "--until", "--cursor", "--limit"},
    ),
    "audit list": ((), {"--outcome", "--all", "--kind", "--since", "--until", "--cursor", "--limit"}),
    "usage get": ((), {"--since", "--until"}),
    "auth login": ((), {"--email", "--totp-code"}),
    "auth logout": ((), set()),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewards-lab api")
    cli_api.configure(parser)
    return parser


def _leaves(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    def children(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return dict(action.choices)

    return {f"{res} {act}": leaf for res, group in children(parser).items() for act, leaf in children(group).items()}


def _shape(leaf: argparse.ArgumentParser) -> tuple[tuple[str, ...], set[str]]:
    positionals = tuple(str(a.metavar or a.dest) for a in leaf._actions if not a.option_strings)
    return positionals, {o for a in leaf._actions for o in a.option_strings if o not in COMMON}


def _call(*argv: str) -> Any:
    """The Call `rewards-lab api ARGV` would send."""
    args = _parser().parse_args([*argv, "--base-url", "http://127.0.0.1:9/v1", "--org", "org_1", "--env", "sandbox"])
    command: cli_api.Command = args.api_command
    return build(command.operation.name, cli_api.values(command, args))


def test_every_command_and_flag_of_before_stays() -> None:
    leaves = _leaves(_parser())
    for name, (positionals, flags) in BEFORE.items():
        assert name in leaves, name
        now_positionals, now_flags = _shape(leaves[name])
        assert now_positionals == positionals and flags <= now_flags, (name, flags - now_flags)


def test_every_documented_operation_is_a_command() -> None:
    named = {command.operation.name for command in cli_api.commands()}
    assert named == {name for name, op in OPERATIONS.items() if op.documented}
    assert set(cli_api.COMMANDS) <= set(OPERATIONS)
    for name, parameter in (*cli_api.DEFAULTS, *cli_api.AS_FLAGS, *cli_api.PROMPTED):
        assert parameter in {p.name for p in parameters(OPERATIONS[name])}, (name, parameter)


def test_flags_become_the_request() -> None:
    update = _call("programmes", "update", "prg_1", "--clear-budget", "--clawback", "none", "--limits", "[]")
    assert (update.method, update.path, update.body) == (
        "PATCH",
        "/reward-programs/prg_1",
        {"limits": [], "budget": None, "clawback": "none"},
    )
    rule = _call("rules", "update", "rul_1", "--priority", "4", "--no-stop-processing", "--clear-name")
    assert rule.body == {"name": None, "priority": 4, "stop_processing": False}
    assert _call("assets", "create", "--name", "Stars", "--symbol", "STAR", "--decimals", "2").body["type"] == "points"
    restore = _call("programmes", "restore", "prg_1", "--version", "live", "--idempotency-key", "k")
    assert (restore.path, restore.idempotency_key) == ("/reward-programs/prg_1/versions/live/restore", "k")
    webhook = _call("webhooks", "create", "--url", "https://example.com/h", "--events", "reward.issued, asset.paused")
    assert webhook.body == {"url": "https://example.com/h", "events": ["reward.issued", "asset.paused"]}
    logs = _call("logs", "list", "--since", "2026-01-01", "--limit", "5")
    assert logs.params == {"from": "2026-01-01", "limit": 5}
    assert _call("programmes", "publish", "prg_1", "--guard-override", "ok").body == {
        "guard_override": {"reason": "ok"}
    }


def test_a_flag_and_its_clear_contradict_each_other() -> None:
    with pytest.raises(UsageError, match="--email and --clear-email contradict each other"):
        _call("customers", "update", "cus_1", "--email", "a@example.com", "--clear-email")


def test_a_new_optional_field_is_a_flag_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    class CustomerCreateWithNickname(rq.CustomerCreate):
        nickname: str | None = None

    entry = dataclasses.replace(OPERATIONS["create_customer"], request=CustomerCreateWithNickname)
    monkeypatch.setitem(OPERATIONS, "create_customer", entry)
    assert "--nickname" in _shape(_leaves(_parser())["customers create"])[1]
    call = _call("customers", "create", "--external-id", "ext-1", "--nickname", "Ace")
    assert call.body == {"external_id": "ext-1", "nickname": "Ace"}


class TierCreate(rq.RequestModel):
    name: str
    threshold: int | None = None


def test_a_new_operation_is_a_command_with_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    tiers = Operation("create_tier", "POST", "/tiers", None, request=TierCreate, response=r.Asset, status=201)
    monkeypatch.setitem(OPERATIONS, "create_tier", tiers)
    positionals, flags = _shape(_leaves(_parser())["tiers create-tier"])
    assert (positionals, flags) == ((), {"--name", "--threshold"})
    assert _call("tiers", "create-tier", "--name", "Gold", "--threshold", "500").body == {
        "name": "Gold",
        "threshold": 500,
    }
    with pytest.raises(SystemExit):  # --name is required, as the model's field is
        _call("tiers", "create-tier")
