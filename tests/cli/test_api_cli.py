"""The seed's standard integration loop driven entirely through `rewards-lab api` subprocesses against a real
`rewards-lab serve`, plus the ledger operations, replay, keys, tables, and failures with type, code, message."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest

from rewards_lab.cli.main import main
from rewards_lab.contract.webhook_signatures import SIGNATURE_HEADER, verify
from tests.live_server import LiveServer, cli, start_server

OWNER_EMAIL = "owner@example.com"
OWNER_PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    path = tmp_path_factory.mktemp("api_cli") / "api.duckdb"
    # the webhook test's receiver listens on 127.0.0.1: the operator's setting for private targets is on
    server = start_server(
        path,
        "Acme",
        "--email",
        OWNER_EMAIL,
        "--password",
        OWNER_PASSWORD,
        serve_args=("--allow-private-webhook-targets",),
    )
    yield server
    server.stop()


IN_PROCESS = {"value": False}


def api(live: LiveServer, *args: str, env: str = "sandbox", key: str | None = None) -> subprocess.CompletedProcess[str]:
    """`rewards-lab api ...` as a subprocess; or, where the test says so (to spare a loaded machine), the very
    same entry point called in-process with the key in the environment and stdout/stderr captured."""
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", env]
    environ = {**os.environ, "REWARDS_API_KEY": key or live.keys[env]}
    if not IN_PROCESS["value"]:
        return subprocess.run(cli("api", *args, *target), env=environ, capture_output=True, text=True, timeout=60)
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, environ), redirect_stdout(out), redirect_stderr(err):
        status = main(["api", *args, *target])
    return subprocess.CompletedProcess(["rewards-lab", "api", *args], status, out.getvalue(), err.getvalue())


@pytest.fixture
def in_process() -> Iterator[None]:
    IN_PROCESS["value"] = True
    yield
    IN_PROCESS["value"] = False


def ok(live: LiveServer, *args: str, **kwargs: str) -> Any:
    result = api(live, *args, **kwargs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def failed(live: LiveServer, *args: str, **kwargs: str) -> str:
    result = api(live, *args, **kwargs)
    assert result.returncode == 1, result.stdout
    assert result.stdout == ""
    return result.stderr


def poll(live: LiveServer, *args: str) -> Any:
    """The command's data once it is not empty (issuance is asynchronous), or after 20 s."""
    deadline = time.monotonic() + 20
    while not (data := ok(live, *args)) and time.monotonic() < deadline:
        time.sleep(0.3)
    return data


def test_standard_integration_loop_through_the_command_line(live: LiveServer) -> None:
    # (1) customer keyed by the client's external id; (2) its wallet
    customer = ok(live, "customers", "create", "--external-id", "user-42", "--email", "u42@example.com")
    assert customer["external_id"] == "user-42" and customer["id"].startswith("cus_")
    wallet = ok(live, "wallets", "create", "--customer-id", customer["id"])
    # (3) asset, activated
    asset = ok(live, "assets", "create", "--name", "Stars", "--symbol", "STAR", "--decimals", "2")
    assert asset["status"] == "configured"
    assert ok(live, "assets", "activate", asset["id"])["status"] == "active"
    # (4) programme, a rule on its draft, simulated, published
    programme = ok(live, "programmes", "create", "--name", "Spring", "--asset-id", asset["id"])
    rule = ok(
        live,
        "rules",
        "create",
        "--program-id",
        programme["id"],
        "--event-type",
        "order.completed",
        "--conditions",
        '[{"field": "amount", "operator": "gte", "value": 20}]',
        "--actions",
        '[{"type": "issue", "amount": {"per": "amount", "rate": 0.05}}]',
    )
    simulated = ok(live, "rules", "simulate", rule["id"], "--event", '{"type": "order.completed", "amount": 42.50}')
    assert simulated["matched"] is True and simulated["totals"][0]["amount"] == "2.12"
    published = ok(live, "programmes", "publish", programme["id"])
    assert published["version"]["number"] == 1
    # (5) a business event; (6) the balance, polled (issuance is asynchronous)
    event = ok(
        live,
        "events",
        "send",
        "--type",
        "order.completed",
        "--external-event-id",
        "o-1",
        "--customer-id",
        "user-42",
        "--data",
        '{"amount": 42.50}',
    )
    assert event["status"] == "received" and event["data"] == {"amount": 42.50}
    executions = poll(live, "executions", "list", "--customer-id", customer["id"])
    assert [(x["amount"], x["status"]) for x in executions] == [("2.12", "issued")]
    balances = ok(live, "wallets", "balances", wallet["id"])["balances"]
    assert [(b["symbol"], b["balance"]) for b in balances] == [("STAR", "2.12")]
    assert [e["status"] for e in ok(live, "events", "list", "--all")] == ["processed"]
    segments = ok(live, "customers", "segments", customer["id"])
    assert "new" in {s["code"] for s in segments["segments"]}


@pytest.mark.usefixtures("in_process")
def test_ledger_operations_replay_and_keys(live: LiveServer) -> None:
    asset = ok(
        live, "assets", "create", "--name", "Credits", "--symbol", "CRED", "--type", "credits", "--decimals", "0"
    )
    ok(live, "assets", "activate", asset["id"])
    alice = ok(live, "customers", "create", "--external-id", "alice")
    bob = ok(live, "customers", "create", "--external-id", "bob")
    a_wallet = ok(live, "wallets", "create", "--customer-id", alice["id"])
    b_wallet = ok(live, "wallets", "create", "--customer-id", bob["id"])
    issued = ok(
        live, "assets", "issue", asset["id"], "--wallet-id", a_wallet["id"], "--amount", "10", "--reason", "gift"
    )
    assert issued["kind"] == "issue" and issued["amount"] == "10"
    ok(live, "assets", "redeem", asset["id"], "--wallet-id", a_wallet["id"], "--amount", "3", "--reference", "r-1")
    moved = ok(
        live,
        "assets",
        "transfer",
        asset["id"],
        "--from-wallet-id",
        a_wallet["id"],
        "--to-wallet-id",
        b_wallet["id"],
        "--amount",
        "4",
    )
    assert moved["kind"] == "transfer"
    assert ok(live, "wallets", "balances", a_wallet["id"])["balances"][0]["balance"] == "3"
    assert ok(live, "wallets", "balances", b_wallet["id"])["balances"][0]["balance"] == "4"
    transactions = ok(live, "transactions", "list", "--asset-id", asset["id"], "--limit", "2", "--all")
    assert [t["kind"] for t in transactions] == ["issue", "redemption", "transfer"]
    # failure: the type, code and message on stderr, exit status 1
    error = failed(
        live, "assets", "redeem", asset["id"], "--wallet-id", b_wallet["id"], "--amount", "99", "--reference", "r-2"
    )
    assert "error: conflict insufficient_balance: " in error
    # an event for a customer that does not exist yet fails; once the customer has a wallet, replay issues it
    programme = ok(live, "programmes", "create", "--name", "Welcome", "--asset-id", asset["id"])
    actions = '[{"type": "issue", "amount": {"fixed": "5"}}]'
    ok(
        live,
        "rules",
        "create",
        "--program-id",
        programme["id"],
        "--event-type",
        "signup.completed",
        "--actions",
        actions,
    )
    ok(live, "programmes", "publish", programme["id"])
    ok(live, "events", "send", "--type", "signup.completed", "--external-event-id", "s-1", "--customer-id", "carol")
    failed_events = poll(live, "events", "list", "--status", "failed")
    assert [e["error"]["code"] for e in failed_events] == ["customer_not_found"]
    carol = ok(live, "customers", "create", "--external-id", "carol")
    c_wallet = ok(live, "wallets", "create", "--customer-id", carol["id"])
    ok(live, "events", "replay", failed_events[0]["id"])
    assert [e["id"] for e in poll(live, "events", "list", "--status", "processed", "--type", "signup.completed")] == [
        failed_events[0]["id"]
    ]
    assert ok(live, "wallets", "balances", c_wallet["id"])["balances"][0]["balance"] == "5"
    # API keys: the secret once, then revoked; a revoked key is refused
    created = ok(live, "api-keys", "create", "--name", "reader", "--permissions", "customers.view")
    assert created["secret"].startswith("rlk_sand_")
    assert ok(live, "customers", "get", alice["id"], key=created["secret"])["id"] == alice["id"]
    assert ok(live, "api-keys", "revoke", created["id"])["revoked_at"] is not None
    refused = failed(live, "customers", "get", alice["id"], key=created["secret"])
    assert "authentication_error api_key_revoked" in refused


@pytest.mark.usefixtures("in_process")
def test_table_format_and_errors(live: LiveServer) -> None:
    ok(live, "customers", "create", "--external-id", "table-1", "--country", "GB")
    table = api(live, "customers", "list", "--external-id", "table-1", "--format", "table")
    header, rule, row = table.stdout.splitlines()
    assert header.split()[:4] == ["id", "external_id", "email", "country"]
    assert set(rule.replace(" ", "")) == {"-"} and "table-1" in row and "GB" in row
    invalid = failed(live, "customers", "create", "--external-id", "bad-email", "--email", "nope")
    assert "error: validation_error customer_email_invalid:" in invalid and "'field': 'email'" in invalid
    missing = failed(live, "wallets", "get", "wal_missing")
    assert "error: not_found wallet_not_found:" in missing


def test_sandbox_key_against_production_fails_with_environment_mismatch(live: LiveServer) -> None:
    error = failed(live, "customers", "list", env="production", key=live.keys["sandbox"])
    assert "error: authorization_error environment_mismatch:" in error
    assert "belongs to sandbox, not production" in error
    assert ok(live, "customers", "list", env="production") == []  # a production key sees production (empty)


def test_the_key_comes_from_the_environment_only(live: LiveServer) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "REWARDS_API_KEY"}
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    result = subprocess.run(cli("api", "customers", "list", *target), env=environ, capture_output=True, text=True)
    assert result.returncode == 2 and "REWARDS_API_KEY" in result.stderr
    flag = subprocess.run(
        cli("api", "customers", "list", *target, "--api-key", "x"), env=environ, capture_output=True, text=True
    )
    assert flag.returncode == 2 and "unrecognized arguments: --api-key" in flag.stderr


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[bytes, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((body, self.headers.get(SIGNATURE_HEADER)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.usefixtures("in_process")
def test_webhooks_and_their_test_delivery(live: LiveServer) -> None:
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hooks"
        created = ok(live, "webhooks", "create", "--url", url, "--events", "reward.issued,asset.paused")
        assert created["events"] == ["reward.issued", "asset.paused"] and created["signing_secret"]
        shown = ok(live, "webhooks", "get", created["id"])
        assert "signing_secret" not in shown and shown["status"] == "enabled"
        assert created["id"] in [w["id"] for w in ok(live, "webhooks", "list", "--all")]
        delivery = ok(live, "webhooks", "test", created["id"])
        deadline = time.monotonic() + 20
        while (one := ok(live, "webhooks", "delivery", created["id"], delivery["id"]))["status"] == "pending":
            assert time.monotonic() < deadline, one
            time.sleep(0.2)
        assert one["status"] == "succeeded" and one["attempts"][0]["status_code"] == 204
        body, signature = _Receiver.received[-1]
        assert verify(body, signature, created["signing_secret"])
        assert [d["id"] for d in ok(live, "webhooks", "deliveries", created["id"])] == [delivery["id"]]
        rotated = ok(live, "webhooks", "rotate-secret", created["id"], "--grace-period-s", "0")
        assert rotated["signing_secret"].startswith("whsec_") and rotated["signing_secret"] != created["signing_secret"]
        assert "signing_secret" not in ok(live, "webhooks", "get", created["id"])
        assert ok(live, "webhooks", "disable", created["id"])["status"] == "disabled"
        refused = failed(live, "webhooks", "test", created["id"])
        assert "error: conflict invalid_state_transition:" in refused
    finally:
        receiver.shutdown()
        receiver.server_close()


@pytest.mark.usefixtures("in_process")
def test_request_logs_and_usage(live: LiveServer) -> None:
    ok(live, "customers", "create", "--external-id", "logged-1")
    failed(live, "customers", "get", "cus_not_there")
    deadline = time.monotonic() + 20  # the request log is written in batches, off the request path
    while not (misses := ok(live, "logs", "list", "--status", "404", "--path", "/v1/customers/")):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert misses[0]["path"] == "/v1/customers/cus_not_there" and misses[0]["method"] == "GET"
    one = ok(live, "logs", "list", "--request-id", misses[0]["request_id"])
    assert [entry["id"] for entry in one] == [misses[0]["id"]]
    usage = ok(live, "usage", "get")
    assert usage["requests"]["total"] >= 2 and usage["requests"]["by_status_class"]["4xx"] >= 1
    table = api(live, "usage", "get", "--format", "table")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split() == ["field", "value"]
    # the client sends its X-SDK-Version: every request above carries one, none is without
    assert ok(live, "logs", "list", "--sdk-version", misses[0]["sdk_version"], "--request-id", misses[0]["request_id"])
    assert misses[0]["sdk_version"] and not ok(live, "logs", "list", "--sdk-version", "none")


def test_the_authentication_audit_lists_denials(live: LiveServer) -> None:
    failed(live, "customers", "list", key="rlk_sand_forged")  # 401: audited, but belongs to no tenant
    no_permission = ok(live, "api-keys", "create", "--name", "reader", "--permissions", "wallets.view")
    failed(live, "customers", "create", "--external-id", "denied-1", key=no_permission["secret"])
    denied = ok(live, "audit", "list", "--kind", "access_denied", "--outcome", "failed")
    mine = [entry for entry in denied if entry["actor_id"] == no_permission["id"]]
    assert [(e["path"], e["status"], e["reason"]) for e in mine] == [("/v1/customers", 403, "permission_denied")]
    created = ok(live, "audit", "list", "--kind", "api_key_created")
    assert no_permission["id"] in [entry["subject_id"] for entry in created], created


@pytest.mark.usefixtures("in_process")
def test_login_takes_no_key_and_its_session_acts_until_logout(live: LiveServer) -> None:
    target = ["--base-url", live.base_url, "--org", live.organization_id, "--env", "sandbox"]
    environ = {k: v for k, v in os.environ.items() if k != "REWARDS_API_KEY"} | {"REWARDS_PASSWORD": OWNER_PASSWORD}
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, environ, clear=True), redirect_stdout(out), redirect_stderr(err):
        status = main(["api", "auth", "login", "--email", OWNER_EMAIL, *target])
    assert status == 0, err.getvalue()
    session = json.loads(out.getvalue())
    assert session["token_type"] == "bearer" and session["account"]["email"] == OWNER_EMAIL
    token = session["token"]
    assert ok(live, "customers", "list", "--external-id", "user-42", key=token) is not None
    assert ok(live, "auth", "logout", key=token)["revoked_at"] is not None
    refused = failed(live, "customers", "list", key=token)
    assert "error: authentication_error" in refused
    with mock.patch.dict(os.environ, environ | {"REWARDS_PASSWORD": "wrong password!!"}, clear=True):
        with redirect_stdout(io.StringIO()), redirect_stderr(err := io.StringIO()):
            status = main(["api", "auth", "login", "--email", OWNER_EMAIL, *target])
    assert status == 1 and "error: authentication_error credentials_invalid:" in err.getvalue()


def test_expiring_assets_programmes_and_a_wallets_lots_from_the_command_line(live: LiveServer) -> None:
    expiry = '{"after_days": 30}'
    asset = ok(
        live, "assets", "create", "--name", "Miles", "--symbol", "MILE", "--decimals", "0", "--expiry", expiry,
        "--value-per-unit", "0.02",
    )  # fmt: skip
    assert (asset["expiry"], asset["value_per_unit"]) == ({"after_days": 30}, "0.02")
    ok(live, "assets", "activate", asset["id"])
    programme = ok(live, "programmes", "create", "--name", "Miles", "--asset-id", asset["id"], "--expiry", expiry)
    assert programme["expiry"] == {"after_days": 30}
    assert ok(live, "programmes", "update", programme["id"], "--clear-expiry")["expiry"] is None
    owner = ok(live, "customers", "create", "--external-id", "flyer")
    wallet = ok(live, "wallets", "create", "--customer-id", owner["id"])
    for amount in ("5", "6"):
        ok(live, "assets", "issue", asset["id"], "--wallet-id", wallet["id"], "--amount", amount, "--reason", "trip")
    ok(live, "assets", "redeem", asset["id"], "--wallet-id", wallet["id"], "--amount", "7", "--reference", "seat")
    lots = ok(live, "wallets", "lots", wallet["id"], "--limit", "1", "--all")
    assert [(lot["amount"], lot["remaining"], lot["status"]) for lot in lots] == [
        ("5", "0", "spent"),
        ("6", "4", "open"),
    ]
    assert len(ok(live, "wallets", "lots", wallet["id"], "--status", "open", "--all")) == 1
    balance = ok(live, "wallets", "balances", wallet["id"])["balances"][0]
    assert balance["next_expiry"]["amount"] == "4"
